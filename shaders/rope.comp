#version 450
// vkattn_rope (src/ops/rope.cpp): rotates elements [off, off + rd) of
// every (token, head) row of x into out, by the host's cos/sin table of the
// token's position; out-of-place calls copy the rest of the row. One
// invocation per row, so a pair is read and written by the lane that owns
// it (in place is safe); 16-bit rows are written element by element with
// atomics (odd rows share words with their neighbours).
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X {
  uint x_w[];
};
layout(std430, binding = 1) coherent buffer Out {
  uint out_w[];
};
layout(std430, binding = 2) readonly buffer Table {
  vec2 cs[];  // [token of the chunk][rd / 2] (cos, sin)
};

layout(push_constant) uniform Push {
  uint rows;
  uint heads;
  uint dim;
  uint rd;
  uint off;
  uint gptj;
  uint dt;
  uint x_skip;  // elements of the windows before the chunk's first row
  uint out_skip;
  uint copy;  // out is not x: copy the elements that are not rotated
}
pc;

float load(uint i) {
  return LOAD_ELEM(x_w, pc.dt, i + pc.x_skip);
}

void store(uint i, float v) {
  i += pc.out_skip;
  if (pc.dt == DT_F32) {
    out_w[i] = floatBitsToUint(v);
  } else {
    STORE16_ATOMIC(out_w, i, encode16(pc.dt, v));
  }
}

void main() {
  uint r = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (r >= pc.rows) return;
  uint base = r * pc.dim, half_rd = pc.rd / 2u, tab = (r / pc.heads) * half_rd;
  if (pc.copy != 0u) {
    for (uint e = 0u; e < pc.off; ++e) store(base + e, load(base + e));
    for (uint e = pc.off + pc.rd; e < pc.dim; ++e) store(base + e, load(base + e));
  }
  for (uint i = 0u; i < half_rd; ++i) {
    uint a = base + pc.off + (pc.gptj != 0u ? 2u * i : i);
    uint b = a + (pc.gptj != 0u ? 1u : half_rd);
    vec2 c = cs[tab + i];
    float x1 = load(a), x2 = load(b);
    store(a, x1 * c.x - x2 * c.y);
    store(b, x2 * c.x + x1 * c.y);
  }
}

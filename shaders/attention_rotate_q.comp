#version 450
// The queries of vkattn_step_attention over a layer of a cache with
// VKATTN_KV_ROTATE_KEYS (src/ops/attention/rotate_q.cpp): every (token,
// head) row of q, split into groups of pc.group consecutive elements, each
// group times the normalized Walsh-Hadamard matrix (the transform the
// append applied to the keys: shaders/kv_append_q4.comp), into a
// contiguous temporary of q's dtype. One workgroup per row: the row is
// staged in shared memory, rotated there (include/hadamard.glsl: no
// intermediate past sqrt(group) x max|x|, so the result is finite whenever
// the exact transform fits q's dtype) and written in q's dtype; 16-bit
// elements with atomics (two lanes may share a word).
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X {
  uint x_w[];
};
layout(std430, binding = 1) coherent buffer Out {
  uint out_w[];
};

layout(push_constant) uniform Push {
  uint rows;  // rows of this dispatch
  uint dim;
  uint group;  // a power of two dividing dim
  uint dt;
  uint x_skip;  // elements of the bound windows before the dispatch's first row
  uint out_skip;
  float norm;  // KvCache::hadamard_final_scale(group), from the host
  uint pad;
}
pc;

// Budget: a workgroup of 64 lanes per (token, head) row, 2.3 KiB of shared
// memory (the row), one load and one store per element, log2(group)
// barriers (7 at d 128); no FMA (halvings, adds, one multiply on odd pass counts). Fake GPUs: 16-24
// VGPRs on RDNA2/3, 12 on Adreno 7xx, 21 halves on M1; no spill, no
// scratch. A decode step rotates Hq rows per token, a few hundred: one
// small pass before the attention.
const uint MAX_DIM = 576u;  // VKATTN_MAX_HEAD_DIM
shared float sh_row[MAX_DIM];
#include "hadamard.glsl"

void main() {
  uint lane = gl_LocalInvocationID.x;
  // The flat workgroup id (grids spill into y); one row each, uniform.
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;
  uint base = row * pc.dim;
  for (uint e = lane; e < pc.dim; e += 64u) sh_row[e] = LOAD_ELEM(x_w, pc.dt, base + e + pc.x_skip);
  memoryBarrierShared();
  barrier();
  hadamard_rotate_row(pc.dim, pc.group, pc.norm, lane, 64u);
  for (uint e = lane; e < pc.dim; e += 64u) {
    float v = sh_row[e];
    uint i = base + e + pc.out_skip;
    if (pc.dt == DT_F32) {
      out_w[i] = floatBitsToUint(v);
    } else {
      STORE16_ATOMIC(out_w, i, encode16(pc.dt, v));
    }
  }
}

#version 450
// Merges two partial attentions over disjoint key sets by their lse:
// out = (e^la * a + e^lb * b) / (e^la + e^lb), lse = log(e^la + e^lb).
// One invocation per 32-bit word of out (1 f32 or 2 f16/bf16 elements) and
// per lse row of this dispatch's chunk of rows. A side with lse = -inf is
// never multiplied (its out may hold anything); both -inf gives 0 and -inf;
// a NaN lse on either side gives NaN out and lse.
// IN_F32 = 1: a and b are f32 rows whatever out's dtype (a cascade's
// parts, src/ops/attention/cascade.cpp: one rounding, the merged row's),
// the chunk's first element in_skip floats into their windows.
// out may alias out_a: each word is read and written by the same
// invocation only. Bindings are windows (src/ops/attention/merge.cpp): the
// chunk's first word is out_skip words into the out windows, its first row
// lse_skip floats into the lse windows (all of them, the scratch that
// stands in for an lse output aliasing an input included).
#extension GL_GOOGLE_include_directive : require
#include "dtype.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DTYPE = DT_F32;
layout(constant_id = 1) const uint IN_F32 = 0;

layout(std430, binding = 0) readonly buffer OutA { uint out_a[]; };
layout(std430, binding = 1) readonly buffer LseA { float lse_a[]; };
layout(std430, binding = 2) readonly buffer OutB { uint out_b[]; };
layout(std430, binding = 3) readonly buffer LseB { float lse_b[]; };
layout(std430, binding = 4) buffer Out { uint out_w[]; };
layout(std430, binding = 5) buffer Lse { float lse_out[]; };

layout(push_constant) uniform Push {
  uint rows;   // rows of this chunk
  uint dv;
  uint words;  // words of out in this chunk
  uint has_lse_out;
  uint out_skip;
  uint lse_skip;
  uint in_skip;  // IN_F32: the chunk's first element in the a/b windows
} pc;

#define NEG_INF (-1.0 / 0.0)

// Weights of a and b for chunk row r: wa, wb, merged lse.
vec3 weights(uint r) {
  float la = lse_a[pc.lse_skip + r], lb = lse_b[pc.lse_skip + r];
  if (isnan(la) || isnan(lb)) return vec3(NAN_F);
  if (la == NEG_INF && lb == NEG_INF) return vec3(0.0, 0.0, NEG_INF);
  if (la == NEG_INF) return vec3(0.0, 1.0, lb);
  if (lb == NEG_INF) return vec3(1.0, 0.0, la);
  float m = max(la, lb);
  float ea = exp(la - m), eb = exp(lb - m);
  float s = ea + eb;
  return vec3(ea / s, eb / s, m + log(s));
}

// Element e of the chunk, merged from its a and b values.
float merge_elem(uint e, float a, float b) {
  vec3 w = weights(e / pc.dv);
  if (isnan(w.x)) return w.x;  // a NaN lse (or +inf on both sides)
  // Select, never multiply, a side with weight 0: it may hold NaN.
  if (w.x == 0.0 && w.y == 0.0) return 0.0;
  if (w.x == 0.0) return b;
  if (w.y == 0.0) return a;
  return w.x * a + w.y * b;
}

void main() {
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint i = id * 64u + gl_LocalInvocationID.x;  // word / row of the chunk
  if (i < pc.words) {
    uint wi = pc.out_skip + i;
    if (DTYPE == DT_F32) {
      uint ai = IN_F32 != 0u ? pc.in_skip + i : wi;
      out_w[wi] = floatBitsToUint(
          merge_elem(i, uintBitsToFloat(out_a[ai]), uintBitsToFloat(out_b[ai])));
    } else {
      uint e0 = 2u * i, total = pc.rows * pc.dv;
      float a0, b0, a1 = 0.0, b1 = 0.0;
      if (IN_F32 != 0u) {
        uint ai = pc.in_skip + e0;
        a0 = uintBitsToFloat(out_a[ai]), b0 = uintBitsToFloat(out_b[ai]);
        if (e0 + 1u < total) a1 = uintBitsToFloat(out_a[ai + 1u]), b1 = uintBitsToFloat(out_b[ai + 1u]);
      } else {
        uint aw = out_a[wi], bw = out_b[wi];
        a0 = decode16(DTYPE, aw & 0xffffu), b0 = decode16(DTYPE, bw & 0xffffu);
        a1 = decode16(DTYPE, aw >> 16), b1 = decode16(DTYPE, bw >> 16);
      }
      uint lo = encode16(DTYPE, merge_elem(e0, a0, b0));
      if (e0 + 1u < total) {
        out_w[wi] = lo | (encode16(DTYPE, merge_elem(e0 + 1u, a1, b1)) << 16);
      } else {
        // An odd element count: the word's upper half is not out's (the
        // element after a view is the caller's): only the lower half.
        STORE16_ATOMIC(out_w, 2u * wi, lo)
      }
    }
  }
  if (pc.has_lse_out != 0u && i < pc.rows) lse_out[pc.lse_skip + i] = weights(i).z;
}

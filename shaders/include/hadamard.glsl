// The normalized Walsh-Hadamard transform (Sylvester order, x H / sqrt(h))
// of each aligned group of h consecutive elements of a row staged in the
// includer's `shared float sh_row[]`: VKATTN_KV_ROTATE_KEYS's keys
// (kv_append_q4.comp) and the queries rotated alike
// (attention_rotate_q.comp). The reference: src/reference/quant_ref.cpp
// (hadamard_rotate, in double).
//
// Range: a pass of butterflies computes (a + b, a - b), which is sqrt(2)
// times the orthonormal step; log2(h) plain passes reach h x max|x|, past
// f32's range for |x| > FLT_MAX / h although the normalized transform is
// finite (a d 64 row of 1e37 is (8e37, 0, ...)). So the even passes
// (0, 2, ..) halve both inputs first ((a/2 + b/2, a/2 - b/2): 1/sqrt(2)
// of the orthonormal step), the odd ones do not (sqrt(2) of it): after
// each pass every element is the orthonormal partial transform times 1 or
// 1/sqrt(2), so no intermediate exceeds the L2 norm of its group, at most
// sqrt(h) x max|x|, and an odd pass count ends with one multiply by
// sqrt(2). Rounding: halving is exact, so each
// element carries one rounding per pass plus the final multiply, as
// plain butterflies followed by x 1 / sqrt(h) did: a few f32 ulps of the
// group's norm. Subnormal inputs follow the device's f32 denormal mode
// (halving one drops its lowest bit, or it is flushed to zero where the
// device flushes): below 2^-126 x sqrt(h) of error in a row's elements.
#ifndef VKATTN_HADAMARD_GLSL
#define VKATTN_HADAMARD_GLSL

// Rotates every group of `group` (a power of two dividing dim) elements of
// sh_row[0, dim) in place; `lanes` lanes of the workgroup, this one
// `lane`, all call it (barriers). `final_scale` is the multiply that ends
// the passes: sqrt(2) when log2(group) is odd, else 1, from the host
// (KvCache::hadamard_final_scale; fault injection may change it). Ends with
// a barrier.
void hadamard_rotate_row(uint dim, uint group, float final_scale, uint lane, uint lanes) {
  uint pass_index = 0u;
  // Butterflies of span 1, 2, .. group / 2: pair p joins elements i and
  // i + len, i = (p / len) 2 len + p % len, within each aligned group.
  for (uint len = 1u; len < group; len *= 2u) {
    float half_in = (pass_index & 1u) == 0u ? 0.5 : 1.0;
    for (uint p = lane; p < dim / 2u; p += lanes) {
      uint i = (p / len) * 2u * len + p % len;
      float a = sh_row[i] * half_in, b = sh_row[i + len] * half_in;
      sh_row[i] = a + b;
      sh_row[i + len] = a - b;
    }
    memoryBarrierShared();
    barrier();
    ++pass_index;
  }
  if (final_scale != 1.0) {
    for (uint e = lane; e < dim; e += lanes) sh_row[e] *= final_scale;
    memoryBarrierShared();
    barrier();
  }
}

#endif

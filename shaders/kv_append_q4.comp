#version 450
// vkattn_step_append into a 4-bit cache (VKATTN_Q4): workgroups take
// (token, kv head) rows of K or V, as kv_append.comp, after RoPE. Per row,
// the lanes first take its blocks of 32 elements: the block's element of
// largest magnitude m (the first on a tie), scale = m / -8 as an f16
// (nearest even, saturated at +-65504; NaN where the block holds inf or
// NaN), written beside the rows (ops/kv_cache.h); then words of 8 codes,
// x / scale rounded to nearest even exactly (dtype.glsl's quotient test,
// not x * (1 / scale)), clamped to -8..7, element e in bits 4 (e % 8).
// Rows of codes are whole words, so each word has one writer; two rows'
// scales may share a word (an odd block count): those are written with
// atomics. A row is first staged in shared memory (after RoPE); a key row
// of a cache with VKATTN_KV_ROTATE_KEYS is then rotated there by the
// normalized Walsh-Hadamard transform of each group of pc.k_rot elements
// (include/hadamard.glsl: butterflies that halve on alternate passes, so
// no intermediate leaves the range of the result). The reference:
// src/reference/quant_ref.cpp (q4_quantize, hadamard_rotate).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "kv_append_common.glsl"

// Budget (8 lanes a workgroup, a row at a time; the append is a small
// share of a step): 3 KiB of shared memory (sh_row 2304 B + 72 B of
// scales), one load in flight per lane while staging (dim / 8 elements
// each), no FMA to speak of (a butterfly is two multiplies, an add and a subtract per
// pair). Fake GPUs (docs/bench/lavapipe-2026-11-28-q4.md): 16-24 VGPRs on
// RDNA2/3, 12 on Adreno 7xx, 37 halves on M1; no spill, no scratch; 10.5
// waves/SIMD on RDNA, bound by LDS (3 KiB x 8 lanes).
const uint MAX_BLOCKS = 18u;  // ceil(VKATTN_MAX_HEAD_DIM / 32), 576 / 32
shared float sh_scale[MAX_BLOCKS];
shared float sh_row[32u * MAX_BLOCKS];  // the row being quantized
#include "hadamard.glsl"

// Stages the row (after RoPE) in sh_row and, for a key row of a rotated
// cache, rotates it there. Ends with a barrier.
void stage_row(bool is_v, uint job, uint src, uint dim) {
  uint lane = gl_LocalInvocationID.x;
  for (uint e = lane; e < dim; e += 8u) sh_row[e] = new_value(is_v, job, src, e);
  memoryBarrierShared();
  barrier();
  if (is_v || pc.k_rot <= 1u) return;
  hadamard_rotate_row(dim, pc.k_rot, pc.k_rot_scale, lane, 8u);
}

// The block's scale: m / -8 in f16 bits (m / -8 is exact in f32 wherever
// the f16 can differ from 0).
uint block_scale_bits(uint dim, uint b) {
  float m = 0.0;
  bool finite = true;
  for (uint e = 32u * b; e < min(32u * b + 32u, dim); ++e) {
    float x = sh_row[e];
    finite = finite && !isnan(x) && !isinf(x);
    if (abs(x) > abs(m)) m = x;
  }
  if (!finite) return 0x7e00u;  // f16 NaN
  return f32_to_f16(clamp(m / -8.0, -65504.0, 65504.0));
}

// x / scale as a 4-bit code in a nibble: nearest even exactly, -8..7;
// 0 where the scale is 0 or NaN.
uint code4(float x, float scale) {
  if (!(abs(scale) > 0.0) || isnan(x)) return 0u;
  float s = abs(scale), a = abs(x);
  float q = round_quotient(a, s, min(roundEven(a / s), 8.0), 8.0);
  int v = (x < 0.0) != (scale < 0.0) ? -int(q) : min(int(q), 7);
  return uint(v) & 15u;
}

// One row: its block scales, then its codes. Called by every lane of the
// workgroup (barriers).
void write_row4(bool is_v, uint job, uint src, uint dst, uint dim, uint h, uint page, uint slot) {
  uint lane = gl_LocalInvocationID.x;
  stage_row(is_v, job, src, dim);
  uint nb = (dim + 31u) / 32u;
  uint blk = is_v ? page * pc.v_page_elems + pc.v_off + pc.v_scale_off
                  : page * pc.page_elems + pc.k_off + pc.k_scale_off;  // bytes
  for (uint b = lane; b < nb; b += 8u) {
    uint bits = block_scale_bits(dim, b);
    sh_scale[b] = f16_to_f32(bits);
    write_half(is_v, (blk >> 1) + (h * pc.page_size + slot) * nb + b, bits);
  }
  memoryBarrierShared();
  barrier();
  uint words = (dim + 7u) / 8u;
  for (uint w = lane; w < words; w += 8u) {
    float scale = sh_scale[w / 4u];
    uint bits = 0u;
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      uint e = 8u * w + i;
      if (e < dim) bits |= code4(sh_row[e], scale) << (4u * i);
    }
    write_word(is_v, (dst >> 2) + w, bits);
  }
  barrier();  // every lane read sh_scale and sh_row before the next row writes them
}

void main() {
  // Rows strided over the workgroups as kv_append.comp (the host bounds
  // the loops: src/ops/kv_append.cpp); the row loop is uniform in the
  // workgroup, so write_row4's barriers are.
  uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  for (uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; wid < pc.n_units;
       wid += groups) {
    AppendRow r = append_row(wid);
    write_row4(r.is_v, r.job, r.src, r.dst, r.dim, r.h, r.page, r.slot);
  }
}

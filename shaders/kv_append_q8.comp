#version 450
// vkattn_step_append into an 8-bit cache (VKATTN_I8, VKATTN_FP8_E4M3):
// workgroups take (token, kv head) rows of K or V, as kv_append.comp, and
// store codes: int8 rows get a scale (absmax / 127 of the row after RoPE,
// the workgroup's reduction in shared memory) written beside the rows;
// fp8 rows divide by the layer's scale (binding 6), both rounded to
// nearest even exactly. A lane writes words of
// four codes when the row's length is a multiple of 4, else single codes
// (atomics: neighbours share words).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "kv_append_common.glsl"

shared float sh_amax[8];

// Element e of the row as an 8-bit code: x / scale rounded to nearest
// even exactly (dtype.glsl), not x * (1 / scale), which rounds twice and
// put exact ties on the odd code.
uint code8(bool is_v, uint job, uint src, uint e, float scale) {
  float x = new_value(is_v, job, src, e);
  if (pc.cache_dt == DT_I8) return f32_div_to_i8(x, scale);
  return f32_div_to_e4m3(x, scale);
}

void write_byte(bool is_v, uint i, uint bits) {
  uint sh = (i & 3u) * 8u;
  if (is_v) {
    atomicAnd(pool_v[i >> 2], ~(0xffu << sh));
    atomicOr(pool_v[i >> 2], (bits & 0xffu) << sh);
  } else {
    atomicAnd(pool_k[i >> 2], ~(0xffu << sh));
    atomicOr(pool_k[i >> 2], (bits & 0xffu) << sh);
  }
}

// One row of an 8-bit cache: its scale (int8: the row's absmax / 127 over
// the workgroup, written beside the rows; fp8: the layer's), then its codes.
// Called by every lane of the workgroup (barriers).
void write_row8(bool is_v, uint job, uint src, uint dst, uint dim, uint h, uint page, uint slot) {
  uint lane = gl_LocalInvocationID.x;
  float scale;
  if (pc.cache_dt == DT_I8) {
    float amax = 0.0;
    for (uint e = lane; e < dim; e += 8u) {
      float x = abs(new_value(is_v, job, src, e));
      amax = (isnan(x) || isinf(x)) ? 1.0 / 0.0 : max(amax, x);
    }
    sh_amax[lane] = amax;
    memoryBarrierShared();
    barrier();
    amax = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; ++i) amax = max(amax, sh_amax[i]);
    barrier();  // every lane read sh_amax before the next row writes it
    scale = isinf(amax) ? uintBitsToFloat(0x7fc00000u) : amax / 127.0;
    if (lane == 0u) {
      uint blk = is_v ? page * pc.v_page_elems + pc.v_off + pc.v_scale_off
                      : page * pc.page_elems + pc.k_off + pc.k_scale_off;
      write_word(is_v, (blk >> 2) + h * pc.page_size + slot, floatBitsToUint(scale));
    }
  } else {
    scale = fp8_scales[pc.scale_base + (is_v ? pc.hkv : 0u) + h];
  }
  // A zero or NaN scale: every code 0 (the NaN scale carries it).
  if (dim % 4u == 0u) {
    for (uint u = lane; u < dim / 4u; u += 8u) {
      uint e = 4u * u;
      uint w = code8(is_v, job, src, e, scale) | (code8(is_v, job, src, e + 1u, scale) << 8) |
               (code8(is_v, job, src, e + 2u, scale) << 16) | (code8(is_v, job, src, e + 3u, scale) << 24);
      write_word(is_v, (dst + e) >> 2, w);
    }
  } else {
    for (uint e = lane; e < dim; e += 8u) write_byte(is_v, dst + e, code8(is_v, job, src, e, scale));
  }
}

void main() {
  // Rows strided over the workgroups as kv_append.comp (the host bounds
  // the loops: src/ops/kv_append.cpp); the row loop is uniform in the
  // workgroup, so write_row8's barriers are.
  uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  for (uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; wid < pc.n_units;
       wid += groups) {
    AppendRow r = append_row(wid);
    write_row8(r.is_v, r.job, r.src, r.dst, r.dim, r.h, r.page, r.slot);
  }
}

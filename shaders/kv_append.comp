#version 450
// vkattn_step_append and vkattn_paged_append into 16/32-bit pages: writes
// the new tokens of one layer into their pages, converted to the cache
// dtype (round to nearest even; same dtype = the same bits). Workgroups
// take (token, kv head) rows of K or V; a lane writes units of a row: a
// 32-bit word of a 16-bit cache row of even length, else one element (odd
// 16-bit rows share words with their neighbours: atomics). 8-bit caches:
// kv_append_q8.comp.
#extension GL_GOOGLE_include_directive : require
#include "kv_append_common.glsl"

void main() {
  // Workgroups stride over the (token, kv head, K or V) rows; the 8 lanes
  // (one lavapipe subgroup: 64-lane workgroups measured 2x slower here)
  // stride over the units of a row. The host keeps both loops short (loop
  // cap: src/ops/kv_append.cpp append_rows_per_group).
  uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  for (uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; wid < pc.n_units;
       wid += groups) {
    AppendRow r = append_row(wid);
    for (uint u = gl_LocalInvocationID.x; u < r.units; u += 8u) {
      if (pc.cache_dt == DT_F32) {
        write_word(r.is_v, r.dst + u, convert_rope(r.is_v, r.job, r.src, u));
      } else if (r.dim % 2u == 0u && pc.pairs != 0u) {
        uint e = 2u * u;
        write_word(r.is_v, (r.dst + e) >> 1,
                   convert_rope(r.is_v, r.job, r.src, e) | (convert_rope(r.is_v, r.job, r.src, e + 1u) << 16));
      } else {
        write_half(r.is_v, r.dst + u, convert_rope(r.is_v, r.job, r.src, u));
      }
    }
  }
}

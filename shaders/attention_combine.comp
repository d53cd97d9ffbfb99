#version 450
// Second pass of split-KV attention: merges the partial results (outputs
// normalized per split, with their lse) of every split of a tile by lse and
// writes out/lse. One workgroup per tile; lanes stride over its rows.
// Combine item: slot = first partial row of split 0, k_begin = partial rows
// between two splits, n_slots = splits (see src/ops/attention_plan.h).
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint QDT = DT_F32;

layout(std430, binding = 0) coherent buffer Out { uint out_w[]; };
layout(std430, binding = 1) writeonly buffer Lse { float lse_out[]; };
layout(std430, binding = 2) readonly buffer Items { Item items[]; };
layout(std430, binding = 3) readonly buffer Seqs { Seq seqs[]; };
layout(std430, binding = 4) readonly buffer PartO { float part_o[]; };
layout(std430, binding = 5) readonly buffer PartL { float part_lse[]; };

layout(push_constant) uniform Push {
  uint n_items;
  uint num_heads;
  uint num_kv_heads;
  uint flags;
  uint tile_rows;
  uint dv;
} pc;

void main() {
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;
  Item it = items[id];
  Seq sq = seqs[it.seq];
  uint G = pc.num_heads / pc.num_kv_heads;
  uint DV = pc.dv;
  uint stride = it.k_begin;  // partial rows between two splits
  for (uint lr = gl_LocalInvocationID.x; lr < pc.tile_rows; lr += 64u) {
    uint r = it.row0 + lr;
    if (r >= sq.t * G) break;
    float mx = NEG_INF;
    for (uint s = 0u; s < it.n_slots; ++s) mx = max(mx, part_lse[it.slot + s * stride + lr]);
    float total = 0.0;
    if (mx != NEG_INF)
      for (uint s = 0u; s < it.n_slots; ++s)
        total += exp(part_lse[it.slot + s * stride + lr] - mx);
    uint orow = (sq.q_off + r / G) * pc.num_heads + it.kv_head * G + r % G;
    uint base = orow * DV;
    for (uint e = 0u; e < DV; ++e) {
      float o = 0.0;
      if (mx != NEG_INF) {
        for (uint s = 0u; s < it.n_slots; ++s) {
          uint prow = it.slot + s * stride + lr;
          float w = exp(part_lse[prow] - mx) / total;
          // A split that saw no key has weight 0 and is skipped, not multiplied.
          if (w > 0.0) o += w * part_o[prow * DV + e];
        }
      }
      if (QDT == DT_F32) {
        out_w[base + e] = floatBitsToUint(o);
      } else {
        STORE16_ATOMIC(out_w, base + e, encode16(QDT, o));
      }
    }
    if ((pc.flags & F_WRITE_LSE) != 0u) lse_out[orow] = mx == NEG_INF ? NEG_INF : mx + log(total);
  }
}

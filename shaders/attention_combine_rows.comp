#version 450
// Second pass of split-KV attention, the variant for CPU devices
// (VKATTN_ATTN_COMBINE=rows; attention_combine.comp, the GPUs', spreads an
// item over every lane through shared memory and barriers, which lavapipe
// runs as scalar loops and coroutine switches: LAVAPIPE.md). Merges
// partial results (rows normalized per split, with their lse) by lse. One
// workgroup per combine item (src/ops/attention/plan.h CombineItem); lanes
// stride over its rows, each walking its row's elements and slots.
// A level of the schedule's combine tree writes a partial again (dst !=
// NO_SLOT), the last level writes out/lse. A split that saw no key (lse
// -inf) has weight 0 and is skipped, never multiplied (its row may hold
// anything). A split whose lse is NaN (a visible NaN or +inf score), or a
// +inf lse (exp(inf - inf)), makes the row's out and lse NaN.
//
// Loop cost per lane (lavapipe's cap; src/ops/attention/prepare.cpp
// combine_rows_fan_in): ceil(stride / 64) rows, each 2 (n_slots + 1) + (DV
// + 1) + DV (n_slots + 1). Budget: no shared memory, one lane a row (a
// CPU thread runs the item's lanes as SIMD), dv x n_slots dependent steps.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint QDT = DT_F32;  // out's dtype (q's, or f32: kFlagOutF32)

layout(std430, binding = 0) coherent buffer Out { uint out_w[]; };
layout(std430, binding = 1) writeonly buffer Lse { float lse_out[]; };
layout(std430, binding = 2) readonly buffer Items { CombineItem items[]; };
layout(std430, binding = 3) readonly buffer Seqs { Seq seqs[]; };
layout(std430, binding = 4) buffer PartO { float part_o[]; };
layout(std430, binding = 5) buffer PartL { float part_lse[]; };
layout(std430, binding = 6) readonly buffer Sinks { float sinks[]; };  // [H], F_SINKS

layout(push_constant) uniform Push {
  uint n_items;
  uint num_heads;
  uint num_kv_heads;
  uint flags;
  uint dv;
  uint item_base;  // items[item_base + id]
  uint seq_base;   // first record / element of each window (attention_common.glsl)
  uint out_base;
  uint lse_base;
  uint out_tok;  // out's row strides (token, head), elements
  uint out_head;
} pc;

void main() {
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;
  CombineItem it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  uint G = pc.num_heads / pc.num_kv_heads;
  uint DV = pc.dv;
  uint row_end = min(sq.t * G, it.row_end);
  for (uint lr = gl_LocalInvocationID.x; lr < it.stride; lr += 64u) {
    uint r = it.row0 + lr;
    if (r >= row_end) break;
    float mx = NEG_INF;
    bool nan_row = false;
    for (uint s = 0u; s < it.n_slots; ++s) {
      float x = part_lse[it.src + s * it.stride + lr];
      mx = max(mx, x);
      nan_row = nan_row || isnan(x);
    }
    float total = 0.0;
    if (mx != NEG_INF)
      for (uint s = 0u; s < it.n_slots; ++s) total += exp(part_lse[it.src + s * it.stride + lr] - mx);
    nan_row = nan_row || isnan(total);
    float lse = nan_row ? NAN_F : mx == NEG_INF ? NEG_INF : mx + log(total);
    // The last level joins the head's sink (once per row, API.md "Models").
    float f = 1.0;
    if (it.dst == NO_SLOT && (pc.flags & F_SINKS) != 0u)
      f = join_sink(lse, sinks[it.kv_head * G + r % G]);
    uint orow = (sq.q_off + r / G) * pc.num_heads + it.kv_head * G + r % G;
    uint base = (sq.q_off + r / G) * pc.out_tok + (it.kv_head * G + r % G) * pc.out_head - pc.out_base;
    for (uint e = 0u; e < DV; ++e) {
      float o = 0.0;
      if (mx != NEG_INF) {
        for (uint s = 0u; s < it.n_slots; ++s) {
          uint prow = it.src + s * it.stride + lr;
          float w = exp(part_lse[prow] - mx) / total;
          if (w > 0.0) o += w * part_o[prow * DV + e];
        }
      }
      o = nan_row ? NAN_F : o * f;
      if (it.dst != NO_SLOT) {
        part_o[(it.dst + lr) * DV + e] = o;
      } else if (QDT == DT_F32) {
        out_w[base + e] = floatBitsToUint(o);
      } else {
        STORE16_ATOMIC(out_w, base + e, encode16(QDT, o));
      }
    }
    if (it.dst != NO_SLOT) {
      part_lse[it.dst + lr] = lse;
    } else if ((pc.flags & F_WRITE_LSE) != 0u) {
      lse_out[orow - pc.lse_base] = lse;
    }
  }
}

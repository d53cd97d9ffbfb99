// Where a forward pass writes, shared by every attention family: output
// rows in q's dtype (QDT), lse, and the split-KV partials that
// attention_combine.comp merges. Include after attention_fetch.glsl; the
// shader defines DV first.
#ifndef VKATTN_ATTENTION_STORE_GLSL
#define VKATTN_ATTENTION_STORE_GLSL

layout(std430, binding = 3) coherent buffer Out {
  uint out_w[];
};
layout(std430, binding = 4) writeonly buffer Lse {
  float lse_out[];
};
layout(std430, binding = 10) writeonly buffer PartO {
  float part_o[];
};
layout(std430, binding = 11) writeonly buffer PartL {
  float part_lse[];
};
layout(std430, binding = 13) readonly buffer Sinks {
  float sinks[];  // [H], read when F_SINKS is set
};

// VKATTN_FAULT_KERNEL: FEATURES bit 30 makes this pipeline's outputs wrong
// on purpose (every row and partial off by one), so that its self-check
// can be watched failing (ops/attention/self_check.h). Never set otherwise.
const bool FAULT_OUTPUT = (FEATURES & 0xc0000000u) == 0x40000000u;  // not the default ~0u
// VKATTN_FAULT_ODD_STORES: bit 29 makes only the stores of rows that share
// 32-bit words with their neighbours (the atomic path below) wrong.
const bool FAULT_ODD = (FEATURES & 0xa0000000u) == 0x20000000u;

// The factor a final (not partial) row of head `head` is multiplied by,
// with its lse updated: 1 without sinks.
float final_row_factor(uint head, inout float lse) {
  return (pc.flags & F_SINKS) != 0u ? join_sink(lse, sinks[head]) : 1.0;
}

// Elements [4c, 4c + 4) of a normalized partial row (arena row prow).
void store_part4(uint prow, uint c, vec4 o) {
  if (FAULT_OUTPUT) o += vec4(1.0);
  [[unroll]] for (uint e = 0u; e < 4u; ++e) {
    if (4u * c + e < DV) part_o[prow * DV + 4u * c + e] = o[e];
  }
}

// Elements [4c, 4c + 4) of an output row whose first element is `base`
// (window-relative), in the output dtype (QDT, or f32 under F_OUT_F32).
// Odd 16-bit rows share words with their neighbours: atomics.
void store_out4(uint base, uint c, vec4 o) {
  if (FAULT_OUTPUT) o += vec4(1.0);
  if (QDT == DT_F32 || (FEATURES & F_OUT_F32) != 0u) {
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      if (4u * c + e < DV) out_w[base + 4u * c + e] = floatBitsToUint(o[e]);
    }
  } else if (DV % 2u == 0u && (pc.flags & F_OUT_ODD) == 0u) {
    [[unroll]] for (uint e = 0u; e < 4u; e += 2u) {
      if (4u * c + e < DV)
        out_w[(base + 4u * c + e) >> 1] = encode16(QDT, o[e]) | (encode16(QDT, o[e + 1u]) << 16);
    }
  } else {
    if (FAULT_ODD) o += vec4(1.0);
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      if (4u * c + e < DV) STORE16_ATOMIC(out_w, base + 4u * c + e, encode16(QDT, o[e]));
    }
  }
}

#endif

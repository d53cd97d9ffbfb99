// Pieces shared by attention_fwd.comp and attention_combine.comp: the work
// item and sequence records written by src/ops/attention/plan.cpp, flags,
// and the output row store.
//
// Windows: a dispatch binds only the part of each tensor its items touch
// (src/ops/attention/schedule.h); push constants give each binding's first
// element (texel) as an absolute index, low 32 bits. Shaders compute
// absolute indices modulo 2^32 and subtract the base, which is exact
// because every window is smaller than 2^32 elements.
#ifndef VKATTN_ATTENTION_COMMON_GLSL
#define VKATTN_ATTENTION_COMMON_GLSL

#include "dtype.glsl"

#define NEG_INF (-1.0 / 0.0)
#define NO_SLOT 0xffffffffu

// floor(log2(n)) and ceil(log2(n)) of a constant 1 <= n < 2048, as
// constant expressions: loop counts for loops over powers of two. Mesa
// 22.3's NIR (Debian 12's lavapipe) unrolls only loops whose counter steps
// by addition; `for (o = 1; o < n; o <<= 1)` stayed a loop, and the
// arrays it indexed went to per-lane scratch memory (attention_decode.glsl:
// 17 % of a top-k decode's time in one such loop, perf, 2026-11-29).
#define FLOOR_LOG2(n)                                                                          \
  ((n) >= 1024u ? 10u : (n) >= 512u ? 9u : (n) >= 256u ? 8u : (n) >= 128u ? 7u : (n) >= 64u ? 6u \
   : (n) >= 32u ? 5u : (n) >= 16u ? 4u : (n) >= 8u ? 3u : (n) >= 4u ? 2u : (n) >= 2u ? 1u : 0u)
#define CEIL_LOG2(n) ((n) <= 1u ? 0u : FLOOR_LOG2((n) - 1u) + 1u)

// Runtime flags (push constant `flags`), mirrored in src/ops/attention/plan.h.
#define F_CAUSAL 1u
#define F_WINDOW 2u
#define F_SOFTCAP 4u
#define F_ALIBI 8u
#define F_MASK_BOOL 16u
#define F_MASK_ADD 32u
#define F_KEY_VALID 64u
#define F_WRITE_LSE 128u
#define F_OUT_ODD 256u
#define F_SINKS 512u
#define F_WINDOW_RIGHT 1024u  // Seq::window_right (compiled in: FEATURES)
#define F_CHUNK 2048u         // Seq::chunk_size (compiled in: FEATURES)
#define F_SPAN 4096u          // Seq::span_lo/span_hi (compiled in: FEATURES)
#define F_TREE 8192u          // Seq::tree_off/tree_w, binding 15 (compiled in: FEATURES)
#define F_TOPK 16384u         // Seq::topk_*, binding 16 (decode family; compiled in: FEATURES)
#define F_OUT_F32 32768u      // out is f32 whatever QDT (a cascade's parts; compiled in: FEATURES)

// A row's normalization from its online-softmax state (running max m,
// running sum l): (1 / l, lse). l > 0: the row saw keys. l = 0: it saw
// none, or only -inf scores (which add nothing): an empty row, out 0 and
// lse -inf. l NaN: a visible score was NaN or +inf (exp(NaN) or
// exp(inf - inf) entered the sum): out and lse NaN, as the header says and
// the f64 reference gives; every merge after it keeps them NaN.
vec2 row_norm(float m, float l) {
  return l > 0.0 ? vec2(1.0 / l, m + log(l)) : (isnan(l) ? vec2(NAN_F) : vec2(0.0, NEG_INF));
}

// A normalized row's final lse joined with its head's sink (API.md
// "Models"): returns the factor the row is multiplied by and updates lse.
// An empty row (lse -inf) becomes out 0, lse = sink; a NaN row stays NaN.
float join_sink(inout float lse, float sink) {
  if (isnan(lse)) return lse;
  if (lse == NEG_INF) {
    lse = sink;
    return 0.0;
  }
  float mx = max(lse, sink);
  float joined = mx + log(exp(lse - mx) + exp(sink - mx));
  float f = exp(lse - joined);
  lse = joined;
  return f;
}

// Work item: rows [row0, row_end) (token, head-in-group) of one (sequence,
// kv head) against keys [k_begin, k_end). slot != NO_SLOT: write a partial.
struct Item {
  uint seq, kv_head, row0, slot;
  uint k_begin, k_end, n_slots, row_end;
};

// Combine item: merges n_slots partials (split s of row r at arena row
// src + s * stride + r) into the partial at dst + r, or into out/lse when
// dst == NO_SLOT.
struct CombineItem {
  uint seq, kv_head, row0, row_end;
  uint src, stride, n_slots, dst;
};

struct Seq {
  uint q_off, k_off, t, u;
  uint mask_off;
  int window_right;  // the call's (F_WINDOW_RIGHT)
  uint chunk_size;   // the call's (F_CHUNK)
  // F_SPAN: every row of an item on this record lies in the bidirectional
  // span [span_lo, span_hi) and also sees its keys (empty: none).
  uint span_lo, span_hi;
  // F_TREE: tree_w words per row (0: no tree), row 0's at tree_off.
  // call_seq: the sequence's index in the call (attention variants' seq).
  uint tree_off, tree_w, call_seq;
  // F_TOPK: token i's list for kv head h starts at element topk_off +
  // i * topk_stride + h * topk_hs of binding 16 (an item's range counts
  // list slots, not keys).
  uint topk_off, topk_stride, topk_hs, pad3;
};

#endif

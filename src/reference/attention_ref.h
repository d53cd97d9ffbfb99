// Plain C++ reference of the attention semantics (DESIGN.md section 1,
// vkattn.h "Attention"), accumulating in double. It is the oracle of the
// tests and the baseline of the benchmark; it knows nothing of Vulkan.
#pragma once

#include <cstdint>
#include <functional>

namespace vkattn::ref {

struct AttentionParams {
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, head_dim_v = 0;  // head_dim_v 0 = head_dim
  double scale = 0;                                                   // 0 = 1/sqrt(head_dim)
  bool causal = false;                  // bottom-right: pos(i) = u - t + i
  int window_left = -1;                 // -1 none; keeps keys with pos(i) - j <= window_left
  int window_right = -1;                // -1 none; keeps keys with j - pos(i) <= window_right
  long chunk_size = 0;                  // 0 off; keeps keys with floor(j/C) == floor(pos(i)/C)
  double softcap = 0;                   // 0 off
  const float* alibi_slopes = nullptr;  // [H] or null
  int mask_type = 0;                    // 0 none, 1 bool, 2 additive
  const uint8_t* bool_mask = nullptr;   // per sequence t_b x u_b row-major, in batch order
  const float* add_mask = nullptr;      // same layout, additive; -inf hides the key
  const int32_t* key_valid = nullptr;   // [total_k] 0 = padding key (hidden); or null
  const float* sinks = nullptr;         // [H] raw logits joining each row's denominator, or null
  // Bidirectional spans (vkattn_attention_desc): sequence b's [start, end)
  // position ranges are the pairs spans[2 * span_indptr[b] .. 2 *
  // span_indptr[b + 1]); a row whose pos lies in one also sees every key
  // of it, whatever causal, the windows and the chunk say. Null: none.
  const int32_t* span_indptr = nullptr;
  const int32_t* spans = nullptr;
  // Trees (vkattn_attention_desc::tree_indptr / tree_mask): sequence b has
  // one when tree_indptr[b + 1] > tree_indptr[b]; row i's bits are the
  // W = ceil(t / 32) words at tree_mask[tree_indptr[b] + i * W], and key
  // j >= u - t is hidden unless bit (j - (u - t)) of them is set (least
  // significant first). Null: none.
  const int32_t* tree_indptr = nullptr;
  const uint32_t* tree_mask = nullptr;
  // Top-k lists (vkattn_attention_desc::topk_indices): topk_k entries per
  // query row (packed row order), or per (row, kv head) when
  // topk_per_head; row i sees key j only if j is listed, once per time it
  // is listed; entries < 0 or >= u are skipped. Null: none.
  const int32_t* topk = nullptr;
  int topk_k = 0;
  bool topk_per_head = false;
  // Attention variants (vkattn_variant: user functions), as host functions
  // of (sequence index in the call, query head, q_pos = u - t + i, k_pos =
  // j): user_mask false hides the key after every built-in rule; user_score
  // takes the score after every built-in term and returns the one the
  // softmax sees (-inf hides). Empty: none.
  std::function<bool(int seq, int head, long q_pos, long k_pos)> user_mask;
  std::function<double(double score, int seq, int head, long q_pos, long k_pos)> user_score;
};

// Packed batch. q [total_q, H, d], k [total_k, Hkv, d], v [total_k, Hkv, dv] as float (already
// rounded to the device dtype by the caller). out [total_q, H, dv], lse [total_q, H] (may be
// null). A row with no visible key gives out = 0 and lse = -inf (lse = sinks[h] with sinks). Hidden
// keys are skipped, never multiplied by zero, so NaN/Inf in hidden K/V never reaches out. A visible
// score of -inf adds nothing (only such scores: an empty row); a visible NaN or +inf score makes
// the row's out and lse NaN. t = 0 and u = 0 are legal.
void attention_varlen(const AttentionParams& p, int batch, const int32_t* cu_q, const int32_t* cu_k,
                      const float* q, const float* k, const float* v, float* out, float* lse);

// floor(a / b) for b > 0: the chunk of position a under chunk_size b (a
// negative position, t > u, lies in a negative chunk). The tests and the
// benchmark take it from here; the library uses core/int_div.h (the oracle
// shares no code with what it judges).
long floor_div(long a, long b);

// Merge of two partials over disjoint keys, rows x dv outputs and rows lses:
// out = (e^la a + e^lb b) / (e^la + e^lb), lse = log(e^la + e^lb). A side whose lse is -inf is
// not read: the other side is returned unchanged; both -inf give 0 and -inf; a NaN lse on either
// side gives NaN out and lse. out may alias out_a
// or out_b, lse may alias lse_a or lse_b, and lse may be null.
void attention_merge(int rows, int dv, const float* out_a, const float* lse_a, const float* out_b,
                     const float* lse_b, float* out, float* lse);

}  // namespace vkattn::ref

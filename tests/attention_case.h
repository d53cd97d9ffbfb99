// One attention test case: random inputs rounded to their dtypes, NaN in
// every K/V position no query may see, out/lse pre-filled with NaN, the
// device result compared with src/reference within stated tolerances.
//
// Tolerances (derived from the reference's own rounding): the reference
// rounds nothing but the inputs, so the device may differ by half an ulp of
// the output dtype at |ref| (its final rounding) plus the f32 accumulation
// error, bounded here by 3e-5 * max(1, max|v|) for out and 5e-5 * (1 + |lse|)
// for lse (exp/log and sums of up to 1e5 terms in f32).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "vkattn/vkattn.h"

namespace vkattn_test {

struct AttnCase {
  int H = 4, Hkv = 2, d = 64, dv = 0;     // dv 0 = d
  std::vector<std::pair<int, int>> seqs;  // (t, u) per sequence
  bool causal = false;
  int window = -1;
  int window_right = -1;  // desc->window_right
  int chunk = 0;          // desc->chunk_size
  // The right window and the chunks passed as the equivalent bool mask
  // instead (mask_type must be NONE): the dense form the rules replace.
  bool rules_as_mask = false;
  // Bidirectional spans per sequence ([start, end) positions; desc->spans),
  // empty: none. With rules_as_mask the mask holds the whole rule
  // (causal and the windows included: a span widens them) and the
  // descriptor passes none of it.
  std::vector<std::vector<std::pair<int, int>>> spans;
  // Trees per sequence (desc->tree_indptr / tree_mask): true gives
  // sequence b a random tree over its t queries (each node's parent drawn
  // from the nodes before it; a node sees its ancestors and itself), false
  // none; empty: no trees. Needs t <= u where true. With tree_as_mask the
  // tree goes in as the equivalent bool mask (mask_type must be NONE;
  // rules_as_mask's rules join it) and the descriptor passes none.
  std::vector<bool> trees;
  bool tree_as_mask = false;
  // Top-k lists (desc->topk_indices) of K = topk entries per query row
  // (per kv head with topk_per_head), -1: none. Each list holds distinct
  // random positions of its sequence, fewer than K on some rows (-1 pads),
  // and, unless topk_as_mask, an entry past u, one below -1 and a repeat.
  // topk_as_mask: the lists go in as the equivalent bool mask instead
  // (mask_type NONE; per-kv-head lists have no mask form).
  int topk = -1;
  bool topk_per_head = false;
  bool topk_as_mask = false;
  float softcap = 0.0f, scale = 0.0f;
  bool alibi = false;
  bool sinks = false;  // desc->sinks: head 0 -inf (no sink), head 1 +6 (dominant), others mixed
  int mask_type = VKATTN_MASK_NONE;
  vkattn_dtype mask_dt = VKATTN_F32;  // of an additive mask
  vkattn_dtype qdt = VKATTN_F32, kdt = VKATTN_F32;
  bool with_lse = true;
  bool padded = false;   // run vkattn_attention_padded: every seq the same (t, u)
  int pad_keys = 0;      // padded: keys of sequence b hidden by key_mask: b * pad_keys % u ...
  bool left_pad = true;  // ... at the start (left) or the end (right)
  uint32_t seed = 1;
  // Attention variant (desc->variant: user functions): its GLSL source
  // (empty: none), param_dtypes and each slot's values (a [n] tensor of
  // that dtype), and the host forms of its functions for the reference and
  // the NaN filling (args: the call's sequence, query head, q_pos, k_pos).
  std::string variant_source;
  uint32_t variant_dtypes[4] = {0, 0, 0, 0};
  std::vector<double> variant_params[4];
  std::function<bool(int, int, long, long)> host_mask;
  std::function<double(double, int, int, long, long)> host_score;
  std::string name() const;
};

struct CaseStats {
  double max_err = 0, max_lse_err = 0;
  int64_t checked = 0, hidden_rows = 0, nan_keys = 0;
  int64_t sink_only_rows = 0;  // rows with no visible key whose lse is their finite sink
};

// Runs the case on ctx and checks it with gtest assertions.
CaseStats run_attention_case(vkattn_context* ctx, const AttnCase& c);

}  // namespace vkattn_test

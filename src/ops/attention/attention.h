// Attention ops: validate on the host (ops/attention/validate.cpp), plan the packed
// batch (ops/attention/plan.h), schedule it into dispatches that fit the
// device (ops/attention/schedule.h), pick a kernel variant
// (ops/attention/variant.h; plan, schedule and variant are made ready in
// ops/attention/prepare.h) and family (ops/attention/family.h: `lanes`,
// ops/attention/families/lanes.cpp) and record its shader, e.g. attention_fwd.comp (+
// attention_combine.comp when key ranges were split;
// ops/attention/record.cpp); vkattn_attention_merge records
// shaders/attention_merge.comp (ops/attention/merge.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "vkattn/vkattn.h"

namespace vkattn {

class Step;
class UserFunctions;
struct FwdConfig;

// Everything a forward call needs, already in packed ("varlen") form.
struct AttentionCall {
  vkattn_attention_desc desc;  // validated copy; head_dim_v resolved
  uint32_t batch = 0;
  std::vector<int64_t> cu_q, cu_k;  // batch + 1 entries each
  Tensor *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  Tensor *lse = nullptr, *mask = nullptr, *alibi = nullptr, *sinks = nullptr;
  Tensor* topk = nullptr;  // desc->topk_indices: I32 [rows, K] or [rows, Hkv, K]
  // desc->variant (attention variants: user functions) and its parameter
  // tensors (desc.variant and desc.variant_params are then cleared).
  std::shared_ptr<UserFunctions> user;
  Tensor* user_params[4] = {nullptr, nullptr, nullptr, nullptr};
  std::vector<uint8_t> key_valid;  // [total_k] 0 = padding key; empty = none
  // Bidirectional spans, copied from the descriptor and checked against
  // the call's key counts (desc.span_indptr/spans are then cleared): batch
  // + 1 prefix sums and the (start, end) pairs; both empty = none.
  std::vector<int32_t> span_indptr, spans;
  // Trees, copied from the descriptor and checked (desc.tree_indptr/
  // tree_mask are then cleared): batch + 1 prefix sums of words and the
  // words; both empty = none.
  std::vector<int32_t> tree_indptr;
  std::vector<uint32_t> tree_words;
  // Paged: K/V come from layer `layer` of the step's cache (k, v null).
  Step* step = nullptr;
  uint32_t layer = 0;
  // Caller pools (vkattn_attention_paged): k, v are [num_pages, page_size,
  // Hkv, dim] and sequence b's keys live in pages[first[b] ..] (checked).
  struct Pools {
    uint32_t page_size = 0;
    std::vector<uint32_t> pages;
    std::vector<uint64_t> first;  // batch entries
  };
  std::shared_ptr<Pools> pools;
  // A self-check's call (ops/attention/self_check.h): runs exactly this
  // pipeline configuration (variant and texel widths), never checked itself.
  const FwdConfig* pinned = nullptr;
  // The up-front self-check of a VKATTN_Q4 call (q4 is no tensor dtype):
  // its stand-in pools k, v are int8 and kv_dtype() says VKATTN_Q4.
  bool q4_stand_in = false;
  // Cascade (ops/attention/cascade.cpp). Keys [key_skip[2b], key_skip[2b +
  // 1]) of sequence b are not read here (the main call: the shared keys
  // its group's prefix call reads; the prefix call: shared keys some row
  // of the group does not see, which the main call reads); empty: none.
  // page_seq[b]: the sequence
  // whose pages (block table or page_indices) sequence b reads; empty:
  // its own. cascade_part: a part of a cascade, never cascaded again.
  // prefix_tiles: the prefix call, whose tiles should hold a group's rows
  // (each tile reads the shared keys once).
  std::vector<uint32_t> key_skip, page_seq;
  bool cascade_part = false, prefix_tiles = false;
  bool paged() const { return step != nullptr || pools != nullptr; }
  // Paged: page i (an index of the step's cache or of the caller's pools)
  // of the sequence whose pages sequence b reads (page_seq).
  uint32_t page(uint32_t b, uint64_t i) const;
  // Top-k: entries per list (the lists' last dim; 0 without lists).
  uint32_t topk_k() const { return topk ? static_cast<uint32_t>(topk->dim(topk->ndim() - 1)) : 0; }
  vkattn_dtype kv_dtype() const;
};

// Checks a descriptor and returns a copy with defaults resolved. Throws
// INVALID_ARGUMENT naming the field.
vkattn_attention_desc check_attention_desc(const vkattn_attention_desc* desc);

// The descriptor's optional tensors (lse, mask, alibi_slopes, sinks) into
// c, and their checks that do not depend on a call's shapes (context,
// contiguity, dtypes, [H] sinks and slopes, a mask where mask_type says).
void take_optional_tensors(AttentionCall& c);
void check_optional_tensors(Context& ctx, const AttentionCall& c);

// The public entry points' validation: build a call or throw.
AttentionCall make_varlen_call(Context& ctx, const vkattn_attention_desc* desc, uint32_t batch,
                               const int32_t* cu_q, const int32_t* cu_k, Tensor* q, Tensor* k,
                               Tensor* v, Tensor* out);
AttentionCall make_padded_call(Context& ctx, const vkattn_attention_desc* desc, Tensor* q,
                               Tensor* k, Tensor* v, const int32_t* key_mask, Tensor* out);

// vkattn_step_attention: q [total_new, H, d] over the step's cache layer.
AttentionCall make_paged_call(Context& ctx, const vkattn_attention_desc* desc, Step& step,
                              uint32_t layer, Tensor* q, Tensor* out);

// vkattn_attention_paged: q over caller-owned page pools.
AttentionCall make_pool_call(Context& ctx, const vkattn_attention_desc* desc, uint32_t batch,
                             const int32_t* cu_q, const int32_t* seq_lens_k,
                             const int32_t* page_indptr, const int32_t* page_indices,
                             uint32_t page_size, Tensor* q, Tensor* k_pages, Tensor* v_pages,
                             Tensor* out);

// The pages of each sequence checked against the pools (shared by
// vkattn_attention_paged and vkattn_paged_append): every used index below
// num_pages, enough pages for `lens[b]` keys. Returns them flattened.
std::shared_ptr<AttentionCall::Pools> check_page_table(uint32_t batch, const int32_t* lens,
                                                       const int32_t* page_indptr,
                                                       const int32_t* page_indices,
                                                       uint32_t page_size, int64_t num_pages);

// vkattn_paged_append(_rope): validation and recording (ops/kv_append.cpp);
// `rope` NULL = no rotation.
void record_paged_append(Context& ctx, uint32_t batch, const int32_t* cu_new,
                         const int32_t* seq_lens_before, const int32_t* page_indptr,
                         const int32_t* page_indices, uint32_t page_size, Tensor* k_new,
                         Tensor* v_new, Tensor* k_pages, Tensor* v_pages,
                         const vkattn_rope_desc* rope = nullptr);

// Records the forward pass. Nothing is recorded for empty work.
void record_attention(Context& ctx, const AttentionCall& call);

// Records a paged call whose sequences share prefix pages as a cascade
// (ops/attention/cascade.cpp) and returns true, or returns false, having
// recorded nothing, when the call has no group to share or a rule the
// cascade does not split (then record_attention plans it as usual).
bool record_cascade(Context& ctx, const AttentionCall& call);

// Validates and records vkattn_attention_merge.
void record_attention_merge(Context& ctx, Tensor* out_a, Tensor* lse_a, Tensor* out_b,
                            Tensor* lse_b, Tensor* out, Tensor* lse);
// Records a checked merge; a and b may be f32 rows for a 16-bit out (a
// cascade's parts: the merged row is rounded once).
void record_merge(Context& ctx, Tensor* out_a, Tensor* lse_a, Tensor* out_b, Tensor* lse_b,
                  Tensor* out, Tensor* lse);

}  // namespace vkattn

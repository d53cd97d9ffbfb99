// A call's plan made ready for recording: the plan (ops/attention/plan.h),
// its schedule (ops/attention/schedule.h), the kernel variant, the texel
// widths, and their device copy (items, combine items, sequences and block
// tables in one host-visible buffer). Paged calls keep it in a buffer of
// their own, reused by every layer of the step; other calls put it in the
// open batch's host ring.
#pragma once

#include <map>
#include <memory>

#include "core/binding_window.h"
#include "core/context.h"
#include "ops/attention/attention.h"
#include "ops/attention/family.h"
#include "ops/attention/plan.h"
#include "ops/attention/schedule.h"
#include "ops/attention/variant.h"

namespace vkattn {

// Plan data regions start at this alignment (any device's storage offset
// alignment divides it).
constexpr uint64_t kRegionAlign = 256;

// Flags whose transforms are compiled into a forward kernel only when a
// call uses them (its FEATURES specialization constant).
constexpr uint32_t kCompiledFlags = kFlagSoftcap | kFlagAlibi | kFlagMaskBool | kFlagMaskAdd |
                                    kFlagKeyValid | kFlagWindowRight | kFlagChunk | kFlagSpan |
                                    kFlagTree | kFlagTopk;

inline uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// The view format of texel kind `kind` (0 = one element, 1 = four
// elements, 2 = eight 16-bit elements) of dtype dt.
VkFormat texel_format(vkattn_dtype dt, uint32_t kind);

// How a forward pass addresses the rows of q, k, v or out in place: the
// first element's byte in the buffer and the token and head strides in
// elements (views of a fused QKV output, strided caller buffers; dense
// tensors are the case tok = H * dim, head = dim).
struct RowLayout {
  uint64_t offset = 0;                 // bytes
  uint64_t tok = 0, head = 0;          // elements
  uint64_t page = 0, page_extent = 0;  // caller pools: page stride and one page's span, elements
  uint64_t extent = 0;                 // elements one token spans: (heads - 1) * head + dim
  uint64_t es = 4;                     // element bytes
  uint64_t unit() const { return std::max(tok, extent) * es; }  // bytes per token, a bound
  // Bytes [lo_byte, hi_byte) hold tokens [lo, hi).
  uint64_t lo_byte(uint64_t lo) const { return offset + lo * tok * es; }
  uint64_t hi_byte(uint64_t lo, uint64_t hi) const {
    return hi > lo ? offset + ((hi - 1) * tok + extent) * es : lo_byte(lo);
  }
};

// The row layout of q/k/v/out `t` ([T, H, dim], or padded [B, S, H, dim]
// with B's stride S times S's). `ok` false: the kernels cannot address it
// in place (it goes through a packed copy, ops/packed_views.h).
RowLayout row_layout(const Tensor& t, bool* ok);
// A caller pool [num_pages, page_size, heads, dim], any strides.
RowLayout pool_layout(const Tensor& t, bool* ok);
// Whether a forward pass may bind `t` in place: an input read through
// texel views (texel), or an output written through storage bindings.
bool rows_bindable(const DeviceCaps& caps, const Tensor& t, bool texel, bool pool = false);

struct PreparedPlan {
  Plan plan;
  Schedule sched;
  AttentionVariant var;
  CallUnits units;
  uint32_t qvec = 0, kvec = 0, vvec = 0;
  RowLayout q, k, v, out;  // k, v unused when the step's cache holds them
  // Where the variant came from (VKATTN_LOG=kernels source=): "table",
  // "tuned" (the device's tuning file), "env" (forced), "check" (a
  // self-check's pinned variant).
  const char* source = "table";
  uint32_t window_pages = 0;  // paged: pages of one binding window (pools, cache)
  Region items, combine, seqs, table;
  // Top-k over pages in several pool buffers: the block table once per
  // buffer, entries of the other buffers' pages NO_SLOT (a pass reads the
  // listed keys of its own buffer). table_len: entries of one copy;
  // table_copy_of: a buffer's copy. Empty: one table.
  uint32_t table_len = 0;
  std::map<uint32_t, uint32_t> table_copy_of;
  // Where the kernels read the regions above: device-local memory
  // (VKATTN_PLAN_MEMORY=device, discrete GPUs' default) or host-visible.
  // A device plan's bytes wait in plan_image until a call records their
  // copy to plan_dst (upload_pending; the step's own buffer, or this call's
  // device ring slice).
  bool plan_on_device = false;
  std::vector<uint8_t> plan_image;
  Buffer* plan_dst = nullptr;
  uint64_t plan_dst_offset = 0;
  bool upload_pending = false;
  // Batch invariance: a sequence whose pages change pool buffer (or caller
  // pool window) is read from copies of its pages gathered into buffers of
  // their own, chunk c of it (at most one binding's pages, cut at fixed
  // positions of the sequence) in pass buffer kGatherBuffer + c, so that
  // its keys are cut where its own length says, never where its pages
  // happen to lie. gathered: the pages (cache page ids, or the caller's
  // pool indices) in gathered order; gather_first: chunk c's first entry.
  static constexpr uint32_t kGatherBuffer = 0x80000000u;
  std::vector<uint32_t> gathered;
  std::vector<uint32_t> gather_first;
};

// Whether the context's attention kernels read their plans from
// device-local memory (VKATTN_PLAN_MEMORY; default: discrete GPUs).
bool plan_on_device(Context& ctx);
// Whether the context's split-KV combine is attention_combine.comp's
// (row, word) jobs over every lane (GPUs' default) or
// attention_combine_rows.comp's lane per row (CPU devices';
// VKATTN_ATTN_COMBINE=words|rows).
bool combine_by_words(Context& ctx);

// Which sequences of a call a plan serves: all of them, or those with at
// most kDecodeMaxTokens query tokens (decode-shaped) or the others. Parts
// are planned apart in batch-invariant contexts
// (VKATTN_CONTEXT_BATCH_INVARIANT), where a part's variant comes from its
// class, not from its sequences (decode: one token x group rows; prefill:
// kInvariantPrefillRows), and its decode-shaped sequences are split into
// fixed chunks of keys (AttentionVariant::invariant_split_keys); and in
// any context where the two classes get different families (the device
// table's decode family for decodes, tiled or coopmat for prefill chunks:
// a serving loop's mixed step), each part planned from its own sequences.
enum class PlanPart : uint32_t { kAll = 0, kDecode = 1, kPrefill = 2 };

// The part a sequence of t query tokens belongs to.
inline PlanPart part_of(int64_t t) {
  return t <= int64_t(kDecodeMaxTokens) ? PlanPart::kDecode : PlanPart::kPrefill;
}

// The call's runtime flags (kFlag*: ops/attention/plan.h).
uint32_t call_flags(const AttentionCall& c);
// The pipeline configuration of a prepared plan: its variant, the call's
// dims, dtypes and transforms, and its attention variant's functions
// (VKATTN_FAULT_KERNEL adds kFeatureFault to the faulted family's,
// ops/attention/self_check.h).
FwdConfig fwd_config(const Context& ctx, const AttentionCall& c, const PreparedPlan& pp,
                     uint32_t flags);

// pp.var (and pp's row layouts and texel widths) for `c`'s sequences of
// `part`: chosen (ops/attention/variant.h), then every unchecked pipeline
// self-checked and a failed family replaced (ops/attention/self_check.h).
void choose_variant(Context& ctx, const AttentionCall& c, PlanPart part, PreparedPlan& pp);

// Plans `c` (its sequences of `part`): the variant (ops/attention/variant.h;
// every unchecked pipeline is self-checked first and a failed family
// replaced, ops/attention/self_check.h), schedule and device copy.
std::shared_ptr<PreparedPlan> prepare_plan(Context& ctx, const AttentionCall& c,
                                           PlanPart part = PlanPart::kAll);

}  // namespace vkattn

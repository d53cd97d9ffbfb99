// Validation of the attention entry points (vkattn_attention_varlen,
// _padded, vkattn_step_attention): every argument is checked on the host and
// turned into an AttentionCall before anything is recorded. Recording is in
// ops/attention/record.cpp, the merge op in ops/attention/merge.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/abi.h"
#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "ops/attention/attention.h"
#include "ops/attention/check.h"
#include "ops/attention/user_functions.h"
#include "ops/kv_cache.h"

namespace vkattn {

bool is_float(vkattn_dtype dt) {
  return dt == VKATTN_F32 || dt == VKATTN_F16 || dt == VKATTN_BF16;
}

std::string shape_str(const Tensor& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.dim(i));
  return s + "]";
}

// Requires `t` to have exactly `want` as its shape.
void require_shape(const Tensor& t, const char* name, std::initializer_list<int64_t> want) {
  bool ok = t.ndim() == want.size();
  uint32_t i = 0;
  for (int64_t w : want) ok = ok && t.dim(i++) == w;
  if (!ok) {
    std::string w = "[";
    i = 0;
    for (int64_t x : want) w += (i++ ? ", " : "") + std::to_string(x);
    fail(VKATTN_ERROR_INVALID_ARGUMENT, name, " has shape ", shape_str(t), ", expected ", w, "]");
  }
}

void require_same_context(Context& ctx, const Tensor* t, const char* name) {
  if (t && &t->context() != &ctx)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, name, " belongs to another context");
}

bool elements_overlap(const Tensor* a, const Tensor* b) {
  if (!a || !b || !a->buffer() || !b->buffer()) return false;
  if (a->buffer()->handle() != b->buffer()->handle()) return false;
  // The same tensor (or an identical view): no search needed.
  if (a == b) return a->numel() > 0;
  return spans_overlap(a->span(), b->span());
}

bool self_overlapping(const Tensor& t) {
  return span_self_overlaps(t.span());
}

namespace {

// Checks the dtypes and the shapes that do not depend on the layout.
void check_tensors(Context& ctx, const AttentionCall& c) {
  const bool paged = c.step != nullptr;  // caller pools check k/v as tensors
  if (paged)
    require(c.q && c.out, "q and out must not be NULL");
  else
    require(c.q && c.k && c.v && c.out, "q, k, v and out must not be NULL");
  for (auto [t, n] : {std::pair<Tensor*, const char*>{c.q, "q"},
                      {c.k, "k"},
                      {c.v, "v"},
                      {c.out, "out"},
                      {c.lse, "desc->lse"},
                      {c.mask, "desc->mask"},
                      {c.alibi, "desc->alibi_slopes"},
                      {c.sinks, "desc->sinks"}})
    require_same_context(ctx, t, n);
  require(is_float(c.q->dtype()), "q must be f32, f16 or bf16, got ", dtype_name(c.q->dtype()));
  require(c.out->dtype() == c.q->dtype(), "out must have q's dtype ", dtype_name(c.q->dtype()),
          ", got ", dtype_name(c.out->dtype()));
  if (!paged) require(c.k->dtype() == c.v->dtype(), "k and v must share a dtype");
  const vkattn_dtype kv = c.kv_dtype();
  if (is_8bit(kv) && !c.step)
    fail(VKATTN_ERROR_UNSUPPORTED, paged ? "8-bit caller pools" : "8-bit k/v tensors", " (",
         dtype_name(kv), ") are not supported yet: use a vkattn_kv_cache of that dtype");
  require(
      kv == c.q->dtype() || kv == VKATTN_F16 || kv == VKATTN_BF16 || is_8bit(kv) || kv == VKATTN_Q4,
      paged ? "the cache dtype must be q's dtype or f16/bf16, got "
            : "k/v must have q's dtype or f16/bf16, got ",
      dtype_name(kv));
  for (const Tensor* in : {c.q, c.k, c.v, c.mask, c.alibi, c.sinks})
    require(!elements_overlap(c.out, in) && !elements_overlap(c.lse, in),
            "out and lse must not alias (overlap) q, k, v, the mask, alibi_slopes or sinks");
  require(!elements_overlap(c.out, c.lse), "out and lse must not alias (overlap) each other");
  require(!self_overlapping(*c.out),
          "out is a view whose elements overlap (a zero or interleaved stride)");
  check_optional_tensors(ctx, c);
}

}  // namespace

void check_optional_tensors(Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  for (auto [t, n] : {std::pair<Tensor*, const char*>{c.lse, "desc->lse"},
                      {c.mask, "desc->mask"},
                      {c.alibi, "desc->alibi_slopes"},
                      {c.sinks, "desc->sinks"}})
    require_same_context(ctx, t, n);
  for (auto [t, n] : {std::pair<Tensor*, const char*>{c.lse, "desc->lse"},
                      {c.mask, "desc->mask"},
                      {c.alibi, "desc->alibi_slopes"},
                      {c.sinks, "desc->sinks"}})
    require(!t || t->contiguous(), n, " must be contiguous (a dense tensor or view)");
  if (d.alibi_slopes) {
    require(c.alibi->dtype() == VKATTN_F32, "alibi_slopes must be f32");
    require_shape(*c.alibi, "alibi_slopes", {d.num_heads});
  }
  if (c.sinks) {
    require(c.sinks->dtype() == VKATTN_F32, "desc->sinks must be f32, got ",
            dtype_name(c.sinks->dtype()));
    require_shape(*c.sinks, "desc->sinks", {d.num_heads});
  }
  if (c.lse) require(c.lse->dtype() == VKATTN_F32, "lse must be f32");
  // Attention variants: their own context's, and a tensor in each slot the
  // variant declares (of its dtype), none elsewhere.
  if (c.user)
    require(&c.user->context() == &ctx, "desc->variant belongs to another context than the call's");
  for (uint32_t s = 0; s < 4; ++s) {
    Tensor* t = c.user_params[s];
    const uint32_t want = c.user ? c.user->slot_dtype(s) : 0u;
    if (!c.user)
      require(!t, "desc->variant_params[", s, "] is set but desc->variant is NULL");
    else if (want == 0)
      require(!t, "desc->variant_params[", s, "] is set but the variant declares no slot ", s,
              " (param_dtypes[", s, "] is 0)");
    else
      require(t != nullptr, "desc->variant_params[", s, "] is NULL but the variant reads slot ", s,
              " (param_dtypes[", s, "] is ", dtype_name(static_cast<vkattn_dtype>(want)), ")");
    if (!t) continue;
    require_same_context(ctx, t, "desc->variant_params[]");
    require(t->dtype() == static_cast<vkattn_dtype>(want), "desc->variant_params[", s, "] is ",
            dtype_name(t->dtype()), ", the variant declared ",
            dtype_name(static_cast<vkattn_dtype>(want)));
  }
  if (d.mask_type == VKATTN_MASK_NONE) {
    require(!c.mask, "desc->mask is set but mask_type is VKATTN_MASK_NONE");
  } else {
    require(c.mask != nullptr, "mask_type is set but desc->mask is NULL");
    if (d.mask_type == VKATTN_MASK_BOOL)
      require(c.mask->dtype() == VKATTN_U8, "a BOOL mask must be u8, got ",
              dtype_name(c.mask->dtype()));
    else
      require(is_float(c.mask->dtype()), "an ADDITIVE mask must be f32, f16 or bf16, got ",
              dtype_name(c.mask->dtype()));
  }
}

// The descriptor's optional tensors (from the checked copy: a 0.1 struct
// has no sinks).
void take_optional_tensors(AttentionCall& c) {
  auto impl = [](vkattn_tensor* t) { return t ? t->impl.get() : nullptr; };
  c.lse = impl(c.desc.lse), c.mask = impl(c.desc.mask);
  c.alibi = impl(c.desc.alibi_slopes), c.sinks = impl(c.desc.sinks);
  // Attention variants: taken out of the descriptor (a copy of it, as the
  // self-check makes, carries none).
  c.user = c.desc.variant ? c.desc.variant->impl : nullptr;
  for (uint32_t s = 0; s < 4; ++s) {
    c.user_params[s] = impl(c.desc.variant_params[s]);
    c.desc.variant_params[s] = nullptr;
  }
  c.desc.variant = nullptr;
}

namespace {

// The descriptor and layout-independent checks both entry points share.
AttentionCall start_call(Context& ctx, const vkattn_attention_desc* desc, Tensor* q, Tensor* k,
                         Tensor* v, Tensor* out) {
  AttentionCall c;
  c.desc = check_attention_desc(desc);
  c.q = q, c.k = k, c.v = v, c.out = out;
  take_optional_tensors(c);
  check_tensors(ctx, c);
  return c;
}

// A descriptor's per-sequence counts (`name`: "desc->span_indptr", ...):
// batch + 1 prefix sums from 0, never decreasing.
void check_counts(const char* name, uint32_t batch, const int32_t* indptr) {
  require(indptr[0] == 0, name, "[0] is ", indptr[0], ", must be 0");
  for (uint32_t b = 0; b < batch; ++b)
    require(indptr[b + 1] >= indptr[b], name, " decreases at ", b + 1, " (", indptr[b], " -> ",
            indptr[b + 1], ")");
}

// The descriptor's bidirectional spans into c, checked against each
// sequence's u (cu_k): prefix sums from 0, never decreasing; per sequence
// sorted, disjoint and nonempty, 0 <= start < end <= u.
void take_spans(AttentionCall& c) {
  vkattn_attention_desc& d = c.desc;
  const int32_t* indptr = d.span_indptr;
  const int32_t* spans = d.spans;
  d.span_indptr = nullptr, d.spans = nullptr;  // borrowed for the call only
  if (!indptr) return;
  check_counts("desc->span_indptr", c.batch, indptr);
  if (indptr[c.batch] == 0) return;  // no spans (spans may be NULL)
  require(spans != nullptr, "desc->spans is NULL but desc->span_indptr counts ", indptr[c.batch],
          " spans");
  for (uint32_t b = 0; b < c.batch; ++b) {
    const int64_t u = c.cu_k[b + 1] - c.cu_k[b];
    int64_t prev_end = 0;
    for (int32_t n = indptr[b]; n < indptr[b + 1]; ++n) {
      const int64_t lo = spans[2 * int64_t(n)], hi = spans[2 * int64_t(n) + 1];
      require(lo >= 0 && lo < hi && hi <= u, "desc->spans: span ", n - indptr[b], " of sequence ",
              b, " is [", lo, ", ", hi, "), must satisfy 0 <= start < end <= u = ", u);
      require(lo >= prev_end, "desc->spans: span ", n - indptr[b], " of sequence ", b, " [", lo,
              ", ", hi, ") starts before the previous one ends (", prev_end,
              "): spans must be sorted and disjoint");
      prev_end = hi;
    }
  }
  host_alloc_point();
  c.span_indptr.assign(indptr, indptr + c.batch + 1);
  c.spans.assign(spans, spans + 2 * int64_t(indptr[c.batch]));
}

// The descriptor's trees into c (tree_indptr / tree_mask, checked against
// each sequence's t and u) and its top-k tensor's shape (top-k is not
// implemented yet: a valid one ends the call UNSUPPORTED).
void take_trees(Context& ctx, AttentionCall& c) {
  vkattn_attention_desc& d = c.desc;
  const int32_t* indptr = d.tree_indptr;
  const uint32_t* words = d.tree_mask;
  d.tree_indptr = nullptr, d.tree_mask = nullptr;  // borrowed for the call only
  if (d.topk_indices) {
    Tensor* t = d.topk_indices->impl.get();
    require_same_context(ctx, t, "desc->topk_indices");
    require(t->dtype() == VKATTN_I32, "desc->topk_indices must be i32, got ",
            dtype_name(t->dtype()));
    require(t->ndim() == 2 || t->ndim() == 3,
            "desc->topk_indices must be [rows, K] or [rows, Hkv, K], got ", shape_str(*t));
    const int64_t rows = c.cu_q[c.batch];
    require(t->dim(0) == rows, "desc->topk_indices' first dim is ", t->dim(0),
            ", must be the call's query tokens ", rows);
    require(t->ndim() == 2 || t->dim(1) == d.num_kv_heads, "desc->topk_indices' middle dim is ",
            t->dim(1), ", must be num_kv_heads ", d.num_kv_heads);
    require(t->dim(t->ndim() - 1) <= INT32_MAX, "desc->topk_indices' K ", t->dim(t->ndim() - 1),
            " is above 2^31 - 1");
    c.topk = t;
  }
  if (!indptr) return;
  check_counts("desc->tree_indptr", c.batch, indptr);
  if (indptr[c.batch] == 0) return;  // no trees (tree_mask may be NULL)
  require(words != nullptr, "desc->tree_mask is NULL but desc->tree_indptr counts ",
          indptr[c.batch], " words");
  for (uint32_t b = 0; b < c.batch; ++b) {
    const int64_t n = int64_t(indptr[b + 1]) - indptr[b];
    if (n == 0) continue;
    const int64_t t = c.cu_q[b + 1] - c.cu_q[b], u = c.cu_k[b + 1] - c.cu_k[b];
    require(t <= u, "desc->tree_indptr: sequence ", b, " has a tree but t = ", t,
            " queries over u = ", u, " keys (a tree needs t <= u)");
    require(n == t * ((t + 31) / 32), "desc->tree_indptr: sequence ", b, " has ", n,
            " words, must be t * ceil(t / 32) = ", t * ((t + 31) / 32), " (t = ", t, ")");
  }
  const uint64_t bytes = uint64_t(indptr[c.batch]) * 4;
  const uint64_t limit = storage_window_limit(ctx.device().caps());
  if (bytes > limit)
    fail(VKATTN_ERROR_UNSUPPORTED, "desc->tree_mask: ", bytes,
         " bytes of tree words pass one storage binding (", limit, " bytes) on this device");
  host_alloc_point();
  c.tree_indptr.assign(indptr, indptr + c.batch + 1);
  c.tree_words.assign(words, words + indptr[c.batch]);
}
}  // namespace

void check_prefix_sums(const char* name, uint32_t batch, const int32_t* cu, int64_t total,
                       const char* tensor) {
  require(cu != nullptr, name, " is NULL");
  require(cu[0] == 0, name, "[0] is ", cu[0], ", must be 0");
  for (uint32_t b = 0; b < batch; ++b)
    require(cu[b + 1] >= cu[b], name, " decreases at ", b + 1, " (", cu[b], " -> ", cu[b + 1], ")");
  require(cu[batch] == total, name, "[", batch, "] is ", cu[batch], ", must equal ", tensor,
          "'s first dim ", total);
}

vkattn_attention_desc check_attention_desc(const vkattn_attention_desc* desc) {
  vkattn_attention_desc d = read_desc(desc, kAttentionDescSizes, &vkattn_attention_desc_init,
                                      "desc", "vkattn_attention_desc_init");
  for (uint32_t r : d.reserved) require(r == 0, "desc->reserved must be 0");
  require(d.num_heads >= 1, "desc->num_heads must be >= 1");
  require(d.num_kv_heads >= 1, "desc->num_kv_heads must be >= 1");
  require(d.num_heads % d.num_kv_heads == 0, "num_heads ", d.num_heads,
          " is not a multiple of num_kv_heads ", d.num_kv_heads);
  require(d.head_dim >= 1 && d.head_dim <= VKATTN_MAX_HEAD_DIM, "desc->head_dim ", d.head_dim,
          " is not in 1..", VKATTN_MAX_HEAD_DIM);
  require(d.head_dim_v <= VKATTN_MAX_HEAD_DIM, "desc->head_dim_v ", d.head_dim_v, " is not in 0..",
          VKATTN_MAX_HEAD_DIM);
  if (d.head_dim_v == 0) d.head_dim_v = d.head_dim;
  require(std::isfinite(d.scale), "desc->scale must be finite");
  if (d.scale == 0.0f) d.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  require(d.causal <= 1, "desc->causal must be 0 or 1");
  require(d.window_left >= -1, "desc->window_left ", d.window_left, " is invalid (-1 = none)");
  require(d.window_right >= -1, "desc->window_right ", d.window_right,
          " is invalid (-1 = none; vkattn_attention_desc_init sets it)");
  require(d.span_indptr != nullptr || d.spans == nullptr,
          "desc->spans is set but desc->span_indptr is NULL");
  require(d.tree_indptr != nullptr || d.tree_mask == nullptr,
          "desc->tree_mask is set but desc->tree_indptr is NULL");
  require(std::isfinite(d.softcap) && d.softcap >= 0.0f, "desc->softcap must be >= 0");
  require(d.mask_type <= VKATTN_MASK_ADDITIVE, "desc->mask_type ", d.mask_type, " is unknown");
  return d;
}

AttentionCall make_varlen_call(Context& ctx, const vkattn_attention_desc* desc, uint32_t batch,
                               const int32_t* cu_q, const int32_t* cu_k, Tensor* q, Tensor* k,
                               Tensor* v, Tensor* out) {
  AttentionCall c = start_call(ctx, desc, q, k, v, out);
  const auto& d = c.desc;
  require(q->ndim() == 3, "q must be [total_q, H, d], got ", shape_str(*q));
  require(k->ndim() == 3, "k must be [total_k, Hkv, d], got ", shape_str(*k));
  const int64_t tq = q->dim(0), tk = k->dim(0);
  require_shape(*q, "q", {tq, d.num_heads, d.head_dim});
  require_shape(*k, "k", {tk, d.num_kv_heads, d.head_dim});
  require_shape(*v, "v", {tk, d.num_kv_heads, d.head_dim_v});
  require_shape(*out, "out", {tq, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {tq, d.num_heads});
  check_prefix_sums("cu_seqlens_q", batch, cu_q, tq);
  check_prefix_sums("cu_seqlens_k", batch, cu_k, tk);
  c.batch = batch;
  host_alloc_point();
  c.cu_q.assign(cu_q, cu_q + batch + 1);
  c.cu_k.assign(cu_k, cu_k + batch + 1);
  if (c.mask) {
    int64_t want = 0;
    for (uint32_t b = 0; b < batch; ++b)
      want += static_cast<int64_t>(cu_q[b + 1] - cu_q[b]) * (cu_k[b + 1] - cu_k[b]);
    require_shape(*c.mask, "mask (1-D, sum of t_b * u_b)", {want});
  }
  take_spans(c);
  take_trees(ctx, c);
  return c;
}

AttentionCall make_padded_call(Context& ctx, const vkattn_attention_desc* desc, Tensor* q,
                               Tensor* k, Tensor* v, const int32_t* key_mask, Tensor* out) {
  AttentionCall c = start_call(ctx, desc, q, k, v, out);
  const auto& d = c.desc;
  require(q->ndim() == 4, "q must be [B, Sq, H, d], got ", shape_str(*q));
  require(k->ndim() == 4, "k must be [B, Sk, Hkv, d], got ", shape_str(*k));
  const int64_t B = q->dim(0), sq = q->dim(1), sk = k->dim(1);
  require_shape(*q, "q", {B, sq, d.num_heads, d.head_dim});
  require_shape(*k, "k", {B, sk, d.num_kv_heads, d.head_dim});
  require_shape(*v, "v", {B, sk, d.num_kv_heads, d.head_dim_v});
  require_shape(*out, "out", {B, sq, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {B, sq, d.num_heads});
  if (c.mask) require_shape(*c.mask, "mask", {B, sq, sk});
  require(B <= UINT32_MAX, "batch ", B, " is above 2^32 - 1");
  c.batch = static_cast<uint32_t>(B);
  host_alloc_point();
  c.cu_q.resize(B + 1);
  c.cu_k.resize(B + 1);
  for (int64_t b = 0; b <= B; ++b) {
    c.cu_q[b] = b * sq;
    c.cu_k[b] = b * sk;
  }
  if (key_mask) {
    c.key_valid.resize(B * sk);
    for (int64_t i = 0; i < B * sk; ++i) {
      require(key_mask[i] == 0 || key_mask[i] == 1, "key_mask[", i, "] is ", key_mask[i],
              ", must be 0 or 1");
      c.key_valid[i] = static_cast<uint8_t>(key_mask[i]);
    }
  }
  take_spans(c);
  take_trees(ctx, c);
  return c;
}

std::shared_ptr<AttentionCall::Pools> check_page_table(uint32_t batch, const int32_t* lens,
                                                       const int32_t* page_indptr,
                                                       const int32_t* page_indices,
                                                       uint32_t page_size, int64_t num_pages) {
  require(page_indptr != nullptr, "page_indptr is NULL");
  require(page_indptr[0] == 0, "page_indptr[0] is ", page_indptr[0], ", must be 0");
  for (uint32_t b = 0; b < batch; ++b)
    require(page_indptr[b + 1] >= page_indptr[b], "page_indptr decreases at ", b + 1);
  require(page_indices != nullptr || page_indptr[batch] == 0, "page_indices is NULL");
  host_alloc_point();
  auto p = std::make_shared<AttentionCall::Pools>();
  p->page_size = page_size;
  p->first.resize(batch);
  for (uint32_t b = 0; b < batch; ++b) {
    require(lens[b] >= 0, "sequence ", b, " has a negative length ", lens[b]);
    const int64_t need = (int64_t(lens[b]) + page_size - 1) / page_size;
    const int64_t have = page_indptr[b + 1] - page_indptr[b];
    require(need <= have, "sequence ", b, " needs ", need, " page(s) of ", page_size, " for its ",
            lens[b], " keys but page_indptr gives it ", have);
    p->first[b] = p->pages.size();
    for (int64_t i = 0; i < need; ++i) {
      const int32_t page = page_indices[page_indptr[b] + i];
      require(page >= 0 && page < num_pages, "page_indices[", page_indptr[b] + i, "] = ", page,
              " is not a page of the pools (", num_pages, " pages)");
      p->pages.push_back(static_cast<uint32_t>(page));
    }
  }
  return p;
}

AttentionCall make_pool_call(Context& ctx, const vkattn_attention_desc* desc, uint32_t batch,
                             const int32_t* cu_q, const int32_t* seq_lens_k,
                             const int32_t* page_indptr, const int32_t* page_indices,
                             uint32_t page_size, Tensor* q, Tensor* k_pages, Tensor* v_pages,
                             Tensor* out) {
  AttentionCall c = start_call(ctx, desc, q, k_pages, v_pages, out);
  const auto& d = c.desc;
  require(page_size >= 1, "page_size must be >= 1");
  require(q->ndim() == 3, "q must be [total_q, H, d], got ", shape_str(*q));
  require(k_pages->ndim() == 4, "k_pages must be [num_pages, page_size, Hkv, d], got ",
          shape_str(*k_pages));
  const int64_t tq = q->dim(0), np = k_pages->dim(0);
  require_shape(*q, "q", {tq, d.num_heads, d.head_dim});
  require_shape(*k_pages, "k_pages", {np, page_size, d.num_kv_heads, d.head_dim});
  require_shape(*v_pages, "v_pages", {np, page_size, d.num_kv_heads, d.head_dim_v});
  require_shape(*out, "out", {tq, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {tq, d.num_heads});
  check_prefix_sums("cu_seqlens_q", batch, cu_q, tq);
  require(seq_lens_k != nullptr || batch == 0, "seq_lens_k is NULL");
  c.batch = batch;
  c.pools = check_page_table(batch, seq_lens_k, page_indptr, page_indices, page_size, np);
  c.cu_q.assign(cu_q, cu_q + batch + 1);
  c.cu_k.assign(1, 0);
  int64_t mask_elems = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    c.cu_k.push_back(c.cu_k.back() + seq_lens_k[b]);
    mask_elems += int64_t(cu_q[b + 1] - cu_q[b]) * seq_lens_k[b];
  }
  require(c.cu_k.back() <= INT32_MAX, "the sequences' keys add up past 2^31 - 1");
  if (c.mask) require_shape(*c.mask, "mask (1-D, sum of t_b * seq_lens_k[b])", {mask_elems});
  take_spans(c);
  take_trees(ctx, c);
  return c;
}

vkattn_dtype AttentionCall::kv_dtype() const {
  if (q4_stand_in) return VKATTN_Q4;
  return step ? step->cache().desc().dtype : k->dtype();
}

uint32_t AttentionCall::page(uint32_t b, uint64_t i) const {
  if (!page_seq.empty()) b = page_seq[b];  // a cascade's prefix call
  return step ? step->seqs()[b].pages[i] : pools->pages[pools->first[b] + i];
}

AttentionCall make_paged_call(Context& ctx, const vkattn_attention_desc* desc, Step& step,
                              uint32_t layer, Tensor* q, Tensor* out) {
  AttentionCall c;
  c.step = &step;
  c.layer = layer;
  c.desc = check_attention_desc(desc);
  c.q = q, c.out = out;
  take_optional_tensors(c);
  const auto& d = c.desc;
  const vkattn_kv_cache_desc& cd = step.cache().desc();
  require(step.is_open(), "the step is no longer open");
  require(layer < cd.num_layers, "layer ", layer, " is not below num_layers ", cd.num_layers);
  require(d.num_kv_heads == cd.num_kv_heads && d.head_dim == cd.head_dim &&
              d.head_dim_v == cd.head_dim_v,
          "desc (Hkv ", d.num_kv_heads, ", d ", d.head_dim, ", dv ", d.head_dim_v,
          ") does not match the cache (Hkv ", cd.num_kv_heads, ", d ", cd.head_dim, ", dv ",
          cd.head_dim_v, ")");
  check_tensors(ctx, c);
  const int64_t n = step.total_new();
  require_shape(*q, "q", {n, d.num_heads, d.head_dim});
  require_shape(*out, "out", {n, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {n, d.num_heads});
  require(n == 0 || step.appended(layer), "layer ", layer,
          " has not been appended in this step (call vkattn_step_append first)");
  c.batch = static_cast<uint32_t>(step.seqs().size());
  host_alloc_point();
  c.cu_q.assign(1, 0);
  c.cu_k.assign(1, 0);
  int64_t mask_elems = 0;
  for (const StepSeq& sq : step.seqs()) {
    c.cu_q.push_back(c.cu_q.back() + sq.t);
    c.cu_k.push_back(c.cu_k.back() + sq.len + sq.t);
    mask_elems += static_cast<int64_t>(sq.t) * (sq.len + sq.t);
  }
  if (c.mask) require_shape(*c.mask, "mask (1-D, sum of t_b * (len_b + t_b))", {mask_elems});
  take_spans(c);
  take_trees(ctx, c);
  return c;
}

}  // namespace vkattn

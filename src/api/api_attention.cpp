// extern "C" shims for the attention entry points.
#include <cmath>
#include <cstring>

#include "api/firewall.h"
#include "api/handles.h"
#include "core/abi.h"
#include "ops/attention/attention.h"
#include "ops/attention/self_check.h"
#include "ops/attention/tune.h"
#include "ops/rope.h"

using namespace vkattn;

namespace {
Tensor* impl(vkattn_tensor* t) {
  return t ? t->impl.get() : nullptr;
}
}  // namespace

extern "C" {

VKATTN_API void vkattn_attention_desc_init(vkattn_attention_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
  desc->window_left = -1;
  desc->window_right = -1;
  desc->mask_type = VKATTN_MASK_NONE;
}

VKATTN_API void vkattn_variant_desc_init(vkattn_variant_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
}

VKATTN_API vkattn_status vkattn_variant_create(vkattn_context* ctx, const vkattn_variant_desc* desc,
                                               vkattn_variant** out) {
  if (out) *out = nullptr;
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    const vkattn_variant_desc d = read_desc(desc, kVariantDescSizes, &vkattn_variant_desc_init,
                                            "desc", "vkattn_variant_desc_init");
    auto impl = std::make_shared<UserFunctions>(ctx->impl, d);
    *out = new vkattn_variant{std::move(impl)};
  });
}

VKATTN_API void vkattn_variant_destroy(vkattn_variant* variant) {
  delete variant;
}

VKATTN_API vkattn_status vkattn_attention_varlen(vkattn_context* ctx,
                                                 const vkattn_attention_desc* desc, uint32_t batch,
                                                 const int32_t* cu_seqlens_q,
                                                 const int32_t* cu_seqlens_k, vkattn_tensor* q,
                                                 vkattn_tensor* k, vkattn_tensor* v,
                                                 vkattn_tensor* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().check_alive();
    AttentionCall call = make_varlen_call(*ctx->impl, desc, batch, cu_seqlens_q, cu_seqlens_k,
                                          impl(q), impl(k), impl(v), impl(out));
    record_attention(*ctx->impl, call);
  });
}

VKATTN_API vkattn_status vkattn_attention_padded(vkattn_context* ctx,
                                                 const vkattn_attention_desc* desc,
                                                 vkattn_tensor* q, vkattn_tensor* k,
                                                 vkattn_tensor* v, const int32_t* key_mask,
                                                 vkattn_tensor* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().check_alive();
    AttentionCall call =
        make_padded_call(*ctx->impl, desc, impl(q), impl(k), impl(v), key_mask, impl(out));
    record_attention(*ctx->impl, call);
  });
}

VKATTN_API vkattn_status vkattn_attention_paged(
    vkattn_context* ctx, const vkattn_attention_desc* desc, uint32_t batch,
    const int32_t* cu_seqlens_q, const int32_t* seq_lens_k, const int32_t* page_indptr,
    const int32_t* page_indices, uint32_t page_size, vkattn_tensor* q, vkattn_tensor* k_pages,
    vkattn_tensor* v_pages, vkattn_tensor* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().check_alive();
    AttentionCall call =
        make_pool_call(*ctx->impl, desc, batch, cu_seqlens_q, seq_lens_k, page_indptr, page_indices,
                       page_size, impl(q), impl(k_pages), impl(v_pages), impl(out));
    record_attention(*ctx->impl, call);
  });
}

namespace {
// vkattn_paged_append and _rope (with_rope: `rope` is required).
vkattn_status paged_append(const char* fn, vkattn_context* ctx, bool with_rope,
                           const vkattn_rope_desc* rope, uint32_t batch,
                           const int32_t* cu_seqlens_new, const int32_t* seq_lens_before,
                           const int32_t* page_indptr, const int32_t* page_indices,
                           uint32_t page_size, vkattn_tensor* k_new, vkattn_tensor* v_new,
                           vkattn_tensor* k_pages, vkattn_tensor* v_pages) {
  return guard(fn, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    if (with_rope) VKATTN_REQUIRE_ARG(rope);
    ctx->impl->recorder().check_alive();
    record_paged_append(*ctx->impl, batch, cu_seqlens_new, seq_lens_before, page_indptr,
                        page_indices, page_size, impl(k_new), impl(v_new), impl(k_pages),
                        impl(v_pages), rope);
  });
}
}  // namespace

VKATTN_API vkattn_status vkattn_paged_append(vkattn_context* ctx, uint32_t batch,
                                             const int32_t* cu_seqlens_new,
                                             const int32_t* seq_lens_before,
                                             const int32_t* page_indptr,
                                             const int32_t* page_indices, uint32_t page_size,
                                             vkattn_tensor* k_new, vkattn_tensor* v_new,
                                             vkattn_tensor* k_pages, vkattn_tensor* v_pages) {
  return paged_append(__func__, ctx, false, nullptr, batch, cu_seqlens_new, seq_lens_before,
                      page_indptr, page_indices, page_size, k_new, v_new, k_pages, v_pages);
}

VKATTN_API vkattn_status vkattn_paged_append_rope(vkattn_context* ctx, const vkattn_rope_desc* rope,
                                                  uint32_t batch, const int32_t* cu_seqlens_new,
                                                  const int32_t* seq_lens_before,
                                                  const int32_t* page_indptr,
                                                  const int32_t* page_indices, uint32_t page_size,
                                                  vkattn_tensor* k_new, vkattn_tensor* v_new,
                                                  vkattn_tensor* k_pages, vkattn_tensor* v_pages) {
  return paged_append(__func__, ctx, true, rope, batch, cu_seqlens_new, seq_lens_before,
                      page_indptr, page_indices, page_size, k_new, v_new, k_pages, v_pages);
}

VKATTN_API void vkattn_rope_desc_init(vkattn_rope_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
  desc->layout = VKATTN_ROPE_NEOX;
  desc->theta = 10000.0f;
  desc->scaling = VKATTN_ROPE_SCALING_NONE;
  desc->factor = 1.0f;
  desc->low_freq_factor = 1.0f;
  desc->high_freq_factor = 4.0f;
  desc->beta_fast = 32.0f;
  desc->beta_slow = 1.0f;
  desc->yarn_truncate = 1;
}

VKATTN_API vkattn_status vkattn_rope(vkattn_context* ctx, const vkattn_rope_desc* desc,
                                     uint32_t batch, const int32_t* cu_seqlens,
                                     const int32_t* start_positions, vkattn_tensor* x,
                                     vkattn_tensor* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().check_alive();
    record_rope(*ctx->impl, desc, batch, cu_seqlens, start_positions, impl(x), impl(out));
  });
}

VKATTN_API vkattn_status vkattn_attention_merge(vkattn_context* ctx, vkattn_tensor* out_a,
                                                vkattn_tensor* lse_a, vkattn_tensor* out_b,
                                                vkattn_tensor* lse_b, vkattn_tensor* out,
                                                vkattn_tensor* lse) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().check_alive();
    record_attention_merge(*ctx->impl, impl(out_a), impl(lse_a), impl(out_b), impl(lse_b),
                           impl(out), impl(lse));
  });
}

VKATTN_API vkattn_status vkattn_context_self_check(vkattn_context* ctx,
                                                   const vkattn_attention_desc* desc,
                                                   vkattn_dtype q_dtype, vkattn_dtype kv_dtype,
                                                   uint32_t paged, uint32_t query_tokens) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(desc);
    self_check_up_front(*ctx->impl, desc, q_dtype, kv_dtype, paged, query_tokens);
    // A step that holds such a sequence may hold decodes too, which run on
    // their own family where it differs (the decode class): checked too.
    if (query_tokens > kDecodeMaxTokens)
      self_check_up_front(*ctx->impl, desc, q_dtype, kv_dtype, paged, 1);
  });
}

VKATTN_API vkattn_status vkattn_context_self_check_counts(vkattn_context* ctx, uint32_t family,
                                                          uint32_t* passed, uint32_t* failed) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(passed);
    VKATTN_REQUIRE_ARG(failed);
    ctx->impl->recorder().check_alive();
    self_check_counts(*ctx->impl, family, passed, failed);
  });
}

VKATTN_API void vkattn_tune_desc_init(vkattn_tune_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
  desc->seconds = 60.0;
}

VKATTN_API const char* vkattn_tune_case_name(uint32_t index) {
  return tune_case_name(index);
}

VKATTN_API vkattn_status vkattn_tune(vkattn_context* ctx, const vkattn_tune_desc* desc) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    const vkattn_tune_desc d =
        read_desc(desc, kTuneDescSizes, &vkattn_tune_desc_init, "desc", "vkattn_tune_desc_init");
    for (uint32_t r : d.reserved) require(r == 0, "desc->reserved must be 0");
    require(std::isfinite(d.seconds) && d.seconds > 0 && d.seconds <= 1e6,
            "desc->seconds must be > 0 (at most 1e6)");
    require(d.num_cases == 0 || d.cases != nullptr, "desc->cases is NULL but num_cases is ",
            d.num_cases);
    for (uint32_t i = 0; i < d.num_cases; ++i)
      require(d.cases[i] != nullptr, "desc->cases[", i, "] is NULL");
    require(!ctx->impl->recorder().external(),
            "tuning runs on vkattn's own queue: call it outside external mode");
    ctx->impl->recorder().check_alive();
    run_tuning(*ctx->impl, d);
  });
}

}  // extern "C"

// extern "C" shims for the paged KV cache and steps.
#include <cstring>

#include "api/firewall.h"
#include "api/handles.h"
#include "core/abi.h"
#include "core/faults.h"
#include "ops/attention/attention.h"
#include "ops/kv_cache.h"

using namespace vkattn;

namespace {
// DEVICE_LOST once the cache's device was lost.
void alive(const KvCache& cache) {
  cache.context().recorder().check_alive();
}
}  // namespace

extern "C" {

VKATTN_API void vkattn_kv_cache_desc_init(vkattn_kv_cache_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
  desc->page_size = 16;
  desc->dtype = VKATTN_F16;
}

VKATTN_API vkattn_status vkattn_kv_cache_create(vkattn_context* ctx,
                                                const vkattn_kv_cache_desc* desc,
                                                vkattn_kv_cache** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(desc);
    VKATTN_REQUIRE_ARG(out);
    ctx->impl->recorder().check_alive();
    host_alloc_point();
    const vkattn_kv_cache_desc d = read_desc(desc, kKvCacheDescSizes, &vkattn_kv_cache_desc_init,
                                             "desc", "vkattn_kv_cache_desc_init");
    auto cache = std::make_shared<KvCache>(ctx->impl, d);
    *out = new vkattn_kv_cache{std::move(cache)};
  });
}

VKATTN_API void vkattn_kv_cache_destroy(vkattn_kv_cache* cache) {
  delete cache;
}

VKATTN_API vkattn_status vkattn_kv_cache_length(vkattn_kv_cache* cache, int64_t seq_id,
                                                int32_t* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    VKATTN_REQUIRE_ARG(out);
    alive(*cache->impl);
    *out = cache->impl->length(seq_id);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_remove(vkattn_kv_cache* cache, int64_t seq_id) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    cache->impl->remove(seq_id);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_fork(vkattn_kv_cache* cache, int64_t src, int64_t dst) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    cache->impl->fork(src, dst);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_truncate(vkattn_kv_cache* cache, int64_t seq_id,
                                                  int32_t new_length) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    cache->impl->truncate(seq_id, new_length);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_num_free_pages(vkattn_kv_cache* cache, uint32_t* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    VKATTN_REQUIRE_ARG(out);
    alive(*cache->impl);
    *out = cache->impl->num_free_pages();
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_read(vkattn_kv_cache* cache, uint32_t layer,
                                              int64_t seq_id, int32_t start, int32_t count,
                                              void* k_dst, size_t k_bytes, void* v_dst,
                                              size_t v_bytes) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    require_not_external(cache->impl->context(), "vkattn_kv_cache_read");
    cache->impl->read(layer, seq_id, start, count, k_dst, k_bytes, v_dst, v_bytes);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_read_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                     int64_t seq_id, int32_t start, int32_t count,
                                                     float* k_scales, float* v_scales) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    require_not_external(cache->impl->context(), "vkattn_kv_cache_read_scales");
    cache->impl->read_scales(layer, seq_id, start, count, k_scales, v_scales);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_read_block_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                           int64_t seq_id, int32_t start,
                                                           int32_t count, float* k_scales,
                                                           size_t k_count, float* v_scales,
                                                           size_t v_count) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    require_not_external(cache->impl->context(), "vkattn_kv_cache_read_block_scales");
    cache->impl->read_block_scales(layer, seq_id, start, count, k_scales, k_count, v_scales,
                                   v_count);
  });
}

VKATTN_API vkattn_status vkattn_kv_cache_set_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                    uint32_t num_scales, const float* k_scales,
                                                    const float* v_scales) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    alive(*cache->impl);
    cache->impl->set_scales(layer, num_scales, k_scales, v_scales);
  });
}

VKATTN_API vkattn_status vkattn_step_begin(vkattn_kv_cache* cache, uint32_t num_seqs,
                                           const int64_t* seq_ids, const int32_t* num_new_tokens,
                                           vkattn_step** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(cache);
    VKATTN_REQUIRE_ARG(out);
    alive(*cache->impl);
    auto step = std::make_shared<Step>(cache->impl, num_seqs, seq_ids, num_new_tokens);
    *out = new vkattn_step{std::move(step)};
  });
}

namespace {
// vkattn_step_append and _rope (with_rope: `rope` is required).
vkattn_status step_append(const char* fn, vkattn_step* step, uint32_t layer, bool with_rope,
                          const vkattn_rope_desc* rope, vkattn_tensor* k_new,
                          vkattn_tensor* v_new) {
  return guard(fn, [&] {
    VKATTN_REQUIRE_ARG(step);
    if (with_rope) VKATTN_REQUIRE_ARG(rope);
    alive(step->impl->cache());
    step->impl->append(layer, k_new ? k_new->impl.get() : nullptr,
                       v_new ? v_new->impl.get() : nullptr, rope);
  });
}
}  // namespace

VKATTN_API vkattn_status vkattn_step_append(vkattn_step* step, uint32_t layer, vkattn_tensor* k_new,
                                            vkattn_tensor* v_new) {
  return step_append(__func__, step, layer, false, nullptr, k_new, v_new);
}

VKATTN_API vkattn_status vkattn_step_append_rope(vkattn_step* step, uint32_t layer,
                                                 const vkattn_rope_desc* rope, vkattn_tensor* k_new,
                                                 vkattn_tensor* v_new) {
  return step_append(__func__, step, layer, true, rope, k_new, v_new);
}

VKATTN_API vkattn_status vkattn_step_attention(vkattn_step* step, uint32_t layer,
                                               const vkattn_attention_desc* desc, vkattn_tensor* q,
                                               vkattn_tensor* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(step);
    Step& st = *step->impl;
    alive(st.cache());
    Context& ctx = st.cache().context();
    Tensor* qt = q ? q->impl.get() : nullptr;
    Tensor* ot = out ? out->impl.get() : nullptr;
    require(qt && ot, "q and out must not be NULL");
    require(&qt->context() == &ctx, "q belongs to another context than the cache");
    AttentionCall call = make_paged_call(ctx, desc, st, layer, qt, ot);
    record_attention(ctx, call);
  });
}

VKATTN_API vkattn_status vkattn_step_commit(vkattn_step* step) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(step);
    // After a device loss the step's appends may never have run: the step
    // stays open (abort it); lengths never advance over lost tokens.
    alive(step->impl->cache());
    step->impl->commit();
    delete step;
  });
}

VKATTN_API void vkattn_step_abort(vkattn_step* step) {
  if (!step) return;
  guard_void(__func__, [&] { step->impl->abort(); });
  delete step;
}

}  // extern "C"

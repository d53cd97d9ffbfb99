// Canary for ThreadSanitizer (tools/canaries.sh): two threads use one cache
// at once, breaking the rule that a context and its objects are externally
// synchronized. The TSan build must report a data race inside vkattn.
#include <cstdio>
#include <thread>

#include "vkattn/vkattn.h"

int main() {
  vkattn_context* ctx = nullptr;
  vkattn_kv_cache_desc d;
  vkattn_kv_cache_desc_init(&d);
  d.num_layers = 1, d.num_kv_heads = 1, d.head_dim = 8, d.num_pages = 16;
  vkattn_kv_cache* cache = nullptr;
  if (vkattn_context_create(nullptr, &ctx) || vkattn_kv_cache_create(ctx, &d, &cache)) {
    std::fprintf(stderr, "canary setup failed: %s\n", vkattn_last_error());
    return 2;
  }
  auto churn = [cache](int64_t base) {
    for (int i = 0; i < 2000; ++i) {
      int64_t id = base + i;
      int32_t t = 0;
      vkattn_step* st = nullptr;
      if (vkattn_step_begin(cache, 1, &id, &t, &st) == VKATTN_SUCCESS) vkattn_step_commit(st);
      vkattn_kv_cache_remove(cache, id);
    }
  };
  std::thread a(churn, 0), b(churn, 100000);
  a.join();
  b.join();
  vkattn_kv_cache_destroy(cache);
  vkattn_context_destroy(ctx);
  return 0;
}

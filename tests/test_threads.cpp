// Threads (label `threads`; tools/checks.sh runs it under ThreadSanitizer):
// four threads each drive their own context through continuous-batching
// steps and check every result, while two more threads call
// vkattn_last_error after failing calls and enumerate devices. Separate
// contexts share nothing the caller can see (vkattn.h "Threading").
#include <atomic>
#include <cmath>
#include <string>
#include <thread>

#include "kv_model.h"

using namespace vkattn_test;

namespace {

// One thread's work: a cache, steps of appends + attention, results read
// back and compared with what the model and the first run say.
int drive_context(int seed, std::vector<float>* outputs) {
  int errors = 0;
  auto ok = [&](vkattn_status s) {
    if (s != VKATTN_SUCCESS) ++errors;
    return s == VKATTN_SUCCESS;
  };
  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = vkattn_test::validation_flag();
  vkattn_context* ctx = nullptr;
  if (!ok(vkattn_context_create(&cd, &ctx))) return errors;
  KvShape s;
  s.layers = 2, s.hkv = 2, s.d = 8, s.dv = 8, s.page_size = 4, s.pages = 64;
  vkattn_kv_cache_desc kd = kv_cache_desc(s);
  vkattn_kv_cache* cache = nullptr;
  ok(vkattn_kv_cache_create(ctx, &kd, &cache));
  std::mt19937 rng(seed);
  KvModel model(s);
  for (int step = 0; step < 6 && cache; ++step) {
    std::vector<int64_t> ids = {1, 2, 3};
    std::vector<int32_t> t = {step == 0 ? 9 : 1, step == 0 ? 4 : 2, step % 3};
    int64_t n = 0;
    for (int32_t x : t) n += x;
    vkattn_step* st = nullptr;
    if (!ok(vkattn_step_begin(cache, 3, ids.data(), t.data(), &st))) break;
    int64_t ks[3] = {n, s.hkv, s.d}, qs[3] = {n, 4, s.d};
    vkattn_tensor *k = nullptr, *q = nullptr, *out = nullptr;
    ok(vkattn_tensor_create(ctx, VKATTN_F32, 3, ks, &k));
    ok(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &q));
    ok(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &out));
    NewTokens nk = random_tokens(rng, n * s.hkv * s.d, VKATTN_F32, s.dtype);
    std::vector<float> qx(n * 4 * s.d);
    for (float& x : qx) x = float(rng() % 17) / 8.0f - 1.0f;
    ok(vkattn_tensor_write(k, nk.in_bytes.data(), nk.in_bytes.size()));
    ok(vkattn_tensor_write(q, qx.data(), qx.size() * 4));
    vkattn_attention_desc desc;
    vkattn_attention_desc_init(&desc);
    desc.num_heads = 4, desc.num_kv_heads = s.hkv, desc.head_dim = s.d, desc.causal = 1;
    for (uint32_t l = 0; l < s.layers; ++l) {
      ok(vkattn_step_append(st, l, k, k));
      ok(vkattn_step_attention(st, l, &desc, q, out));
    }
    std::vector<float> o(n * 4 * s.dv);
    ok(vkattn_tensor_read(out, o.data(), o.size() * 4));
    for (float x : o)
      if (!std::isfinite(x)) ++errors;
    outputs->insert(outputs->end(), o.begin(), o.end());
    ok(vkattn_step_commit(st));
    // The cache holds exactly what was appended (K = V here).
    int64_t off = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& m = model.get(ids[i]);
      for (uint32_t l = 0; l < s.layers; ++l) {
        m.k[l].insert(m.k[l].end(), nk.cache_bytes.begin() + off * model.k_row(),
                      nk.cache_bytes.begin() + (off + t[i]) * model.k_row());
      }
      m.len += t[i];
      off += t[i];
      std::vector<uint8_t> kb(m.len * model.k_row()), vb(m.len * model.v_row());
      ok(vkattn_kv_cache_read(cache, 1, ids[i], 0, m.len, kb.data(), kb.size(), vb.data(),
                              vb.size()));
      if (kb != m.k[1] || vb != m.k[1]) ++errors;
    }
    for (vkattn_tensor* x : {k, q, out}) vkattn_tensor_destroy(x);
  }
  uint32_t msgs = 0;
  ok(vkattn_context_validation_messages(ctx, &msgs));
  errors += int(msgs);
  vkattn_kv_cache_destroy(cache);
  vkattn_context_destroy(ctx);
  return errors;
}

}  // namespace

TEST(Threads, ContextsPerThreadWithErrorsAndEnumeration) {
  constexpr int kWorkers = 4;
  std::vector<std::vector<float>> outputs(kWorkers);
  std::vector<int> errors(kWorkers, 0);
  std::atomic<bool> done{false};
  std::atomic<int> side_errors{0}, side_calls{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i)
    threads.emplace_back([&, i] { errors[i] = drive_context(77, &outputs[i]); });
  // Failing calls and their thread-local messages, and device enumeration.
  threads.emplace_back([&] {
    while (!done) {
      vkattn_status s = vkattn_tensor_write(nullptr, nullptr, 0);
      if (s != VKATTN_ERROR_INVALID_ARGUMENT ||
          std::string(vkattn_last_error()).find("vkattn_tensor_write") == std::string::npos)
        ++side_errors;
      ++side_calls;
    }
  });
  threads.emplace_back([&] {
    while (!done) {
      uint32_t n = 0;
      vkattn_device_info info;
      vkattn_device_info_init(&info);
      if (vkattn_device_count(&n) != VKATTN_SUCCESS || n == 0 ||
          vkattn_device_get_info(0, &info) != VKATTN_SUCCESS)
        ++side_errors;
      ++side_calls;
    }
  });
  for (int i = 0; i < kWorkers; ++i) threads[i].join();
  done = true;
  threads[kWorkers].join();
  threads[kWorkers + 1].join();
  for (int i = 0; i < kWorkers; ++i) {
    EXPECT_EQ(errors[i], 0) << "thread " << i;
    // Same work, same results: contexts do not interfere.
    EXPECT_EQ(outputs[i], outputs[0]) << "thread " << i;
  }
  EXPECT_FALSE(outputs[0].empty());
  EXPECT_EQ(side_errors.load(), 0);
  std::printf("%d threads x 6 steps x 2 layers, %d side calls\n", kWorkers, side_calls.load());
}

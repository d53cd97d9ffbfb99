// continuous_batching: a small serving loop over a paged KV cache, as an
// inference engine drives vkattn.
//
// Requests with different prompt and output lengths arrive over time. Each
// step takes every running decode (1 token each) and fills the rest of a
// token budget with prefill chunks of waiting requests; all of it is one
// packed batch without padding: per layer one append and one attention
// call. Finished requests leave and their pages are reused.
//
//   ./build/examples/continuous_batching      (VKATTN_DEVICE picks a device)
//
// The model is synthetic (q/k/v of a token are a fixed function of request,
// position and layer; no matmuls), so the numbers measure attention and the
// cache alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "vkattn/vkattn.h"

namespace {

constexpr uint32_t kLayers = 4, kHeads = 8, kKvHeads = 2, kDim = 64, kPage = 16, kPages = 256;
constexpr int kTokenBudget = 256;  // tokens per step

void check(vkattn_status s, const char* what) {
  if (s != VKATTN_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: " + vkattn_last_error());
}

float value(uint32_t kind, uint64_t id, uint32_t layer, uint32_t pos, uint32_t i) {
  uint32_t x = kind * 0x9e3779b9u ^ static_cast<uint32_t>(id) * 0x85ebca6bu ^ layer * 0xc2b2ae35u ^
               pos * 0x27d4eb2fu ^ i * 0x165667b1u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
}

// A tensor that frees itself.
struct Tensor {
  vkattn_tensor* t = nullptr;
  Tensor(vkattn_context* ctx, int64_t n, uint32_t heads) {
    int64_t shape[3] = {n, heads, kDim};
    check(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &t), "vkattn_tensor_create");
  }
  ~Tensor() { vkattn_tensor_destroy(t); }
  void write(const std::vector<float>& x) {
    check(vkattn_tensor_write(t, x.data(), x.size() * sizeof(float)), "vkattn_tensor_write");
  }
};

struct Request {
  int64_t id;
  int arrival, prompt, output;
  int prefilled = 0, generated = 0;
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc > 1) {  // it takes no argument
    std::fprintf(stderr, "usage: continuous_batching (no arguments; got \"%s\")\n", argv[1]);
    return 2;
  }
  vkattn_context_desc cdesc;
  vkattn_context_desc_init(&cdesc);
  cdesc.flags = VKATTN_CONTEXT_PROFILING;
  vkattn_context* ctx = nullptr;
  check(vkattn_context_create(&cdesc, &ctx), "vkattn_context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  check(vkattn_context_get_device_info(ctx, &info), "vkattn_context_get_device_info");

  vkattn_kv_cache_desc kd;
  vkattn_kv_cache_desc_init(&kd);
  kd.num_layers = kLayers;
  kd.num_kv_heads = kKvHeads;
  kd.head_dim = kDim;
  kd.page_size = kPage;
  kd.num_pages = kPages;
  kd.dtype = VKATTN_F16;
  vkattn_kv_cache* cache = nullptr;
  check(vkattn_kv_cache_create(ctx, &kd, &cache), "vkattn_kv_cache_create");

  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = kHeads;
  ad.num_kv_heads = kKvHeads;
  ad.head_dim = kDim;
  ad.causal = 1;

  std::printf("device: %s\n", info.name);
  std::printf(
      "model: %u layers, %u/%u heads, d %u; cache: %u pages x %u tokens, f16; "
      "budget %d tokens per step\n",
      kLayers, kHeads, kKvHeads, kDim, kPages, kPage, kTokenBudget);

  // 16 requests: prompts of 24..420 tokens, 6..40 output tokens, arriving
  // every other step.
  std::deque<Request> pending;
  uint32_t seed = 12345;
  auto rnd = [&](int lo, int hi) {
    seed = seed * 1664525u + 1013904223u;
    return lo + static_cast<int>((seed >> 8) % static_cast<uint32_t>(hi - lo + 1));
  };
  for (int i = 0; i < 16; ++i) pending.push_back({i + 1, 2 * i, rnd(24, 420), rnd(6, 40)});

  std::vector<Request> running;  // admitted: prefilling or decoding
  int64_t tokens = 0, rows = 0, finished = 0, padded_rows = 0;
  double gpu_ms = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; !pending.empty() || !running.empty(); ++step) {
    while (!pending.empty() && pending.front().arrival <= step) {
      running.push_back(pending.front());
      pending.pop_front();
    }
    // The batch: every decode, then prefill chunks while the budget and the
    // free pages last.
    uint32_t free_pages = 0;
    check(vkattn_kv_cache_num_free_pages(cache, &free_pages), "vkattn_kv_cache_num_free_pages");
    std::vector<int64_t> ids;
    std::vector<int32_t> t, len;
    std::vector<size_t> who;
    int budget = kTokenBudget, decodes = 0, prefill = 0;
    auto pages_for = [&](int from, int n) {
      return (from + n + kPage - 1) / kPage - (from + kPage - 1) / kPage;
    };
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < running.size() && budget > 0; ++i) {
        Request& r = running[i];
        const bool decoding = r.prefilled == r.prompt;
        if (decoding != (pass == 0)) continue;
        const int pos = r.prefilled + (decoding ? r.generated - 1 : 0);
        const int n = decoding ? 1 : std::min(budget, r.prompt - r.prefilled);
        const uint32_t need = static_cast<uint32_t>(pages_for(pos, n));
        if (need > free_pages) continue;  // waits for pages to be freed
        free_pages -= need;
        ids.push_back(r.id);
        t.push_back(n);
        len.push_back(pos);
        who.push_back(i);
        budget -= n;
        (decoding ? decodes : prefill) += decoding ? 1 : n;
      }
    if (ids.empty()) throw std::runtime_error("no request fits the cache");
    int64_t total = 0, longest = 0;
    for (int32_t x : t) total += x, longest = std::max<int64_t>(longest, x);
    padded_rows += longest * static_cast<int64_t>(t.size());  // what [B, max t] would hold

    vkattn_step* st = nullptr;
    check(vkattn_step_begin(cache, static_cast<uint32_t>(ids.size()), ids.data(), t.data(), &st),
          "vkattn_step_begin");
    Tensor q(ctx, total, kHeads), k(ctx, total, kKvHeads), v(ctx, total, kKvHeads),
        out(ctx, total, kHeads);
    std::vector<float> hq(total * kHeads * kDim), hk(total * kKvHeads * kDim),
        hv(total * kKvHeads * kDim);
    for (uint32_t l = 0; l < kLayers; ++l) {
      size_t row = 0;
      for (size_t b = 0; b < ids.size(); ++b)
        for (int i = 0; i < t[b]; ++i, ++row) {
          const uint32_t pos = static_cast<uint32_t>(len[b] + i);
          for (uint32_t e = 0; e < kHeads * kDim; ++e)
            hq[row * kHeads * kDim + e] = value(0, ids[b], l, pos, e);
          for (uint32_t e = 0; e < kKvHeads * kDim; ++e) {
            hk[row * kKvHeads * kDim + e] = value(1, ids[b], l, pos, e);
            hv[row * kKvHeads * kDim + e] = value(2, ids[b], l, pos, e);
          }
        }
      q.write(hq);
      k.write(hk);
      v.write(hv);
      check(vkattn_step_append(st, l, k.t, v.t), "vkattn_step_append");
      check(vkattn_step_attention(st, l, &ad, q.t, out.t), "vkattn_step_attention");
    }
    check(vkattn_step_commit(st), "vkattn_step_commit");
    // "Sampling" reads the last layer's output (and waits for the step).
    std::vector<float> o(total * kHeads * kDim);
    check(vkattn_tensor_read(out.t, o.data(), o.size() * sizeof(float)), "vkattn_tensor_read");
    for (float x : o)
      if (!std::isfinite(x)) throw std::runtime_error("non-finite attention output");
    uint64_t ns = 0;
    check(vkattn_context_last_gpu_time(ctx, &ns), "vkattn_context_last_gpu_time");
    gpu_ms += ns * 1e-6;
    tokens += total;
    rows += static_cast<int64_t>(o.size() / (kHeads * kDim));

    // Advance the requests; finished ones leave and free their pages.
    std::string done;
    for (size_t b = 0; b < ids.size(); ++b) {
      Request& r = running[who[b]];
      if (r.prefilled < r.prompt) {
        r.prefilled += t[b];
        if (r.prefilled == r.prompt) r.generated = 1;  // the last chunk yields token 1
      } else {
        ++r.generated;
      }
    }
    for (size_t i = 0; i < running.size();) {
      if (running[i].generated >= running[i].output) {
        check(vkattn_kv_cache_remove(cache, running[i].id), "vkattn_kv_cache_remove");
        done += " #" + std::to_string(running[i].id);
        ++finished;
        running.erase(running.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    check(vkattn_kv_cache_num_free_pages(cache, &free_pages), "vkattn_kv_cache_num_free_pages");
    std::printf(
        "step %3d: %2d decodes + %3d prefill tokens = %3lld rows | %3u free pages | "
        "%.2f ms GPU%s%s\n",
        step, decodes, prefill, static_cast<long long>(total), free_pages, ns * 1e-6,
        done.empty() ? "" : " | finished", done.c_str());
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint32_t free_pages = 0;
  check(vkattn_kv_cache_num_free_pages(cache, &free_pages), "vkattn_kv_cache_num_free_pages");
  std::printf(
      "%lld requests, %lld tokens in %.2f s wall (%.0f tokens/s; first steps include "
      "pipeline compilation), %.1f ms GPU (%.0f tokens/s)\n",
      static_cast<long long>(finished), static_cast<long long>(tokens), wall, tokens / wall, gpu_ms,
      tokens / (gpu_ms * 1e-3));
  std::printf(
      "padding tokens: %lld (a padded [batch, max t] layout would have computed %lld "
      "rows for these %lld tokens); free pages at the end: %u of %u\n",
      static_cast<long long>(rows - tokens), static_cast<long long>(padded_rows),
      static_cast<long long>(tokens), free_pages, kPages);
  vkattn_kv_cache_destroy(cache);
  vkattn_context_destroy(ctx);
  if (rows != tokens || free_pages != kPages) return 1;
  std::printf("ok\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}

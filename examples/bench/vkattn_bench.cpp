// vkattn-bench: the benchmark that tells the truth. It first measures the
// device's own peaks (f32 FMA throughput, texel read bandwidth), then for
// each case checks the answer against src/reference before timing it with
// GPU timestamps, and prints medians, GFLOP/s or GB/s, the fraction of the
// measured peak, and the reference's CPU time.
//
//   vkattn-bench [--reps N] [--case NAME]...   (default: every case)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/pipeline.h"
#include "core/tensor.h"
#include "reference/attention_ref.h"
#include "vkattn/vkattn.h"

namespace {

int g_reps = 10;

void check(vkattn_status s, const char* what) {
  if (s != VKATTN_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, vkattn_last_error());
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// GPU milliseconds of `record` (one submission), median of g_reps runs.
template <typename F>
double time_gpu(vkattn_context* ctx, F&& record, int reps = g_reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    record();
    check(vkattn_context_synchronize(ctx), "synchronize");
    uint64_t ns = 0;
    check(vkattn_context_last_gpu_time(ctx, &ns), "last_gpu_time");
    ms.push_back(ns * 1e-6);
  }
  return median(ms);
}

struct Peaks {
  double gflops = 0, gbps = 0;
};

Peaks measure_peaks(vkattn_context* ctx) {
  using namespace vkattn;
  Context& c = *ctx->impl;
  Peaks p;
  {
    static const KernelLayout layout{"peak_fma", {BindingKind::kStorageBuffer}, 8};
    const uint64_t groups = 256, iters = 2048;
    auto out = std::make_shared<Buffer>(c.device(), groups * 64 * 4, false);
    const Pipeline& pipe = c.pipelines().get(layout, {});
    struct {
      uint32_t iters;
      float seed;
    } push{static_cast<uint32_t>(iters), 0.5f};
    double ms = time_gpu(ctx, [&] {
      BoundBuffer b;
      b.buffer = out;
      c.pipelines().dispatch(c.recorder(), pipe, {b}, &push, sizeof(push), groups);
    });
    p.gflops = groups * 64.0 * iters * 16 * 4 * 2 / (ms * 1e6);
  }
  {
    static const KernelLayout layout{
        "peak_read", {BindingKind::kUniformTexel, BindingKind::kStorageBuffer}, 8};
    const uint64_t bytes = 64ull << 20, texels = bytes / 16, n_inv = 64 * 1024;
    auto src = std::make_shared<Buffer>(c.device(), bytes, false);
    auto out = std::make_shared<Buffer>(c.device(), n_inv * 4, false);
    const Pipeline& pipe = c.pipelines().get(layout, {});
    struct {
      uint32_t texels, n_inv;
    } push{static_cast<uint32_t>(texels), static_cast<uint32_t>(n_inv)};
    double ms = time_gpu(ctx, [&] {
      BoundBuffer s, o;
      s.buffer = src;
      s.format = VK_FORMAT_R32G32B32A32_UINT;
      o.buffer = out;
      c.pipelines().dispatch(c.recorder(), pipe, {s, o}, &push, sizeof(push), n_inv / 64);
    });
    p.gbps = bytes / (ms * 1e6);
  }
  return p;
}

uint16_t to_f16(float f) {
  // Round to nearest even through the library's own conversion is not
  // exposed; inputs here are exact in f16 (multiples of 1/1024 in [-1, 1]).
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
  if (a < 0x38800000u) return static_cast<uint16_t>(sign);  // tiny -> 0 (not produced here)
  return static_cast<uint16_t>(sign | ((a - 0x38000000u) >> 13));
}

struct AttnBench {
  const char* name;
  int batch, t, u, H, Hkv, d;
  bool causal;
  vkattn_dtype qdt, kdt;
};

void run_attention(vkattn_context* ctx, const AttnBench& b, const Peaks& peaks) {
  std::mt19937 rng(42);
  auto rnd = [&] { return static_cast<float>(static_cast<int>(rng() % 2049) - 1024) / 1024.0f; };
  const int64_t tq = int64_t(b.batch) * b.t, tk = int64_t(b.batch) * b.u;
  std::vector<float> q(tq * b.H * b.d), k(tk * b.Hkv * b.d), v(tk * b.Hkv * b.d);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = rnd();
  std::vector<int32_t> cu_q(b.batch + 1), cu_k(b.batch + 1);
  for (int i = 0; i <= b.batch; ++i) cu_q[i] = i * b.t, cu_k[i] = i * b.u;

  auto make = [&](vkattn_dtype dt, std::vector<int64_t> shape, const std::vector<float>* data) {
    vkattn_tensor* t;
    check(vkattn_tensor_create(ctx, dt, 3, shape.data(), &t), "tensor_create");
    if (data) {
      if (dt == VKATTN_F32) {
        check(vkattn_tensor_write(t, data->data(), data->size() * 4), "write");
      } else {
        std::vector<uint16_t> h(data->size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = to_f16((*data)[i]);
        check(vkattn_tensor_write(t, h.data(), h.size() * 2), "write");
      }
    }
    return t;
  };
  vkattn_tensor* tq_ = make(b.qdt, {tq, b.H, b.d}, &q);
  vkattn_tensor* tk_ = make(b.kdt, {tk, b.Hkv, b.d}, &k);
  vkattn_tensor* tv_ = make(b.kdt, {tk, b.Hkv, b.d}, &v);
  vkattn_tensor* to_ = make(b.qdt, {tq, b.H, b.d}, nullptr);
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = b.H, desc.num_kv_heads = b.Hkv, desc.head_dim = b.d, desc.causal = b.causal;
  auto record = [&] {
    check(
        vkattn_attention_varlen(ctx, &desc, b.batch, cu_q.data(), cu_k.data(), tq_, tk_, tv_, to_),
        "attention_varlen");
  };

  // Verify before timing.
  record();
  std::vector<float> out(tq * b.H * b.d);
  if (b.qdt == VKATTN_F32) {
    check(vkattn_tensor_read(to_, out.data(), out.size() * 4), "read");
  } else {
    std::vector<uint16_t> h(out.size());
    check(vkattn_tensor_read(to_, h.data(), h.size() * 2), "read");
    for (size_t i = 0; i < h.size(); ++i) {
      uint32_t x = h[i], sign = (x & 0x8000u) << 16, e = (x >> 10) & 0x1f, m = x & 0x3ff, bits;
      if (e == 0)
        bits = sign;  // zero (subnormals do not occur at these magnitudes)
      else
        bits = sign | ((e + 112) << 23) | (m << 13);
      std::memcpy(&out[i], &bits, 4);
    }
  }
  vkattn::ref::AttentionParams p;
  p.num_heads = b.H, p.num_kv_heads = b.Hkv, p.head_dim = b.d, p.causal = b.causal;
  std::vector<float> ref(out.size());
  auto t0 = std::chrono::steady_clock::now();
  vkattn::ref::attention_varlen(p, b.batch, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(),
                                ref.data(), nullptr);
  double ref_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, double(std::fabs(out[i] - ref[i])));
  double tol = b.qdt == VKATTN_F32 ? 1e-4 : 2e-3;

  double ms = time_gpu(ctx, record);
  // FLOPs of the visible score pairs: 2*d for q.k and 2*d for p.v.
  double pairs = 0;
  for (int i = 0; i < b.t; ++i) pairs += b.causal ? std::min(b.u, b.u - b.t + i + 1) : b.u;
  double flops = pairs * b.batch * b.H * 4.0 * b.d;
  double kv_bytes = 2.0 * tk * b.Hkv * b.d * vkattn_dtype_size(b.kdt);
  std::printf(
      "%-34s %9.3f ms  %7.1f GFLOP/s (%4.1f%% of FMA peak)  %6.2f GB/s K/V (%4.1f%% of read peak)"
      "  max err %.2e %s  reference %.0f ms\n",
      b.name, ms, flops / (ms * 1e6), 100.0 * flops / (ms * 1e6) / peaks.gflops,
      kv_bytes / (ms * 1e6), 100.0 * kv_bytes / (ms * 1e6) / peaks.gbps, err,
      err <= tol ? "ok" : "WRONG", ref_ms);
  for (auto* t : {tq_, tk_, tv_, to_}) vkattn_tensor_destroy(t);
  if (!(err <= tol)) std::exit(2);
}

// One layer of a continuous-batching step over a paged cache (Hkv heads,
// f16, 16-token pages): `decodes` sequences of `cached` tokens bring one
// token each, plus one prefill chunk of `chunk` tokens over `chunk_cached`
// cached tokens. The cache is filled first (appends only); the step's
// attention is verified against the reference, then append and attention
// are timed separately.
struct StepBench {
  const char* name;
  int decodes, cached, chunk, chunk_cached, H, Hkv, d;
};

void run_step(vkattn_context* ctx, const StepBench& b, const Peaks& peaks) {
  std::mt19937 rng(7);
  auto rnd = [&] { return static_cast<float>(static_cast<int>(rng() % 2049) - 1024) / 1024.0f; };
  std::vector<int64_t> ids;
  std::vector<int32_t> len, t;
  for (int i = 0; i < b.decodes; ++i) ids.push_back(i), len.push_back(b.cached), t.push_back(1);
  if (b.chunk) ids.push_back(1000), len.push_back(b.chunk_cached), t.push_back(b.chunk);
  const size_t B = ids.size();
  int64_t pages = 0, total_new = 0;
  for (size_t i = 0; i < B; ++i) pages += (len[i] + t[i] + 15) / 16, total_new += t[i];
  vkattn_kv_cache_desc kd;
  vkattn_kv_cache_desc_init(&kd);
  kd.num_layers = 1, kd.num_kv_heads = b.Hkv, kd.head_dim = b.d, kd.num_pages = pages + 1;
  vkattn_kv_cache* cache;
  check(vkattn_kv_cache_create(ctx, &kd, &cache), "kv_cache_create");
  const int64_t row = int64_t(b.Hkv) * b.d;
  // Host copies of every sequence's K/V (exact in f16), for the reference.
  std::vector<std::vector<float>> hk(B), hv(B);
  auto append = [&](vkattn_step* st, const std::vector<int32_t>& n,
                    const std::vector<int32_t>& at) {
    int64_t tot = 0;
    for (int32_t x : n) tot += x;
    std::vector<uint16_t> k16(tot * row), v16(tot * row);
    int64_t r = 0;
    for (size_t i = 0; i < B; ++i)
      for (int j = 0; j < n[i]; ++j, ++r)
        for (int64_t e = 0; e < row; ++e) {
          float kx = rnd(), vx = rnd();
          k16[r * row + e] = to_f16(kx), v16[r * row + e] = to_f16(vx);
          hk[i].resize(std::max<size_t>(hk[i].size(), (at[i] + j + 1) * row));
          hv[i].resize(hk[i].size());
          hk[i][(at[i] + j) * row + e] = kx, hv[i][(at[i] + j) * row + e] = vx;
        }
    int64_t shape[3] = {tot, b.Hkv, b.d};
    vkattn_tensor *k, *v;
    check(vkattn_tensor_create(ctx, VKATTN_F16, 3, shape, &k), "tensor_create");
    check(vkattn_tensor_create(ctx, VKATTN_F16, 3, shape, &v), "tensor_create");
    check(vkattn_tensor_write(k, k16.data(), k16.size() * 2), "write");
    check(vkattn_tensor_write(v, v16.data(), v16.size() * 2), "write");
    check(vkattn_step_append(st, 0, k, v), "step_append");
    return std::make_pair(k, v);
  };
  {  // Fill the cache.
    vkattn_step* st;
    check(vkattn_step_begin(cache, B, ids.data(), len.data(), &st), "step_begin");
    auto kv = append(st, len, std::vector<int32_t>(B, 0));
    check(vkattn_step_commit(st), "step_commit");
    vkattn_tensor_destroy(kv.first), vkattn_tensor_destroy(kv.second);
  }
  vkattn_step* st;
  check(vkattn_step_begin(cache, B, ids.data(), t.data(), &st), "step_begin");
  auto kv = append(st, t, len);
  std::vector<float> q(total_new * b.H * b.d);
  for (auto& e : q) e = rnd();
  int64_t qs[3] = {total_new, b.H, b.d};
  vkattn_tensor *tq, *to;
  check(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &tq), "tensor_create");
  check(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &to), "tensor_create");
  check(vkattn_tensor_write(tq, q.data(), q.size() * 4), "write");
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = b.H, desc.num_kv_heads = b.Hkv, desc.head_dim = b.d, desc.causal = 1;
  auto record = [&] { check(vkattn_step_attention(st, 0, &desc, tq, to), "step_attention"); };
  record();
  std::vector<float> out(q.size()), ref(q.size());
  check(vkattn_tensor_read(to, out.data(), out.size() * 4), "read");
  std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
  std::vector<float> rk, rv;
  for (size_t i = 0; i < B; ++i) {
    cu_q[i + 1] = cu_q[i] + t[i], cu_k[i + 1] = cu_k[i] + len[i] + t[i];
    rk.insert(rk.end(), hk[i].begin(), hk[i].end());
    rv.insert(rv.end(), hv[i].begin(), hv[i].end());
  }
  vkattn::ref::AttentionParams p;
  p.num_heads = b.H, p.num_kv_heads = b.Hkv, p.head_dim = b.d, p.causal = true;
  vkattn::ref::attention_varlen(p, B, cu_q.data(), cu_k.data(), q.data(), rk.data(), rv.data(),
                                ref.data(), nullptr);
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, double(std::fabs(out[i] - ref[i])));
  double ms = time_gpu(ctx, record);
  double append_ms =
      time_gpu(ctx, [&] { check(vkattn_step_append(st, 0, kv.first, kv.second), "append"); });
  double pairs = 0, kv_bytes = 0;
  for (size_t i = 0; i < B; ++i) {
    for (int j = 0; j < t[i]; ++j) pairs += len[i] + j + 1;
    kv_bytes += 2.0 * (len[i] + t[i]) * row * 2;
  }
  double flops = pairs * b.H * 4.0 * b.d;
  std::printf(
      "%-34s %9.3f ms  %7.1f GFLOP/s (%4.1f%% of FMA peak)  %6.2f GB/s K/V (%4.1f%% of read peak)"
      "  max err %.2e %s  append %.3f ms\n",
      b.name, ms, flops / (ms * 1e6), 100.0 * flops / (ms * 1e6) / peaks.gflops,
      kv_bytes / (ms * 1e6), 100.0 * kv_bytes / (ms * 1e6) / peaks.gbps, err,
      err <= 1e-4 ? "ok" : "WRONG", append_ms);
  vkattn_step_abort(st);
  for (auto* x : {tq, to, kv.first, kv.second}) vkattn_tensor_destroy(x);
  vkattn_kv_cache_destroy(cache);
  if (!(err <= 1e-4)) std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      g_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--case") && i + 1 < argc)
      only.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: vkattn-bench [--reps N] [--case NAME]...\n");
      return 1;
    }
  }
  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = VKATTN_CONTEXT_PROFILING;
  vkattn_context* ctx;
  check(vkattn_context_create(&cd, &ctx), "context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  vkattn_context_get_device_info(ctx, &info);
  Peaks peaks = measure_peaks(ctx);
  std::printf(
      "device: %s (%s)\nmeasured peaks: %.1f GFLOP/s f32 FMA, %.2f GB/s texel read; medians of %d "
      "runs\n",
      info.name, info.driver_info, peaks.gflops, peaks.gbps, g_reps);
  const AttnBench cases[] = {
      {"prefill_causal_1024_h8_d128_f16", 1, 1024, 1024, 8, 8, 128, true, VKATTN_F16, VKATTN_F16},
      {"prefill_causal_1024_h8_d128_f32", 1, 1024, 1024, 8, 8, 128, true, VKATTN_F32, VKATTN_F32},
      {"decode_4096_h32_kv8_d128_f16kv", 1, 1, 4096, 32, 8, 128, true, VKATTN_F32, VKATTN_F16},
      {"decode_b16_2048_h32_kv8_d128", 16, 1, 2048, 32, 8, 128, true, VKATTN_F32, VKATTN_F16},
  };
  for (const auto& c : cases) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    run_attention(ctx, c, peaks);
  }
  const StepBench steps[] = {
      {"step_decode_b16_2048_h32_kv8_d128", 16, 2048, 0, 0, 32, 8, 128},
      {"step_mixed_12x1024_chunk256_h32_kv8", 12, 1024, 256, 512, 32, 8, 128},
  };
  for (const auto& c : steps) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    run_step(ctx, c, peaks);
  }
  vkattn_context_destroy(ctx);
  return 0;
}

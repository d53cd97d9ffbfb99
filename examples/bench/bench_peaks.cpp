// The device's own peaks for vkattn-bench: f32 FMA throughput
// (shaders/peak_fma.comp: independent scalar chains, every FMA unrolled
// but one loop), read bandwidth (shaders/peak_read.comp: per-lane or
// per-workgroup contiguous spans of f16 storage-buffer words unpacked,
// plain f32 vec4 and f16 texel fetches, checksums verified; the bound is
// the fastest of them, each reported), and the submit round trip. Each
// figure is the best of several shapes (workgroup 64/256/1024, and chain
// counts), and the winning shape is reported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "api/handles.h"
#include "bench.h"
#include "core/coopmat.h"
#include "core/device.h"
#include "core/pipeline.h"

namespace bench {

namespace {

using namespace vkattn;

const KernelLayout kFma{"peak_fma", {BindingKind::kStorageBuffer}, 8};

const KernelLayout kRead{
    "peak_read",
    {BindingKind::kStorageBuffer, BindingKind::kUniformTexel, BindingKind::kStorageBuffer},
    8};

// GFLOP/s of peak_fma.comp at one shape, or 0 if its checksums are wrong
// (a loop the driver ended early, an optimized-away chain): the answer is
// checked before the time is believed. The rolled loop stays far below the
// loop cap even if the driver keeps the unrolled ones rolled; the work
// grows by invocations.
double fma_gflops(vkattn_context* ctx, uint32_t wg, uint32_t acc, uint32_t unroll) {
  Context& c = *ctx->impl;
  constexpr uint32_t kIters = 256;
  const uint64_t max_inv = 1ull << 21;
  auto out = std::make_shared<Buffer>(c.device(), max_inv * 4, true);
  const Pipeline& pipe = c.pipelines().get(kFma, {wg, acc, unroll});
  struct {
    uint32_t iters;
    float seed;
  } push{kIters, 0.5f};
  BoundBuffer b;
  b.buffer = out;
  uint64_t groups = std::max<uint64_t>(1, 2048 / wg);
  auto once = [&] { c.pipelines().dispatch(c.recorder(), pipe, {b}, &push, sizeof(push), groups); };
  double ms = time_gpu(ctx, once, 1, 0);
  while (ms < 20.0 && groups * wg * 2 <= max_inv) {
    groups *= 2;
    ms = time_gpu(ctx, once, 1, 0);
  }
  // Checksums: chain i of invocation id starts at (id + i) * 1e-6 and runs
  // R = iters * unroll rounds of x = 0.999 x + seed.
  const double rounds = double(kIters) * unroll, br = std::pow(0.999, rounds);
  const float* got = reinterpret_cast<const float*>(out->mapped());
  for (uint64_t id : {uint64_t(0), groups * wg / 2, groups * wg - 1}) {
    double want = 0;
    for (uint32_t i = 0; i < acc; ++i)
      want += br * double(id + i) * 1e-6 + 0.5 * (1 - br) / (1 - 0.999);
    if (!got || !(std::fabs(got[id] - want) <= 1e-3 * std::fabs(want))) return 0;
  }
  ms = time_gpu(ctx, once, std::max(3, g_reps / 2));
  return double(groups * wg) * rounds * acc * 2.0 / (ms * 1e6);
}

const KernelLayout kMatrix{"peak_coopmat",
                           {BindingKind::kStorageBuffer},
                           8,
                           /*full_subgroups=*/true};

// GFLOP/s of peak_coopmat.comp at one shape (m x n x k matrices, `acc`
// accumulators per subgroup, a workgroup of `wg` lanes), or 0 if its sums
// are wrong.
double matrix_gflops(vkattn_context* ctx, uint32_t wg, uint32_t m, uint32_t n, uint32_t k,
                     uint32_t acc) {
  Context& c = *ctx->impl;
  constexpr uint32_t kUnroll = 4, kIters = 64;
  const uint32_t sg = std::max<uint32_t>(c.device().caps().subgroup_size, 1);
  const uint64_t per_group = wg / sg, max_groups = 1u << 16;
  auto out = std::make_shared<Buffer>(c.device(), max_groups * per_group * m * n * 4, true);
  const Pipeline& pipe = c.pipelines().get(kMatrix, {wg, m, n, k, acc, kUnroll});
  // alpha = 1/16: every product k / 256, every sum a multiple of 1/256
  // far below 2^24 ulps: exact.
  struct {
    uint32_t iters;
    float alpha;
  } push{kIters, 1.0f / 16};
  BoundBuffer b;
  b.buffer = out;
  uint64_t groups = 1;
  auto once = [&] { c.pipelines().dispatch(c.recorder(), pipe, {b}, &push, sizeof(push), groups); };
  double ms = time_gpu(ctx, once, 1, 0);
  while (ms < 20.0 && groups * 2 <= max_groups) {
    groups *= 2;
    ms = time_gpu(ctx, once, 1, 0);
  }
  const double want = double(acc) * kIters * kUnroll * k / 256.0;
  const float* got = reinterpret_cast<const float*>(out->mapped());
  const uint64_t last = groups * per_group * m * n - 1;
  for (uint64_t i : {uint64_t(0), last / 2, last})
    if (!got || got[i] != want) return 0;
  ms = time_gpu(ctx, once, std::max(3, g_reps / 2));
  return double(groups * per_group) * kIters * kUnroll * acc * 2.0 * m * n * k / (ms * 1e6);
}

// GB/s of peak_read.comp for one kind, pattern (span: per-lane spans, else
// workgroup spans with adjacent lanes) and workgroup, or 0 if its checksums
// are wrong. The source lives where the device reads fastest and is filled
// on the device with one word, so every checksum is known.
double read_gbps(vkattn_context* ctx, uint32_t wg, uint32_t kind, uint32_t span_pattern,
                 uint64_t bytes) {
  Context& c = *ctx->impl;
  constexpr uint32_t kWord = 0x3c3c3c3cu;  // f16 halves 1.0586, or one small f32
  static std::shared_ptr<Buffer> src;
  if (!src || src->size() != bytes) {
    src.reset();
    src = std::make_shared<Buffer>(c.device(), bytes, false);
    c.recorder().use(src);
    c.device().vk().vkCmdFillBuffer(c.recorder().cmd(), src->handle(), 0, bytes, kWord);
    check(vkattn_context_synchronize(ctx), "synchronize");
  }
  // Enough lanes for a GPU, few enough that a CPU's lanes read long spans.
  const uint64_t n_inv = c.device().info().device_type == VKATTN_DEVICE_CPU ? 16384 : 262144;
  const uint64_t words = bytes / 16, span = words / n_inv / 8 * 8;
  auto out = std::make_shared<Buffer>(c.device(), n_inv * 4, true);
  const Pipeline& pipe = c.pipelines().get(kRead, {wg, kind, span_pattern});
  struct {
    uint32_t span, n_inv;
  } push{static_cast<uint32_t>(span), static_cast<uint32_t>(n_inv)};
  BoundBuffer s, t, o;
  s.buffer = src;
  t.buffer = src;
  t.format = VK_FORMAT_R32G32B32A32_UINT;
  o.buffer = out;
  auto once = [&] {
    c.pipelines().dispatch(c.recorder(), pipe, {s, t, o}, &push, sizeof(push), n_inv / wg);
  };
  time_gpu(ctx, once, 1, 0);
  float f32;
  std::memcpy(&f32, &kWord, 4);
  const double per_word = kind == 1 ? 4.0 * f32 : 8.0 * 1.05859375;
  const double want = double(span) * per_word;
  const float* got = reinterpret_cast<const float*>(out->mapped());
  for (uint64_t id : {uint64_t(0), n_inv / 2 + 3, n_inv - 1})
    if (!got || !(std::fabs(got[id] - want) <= 1e-4 * want)) return 0;
  const double ms = time_gpu(ctx, once);
  return double(span * n_inv * 16) / (ms * 1e6);
}

// The independent check on a CPU device (lavapipe runs on the host's
// cores): the host's own FMA throughput, measured with native AVX2 FMA
// chains on every core in the same minute. 0 where it does not apply.
#if defined(__x86_64__)
// Ten independent 8-wide chains kept in registers (an array would live in
// memory and measure the cache instead).
__attribute__((target("avx2,fma"), noinline)) float native_fma_chains(long rounds, float seed) {
  typedef float v8 __attribute__((vector_size(32)));
  const v8 m = {0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f};
  const v8 c = {seed, seed, seed, seed, seed, seed, seed, seed};
  v8 a0 = m * 0.f, a1 = m * 1.f, a2 = m * 2.f, a3 = m * 3.f, a4 = m * 4.f;
  v8 a5 = m * 5.f, a6 = m * 6.f, a7 = m * 7.f, a8 = m * 8.f, a9 = m * 9.f;
  for (long n = 0; n < rounds; ++n) {
    a0 = __builtin_ia32_vfmaddps256(a0, m, c);
    a1 = __builtin_ia32_vfmaddps256(a1, m, c);
    a2 = __builtin_ia32_vfmaddps256(a2, m, c);
    a3 = __builtin_ia32_vfmaddps256(a3, m, c);
    a4 = __builtin_ia32_vfmaddps256(a4, m, c);
    a5 = __builtin_ia32_vfmaddps256(a5, m, c);
    a6 = __builtin_ia32_vfmaddps256(a6, m, c);
    a7 = __builtin_ia32_vfmaddps256(a7, m, c);
    a8 = __builtin_ia32_vfmaddps256(a8, m, c);
    a9 = __builtin_ia32_vfmaddps256(a9, m, c);
  }
  v8 s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + (a8 + a9);
  return s[0];
}
#endif

double native_fma_gflops() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const long rounds = 100000000;
  std::vector<std::thread> ts;
  std::vector<float> sink(threads);
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < threads; ++i)
    ts.emplace_back([&, i] { sink[i] = native_fma_chains(rounds, 0.5f); });
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return threads * double(rounds) * 10 * 8 * 2 / (s * 1e9);
#else
  return 0;
#endif
}

}  // namespace

bool matrix_peak_built() {
  return find_shader(kMatrix.shader) != nullptr;
}

Peaks measure_peaks(vkattn_context* ctx) {
  Context& c = *ctx->impl;
  const DeviceCaps& caps = c.device().caps();
  Peaks p;
  char shape[96];
  // (chains, rounds unrolled per iteration): on lavapipe, bodies of more
  // than ~256 FMAs run slower, and fewer than ~8 chains do not hide the
  // latency on a GPU; the best of all of them is the peak.
  const std::pair<uint32_t, uint32_t> kFmaShapes[] = {{4, 64}, {8, 8}, {8, 16}, {16, 8}};
  double fma_low = 0;
  for (uint32_t wg : {64u, 256u, 1024u}) {
    if (wg > caps.max_workgroup_invocations) continue;
    for (auto [acc, unroll] : kFmaShapes) {
      progress("peaks: f32 FMA, workgroup %u, %u chains x %u", wg, acc, unroll);
      const double g = fma_gflops(ctx, wg, acc, unroll);
      fma_low = fma_low == 0 ? g : std::min(fma_low, g);
      if (g > p.fma_gflops) {
        p.fma_gflops = g;
        p.fma_wg = wg, p.fma_acc = acc, p.fma_unroll = unroll;
        std::snprintf(shape, sizeof(shape), "workgroup %u, %u chains x %u unrolled", wg, acc,
                      unroll);
        p.fma_shape = shape;
      }
    }
  }
  p.fma_low_gflops = fma_low;
  if (c.device().info().device_type == VKATTN_DEVICE_CPU) {
    progress("peaks: the host's native FMA (independent check)");
    p.fma_probe_gflops = native_fma_gflops();
  }
  // Larger than a CPU device's caches; a GPU gets more.
  uint64_t bytes =
      c.device().info().device_type == VKATTN_DEVICE_DISCRETE_GPU ? (1ull << 30) : (120ull << 20);
  bytes = std::min<uint64_t>(bytes, caps.max_storage_buffer_range / (1 << 20) * (1 << 20));
  bytes = std::min<uint64_t>(bytes, uint64_t(caps.max_texel_buffer_elements) * 16);
  bytes = bytes >> 20 << 20;
  p.read_bytes = bytes;
  static const char* const kKinds[] = {"f16 storage uvec4", "f32 storage vec4", "f16 texel"};
  static const char* const kPatterns[] = {"workgroup spans", "lane spans"};
  for (uint32_t wg : {64u, 256u, 1024u}) {
    if (wg > caps.max_workgroup_invocations) continue;
    progress("peaks: reads, workgroup %u", wg);
    for (uint32_t kind : {0u, 1u, 2u}) {
      for (uint32_t pattern : {0u, 1u}) {
        const double g = read_gbps(ctx, wg, kind, pattern, bytes);
        if (g <= p.read_kinds[kind]) continue;
        p.read_kinds[kind] = g;
        p.read_kind_wg[kind] = wg, p.read_kind_pattern[kind] = pattern;
        std::snprintf(shape, sizeof(shape), "%s, %s, workgroup %u, %llu MiB", kKinds[kind],
                      kPatterns[pattern], wg, static_cast<unsigned long long>(bytes >> 20));
        p.read_kind_shapes[kind] = shape;
      }
    }
  }
  // The bound is the fastest way this device reads f16 data (on lavapipe
  // texel fetches beat storage-buffer loads by ~10x); the cases also report
  // their bandwidth against the f16 storage-buffer read (the bar).
  for (int kind = 0; kind < 3; ++kind) {
    if (p.read_kinds[kind] > p.read_gbps) {
      p.read_gbps = p.read_kinds[kind];
      p.read_kind = kind;
      p.read_shape = p.read_kind_shapes[kind];
    }
  }
  // f16 matrices, f32 accumulation, operands streamed from shared memory
  // (shaders/peak_coopmat.comp): the shapes the coopmat family takes (N and
  // K multiples of 8), 4 subgroups a workgroup, 4 or 8 accumulators.
  if (find_shader(kMatrix.shader) && caps.coopmat.usable() && caps.subgroup_size) {
    for (const CoopmatShape& s : caps.coopmat.f16_shapes) {
      if (s.n % 8 != 0 || s.k % 8 != 0 || s.m == 0 || s.m > 64 || s.n > 64 || s.k > 64) continue;
      const uint32_t wg =
          std::min(4 * caps.subgroup_size,
                   caps.max_workgroup_invocations / caps.subgroup_size * caps.subgroup_size);
      for (uint32_t acc : {4u, 8u}) {
        progress("peaks: f16 matrices %ux%ux%u, %u accumulators", s.m, s.n, s.k, acc);
        const double g = matrix_gflops(ctx, wg, s.m, s.n, s.k, acc);
        if (g <= p.matrix_gflops) continue;
        p.matrix_gflops = g;
        p.matrix_m = s.m, p.matrix_n = s.n, p.matrix_k = s.k, p.matrix_wg = wg, p.matrix_acc = acc;
        std::snprintf(shape, sizeof(shape), "%ux%ux%u f16 -> f32, %u accumulators, workgroup %u",
                      s.m, s.n, s.k, acc, wg);
        p.matrix_shape = shape;
      }
    }
  }
  // Submit + wait of one tiny dispatch, host wall clock.
  {
    auto out = std::make_shared<Buffer>(c.device(), 64 * 4, false);
    const Pipeline& pipe = c.pipelines().get(kFma, {64u, 8u, 32u});
    struct {
      uint32_t iters;
      float seed;
    } push{1, 0.5f};
    BoundBuffer b;
    b.buffer = out;
    std::vector<double> us;
    for (int i = 0; i < 31; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      c.pipelines().dispatch(c.recorder(), pipe, {b}, &push, sizeof(push), 1);
      check(vkattn_context_synchronize(ctx), "synchronize");
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    p.submit_us = median(us);
  }
  return p;
}

Peaks measure_peaks_again(vkattn_context* ctx, const Peaks& p) {
  Peaks q = p;
  if (p.fma_wg) q.fma_gflops = fma_gflops(ctx, p.fma_wg, p.fma_acc, p.fma_unroll);
  for (int kind = 0; kind < 3; ++kind) {
    if (kind != 0 && kind != p.read_kind) continue;
    if (!p.read_kind_wg[kind]) continue;
    q.read_kinds[kind] =
        read_gbps(ctx, p.read_kind_wg[kind], kind, p.read_kind_pattern[kind], p.read_bytes);
  }
  if (p.read_kind >= 0) q.read_gbps = q.read_kinds[p.read_kind];
  return q;
}

Peaks mean_peaks(const Peaks& a, const Peaks& b) {
  Peaks m = a;
  m.fma_gflops = 0.5 * (a.fma_gflops + b.fma_gflops);
  m.read_gbps = 0.5 * (a.read_gbps + b.read_gbps);
  m.read_kinds[0] = 0.5 * (a.read_kinds[0] + b.read_kinds[0]);
  return m;
}

}  // namespace bench

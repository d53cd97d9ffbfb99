// GPU timing of recorded work (template part of bench.h).
#pragma once

#include <chrono>

namespace bench {

// The warm-up: a GPU that sat idle runs at a fraction of its clock for the
// first milliseconds (measured on an H100: FMA peak 11-25 TFLOP/s right
// after idle, 64 when busy), which made the medians of short cases swing
// 3x between runs. Sizing and checking runs pass 0 (one untimed run).
template <typename F>
double time_gpu(vkattn_context* ctx, F&& record, int reps, double warmup_ms) {
  if (g_build_only) {  // one run: its pipelines exist; no time means anything
    record();
    check(vkattn_context_synchronize(ctx), "synchronize");
    return 0.0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  do {
    record();
    check(vkattn_context_synchronize(ctx), "synchronize");
  } while (
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() <
      warmup_ms);
  std::vector<double>& ms = g_last_times;
  ms.clear();
  for (int r = 0; r < reps; ++r) {
    record();
    check(vkattn_context_synchronize(ctx), "synchronize");
    uint64_t ns = 0;
    check(vkattn_context_last_gpu_time(ctx, &ns), "last_gpu_time");
    ms.push_back(ns * 1e-6);
  }
  return median(ms);
}

}  // namespace bench

// GPU timing of recorded work (template part of bench.h).
#pragma once

namespace bench {

template <typename F>
double time_gpu(vkattn_context* ctx, F&& record, int reps) {
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

}  // namespace bench

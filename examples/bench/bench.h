// vkattn-bench: shared pieces of the benchmark (examples/bench/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vkattn/vkattn.h"

namespace bench {

extern int g_reps;
// --build-only: each case's calls run once, nothing is verified, timed or
// compared with a peak (a fake GPU executes nothing: tools/gpu-static.sh);
// what counts is the pipelines the cases build (VKATTN_LOG=stats).
extern bool g_build_only;
// topk-decode-2048-of-131072's diagnostics (--topk-stride, --topk-prompt):
// the gap between listed positions (kTopkStride: every key on its own
// page) and the forked prompt's length (kTopkPrompt: 5 pool buffers on
// lavapipe); the case's own shape is the defaults.
constexpr int kTopkStride = 64;
constexpr int kTopkPrompt = 131072;
constexpr int kMaxTopkPrompt = 1 << 24;  // (--topk-prompt: int32 positions, 4 bytes a key and head)
constexpr int kMaxReps = 100000;
extern int g_topk_stride;
extern int g_topk_prompt;

// Exits with a message on any failing call.
void check(vkattn_status s, const char* what);
double median(std::vector<double> v);
// Untimed runs of wall time before a timing (bench_time.h).
constexpr double kWarmupMs = 200.0;
// GPU milliseconds of `record` (one submission each), median of `reps`,
// after `warmup_ms` of untimed runs (at least one).
template <typename F>
double time_gpu(vkattn_context* ctx, F&& record, int reps = g_reps, double warmup_ms = kWarmupMs);
// The timed runs of the last time_gpu, in order (their spread beside the
// median: one H200 gave the same case 4x apart in two processes).
extern std::vector<double> g_last_times;
// Progress on stderr.
void progress(const char* fmt, ...);

// The device's own ceilings, each the best of several kernel shapes.
struct Peaks {
  double fma_gflops = 0;      // f32 FMA, every loop unrolled
  std::string fma_shape;      // which shape won
  double fma_low_gflops = 0;  // the slowest shape (the spread shows what shape costs)
  // CPU devices: the host's native FMA throughput, an independent check of
  // fma_gflops (0 elsewhere).
  double fma_probe_gflops = 0;
  double read_gbps = 0;    // the fastest way to read f16 data (the read bound)
  std::string read_shape;  // which kind, pattern and workgroup
  // peaks.read_kinds: f16 storage-buffer uvec4 unpacked, f32 storage vec4,
  // f16 texel fetches unpacked.
  double read_kinds[3] = {0, 0, 0};
  std::string read_kind_shapes[3];  // the pattern and workgroup that won, per kind
  double submit_us = 0;             // submit + wait of a tiny dispatch, host clock
  // f16 cooperative-matrix throughput, f32 accumulation (GFLOP/s; 0 where
  // the device offers no usable VK_KHR_cooperative_matrix or the build has
  // no coopmat shaders), and the shape that won.
  double matrix_gflops = 0;
  std::string matrix_shape;
  uint32_t matrix_m = 0, matrix_n = 0, matrix_k = 0, matrix_wg = 0, matrix_acc = 0;
  // The winning shapes, so the peaks can be measured again beside a case.
  uint32_t fma_wg = 0, fma_acc = 0, fma_unroll = 0;
  uint32_t read_kind_wg[3] = {0, 0, 0}, read_kind_pattern[3] = {0, 0, 0};
  int read_kind = -1;  // which kind is read_gbps
  uint64_t read_bytes = 0;
};
Peaks measure_peaks(vkattn_context* ctx);
// This build embeds the f16 matrix peak's shader (-DVKATTN_COOPMAT=ON).
bool matrix_peak_built();
// The FMA peak, the read bound and the f16 storage read measured again in
// their winning shapes (a second or so): a CPU device's speed drifts with
// its host (here up to ~2x between minutes), so each case is compared
// with peaks measured right before and after it, not minutes earlier.
Peaks measure_peaks_again(vkattn_context* ctx, const Peaks& p);
// `a` with the FMA peak, the read bound and the f16 storage read averaged
// with `b`'s.
Peaks mean_peaks(const Peaks& a, const Peaks& b);

// One case's result, as the table and the JSON show it.
struct Result {
  std::string name, variant, notes;
  double median_ms = 0, gflops = 0, gbps = 0, fraction = 0, max_err = 0, ref_speedup = 0;
  double flops = 0, bytes = 0;         // work of one timed run (visible pairs; K/V bytes)
  double fma_peak = 0, read_peak = 0;  // the peaks this case is compared with
  std::string bound;                   // "fma" or "read": the larger term of the roofline
  bool ok = false;
  std::vector<std::pair<std::string, double>> extra;  // case-specific figures
  std::vector<std::string> lines;  // printed under the case's own (a comparison it timed)
  // VKATTN_LOG=stats: the pipelines the case ran, one JSON object per
  // executable ({"shader", "spec", "executable", "stats": {name: value}}).
  std::vector<std::string> stats;
};

// Fills gflops, gbps, bound and fraction from r.flops, r.bytes and the peaks
// (roofline: the fastest possible time is max(flops / F, bytes / B)).
void roofline(Result& r, const Peaks& p);
// Adds a note to r.notes, before or after the others, "; " between.
void add_note(Result& r, const std::string& note, bool front = false);
// Adds the last timing's fastest and slowest runs (min_ms, max_ms) to r.
void add_spread(Result& r);

// The cases (bench_cases.cpp); `run` returns false when verification failed.
struct Case {
  const char* name;
  const char* what;
  bool (*run)(vkattn_context* ctx, Result* out);
};
const std::vector<Case>& all_cases();

// The kernel family and shape choose_attention_variant() gives a call of
// head dims d and dv and at most max_rows rows per (sequence, kv head), as
// text.
std::string variant_name(vkattn_context* ctx, uint32_t d, uint32_t dv, uint32_t max_rows,
                         uint32_t group = 1);
// The statistics of the pipelines dispatched on ctx since the last call,
// as Result::stats holds them (empty without VKATTN_LOG=stats or on a
// device without them).
std::vector<std::string> take_pipeline_stats(vkattn_context* ctx);
// s as a JSON string literal (quotes escaped, control characters dropped).
std::string json_str(const std::string& s);

}  // namespace bench

#include "bench_time.h"

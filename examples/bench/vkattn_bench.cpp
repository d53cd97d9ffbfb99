// vkattn-bench: the benchmark that tells the truth. It measures the
// device's own peaks first (f32 FMA with every loop unrolled, f16 reads as
// decode does them, the submit round trip; each the best of several kernel
// shapes), then verifies each case against src/reference before timing it
// with GPU timestamps, and reports the median, GFLOP/s of the visible score
// pairs, GB/s of K/V, the fraction of the roofline bound
// (max(FLOPs / FMA peak, bytes / read peak)) and the speedup over the
// single-thread reference. Quote it from a quiet machine: on lavapipe the
// peaks drop by half when another process takes a core.
//
//   vkattn-bench [--reps N] [--case GLOB]... [--json FILE] [--list] [--variants] ...
//
// Every argument is checked before anything runs (a bad one: the usage and
// exit status 2).

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.h"
#include "common/kernel_choice.h"
#include "common/tool_args.h"

namespace bench {

int g_reps = 7;
bool g_build_only = false;
int g_topk_stride = kTopkStride;
int g_topk_prompt = kTopkPrompt;
std::vector<double> g_last_times;

void check(vkattn_status s, const char* what) {
  if (s != VKATTN_SUCCESS) {
    std::fprintf(stderr, "vkattn-bench: %s: %s\n", what, vkattn_last_error());
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void progress(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("vkattn-bench: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

void roofline(Result& r, const Peaks& p) {
  const double s = r.median_ms * 1e-3, flops = r.flops, bytes = r.bytes;
  r.fma_peak = p.fma_gflops;
  r.read_peak = p.read_gbps;
  r.gflops = flops / s * 1e-9;
  r.gbps = bytes / s * 1e-9;
  const double t_fma = flops / (p.fma_gflops * 1e9), t_read = bytes / (p.read_gbps * 1e9);
  r.bound = t_fma >= t_read ? "fma" : "read";
  r.fraction = std::max(t_fma, t_read) / s;
  // Cases the coopmat family served: their FLOPs against the f16 matrix
  // peak (prefill's target: 30 % on an NVIDIA GPU).
  if (p.matrix_gflops > 0 && r.variant.rfind("coopmat", 0) == 0) {
    r.extra.push_back({"fraction_of_matrix_peak", r.gflops / p.matrix_gflops});
    char note[64];
    std::snprintf(note, sizeof(note), "%.1f%% of the f16 matrix peak",
                  100.0 * r.gflops / p.matrix_gflops);
    add_note(r, note, /*front=*/true);
  }
  // The K/V bandwidth against the f16 storage-buffer read peak (decode's
  // target: at least 1x).
  if (r.bound == "read" && p.read_kinds[0] > 0) {
    r.extra.push_back({"x_f16_storage_read", r.gbps / p.read_kinds[0]});
    char note[64];
    std::snprintf(note, sizeof(note), "%.2fx the f16 storage read", r.gbps / p.read_kinds[0]);
    add_note(r, note, /*front=*/true);
  }
}

void add_note(Result& r, const std::string& note, bool front) {
  if (r.notes.empty())
    r.notes = note;
  else
    r.notes = front ? note + "; " + r.notes : r.notes + "; " + note;
}

void add_spread(Result& r) {
  if (g_last_times.empty()) return;
  const auto [lo, hi] = std::minmax_element(g_last_times.begin(), g_last_times.end());
  r.extra.push_back({"min_ms", *lo});
  r.extra.push_back({"max_ms", *hi});
  char n[96];
  std::snprintf(n, sizeof(n), "runs %.3f-%.3f ms", *lo, *hi);
  add_note(r, n);
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}

}  // namespace bench

using namespace bench;

namespace {

void write_json(const char* path, const vkattn_device_info& d, const Peaks& p,
                const std::vector<Result>& rs) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "vkattn-bench: cannot write %s\n", path);
    std::exit(1);
  }
  std::fprintf(f,
               "{\n  \"device\": {\"name\": %s, \"driver_name\": %s, \"driver_info\": %s, "
               "\"vendor_id\": %u, \"device_id\": %u, \"device_type\": %u, \"api_version\": %u, "
               "\"driver_version\": %u, \"subgroup_size\": %u, \"max_shared_memory\": %u, "
               "\"max_buffer_range\": %llu, \"supports_f16\": %u, \"supports_16bit_storage\": %u, "
               "\"supports_bf16\": %u},\n",
               json_str(d.name).c_str(), json_str(d.driver_name).c_str(),
               json_str(d.driver_info).c_str(), d.vendor_id, d.device_id, d.device_type,
               d.api_version, d.driver_version, d.subgroup_size, d.max_shared_memory,
               static_cast<unsigned long long>(d.max_buffer_range), d.supports_f16,
               d.supports_16bit_storage, d.supports_bf16);
  std::fprintf(
      f,
      "  \"peaks\": {\"fma_gflops\": %.3f, \"read_gbps\": %.3f, \"submit_us\": %.1f, "
      "\"native_fma_gflops\": %.3f, \"fma_shape\": %s, \"read_shape\": %s, "
      "\"read_kinds\": {\"f16_storage_uvec4\": %.3f, \"f32_storage_vec4\": %.3f, "
      "\"f16_texel_rgba32ui\": %.3f}, \"matrix_f16_gflops\": %.3f, \"matrix_shape\": %s},\n",
      p.fma_gflops, p.read_gbps, p.submit_us, p.fma_probe_gflops, json_str(p.fma_shape).c_str(),
      json_str(p.read_shape).c_str(), p.read_kinds[0], p.read_kinds[1], p.read_kinds[2],
      p.matrix_gflops, json_str(p.matrix_shape).c_str());
  std::fprintf(f, "  \"cases\": [");
  for (size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    std::fprintf(f,
                 "%s\n    {\"name\": %s, \"median_ms\": %.4f, \"gflops\": %.3f, \"gbps\": %.3f, "
                 "\"bound\": %s, \"fraction_of_peak\": %.4f, \"max_err\": %.3g, \"ok\": %s, "
                 "\"speedup_over_reference\": %.2f, \"variant\": %s, \"fma_peak_gflops\": %.3f, "
                 "\"read_peak_gbps\": %.3f",
                 i ? "," : "", json_str(r.name).c_str(), r.median_ms, r.gflops, r.gbps,
                 json_str(r.bound).c_str(), r.fraction, r.max_err, r.ok ? "true" : "false",
                 r.ref_speedup, json_str(r.variant).c_str(), r.fma_peak, r.read_peak);
    for (auto& [k, v] : r.extra) std::fprintf(f, ", %s: %.4g", json_str(k).c_str(), v);
    if (!r.stats.empty()) {
      std::fprintf(f, ", \"pipelines\": [");
      for (size_t j = 0; j < r.stats.size(); ++j)
        std::fprintf(f, "%s\n      %s", j ? "," : "", r.stats[j].c_str());
      std::fprintf(f, "]");
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

}  // namespace

// --variants: the device table's row for the default device and the
// kernel each benchmark shape gets (VKATTN_ATTN_* forcing applies).
int print_variants() {
  vkattn_context* ctx;
  check(vkattn_context_create(nullptr, &ctx), "context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  check(vkattn_context_get_device_info(ctx, &info), "get_device_info");
  std::printf("device: %s (%s), vendor 0x%04x, subgroup %u, shared memory %u bytes\n", info.name,
              info.driver_info, info.vendor_id, info.subgroup_size, info.max_shared_memory);
  std::printf("%s", vkattn_tools::device_table_row(ctx).c_str());
  for (const vkattn_tools::ReportShape& s : vkattn_tools::kReportShapes)
    std::printf("  %-44s %s\n", s.what, variant_name(ctx, s.d, s.d, s.rows, s.group).c_str());
  vkattn_context_destroy(ctx);
  return 0;
}

void usage(FILE* to) {
  std::fprintf(to,
               "usage: vkattn-bench [--reps N] [--case GLOB]... [--json FILE] [--list] "
               "[--variants] [--build-only] [--topk-stride N] [--topk-prompt N]\n"
               "  --reps N     timed runs per case (median; default %d; 1..%d)\n"
               "  --case GLOB  only cases whose name matches (repeatable; each must match one)\n"
               "  --json FILE  also write the results as JSON\n"
               "  --list       list the cases\n"
               "  --variants   what the device table picks for this device, and why\n"
               "  --build-only run each case's calls once: no answers checked, no timing, no\n"
               "               peaks (fake GPUs, tools/gpu-static.sh; with VKATTN_LOG=stats)\n"
               "  --topk-stride N, --topk-prompt N\n"
               "               topk-decode-2048-of-131072's list stride (default %d: each key\n"
               "               on its own page; 1: contiguous; at least 1) and prompt length\n"
               "               (default %d; 2048..%d); diagnostics: the case's name stays, say\n"
               "               them beside it\n",
               g_reps, kMaxReps, kTopkStride, kTopkPrompt, kMaxTopkPrompt);
}

// A bad argument: what is wrong, the usage, exit status 2.
int refuse(const std::string& why) {
  std::fprintf(stderr, "vkattn-bench: %s\n", why.c_str());
  usage(stderr);
  return 2;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> globs;
  const char* json = nullptr;
  bool list = false, variants = false, help = false;
  // Every argument is checked before any acts (--list and --variants too).
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool takes_value = a == "--reps" || a == "--case" || a == "--json" ||
                             a == "--topk-stride" || a == "--topk-prompt";
    if (takes_value && i + 1 >= argc) return refuse(a + " needs a value");
    uint64_t n = 0;
    if (a == "--reps") {
      if (!tool_parse_u64(argv[++i], 1, kMaxReps, &n))
        return refuse("--reps " + std::string(argv[i]) + " is not a whole number in 1.." +
                      std::to_string(kMaxReps));
      g_reps = int(n);
    } else if (a == "--case") {
      globs.push_back(argv[++i]);
    } else if (a == "--json") {
      json = argv[++i];
    } else if (a == "--list") {
      list = true;
    } else if (a == "--variants") {
      variants = true;
    } else if (a == "--topk-stride") {
      if (!tool_parse_u64(argv[++i], 1, kMaxTopkPrompt, &n))
        return refuse("--topk-stride " + std::string(argv[i]) + " is not a whole number in 1.." +
                      std::to_string(kMaxTopkPrompt));
      g_topk_stride = int(n);
    } else if (a == "--topk-prompt") {
      if (!tool_parse_u64(argv[++i], 2048, kMaxTopkPrompt, &n))
        return refuse("--topk-prompt " + std::string(argv[i]) + " is not a whole number in 2048.." +
                      std::to_string(kMaxTopkPrompt));
      g_topk_prompt = int(n);
    } else if (a == "--build-only") {
      g_build_only = true;
    } else if (a == "--help" || a == "-h") {
      help = true;
    } else {
      return refuse("unknown argument \"" + a + "\"");
    }
  }
  if (g_build_only) g_reps = 1;
  for (const std::string& g : globs) {
    bool any = false;
    for (const Case& c : all_cases()) any = any || tool_glob_match(g.c_str(), c.name);
    if (!any) return refuse("--case " + g + " matches no case (--list names them)");
  }
  if (json && !tool_writable(json))
    return refuse("--json " + std::string(json) + " cannot be written");
  if (list + variants > 1 || ((list || variants) && (json || !globs.empty() || g_build_only)))
    return refuse("--list and --variants take no other argument");
  if (help) {
    usage(stdout);
    return 0;
  }
  if (list) {
    for (const Case& c : all_cases()) std::printf("%-22s %s\n", c.name, c.what);
    return 0;
  }
  if (variants) return print_variants();
  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = VKATTN_CONTEXT_PROFILING;
  vkattn_context* ctx;
  check(vkattn_context_create(&cd, &ctx), "context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  check(vkattn_context_get_device_info(ctx, &info), "get_device_info");
  std::printf("device: %s (%s)\n", info.name, info.driver_info);
  Peaks peaks;
  if (g_build_only)
    std::printf("build only: each case's calls run once; nothing is checked or timed\n");
  else
    peaks = measure_peaks(ctx);
  char probe[96] = "";
  if (peaks.fma_probe_gflops > 0)
    std::snprintf(probe, sizeof(probe), "; the host's native AVX2 FMA: %.1f, %+.0f%%",
                  peaks.fma_probe_gflops, 100.0 * (peaks.fma_gflops / peaks.fma_probe_gflops - 1));
  std::printf(
      "peaks: f32 FMA %.1f GFLOP/s (%s; slowest shape %.1f%s)\n"
      "       read %.2f GB/s (%s); by kind: f16 storage uvec4 %.2f, f32 storage vec4 %.2f, "
      "f16 texel %.2f GB/s\n"
      "       submit + wait %.0f us\n",
      peaks.fma_gflops, peaks.fma_shape.c_str(), peaks.fma_low_gflops, probe, peaks.read_gbps,
      peaks.read_shape.c_str(), peaks.read_kinds[0], peaks.read_kinds[1], peaks.read_kinds[2],
      peaks.submit_us);
  if (peaks.matrix_gflops > 0)
    std::printf("       f16 matrices %.1f GFLOP/s (%s)\n", peaks.matrix_gflops,
                peaks.matrix_shape.c_str());
  else
    std::printf("       f16 matrices: none (no usable VK_KHR_cooperative_matrix%s)\n",
                matrix_peak_built() ? "" : ", or a build without -DVKATTN_COOPMAT=ON");
  std::printf(
      "medians of %d runs, GPU timestamps; %% of peak = the roofline bound "
      "max(FLOPs / FMA, bytes / read) over the time, with the FMA and read peaks measured again "
      "right before and after each case (their mean; the machine's speed drifts)\n\n",
      g_reps);
  std::printf("%-22s %10s %9s %8s %5s %7s %7s %9s  %s\n", "case", "median ms", "GFLOP/s", "GB/s",
              "bound", "% peak", "x ref", "max err", "notes");
  std::vector<Result> results;
  bool all_ok = true;
  for (const Case& c : all_cases()) {
    bool take = globs.empty();
    for (const std::string& g : globs) take = take || tool_glob_match(g.c_str(), c.name);
    if (!take) continue;
    Result r;
    r.name = c.name;
    if (g_build_only) {
      take_pipeline_stats(ctx);  // (earlier cases')
      c.run(ctx, &r);
      r.stats = take_pipeline_stats(ctx);
      r.ok = true;  // (garbage answers: not checked)
      r.median_ms = r.ref_speedup = r.max_err = r.gflops = r.gbps = r.fraction = 0;
      for (auto& e : r.extra) e.second = 0;
      std::printf("%-22s built, %zu pipeline statistic line(s); kernel: %s\n", r.name.c_str(),
                  r.stats.size(), r.variant.c_str());
      results.push_back(r);
      continue;
    }
    const Peaks before = measure_peaks_again(ctx, peaks);
    take_pipeline_stats(ctx);  // (the peaks' and earlier cases')
    c.run(ctx, &r);
    r.stats = take_pipeline_stats(ctx);
    const Peaks after = measure_peaks_again(ctx, peaks);
    roofline(r, mean_peaks(before, after));
    char drift[128];
    std::snprintf(drift, sizeof(drift), "peaks beside it: FMA %.1f-%.1f, read %.2f-%.2f",
                  std::min(before.fma_gflops, after.fma_gflops),
                  std::max(before.fma_gflops, after.fma_gflops),
                  std::min(before.read_gbps, after.read_gbps),
                  std::max(before.read_gbps, after.read_gbps));
    add_note(r, drift);
    all_ok = all_ok && r.ok;
    std::printf("%-22s %10.3f %9.1f %8.2f %5s %6.1f%% %7.1f %9.1e  %s%s\n", r.name.c_str(),
                r.median_ms, r.gflops, r.gbps, r.bound.c_str(), 100.0 * r.fraction, r.ref_speedup,
                r.max_err, r.ok ? "" : "WRONG ", r.notes.c_str());
    std::printf("%-22s kernel: %s\n", "", r.variant.c_str());
    for (const std::string& l : r.lines) std::printf("%-22s %s\n", "", l.c_str());
    results.push_back(r);
  }
  if (json) write_json(json, info, peaks, results);
  vkattn_context_destroy(ctx);
  return all_ok ? 0 : 2;
}

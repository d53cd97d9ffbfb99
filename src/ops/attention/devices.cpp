#include "ops/attention/devices.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <sstream>

#include "core/device.h"
#include "core/host.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

constexpr uint32_t kNvidia = 0x10DE, kAmd = 0x1002, kIntel = 0x8086, kArm = 0x13B5,
                   kQualcomm = 0x5143, kApple = 0x106B;
// lanes_wg / decode_wg: the device's subgroup size (lanes: clamped to 8..64).
constexpr uint32_t kSubgroup = 0;

// Which devices a row serves: every condition given must hold (0 / NULL:
// any). Rows are tried in order; the first that matches is the device's.
struct DeviceMatch {
  bool cpu;              // device_type CPU (lavapipe, SwiftShader)
  uint32_t vendor;       // vendor id
  const char* driver;    // driver name, exactly
  const char* name_has;  // a substring of the device name
};

// The numbers a row sets (AttentionDefaults has each one's meaning).
struct RowChoices {
  AttentionFamily family;
  uint32_t lanes_wg, lanes_max_rows;
  bool lanes_decode_merge;
  uint32_t tiled_lanes_per_row, tiled_wg, tiled_row_floats, tiled_tile_keys;
  bool tiled_f16_math, tiled_double_buffer;
  bool coopmat_prefill;
  uint32_t coopmat_min_rows, coopmat_subgroups, coopmat_tile_keys;
  bool decode_default;
  uint32_t decode_wg, decode_keys_per_group, decode_lane_vec4, decode_row_splits, decode_max_tiles;
  uint32_t invariant_split_keys;
  bool decode_wide_rows = false;  // the rows' positional lists leave these off
  uint32_t decode_touch_ahead = 0;
};

// One row of the device table: the devices it matches, its choices, where
// they come from (`measured: <GPU, driver, date>`, `static: <compiler,
// GPU, date>` or `reasoned`) and why each family is set up so. Adding a
// GPU is adding a row.
struct DeviceRow {
  const char* name;
  const char* source;
  DeviceMatch match;
  RowChoices choices;
  const char* why;
  const char* coopmat_why;
  const char* decode_why;
};

// Every GPU row starts from these (reasons beside each value):
// - family tiled: measured on an H100 (580.159.04, docs/guide/devices-tested.md), every test
//   passes with tiled; lanes' register arrays (R rows x head dim of q and the accumulator per
//   lane) spill and kept NVIDIA's shader compiler busy for minutes at R = 4, d 128, so lanes, a
//   fallback there, takes one row, one subgroup a workgroup, merging decode lanes in shared
//   memory.
// - tiled (measured on NVIDIA only): 4 lanes per head-dim split and 128 lanes per workgroup, as
//   ggml-vulkan's scalar flash attention; 32 keys per tile (ggml: 64 keys of f16; ours are
//   staged as f32). At most 32 floats of q and accumulator per lane and row: d 64 keeps 4 lanes
//   per row and 128 lanes, d 128 takes 8 and 256, d 256 16 and 512 (64 rows a workgroup
//   throughout). At 4 lanes per row d 128 needed 232 GPRs on NAK (8 warps/SM) and d 256 spilled
//   129-678 VGPRs on RDNA2 (tools/gpu/static_sweep.sh, Mesa 26.1, 2026-11-27). f16 arithmetic
//   and double-buffered tiles: off until a GPU measures them faster (nothing has yet).
// - coopmat: off unless a row knows the driver good; 4 subgroups of 16 rows and 32 keys per tile
//   (ggml-vulkan's coopmat flash attention: 16-row blocks, 32-64 keys), shrunk to fit shared
//   memory; NVIDIA's row 64 (FlashAttention-2's kBlockN and ggml cm1's Bc: 64 fits its 48 KiB at
//   d 128 with q's fragments in registers).
// - decode (reasoned from FlashInfer's decode and the budget in families/decode.cpp): 128 lanes,
//   2 keys per key group and tile (16 keys at d 128 f16); 8 vec4 of q and accumulators per lane
//   and a tile's rows split over 4 sets of lanes, so a GQA-8 decode at d 128 is one tile (K/V
//   read once from memory, twice from L1): at 32 vec4 and 8 rows a lane it took 252 VGPRs on
//   RDNA3 (3 waves/SIMD) and 232 GPRs on NAK (8 warps/SM) (tools/gpu/static_sweep.sh, Mesa 26.1,
//   2026-11-27). Mixed steps run their decodes here and a prefill chunk on the prefill family,
//   in the same call (ops/attention/record.cpp, issue G).
// - batch invariance: splits of 256 keys (a decode over 4096 keys and 8 kv heads: 128
//   workgroups; reasoned).
constexpr RowChoices kGpu = {AttentionFamily::kTiled,
                             kSubgroup,
                             1,
                             true,
                             4,
                             128,
                             32,
                             32,
                             false,
                             false,
                             false,
                             8,
                             4,
                             32,
                             true,
                             128,
                             2,
                             8,
                             4,
                             2,
                             256};
constexpr const char* kGpuDecodeWhy =
    "GPUs: decode-shaped calls (at most 8 query tokens per sequence) read K/V once per GQA group "
    "with 16-byte loads and a tile in flight (unmeasured: the next GPU run decides)";
constexpr const char* kNoCoopmat =
    "no known-good cooperative-matrix driver for this row: forced only";

constexpr RowChoices with_tile_keys(RowChoices c, uint32_t keys) {
  c.tiled_tile_keys = keys;
  return c;
}
// MLA decodes in one wide tile (NVIDIA: GA102's NAK held d 576 / dv 512 at
// 16 rows in 256 lanes to 224 GPRs, 232 with the page window, no spill;
// M1's compiler spilled 419 values on the same shape, so other rows keep
// several tiles).
constexpr RowChoices with_wide_decode(RowChoices c) {
  c.decode_wide_rows = true;
  return c;
}
constexpr RowChoices with_coopmat(RowChoices c, uint32_t subgroups) {
  c.coopmat_prefill = true;
  c.coopmat_subgroups = subgroups;
  return c;
}
constexpr RowChoices with_coopmat_keys(RowChoices c, uint32_t keys) {
  c.coopmat_tile_keys = keys;
  return c;
}
// Intel: 16 keys per tile (64 KiB SLM shared by more threads), coopmat 2 subgroups.
constexpr RowChoices kIntelChoices = [] {
  RowChoices c = with_tile_keys(kGpu, 16);
  c.coopmat_subgroups = 2;
  return c;
}();
// Mobile: 64-lane tiled and decode workgroups, 16 keys per tile, 16 vec4 a decode lane.
constexpr RowChoices kMobile = [] {
  RowChoices c = with_tile_keys(kGpu, 16);
  c.tiled_wg = 64;
  c.decode_wg = 64;
  c.decode_lane_vec4 = 16;
  return c;
}();
// 16 floats of a row a lane: twice the lanes per row (Adreno 6xx, AGX).
constexpr RowChoices half_row_floats(RowChoices c) {
  c.tiled_row_floats = 16;
  return c;
}

// Reasons shared by a vendor's rows.
constexpr const char* kAmdWhy =
    "64-lane waves (RDNA may run 32): lanes workgroup of one wave; tiled 128 lanes, 4 per row; "
    "64 KiB of LDS per workgroup";
constexpr const char* kIntelWhy =
    "SIMD8-32 subgroups: lanes workgroup of one subgroup; tiled 128 lanes, 4 per row, 16 keys per "
    "tile (64 KiB SLM shared by more threads)";
constexpr const char* kMobileWhy =
    "mobile GPUs: 16-128 lane subgroups, 32 KiB of shared memory and few registers: tiled 64 "
    "lanes, 4 per row, 16 keys per tile";
constexpr const char* kAdrenoCoopmatWhy =
    "Adreno's cooperative matrices gave wrong results with masks (ggml-vulkan reports): forced "
    "only";

const DeviceRow kDeviceTable[] = {
    // lavapipe: lanes never talk (a barrier or shared-memory staging costs more than it saves,
    // LAVAPIPE.md); decode measured (vkattn-bench --reps 5, 2026-11-25), lanes / decode ms:
    // decode-1x4096 7.3 / 6.6, decode-16x512 20.4 / 14.2, decode-16x2048 44.6 / 54.1,
    // decode-1x32768 47.7 / 105.7, decode-8x32768-paged 365 / 694, gptoss-decode 39.6 / 124.8:
    // lanes stays (docs/guide/benchmark.md). Batch invariance: splits of 2048 keys cost nothing
    // measurable (decode-1x4096 4.9 vs 4.8 ms, decode-16x2048 44.3 vs 43.7, decode-1x32768 41.8
    // vs 41.5); 256 cost 1.5x. tiled's and coopmat's shapes: the tests' (forced only). Top-k
    // decodes touch the listed rows a tile ahead of their loads (topk-decode-2048-of-131072 /
    // decode-16x2048 in one process: 1.21-1.26x, 1.58-1.63x without; 2026-11-29).
    {"CPU device (lavapipe / llvmpipe)",
     "measured: llvmpipe (Mesa 22.3.6, LLVM 15.0.6, 2 cores), 2026-11-25",
     {true, 0, nullptr, nullptr},
     {AttentionFamily::kLanes,
      8,
      32,
      false,
      8,
      32,
      0,
      16,
      false,
      false,
      false,
      8,
      1,
      16,
      false,
      kSubgroup,
      8,
      32,
      1,
      2,
      2048,
      false,
      1},
     "lanes, one 8-lane subgroup per workgroup: lanes never talk, because on lavapipe a barrier "
     "or shared-memory staging costs more than it saves (LAVAPIPE.md; tiled measured 26-57x "
     "slower here); decode lanes write partials (shared-memory merge 40 ms vs 26 ms, "
     "decode-16x512); items balanced over the thread pool's contiguous chunks (lp_cs_tpool)",
     "never by default on a CPU: lavapipe 26.1's 8x8x8 matrices are scalar code "
     "(docs/guide/testing.md); forced with VKATTN_ATTN_KERNEL=coopmat for tests",
     "forced only on a CPU: slower than lanes on most decode cases (decode-16x2048 54 vs 45 ms, "
     "decode-1x32768 106 vs 48 ms; docs/guide/benchmark.md); VKATTN_ATTN_KERNEL=decode for "
     "tests"},
    // coopmat is not the default: wrong on every NVIDIA draw until 2026-11-28, when an H200
    // showed why (the driver placed 4-byte shared arrays before the matrix arrays, 8 bytes off
    // 16; docs/bench/h200-2026-11-28.md) and passed every check once each shared array was a
    // whole number of 16 bytes; it was then 1.2-1.7x faster than tiled at d 64-128 without a
    // causal mask and slower on causal, d 256 and MLA, in one process each. Turing
    // (0x1E00-0x21FF) also miscompiled ggml-vulkan's coopmat attention.
    {"NVIDIA (0x10DE)",
     "measured: H100 and H200 (driver 580.159.04, 2026-11-23/27/28); static: GA102 NAK (Mesa "
     "26.1, 2026-11-27)",
     {false, kNvidia, nullptr, nullptr},
     with_coopmat_keys(with_wide_decode(kGpu), 64),
     "32-lane warps: lanes workgroup of one warp; tiled 128 lanes (4 warps, as FlashAttention-2's "
     "forward and ggml's scalar path), 4 lanes per row; 48 KiB of shared memory under Vulkan "
     "bounds the tile",
     "NVIDIA: right on an H200 since 2026-11-28 (driver 580.159.04) but faster than tiled only "
     "at d 64-128 without a causal mask (docs/bench/h200-2026-11-28.md); forced only until it "
     "wins in repeated processes",
     kGpuDecodeWhy},
    // RADV offers VK_KHR_cooperative_matrix on RDNA3 (GFX11) and newer only; other AMD drivers
    // advertise it on older chips and emulate it.
    {"AMD (0x1002)",
     "static: navi21/navi31/gfx1201 ACO (Mesa 26.1, 2026-11-27)",
     {false, kAmd, "radv", nullptr},
     with_coopmat(kGpu, 4),
     kAmdWhy,
     "RADV: cooperative matrices on RDNA3+ WMMA for prefill (unmeasured here); 32 keys per tile "
     "(64 took navi31's LDS from 41 to 44 KiB a workgroup: 3 -> 2 waves/SIMD)",
     kGpuDecodeWhy},
    {"AMD (0x1002)",
     "static: navi21/navi31/gfx1201 ACO (Mesa 26.1, 2026-11-27)",
     {false, kAmd, nullptr, nullptr},
     kGpu,
     kAmdWhy,
     "AMD drivers other than RADV advertise cooperative matrices on pre-RDNA3 chips and emulate "
     "them: forced only",
     kGpuDecodeWhy},
    // ANV offers VK_KHR_cooperative_matrix on XMX hardware (Arc, Xe2).
    {"Intel (0x8086)",
     "reasoned",
     {false, kIntel, "Intel open-source Mesa driver", nullptr},
     with_coopmat(kIntelChoices, 2),
     kIntelWhy,
     "ANV: XMX matrix engines (Arc, Xe2) for prefill (unmeasured here)",
     kGpuDecodeWhy},
    {"Intel (0x8086)",
     "reasoned",
     {false, kIntel, nullptr, nullptr},
     kIntelChoices,
     kIntelWhy,
     kNoCoopmat,
     kGpuDecodeWhy},
    {"Arm Mali (0x13B5)",
     "reasoned",
     {false, kArm, nullptr, nullptr},
     kMobile,
     kMobileWhy,
     "unmeasured mobile cooperative matrices: forced only",
     kGpuDecodeWhy},
    // Adreno 6xx: ir3 keeps 32 registers a fiber there (48 on the 740): 32 floats of a row a lane
    // spilled 27-41 values to private memory at d 128-256 (fake Adreno 660), 16 (twice the
    // lanes) none.
    {"Qualcomm Adreno (0x5143)",
     "static: Adreno 740/660 ir3 (Mesa 26.1, 2026-11-27)",
     {false, kQualcomm, nullptr, "Adreno (TM) 6"},
     half_row_floats(kMobile),
     kMobileWhy,
     kAdrenoCoopmatWhy,
     kGpuDecodeWhy},
    {"Qualcomm Adreno (0x5143)",
     "static: Adreno 740/660 ir3 (Mesa 26.1, 2026-11-27)",
     {false, kQualcomm, nullptr, nullptr},
     kMobile,
     kMobileWhy,
     kAdrenoCoopmatWhy,
     kGpuDecodeWhy},
    {"Apple via MoltenVK (0x106B)",
     "reasoned",
     {false, kApple, nullptr, nullptr},
     with_tile_keys(kGpu, 16),
     "32-lane SIMD groups, 32 KiB of threadgroup memory: tiled 128 lanes, 4 per row, 16 keys per "
     "tile",
     kNoCoopmat,
     kGpuDecodeWhy},
    // Honeykrisp (Apple AGX): at most 255 16-bit register halves a lane. 32 floats of q and
    // accumulators a row spilled 18-39 registers at d 64-256 (AGX's compiler, fake M1); 16
    // (twice the lanes per row: d 128 takes 16) spill none: 215-231 halves, 448 threads a core.
    {"other GPU (Apple M1 on Honeykrisp among them)",
     "static: M1 AGX (Mesa 26.1, 2026-11-27)",
     {false, 0, "Honeykrisp", nullptr},
     half_row_floats(kGpu),
     "no vendor row: the tiled family with the GPU defaults; Honeykrisp (AGX): 16 floats of a row "
     "a lane (static: M1, no spills)",
     kNoCoopmat,
     kGpuDecodeWhy},
    {"other GPU (Apple M1 on Honeykrisp among them)",
     "static: M1 AGX (Mesa 26.1, 2026-11-27)",
     {false, 0, nullptr, nullptr},
     kGpu,
     "no vendor row: the tiled family with the GPU defaults",
     kNoCoopmat,
     kGpuDecodeWhy},
};

bool matches(const DeviceMatch& m, const vkattn_device_info& info) {
  return (info.device_type == VKATTN_DEVICE_CPU) == m.cpu &&
         (!m.vendor || info.vendor_id == m.vendor) &&
         (!m.driver || std::strcmp(info.driver_name, m.driver) == 0) &&
         (!m.name_has || std::strstr(info.name, m.name_has) != nullptr);
}

}  // namespace

AttentionDefaults attention_defaults(const Device& device) {
  return attention_defaults(device.info(), device.caps());
}

AttentionDefaults attention_defaults(const vkattn_device_info& info, const DeviceCaps& caps) {
  const DeviceRow* row = &kDeviceTable[std::size(kDeviceTable) - 1];  // any other GPU
  for (const DeviceRow& r : kDeviceTable) {
    if (matches(r.match, info)) {
      row = &r;
      break;
    }
  }
  const RowChoices& c = row->choices;
  const bool cpu = info.device_type == VKATTN_DEVICE_CPU;
  const uint32_t sg = caps.subgroup_size ? caps.subgroup_size : 32;
  AttentionDefaults d{};
  d.row = row->name;
  d.source = row->source;
  d.family = c.family;
  d.lanes_wg = c.lanes_wg == kSubgroup ? std::clamp<uint32_t>(sg, 8, 64) : c.lanes_wg;
  d.lanes_max_rows = c.lanes_max_rows;
  d.lanes_decode_merge = c.lanes_decode_merge;
  // lavapipe hands each thread a contiguous chunk of a dispatch (core/host.h).
  d.static_chunks = cpu ? cpu_device_threads() : 0;
  // About 2 workgroups per compute unit where the driver reports them (an
  // H100 has 132 SMs), else a few per host thread (CPU) or 256.
  d.target_items = caps.compute_units ? 2 * caps.compute_units : busy_workgroups(cpu);
  d.tiled_lanes_per_row = c.tiled_lanes_per_row;
  d.tiled_wg = c.tiled_wg;
  d.tiled_row_floats = c.tiled_row_floats;
  d.tiled_tile_keys = c.tiled_tile_keys;
  d.tiled_f16_math = c.tiled_f16_math;
  d.tiled_double_buffer = c.tiled_double_buffer;
  d.coopmat_prefill = c.coopmat_prefill;
  d.coopmat_min_rows = c.coopmat_min_rows;
  d.coopmat_subgroups = c.coopmat_subgroups;
  d.coopmat_tile_keys = c.coopmat_tile_keys;
  d.coopmat_why = row->coopmat_why;
  d.decode_default = c.decode_default;
  d.decode_wg = c.decode_wg == kSubgroup ? sg : c.decode_wg;
  d.decode_keys_per_group = c.decode_keys_per_group;
  d.decode_lane_vec4 = c.decode_lane_vec4;
  d.decode_row_splits = c.decode_row_splits;
  d.decode_max_tiles = c.decode_max_tiles;
  d.decode_wide_rows = c.decode_wide_rows;
  d.decode_touch_ahead = c.decode_touch_ahead;
  d.decode_why = row->decode_why;
  d.invariant_split_keys = c.invariant_split_keys;
  d.why = row->why;
  return d;
}

namespace {

// Whether this build and device can run coopmat, and when the table picks it.
std::string coopmat_state(const Device& device, const AttentionDefaults& d) {
  const CoopmatSupport& cm = device.caps().coopmat;
  if (!coopmat_built()) return "not built (-DVKATTN_COOPMAT=ON)";
  if (!cm.usable()) return "unavailable: " + cm.missing();
  return "f16 shapes " + describe_shapes(cm.f16_shapes) + ", " +
         (d.coopmat_prefill
              ? "the default for tiles of more than " + std::to_string(d.coopmat_min_rows) + " rows"
              : std::string("forced only"));
}

}  // namespace

std::string describe_attention_defaults(const Device& device) {
  const AttentionDefaults d = attention_defaults(device);
  std::ostringstream o;
  o << "device row: " << d.row << (*d.source ? ", " : "") << d.source << "\n"
    << "  default family: " << (d.family == AttentionFamily::kTiled ? "tiled" : "lanes") << "\n"
    << "  lanes (VKATTN_ATTN_KERNEL=lanes): workgroup " << d.lanes_wg << ", at most "
    << d.lanes_max_rows << " rows per lane, decode merge "
    << (d.lanes_decode_merge ? "in shared memory" : "by the combine pass") << ", items "
    << (d.static_chunks ? "balanced over " + std::to_string(d.static_chunks) + " thread chunks"
                        : std::string("heaviest first"))
    << ", " << d.target_items << " items per dispatch wanted\n"
    << "  tiled (VKATTN_ATTN_KERNEL=tiled): workgroup " << d.tiled_wg << ", "
    << d.tiled_lanes_per_row << " lanes per row, " << d.tiled_tile_keys
    << " keys per tile (halved until a tile fits " << device.caps().max_shared_memory
    << " bytes of shared memory), row sums by "
    << (device.caps().subgroup_shuffle
            ? "subgroup shuffles where whole subgroups fit, else shared memory"
            : "shared memory")
    << "\n"
    << "  decode (VKATTN_ATTN_KERNEL=decode): "
    << (d.decode_default ? "the default for calls of at most 8 query tokens per sequence"
                         : "forced only")
    << "; workgroup " << d.decode_wg << ", " << d.decode_keys_per_group
    << " keys per key group and tile, " << d.decode_lane_vec4
    << " vec4 of q and accumulators per lane"
    << (d.decode_wide_rows ? " (rows wider than that: up to 16 row splits, 256 lanes, one tile)"
                           : "")
    << (d.decode_touch_ahead ? ", top-k rows touched " + std::to_string(d.decode_touch_ahead) +
                                   " tile(s) ahead of the loads"
                             : std::string())
    << ", splits for " << d.target_items << " workgroups (compute units: "
    << (device.caps().compute_units ? std::to_string(device.caps().compute_units)
                                    : std::string("unknown"))
    << "); " << d.decode_why << "\n"
    << "  coopmat (VKATTN_ATTN_KERNEL=coopmat): " << coopmat_state(device, d) << "; "
    << d.coopmat_subgroups << " subgroups, " << d.coopmat_tile_keys << " keys per tile; "
    << d.coopmat_why << "\n"
    << "  why: " << d.why << "\n";
  return o.str();
}

}  // namespace vkattn

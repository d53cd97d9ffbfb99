#include "ops/attention/devices.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/device.h"
#include "core/host.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

constexpr uint32_t kNvidia = 0x10DE, kAmd = 0x1002, kIntel = 0x8086, kArm = 0x13B5,
                   kQualcomm = 0x5143, kApple = 0x106B;

}  // namespace

AttentionDefaults attention_defaults(const Device& device) {
  return attention_defaults(device.info(), device.caps());
}

AttentionDefaults attention_defaults(const vkattn_device_info& info, const DeviceCaps& caps) {
  const uint32_t sg = caps.subgroup_size ? caps.subgroup_size : 32;
  AttentionDefaults d{};
  // GPUs: tiled. Measured on an H100 (580.159.04, docs/guide/devices-tested.md): every test passes
  // with tiled; lanes' register arrays (R rows x head dim of q and the
  // accumulator per lane) spill and kept NVIDIA's shader compiler busy for
  // minutes at R = 4, d 128, so lanes, a fallback there, takes one row.
  d.family = AttentionFamily::kTiled;
  d.lanes_max_rows = 1;
  d.lanes_wg = std::clamp<uint32_t>(sg, 8, 64);
  d.lanes_decode_merge = true;
  d.static_chunks = 0;
  // About 2 workgroups per compute unit where the driver reports them (an
  // H100 has 132 SMs), else 256.
  d.target_items = caps.compute_units ? 2 * caps.compute_units : busy_workgroups(false);
  // tiled, every GPU (measured on NVIDIA only): 4 lanes per head-dim split and 128
  // lanes per workgroup, as ggml-vulkan's scalar flash attention; 32 keys
  // per tile (ggml: 64 keys of f16; ours are staged as f32).
  d.tiled_lanes_per_row = 4;
  d.tiled_wg = 128;
  // At most 32 floats of q and accumulator per lane and row: d 64 keeps 4
  // lanes per row and 128 lanes, d 128 takes 8 and 256, d 256 16 and 512
  // (64 rows a workgroup throughout). At 4 lanes per row d 128 needed 232
  // GPRs on NAK (8 warps/SM) and d 256 spilled 129-678 VGPRs on RDNA2
  // (tools/gpu/static_sweep.sh, Mesa 26.1, 2026-11-27).
  d.tiled_row_floats = 32;
  d.tiled_tile_keys = 32;
  // f16 arithmetic: off until a GPU measures it faster (nothing has yet).
  d.tiled_f16_math = false;
  // Double-buffered tiles: likewise unmeasured, off.
  d.tiled_double_buffer = false;
  // coopmat: off unless the vendor row below knows the driver good; 4
  // subgroups of 16 rows and 32 keys per tile (ggml-vulkan's coopmat flash
  // attention: 16-row blocks, 32-64 keys), shrunk to fit shared memory.
  d.coopmat_prefill = false;
  d.coopmat_min_rows = 8;
  d.coopmat_subgroups = 4;
  d.coopmat_tile_keys = 32;
  d.coopmat_why = "no known-good cooperative-matrix driver for this row: forced only";
  // decode, every GPU (unmeasured: reasoned from FlashInfer's decode and
  // the budget in families/decode.cpp): 128 lanes, 2 keys per key group
  // and tile (16 keys at d 128 f16), 32 vec4 of q and accumulators per
  // lane (8 rows at d 128), K/V read at most twice per GQA group.
  // Mixed steps (decodes and a prefill chunk in one call) run their
  // decodes here and the chunk on the prefill family, in the same call
  // (ops/attention/record.cpp, issue G).
  d.decode_default = true;
  d.decode_wg = 128;
  d.decode_keys_per_group = 2;
  // 16 vec4 of q and accumulators per lane (4 rows at d 128), and a tile's
  // rows split over 2 sets of lanes, so a GQA-8 decode at d 128 is one tile
  // (K/V read once from memory, twice from L1) at 4 rows a lane: at 32
  // vec4 and 8 rows a lane it took 252 VGPRs on RDNA3 (3 waves/SIMD) and
  // 232 GPRs on NAK (8 warps/SM) (tools/gpu/static_sweep.sh, Mesa 26.1,
  // 2026-11-27).
  d.decode_lane_vec4 = 8;
  d.decode_row_splits = 4;
  d.decode_max_tiles = 2;
  // Batch invariance: splits of 256 keys (a decode over 4096 keys and 8 kv
  // heads: 128 workgroups; unmeasured).
  d.invariant_split_keys = 256;
  d.decode_why =
      "GPUs: decode-shaped calls (at most 8 query tokens per sequence) read K/V once per GQA "
      "group with 16-byte loads and a tile in flight (unmeasured: the next GPU run decides)";
  const std::string driver = info.driver_name;

  if (info.device_type == VKATTN_DEVICE_CPU) {
    d.row = "CPU device (lavapipe / llvmpipe)";
    d.family = AttentionFamily::kLanes;
    d.lanes_max_rows = 32;
    d.lanes_wg = 8;
    d.lanes_decode_merge = false;
    d.static_chunks = cpu_device_threads();
    d.target_items = caps.compute_units ? 2 * caps.compute_units : busy_workgroups(true);
    d.tiled_lanes_per_row = 8;
    d.tiled_wg = 32;
    d.tiled_row_floats = 0;  // (forced only on a CPU: the tests' shapes)
    d.tiled_tile_keys = 16;
    d.coopmat_subgroups = 1;
    d.coopmat_tile_keys = 16;
    d.decode_default = false;
    d.decode_wg = sg;  // one subgroup
    // Batch invariance on lavapipe (lanes' decode mode splits each item over
    // its 8 lanes anyway): splits of 2048 keys cost nothing measurable
    // against the default (decode-1x4096 4.9 vs 4.8 ms, decode-16x2048 44.3
    // vs 43.7, decode-1x32768 41.8 vs 41.5); 256 cost 1.5x.
    d.invariant_split_keys = 2048;
    d.decode_keys_per_group = 8;
    d.decode_lane_vec4 = 32;
    d.decode_row_splits = 1;
    // decode measured on lavapipe (vkattn-bench --reps 5, 2026-11-25):
    // lanes / decode ms: decode-1x4096 7.3 / 6.6, decode-16x512 20.4 / 14.2,
    // decode-16x2048 44.6 / 54.1, decode-1x32768 47.7 / 105.7,
    // decode-8x32768-paged 365 / 694, gptoss-decode 39.6 / 124.8: lanes
    // stays (docs/guide/benchmark.md).
    d.decode_why =
        "forced only on a CPU: slower than lanes on most decode cases (decode-16x2048 54 vs "
        "45 ms, decode-1x32768 106 vs 48 ms; docs/guide/benchmark.md); VKATTN_ATTN_KERNEL=decode "
        "for tests";
    d.coopmat_why =
        "never by default on a CPU: lavapipe 26.1's 8x8x8 matrices are scalar code "
        "(docs/guide/testing.md); forced with VKATTN_ATTN_KERNEL=coopmat for tests";
    d.why =
        "lanes, one 8-lane subgroup per workgroup: lanes never talk, because on lavapipe a "
        "barrier or shared-memory staging costs more than it saves (LAVAPIPE.md; tiled measured "
        "26-57x slower here); decode lanes write partials (shared-memory merge 40 ms vs 26 ms, "
        "decode-16x512); items balanced over the thread pool's contiguous chunks (lp_cs_tpool)";
    return d;
  }
  switch (info.vendor_id) {
    case kNvidia:
      d.row =
          "NVIDIA (0x10DE), measured: H100 and H200 (driver 580.159.04, 2026-11-23/27); static: "
          "GA102 NAK (Mesa 26.1, 2026-11-27)";
      d.why =
          "32-lane warps: lanes workgroup of one warp; tiled 128 lanes (4 warps, as "
          "FlashAttention-2's forward and ggml's scalar path), 4 lanes per row; 48 KiB of shared "
          "memory under Vulkan bounds the tile";
      // Not the default: on an H100 (driver 580.159.04, 2026-11-23) the
      // coopmat family's answers were wrong (docs/guide/devices-tested.md):
      // Q K^T read from shared memory lost head-dim elements, and O loaded
      // back as an accumulator came out 0. lavapipe 26.1 passes the same
      // grids. Turing (0x1E00-0x21FF) also miscompiled ggml-vulkan's coopmat
      // attention.
      d.coopmat_why =
          "NVIDIA: wrong answers measured on H100 (driver 580.159.04: Q K^T from shared memory "
          "lost head-dim elements, O reloaded as an accumulator read 0); forced only, until a "
          "kernel passes the tests there";
      break;
    case kAmd:
      d.row = "AMD (0x1002), static: navi21/navi31/gfx1201 ACO (Mesa 26.1, 2026-11-27)";
      d.why =
          "64-lane waves (RDNA may run 32): lanes workgroup of one wave; tiled 128 lanes, 4 per "
          "row; 64 KiB of LDS per workgroup";
      // RADV offers VK_KHR_cooperative_matrix on RDNA3 (GFX11) and newer
      // only; other AMD drivers advertise it on older chips and emulate it.
      if (driver == "radv") {
        d.coopmat_prefill = true;
        d.coopmat_why = "RADV: cooperative matrices on RDNA3+ WMMA for prefill (unmeasured here)";
      } else {
        d.coopmat_why =
            "AMD drivers other than RADV advertise cooperative matrices on pre-RDNA3 chips and "
            "emulate them: forced only";
      }
      break;
    case kIntel:
      d.row = "Intel (0x8086), unmeasured";
      d.why =
          "SIMD8-32 subgroups: lanes workgroup of one subgroup; tiled 128 lanes, 4 per row, 16 "
          "keys per tile (64 KiB SLM shared by more threads)";
      d.tiled_tile_keys = 16;
      d.coopmat_subgroups = 2;
      // ANV offers VK_KHR_cooperative_matrix on XMX hardware (Arc, Xe2).
      if (driver == "Intel open-source Mesa driver") {
        d.coopmat_prefill = true;
        d.coopmat_why = "ANV: XMX matrix engines (Arc, Xe2) for prefill (unmeasured here)";
      }
      break;
    case kArm:
    case kQualcomm:
      d.row = info.vendor_id == kArm
                  ? "Arm Mali (0x13B5), unmeasured"
                  : "Qualcomm Adreno (0x5143), static: Adreno 740/660 ir3 (Mesa 26.1, "
                    "2026-11-27)";
      d.why =
          "mobile GPUs: 16-128 lane subgroups, 32 KiB of shared memory and few registers: tiled "
          "64 lanes, 4 per row, 16 keys per tile";
      d.tiled_wg = 64;
      d.tiled_tile_keys = 16;
      d.decode_wg = 64;
      d.decode_lane_vec4 = 16;
      // Adreno 6xx: ir3 keeps 32 registers a fiber there (48 on the 740):
      // 32 floats of a row a lane spilled 27-41 values to private memory
      // at d 128-256 (fake Adreno 660), 16 (twice the lanes) none.
      if (info.vendor_id == kQualcomm && std::strstr(info.name, "Adreno (TM) 6"))
        d.tiled_row_floats = 16;
      d.coopmat_why =
          info.vendor_id == kQualcomm
              ? "Adreno's cooperative matrices gave wrong results with masks (ggml-vulkan "
                "reports): forced only"
              : "unmeasured mobile cooperative matrices: forced only";
      break;
    case kApple:
      d.row = "Apple via MoltenVK (0x106B), unmeasured";
      d.why =
          "32-lane SIMD groups, 32 KiB of threadgroup memory: tiled 128 lanes, 4 per row, 16 keys "
          "per tile";
      d.tiled_tile_keys = 16;
      break;
    default:
      d.row =
          "other GPU (Apple M1 on Honeykrisp among them), static: M1 AGX (Mesa 26.1, 2026-11-27)";
      d.why = "no vendor row: the tiled family with the GPU defaults";
      // Honeykrisp (Apple AGX): at most 255 16-bit register halves a lane.
      // 32 floats of q and accumulators a row spilled 18-39 registers at
      // d 64-256 (AGX's compiler, fake M1); 16 (twice the lanes per row:
      // d 128 takes 16) spill none: 215-231 halves, 448 threads a core.
      if (driver == "Honeykrisp") {
        d.tiled_row_floats = 16;
        d.why =
            "no vendor row: the tiled family with the GPU defaults; Honeykrisp (AGX): 16 floats "
            "of a row a lane (static: M1, no spills)";
      }
      break;
  }
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
  o << "device row: " << d.row << "\n"
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
    << " vec4 of q and accumulators per lane, splits for " << d.target_items
    << " workgroups (compute units: "
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

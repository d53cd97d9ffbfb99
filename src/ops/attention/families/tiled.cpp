// The `tiled` attention family: shaders/attention_tiled.comp (subgroup
// shuffles) and attention_tiled_smem.comp (shared-memory sums), body in
// shaders/include/attention_tiled.glsl. L lanes share a row (each holds 1/L
// of its head dims), R rows per group of L lanes, K/V tiles of BC keys
// staged in shared memory by the whole workgroup. Shaped for GPUs (q and
// accumulators spread over lanes, coalesced tile loads); forced with
// VKATTN_ATTN_KERNEL=tiled and tested on lavapipe. The GPU rows' prefill
// family where coopmat is not picked.
//
// Budget (GPU rows of ops/attention/devices.cpp; reasoned from
// FlashAttention-2's forward and ggml-vulkan's scalar path, checked by the
// fake GPUs' compilers, tools/gpu/static_sweep.sh, Mesa 26.1, 2026-11-27):
//   prefill, f16 K/V, 64 rows a workgroup, BC 32 keys a tile (16 where 48
//   KiB of shared memory cannot hold 32 at d 256), consumed in chunks of
//   BCH 4 keys.
//   - registers per lane: q and accumulators of R 2 rows at most 32 floats
//     a row (L = (d + dv) / 32 lanes a row: 4 at d 64, 8 at d 128, 16 at
//     d 256), scores of R x BCH = 8 pairs: measured 128 GPRs on Ampere NAK
//     at d 64-256 (no spill; 16 warps/SM: two 256-lane workgroups), 128-192
//     VGPRs and no spill on RDNA2 ACO (2-4 waves/SIMD), 48 vec4 registers
//     and no private memory on Adreno 740, 18-42 spills on Apple AGX (255
//     halves). Before (4 lanes a row, the whole tile's R x BC scores live):
//     255 GPRs and 358-384 spills on NAK, 188-678 VGPRs spilled on RDNA2,
//     260-406 private stores on ir3, 311-528 spills on AGX.
//   - workgroups: 128 lanes at d 64, 256 at d 128-256 (64 rows at d <= 128;
//     32 at d 256, where 512 lanes would cap a lane at 128 registers).
//   - FMAs per shared byte: each 16-byte K or V texel read from shared
//     memory serves R = 2 rows: 0.5 FMA per byte, the scalar path's limit
//     (coopmat is the answer to it).
//   - loads in flight: the tile's BC x (d + dv) / 4 vec4 over WG lanes, 8
//     per lane at d 128 (DBUF = 1 keeps the next tile's in registers).
#include <algorithm>

#include "core/loop_budget.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

const KernelLayout kTiledLayout{"attention_tiled", fwd_bindings(), sizeof(FwdPush)};
const KernelLayout kTiledSmemLayout{"attention_tiled_smem", fwd_bindings(), sizeof(FwdPush)};
const KernelLayout kTiledF16Layout{"attention_tiled_f16", fwd_bindings(), sizeof(FwdPush)};
const KernelLayout kTiledSmemF16Layout{"attention_tiled_smem_f16", fwd_bindings(), sizeof(FwdPush)};

// attention_tiled.glsl's specialization constants, in constant_id order.
struct TiledSpec {
  FwdSpecHead head;         // 0-11, shape = R: rows per row group
  uint32_t lanes_per_row;   // 12 L
  uint32_t double_buffer;   // 13 DBUF
  uint32_t user_rows;       // 14 UEV (FwdConfig::user_rows)
  uint32_t user_head_free;  // 15 UHF (FwdConfig::user_head_free)
};
static_assert(sizeof(TiledSpec) == 16 * 4, "attention_tiled.glsl has 16 constants");

std::string tiled_declines(const DeviceCaps& caps, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const uint32_t L = v.lanes_per_row;
  if (L == 0 || (L & (L - 1)) != 0 || v.wg % L != 0)
    return "lanes per row " + std::to_string(L) + " must be a power of two dividing the workgroup";
  if (std::string why = exceeds_workgroup(caps, v.wg); !why.empty()) return why;
  if (v.subgroup_ops && !caps.subgroup_shuffle) return "the device has no subgroup shuffles";
  if (v.f16_math && !caps.shader_float16) return "f16 arithmetic needs shaderFloat16";
  if (v.subgroup_ops &&
      (caps.subgroup_size == 0 || caps.subgroup_size % L != 0 || v.wg % caps.subgroup_size != 0))
    return "subgroup sums need L | subgroup size | workgroup";
  return exceeds_shared_memory(caps, kTiledFamily.shared_bytes(cfg));
}

// sh_k + sh_v (a vec4 per 4 elements of each key of a tile: f32, or f16
// with f16 arithmetic), plus the partial sums without subgroup ops.
uint64_t tiled_shared_bytes(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const uint64_t d4 = (cfg.head_dim + 3) / 4, dv4 = (cfg.head_dim_v + 3) / 4;
  uint64_t bytes = uint64_t(v.tile_keys) * (d4 + dv4) * (v.f16_math ? 8 : 16);
  if (!v.subgroup_ops) bytes += uint64_t(v.wg) * v.rows * v.tile_keys * 4;
  // Attention variants with a mask function: sh_uany, sh_urange and
  // sh_ubits (three slots of a word per row of the workgroup and 32 keys).
  if (cfg.user_mask)
    bytes += (5 + 3 * uint64_t(v.wg / std::max<uint32_t>(v.lanes_per_row, 1)) * v.rows *
                      ((v.tile_keys + 31) / 32)) *
             4;
  return bytes;
}

const Pipeline& tiled_pipeline(Pipelines& pipes, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const TiledSpec spec{fwd_spec_head(cfg, v.rows, v.tile_keys), v.lanes_per_row,
                       v.double_buffer ? 1u : 0u, cfg.user_rows, cfg.user_head_free ? 1u : 0u};
  const KernelLayout& layout = v.f16_math ? (v.subgroup_ops ? kTiledF16Layout : kTiledSmemF16Layout)
                                          : (v.subgroup_ops ? kTiledLayout : kTiledSmemLayout);
  return pipes.get(layout, spec_words(spec), tiled_shared_bytes(cfg), cfg.user);
}

}  // namespace

const AttentionFamilyDesc kTiledFamily{AttentionFamily::kTiled, "tiled", tiled_declines,
                                       tiled_shared_bytes, tiled_pipeline};

uint32_t tiled_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                        bool mask_scans) {
  // Loops of one invocation of attention_tiled.glsl (each costs its
  // iterations + 1): per tile of BC keys, the tile loop's own iteration and
  // the two cooperative load loops (BC * D4 and BC * DV4 vec4 over WG
  // lanes). Everything else is unrolled.
  const uint64_t d4 = (head_dim + 3) / 4, dv4 = (head_dim_v + 3) / 4, bc = v.tile_keys;
  // (The tile's chunks of BCH keys are unrolled too; counted as if the
  // compiler kept that loop rolled, a guard.)
  const uint64_t bch = bc % 4 == 0 ? 4 : bc;
  // A variant's mask function adds the loop one pass (loop_cost(1)) and,
  // with mask_scans, the range scans from both ends: a lane tests every
  // WG-th tile (at most tiles / WG + 2 of them over both scans), each an
  // iteration of its scan plus the loop over the workgroup's rows.
  const uint64_t per_tile = 1 + loop_cost((bc * d4 + v.wg - 1) / v.wg) +
                            loop_cost((bc * dv4 + v.wg - 1) / v.wg) + loop_cost(bc / bch);
  const uint64_t fixed = loop_cost(1);
  if (!mask_scans)
    return static_cast<uint32_t>(
        std::min<uint64_t>((kLoopUsable - fixed) / per_tile * bc, 1u << 30));
  const uint64_t wg = std::max<uint32_t>(v.wg, 1);
  const uint64_t wrows = wg / std::max<uint32_t>(v.lanes_per_row, 1) * v.rows;
  const uint64_t scan_tile = 1 + loop_cost(wrows);  // one tested tile
  // tiles * per_tile + (tiles / WG + 2) * scan_tile + fixed + 2 exit tests
  // <= kLoopUsable, in units of 1 / WG.
  const uint64_t fixed_scan = fixed + 2 * loop_cost(0) + 2 * scan_tile;
  if (fixed_scan >= kLoopUsable) return static_cast<uint32_t>(bc);
  const uint64_t tiles = (kLoopUsable - fixed_scan) * wg / (per_tile * wg + scan_tile);
  return static_cast<uint32_t>(std::min<uint64_t>(std::max<uint64_t>(tiles, 1) * bc, 1u << 30));
}

}  // namespace vkattn

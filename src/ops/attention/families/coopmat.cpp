// The `coopmat` attention family: shaders/attention_coopmat.comp. Q K^T and
// P V as cooperative-matrix products (VK_KHR_cooperative_matrix: tensor
// cores), NSG subgroups per workgroup each owning TM rows, K/V tiles of BC
// keys staged in shared memory as f16 a chunk of head-dim columns at a
// time (all of them unless MLA-sized dims need chunks), softmax in f32,
// O in accumulators or registers (OREG) or, where a lane's share would be too large
// (MLA's dv 512) or V needs chunks, in shared memory. Built only with
// -DVKATTN_COOPMAT=ON; the matrix shape comes from the device
// (core/coopmat.h); f16 K/V only (other dtypes decline, and the variant
// chooser hands them to `tiled`, logged).
//
// Budget, for the 16x16x16 shape, d = dv = 128, f16 K/V, NVIDIA's table
// row (NSG 4, BC 64, q's fragments in registers, O in accumulators),
// reasoned from FlashAttention-2 (kBlockN 64, Q and O in registers) and
// ggml-vulkan's cm1 (Bc 64), then checked on Mesa 26.1's compilers
// (tools/gpu/static_sweep.sh, 2026-11-28):
//   - shared memory (coopmat_shared_bytes): q staged once through the K/V
//     tile (sh_q 16 bytes), one tile for K and then V (64 x 136 f16,
//     17 KiB), scores (64 x 68 f32 + a vec4 a row, 17 KiB; the alpha
//     block and the final output pass through them), P (64 x 72 f16,
//     9 KiB), m, l, alpha: 44848 bytes, within NVIDIA's 48 KiB (q in
//     shared memory at BC 64 would need 60 KiB). GA10x's 100 KiB holds 2
//     workgroups (8 warps/SM), an H100's 228 KiB 5 (registers allow 2).
//   - registers per lane: O's 8 accumulators of 16 x 16 (64 floats on 32
//     lanes), q's 8 A fragments (32), one S accumulator at a time (8), and
//     the loads a tile ahead, K and V 16 f16vec4 each (64): NAK 248 GPRs,
//     no spill to memory, no local memory -> 8 warps/SM on GA102 (the
//     target; 160 GPRs at BC 32 with O in scalar registers).
//   - loads in flight per lane: the next tile's K (issued right after this
//     tile's is staged, under Q K^T, the softmax and P V) and this tile's V
//     (issued when the tile starts, stored after the softmax): 32 16-byte
//     loads a lane, 64 KiB a workgroup of 128 lanes; each K/V byte read
//     serves 64 query rows.
//   - per tile: 4 workgroup and 2 subgroup barriers (O in scalar
//     registers added 2 subgroup barriers for each of 8 P V blocks); the
//     softmax on 2 lanes a row (32 keys each, max and sum by one shuffle).
//   - matrix work per shared byte: a subgroup's tile is 2 x 16 x 64 x 128
//     MACs (262 K) over K's and V's B fragments (16 KiB each) and P's A
//     fragments (2 KiB): about 7.5 MACs per byte read (6 at BC 32 with q
//     read from shared memory); more rows a subgroup (FA2's 32 a warp,
//     two row blocks sharing each B fragment) is the next step.
// MLA (d 576 / dv 512) on NVIDIA: O's 16 x 512 would be 256 floats a
// lane, so the 4 subgroups share 16 rows (COLS, FlashMLA's split of dv
// over warpgroups): each computes a partial S over every 4th 16-column
// step of the head dim (the softmax sums the four), and owns 128 of O's
// columns in accumulators (64 floats a lane). Shared memory: q 16 x 584
// f16 (18.7 KiB), the K/V tile 16 keys x 584 (18.7 KiB), 4 partial score
// blocks (5 KiB), P: 43488 bytes with the head dims whole, so K and V
// load a tile ahead (18 + 16 f16vec4 a lane). NAK: 224 GPRs, no spill,
// 8 warps/SM (was 1 subgroup with O in shared memory: 2). Each K/V byte
// serves only 16 rows (a workgroup of 64 would need O's 64 x 512 in
// registers: 4 x more); per tile one more workgroup barrier (the
// partials), the softmax on 8 lanes a row, 4 rows a subgroup.
// RADV's row keeps 32-key tiles: at 64, navi31's LDS went from 41 to
// 44 KiB a workgroup (3 -> 2 waves/SIMD); at 32 q stays in shared memory
// (its staging needs BC >= the 64 rows), O in accumulators: 41248 bytes,
// 256 VGPRs, no spill, 3 waves/SIMD at d 128, 4 at d 64, 2 at d 256.
#include <algorithm>

#include "core/pipeline.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

const KernelLayout kCoopmatLayout{"attention_coopmat", fwd_bindings(), sizeof(FwdPush),
                                  /*full_subgroups=*/true};

// attention_coopmat.comp's specialization constants, in constant_id order.
struct CoopmatSpec {
  FwdSpecHead head;     // 0-11, shape = NSG: subgroups
  uint32_t tm, tn, tk;  // 12-14 TM, TN, TK
  uint32_t dc, dvc;     // 15-16 DC, DVC: head-dim columns staged at a time
  uint32_t sg, oreg;    // 17-18 SG: the required subgroup size; OREG: O in registers
  uint32_t lpr;         // 19 LPR: lanes a row takes in the softmax
  uint32_t qreg;        // 20 QREG: q's fragments in registers
  uint32_t cols;        // 21 COLS: subgroups split the head dim and O's columns of one row block
  uint32_t uhf;         // 22 UHF: the mask function reads no head (FwdConfig::user_head_free)
};
static_assert(sizeof(CoopmatSpec) == 23 * 4, "attention_coopmat.comp has 23 constants");

uint32_t round_up(uint32_t x, uint32_t m) {
  return (x + m - 1) / m * m;
}

// The head dims padded to the matrix shape (DP, DVP) and the columns of
// each staged at a time (DC, DVC; the variant's chunks, 0 = all).
struct CoopmatDims {
  uint32_t dp, dvp, dc, dvc;
};

CoopmatDims coopmat_dims(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  CoopmatDims d{};
  d.dp = round_up(cfg.head_dim, std::max<uint32_t>(v.coopmat_k, 1));
  d.dvp = round_up(cfg.head_dim_v, std::max<uint32_t>(v.coopmat_n, 1));
  d.dc = v.head_chunk == 0 ? d.dp : std::min(v.head_chunk, d.dp);
  d.dvc = v.head_chunk_v == 0 ? d.dvp : std::min(v.head_chunk_v, d.dvp);
  return d;
}

std::string coopmat_declines(const DeviceCaps& caps, const FwdConfig& cfg) {
  if (!coopmat_built()) return "vkattn was built without -DVKATTN_COOPMAT=ON";
  if (!caps.coopmat.usable()) return caps.coopmat.missing();
  // K/V tiles are f16: f16 caches, and 8-bit ones dequantized into them.
  if (cfg.kv_dtype == VKATTN_BF16 || cfg.kv_dtype == VKATTN_F32)
    return std::string("no ") + (cfg.kv_dtype == VKATTN_BF16 ? "bf16" : "f32") +
           " matrix type for K/V (f16 only)";
  const AttentionVariant& v = cfg.var;
  const CoopmatShape s{v.coopmat_m, v.coopmat_n, v.coopmat_k};
  bool offered = false;
  for (const CoopmatShape& o : caps.coopmat.f16_shapes)
    offered |= o.m == s.m && o.n == s.n && o.k == s.k;
  if (!offered) return "the device offers no " + describe_shapes({s}) + " f16 shape";
  if (s.m == 0 || s.k % 8 != 0 || s.n % 8 != 0)
    return "matrix shape " + describe_shapes({s}) + " (N and K must be multiples of 8)";
  if (v.tile_keys == 0 || v.tile_keys % s.n != 0 || v.tile_keys % s.k != 0)
    return "tile of " + std::to_string(v.tile_keys) + " keys is not a multiple of N and K";
  const CoopmatDims d = coopmat_dims(cfg);
  if (d.dc % s.k != 0 || d.dvc % s.n != 0)
    return "head-dim chunks " + std::to_string(d.dc) + "/" + std::to_string(d.dvc) +
           " are not multiples of K/N";
  if (caps.subgroup_size == 0 || v.wg != v.subgroups * caps.subgroup_size)
    return "the workgroup must be whole subgroups";
  // The softmax's row max and sum: shuffles among a row's lanes, every
  // row of the subgroup's within one pass or several.
  if (!caps.subgroup_shuffle) return "the device has no subgroup shuffles";
  const uint32_t lpr = v.softmax_lanes, sg = caps.subgroup_size;
  if (lpr == 0 || (lpr & (lpr - 1)) != 0 || lpr > sg || sg / lpr > s.m || s.m % (sg / lpr) != 0)
    return "softmax lanes " + std::to_string(lpr) + " a row: a power of two from " +
           std::to_string(sg > s.m ? sg / s.m : 1) + " to the subgroup's " + std::to_string(sg);
  if (v.tile_keys % lpr != 0)
    return "tile of " + std::to_string(v.tile_keys) + " keys does not split over the " +
           std::to_string(lpr) + " lanes of a row";
  if (v.o_regs > 2 || (v.o_regs != 0 && d.dvc != d.dvp))
    return "O in " + std::string(v.o_regs == 1 ? "registers" : "accumulators") +
           " needs one chunk of V's columns (or O mode " + std::to_string(v.o_regs) + ")";
  if (v.o_regs == 1 && s.m * s.n % sg != 0)
    return "O in registers needs a matrix block that splits over the subgroup";
  if (v.col_split &&
      (v.o_regs != 2 || v.q_regs || s.m % v.subgroups != 0 || (d.dvp / s.n) % v.subgroups != 0 ||
       (sg / lpr) > s.m / v.subgroups || (s.m / v.subgroups) % (sg / lpr) != 0))
    return "subgroups splitting columns (" + std::to_string(v.subgroups) +
           ") need O in accumulators, q in shared memory, rows and O's column blocks that split "
           "over them, and softmax lanes covering a subgroup's rows";
  if (v.q_regs && (d.dc != d.dp || d.dvc != d.dvp ||
                   !coopmat_q_staging_fits(v.subgroups * s.m, v.tile_keys, d.dc, d.dvc)))
    return "q in registers needs one chunk of q's and of V's columns, q staged through the K/V "
           "tile (" +
           std::to_string(v.subgroups * s.m) + " rows, " + std::to_string(v.tile_keys) + " keys)";
  if (std::string why = exceeds_workgroup(caps, v.wg); !why.empty()) return why;
  return exceeds_shared_memory(caps, kCoopmatFamily.shared_bytes(cfg));
}

// attention_coopmat.comp's shared arrays: a chunk of q and one tile for a
// chunk of K's columns and then of V's (f16), scores (f32; the P V blocks
// pass through them too), P (f16), O (f32, all DVP columns) unless O is in registers,
// m, l, alpha per row, a seen bit per key, and a mask function's range.
uint64_t coopmat_shared_bytes(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const CoopmatDims d = coopmat_dims(cfg);
  // Rows of q, P, O, m, l (COLS: one block shared by the subgroups) and
  // of the scores (each subgroup's TM).
  const uint64_t srows = uint64_t(v.subgroups) * v.coopmat_m, bc = v.tile_keys;
  const uint64_t rows = v.col_split ? v.coopmat_m : srows;
  // Rows of 4-vectors padded by 16 bytes (attention_coopmat.comp QS, VS,
  // PS: 2 f16vec4; SS: 1 vec4).
  const uint64_t qs = (d.dc / 4 + 2) * 8, vs = (d.dvc / 4 + 2) * 8, ps = (bc / 4 + 2) * 8;
  // The scalar arrays are rounded up to 16 bytes each, as the shader
  // declares them, so that no packing order puts a matrix array off 16.
  const uint64_t ss = (bc / 4 + 1) * 16, o = v.o_regs != 0 ? 16 : rows * d.dvp * 4;
  const uint64_t q = v.q_regs ? 16 : rows * qs;  // Q_REGS: staged in sh_kv
  const uint64_t rows4 = (rows + 3) / 4 * 4, kw4 = ((bc + 31) / 32 + 3) / 4 * 4;
  // A mask function's range scan (sh_urange: 4 words).
  const uint64_t urange = cfg.user_mask ? 16 : 0;
  // K and V take turns in one tile (sh_kv).
  return q + bc * std::max(qs, vs) + srows * ss + rows * ps + o + rows4 * 12 + kw4 * 4 + urange;
}

const Pipeline& coopmat_pipeline(Pipelines& pipes, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const CoopmatDims d = coopmat_dims(cfg);
  const CoopmatSpec spec{fwd_spec_head(cfg, v.subgroups, v.tile_keys),
                         v.coopmat_m,
                         v.coopmat_n,
                         v.coopmat_k,
                         d.dc,
                         d.dvc,
                         v.lanes_per_row,
                         v.o_regs,
                         v.softmax_lanes,
                         v.q_regs ? 1u : 0u,
                         v.col_split ? 1u : 0u,
                         cfg.user_head_free ? 1u : 0u};
  return pipes.get(kCoopmatLayout, spec_words(spec), coopmat_shared_bytes(cfg), cfg.user);
}

}  // namespace

bool coopmat_q_staging_fits(uint32_t rows, uint32_t bc, uint32_t dc, uint32_t dvc) {
  // f16vec4 rows padded by 2 (attention_coopmat.comp QS, VS, KVN).
  const uint64_t qs = dc / 4 + 2, vs = dvc / 4 + 2;
  return uint64_t(rows) * qs <= uint64_t(bc) * std::max(qs, vs);
}

bool coopmat_built() {
  return find_shader(kCoopmatLayout.shader) != nullptr;
}

const AttentionFamilyDesc kCoopmatFamily{AttentionFamily::kCoopmat, "coopmat", coopmat_declines,
                                         coopmat_shared_bytes, coopmat_pipeline};

}  // namespace vkattn

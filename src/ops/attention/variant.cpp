#include "ops/attention/variant.h"

#include <algorithm>

#include "core/device.h"
#include "core/error.h"
#include "core/host.h"
#include "core/kernel_options.h"
#include "core/loop_budget.h"
#include "ops/attention/devices.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {
// Tiles of at most this many rows take tiled's decode shape.
constexpr uint32_t kTiledDecodeRows = 8;
// coopmat: the most floats of O a lane holds in registers by default
// (attention_coopmat.comp OREG; NAK gave d 128 at 64 of them ~120 GPRs).
constexpr uint64_t kCoopmatRegFloats = 64;
// coopmat: the most f16 of q's A fragments a lane holds by default
// (attention_coopmat.comp QREG; NVIDIA's d 128: 16 x 128 over 32 lanes,
// 32 registers).
constexpr uint64_t kCoopmatQRegHalves = 64;
}  // namespace

uint32_t attention_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v) {
  // Loops of one invocation of attention_fwd.comp (each costs its
  // iterations + 1, core/loop_budget.h):
  //   compact variant (UNROLL_D = 0), per row: the q load (D4) and the
  //   accumulator clear (DV4), then the final store (DV4);
  //   the key-block loop: one iteration per block of BK keys;
  //   compact variant, per block: the QK loop (D4 / CK) and PV loop (DV4 / CV);
  //   the decode merge, when on.
  const uint64_t d4 = (head_dim + 3) / 4, dv4 = (head_dim_v + 3) / 4;
  auto chunk = [](uint64_t n4) -> uint64_t { return n4 % 4 == 0 ? 4 : n4 % 2 == 0 ? 2 : 1; };
  uint64_t fixed = 0, per_block = 1;
  if (!v.unroll_d) {
    fixed = uint64_t(v.rows) * (loop_cost(d4) + loop_cost(dv4) + loop_cost(dv4));
    per_block += loop_cost(d4 / chunk(d4)) + loop_cost(dv4 / chunk(dv4));
  }
  // The decode merge: a loop over the lanes and one over DV4.
  if (v.decode_merge) fixed += loop_cost(v.wg) + loop_cost(dv4);
  const uint64_t usable = kLoopUsable - loop_cost(0);  // the key loop's exit test
  if (fixed >= usable) return v.block_keys;
  const uint64_t blocks = std::max<uint64_t>(1, (usable - fixed) / per_block);
  return static_cast<uint32_t>(std::min<uint64_t>(blocks * v.block_keys, 1u << 30));
}

uint32_t attention_max_keys_with_mask_scans(uint32_t max_keys, uint32_t block_keys) {
  // attention_fwd.comp with a variant's mask function scans each lane's
  // range from both ends before the key loop: at most one more iteration
  // per block and two more exit tests, so half the keys, less two blocks.
  return static_cast<uint32_t>(
      std::max<int64_t>(block_keys, int64_t(max_keys / 2) - 2 * int64_t(block_keys)));
}

namespace {

// The tiled family's shape (ops/attention/families/tiled.cpp): lanes per row,
// workgroup and keys per tile from the device table (ops/attention/devices.h),
// 2 rows per group for prefill and 1 for decode-sized tiles, the tile halved
// until it fits shared memory (with a mask function's arrays: user_mask).
void configure_tiled(AttentionVariant& v, const DeviceCaps& caps, const AttentionDefaults& dev,
                     const KernelOptions& forced, uint32_t head_dim, uint32_t head_dim_v,
                     uint32_t max_rows, bool cpu, bool user_mask) {
  using K = KernelOptions;
  v.family = AttentionFamily::kTiled;
  const uint32_t sg = caps.subgroup_size;
  // Decode (every tile has at most kTiledDecodeRows rows: one or a few
  // tokens of a GQA group): one row group holds all of a tile's rows (R,
  // the GQA group as the M dimension) and its lanes split the head dims
  // (L = the subgroup, at most 32), so no lane idles for rows the tile does
  // not have (the prefill shape, 32 row groups, left 28 idle for 4 rows);
  // the key range is split over workgroups (min_split_keys below).
  const bool shape_forced = forced.attn_lanes_per_row != K::kUnset || forced.attn_wg != K::kUnset ||
                            forced.attn_rows != K::kUnset;
  if (!shape_forced && max_rows <= kTiledDecodeRows) {
    v.lanes_per_row = std::clamp<uint32_t>(pow2_at_most(sg ? sg : 32), 4, 32);
    v.wg = std::max<uint32_t>(v.lanes_per_row, std::min<uint32_t>(pow2_at_most(sg ? sg : 32), 64));
    const uint32_t groups = v.wg / v.lanes_per_row;
    v.rows = pow2_at_least((std::max(max_rows, 1u) + groups - 1) / groups);
  } else {
    // Head dims past the row budget: more lanes per row, and a workgroup
    // as many times larger (as many rows, so each tile serves as many).
    uint32_t lanes = dev.tiled_lanes_per_row, wg = dev.tiled_wg;
    if (dev.tiled_row_floats) {
      const uint32_t per = dev.tiled_row_floats;
      const uint32_t want = pow2_at_least((head_dim + head_dim_v + per - 1) / per);
      // Lanes of a row stay in one subgroup (the shuffle sums), at most 64.
      const uint32_t cap = std::min<uint32_t>(64u, sg ? pow2_at_most(sg) : 32u);
      // Workgroups of at most 256 lanes: at 512 a lane gets at most 128
      // registers (NAK: 64K per SM; ACO: the workgroup on one CU), and
      // d 256 spilled there; past 256 the rows per workgroup shrink.
      const uint32_t wg_cap =
          std::min<uint32_t>(std::max<uint32_t>(dev.tiled_wg, 256), caps.max_workgroup_invocations);
      while (lanes < want && lanes * 2 <= std::min(cap, wg)) {
        lanes *= 2;
        if (wg * 2 <= wg_cap) wg *= 2;
      }
    }
    v.lanes_per_row = K::pick(forced.attn_lanes_per_row, lanes);
    v.wg = K::pick(forced.attn_wg, wg);
    const uint32_t groups = std::max<uint32_t>(v.wg / std::max<uint32_t>(v.lanes_per_row, 1), 1);
    // A row still past the budget at the most lanes a subgroup gives it
    // (MLA's d 576 + 512): one row per lane group (AGX spilled 20 values
    // at 2, none at 1).
    const bool over_budget =
        dev.tiled_row_floats && v.lanes_per_row * dev.tiled_row_floats < head_dim + head_dim_v;
    v.rows = K::pick(forced.attn_rows, max_rows <= groups || over_budget ? 1 : 2);
  }
  const uint32_t L = std::max<uint32_t>(v.lanes_per_row, 1);
  // Row sums by subgroup shuffles where a row's L lanes sit in one
  // subgroup and the workgroup is whole subgroups; else in shared memory
  // (a workgroup smaller than NVIDIA's 32-lane warps, say).
  v.subgroup_ops = caps.subgroup_shuffle && !forced.disable_subgroup_ops && sg != 0 &&
                   sg % L == 0 && v.wg % sg == 0;
  // f16 arithmetic needs shaderFloat16; the force switch wins over the
  // device table, the kill switch over both.
  v.f16_math = caps.shader_float16 && !forced.disable_f16_math &&
               (forced.force_f16_math || dev.tiled_f16_math);
  v.double_buffer = K::pick(forced.attn_double_buffer, dev.tiled_double_buffer ? 1 : 0) != 0;
  v.decode_min_keys = 0;  // no decode mode: splits come from target_items
  v.decode_merge = false;
  v.unroll_d = true;
  FwdConfig probe = probe_config(v, head_dim, head_dim_v, VKATTN_F32, user_mask);
  v.tile_keys = K::pick(forced.attn_tile_keys, dev.tiled_tile_keys);
  if (forced.attn_tile_keys == K::kUnset) {
    probe.var.tile_keys = v.tile_keys;
    while (v.tile_keys > 1 && kTiledFamily.shared_bytes(probe) > caps.max_shared_memory)
      probe.var.tile_keys = v.tile_keys /= 2;
  }
  v.block_keys = v.tile_keys;
  if (v.wg < 1 || v.rows < 1 || v.rows > 16 || v.tile_keys < 1 || v.tile_keys > 64 || L > 64)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range for tiled (wg ", v.wg,
         ", rows ", v.rows, ", tile keys ", v.tile_keys, ", lanes per row ", L, ")");
  v.max_keys = std::min(v.max_keys, tiled_max_keys(v, head_dim, head_dim_v));
  // Long key ranges split against short ones (a causal diagonal) while the
  // tiles are fewer than the device runs at once (AttentionVariant).
  v.balance_items = K::pick(forced.attn_balance_items, cpu ? 0u : dev.target_items);
  // Split keys down to 4 tiles a workgroup, so that a decode batch's few
  // tiles still fill a GPU (decode-1x4096: 64 workgroups, not 16).
  if (!cpu) v.min_split_keys = std::min(v.min_split_keys, 4 * v.tile_keys);
  v.min_split_keys = std::min(v.min_split_keys, v.max_keys);
}

// The device's largest f16 matrix shape with N and K multiples of 8
// (16x16x16 where offered); shapes the kernel cannot take rank last.
CoopmatShape best_coopmat_shape(const DeviceCaps& caps) {
  auto rank = [](const CoopmatShape& s) -> uint64_t {
    if (s.m == 0 || s.n % 8 != 0 || s.k % 8 != 0 || s.m > 64 || s.n > 64 || s.k > 64) return 0;
    if (s.m == 16 && s.n == 16 && s.k == 16) return UINT64_MAX;
    return uint64_t(s.m) * s.n * s.k;
  };
  CoopmatShape best{};
  for (const CoopmatShape& s : caps.coopmat.f16_shapes)
    if (rank(s) > rank(best)) best = s;
  return best;
}

// The largest power of two below c that is a multiple of m, else c.
uint32_t narrower_chunk(uint32_t c, uint32_t m) {
  uint32_t p = 1;
  while (p * 2 < c) p *= 2;
  return p >= m && p % m == 0 ? p : c;
}

// Where coopmat keeps O and q (attention_coopmat.comp OREG, QREG), given
// the chunks and tile the fitting below settles on.
struct CoopmatPlacement {
  CoopmatShape best;
  uint32_t sg, dp, dvp;
  uint32_t want_o;  // 0 shared, 1 registers, 2 accumulators (where V is one chunk)
  bool want_q;
  bool size_known;  // the subgroup size is the pipeline's own (OREG 1's layout)
  void apply(AttentionVariant& v) const {
    v.o_regs = v.head_chunk_v != dvp                     ? 0u
               : want_o != 1                             ? want_o
               : size_known && best.m * best.n % sg == 0 ? 1u
                                                         : 0u;
    v.q_regs =
        !v.col_split && want_q && v.head_chunk == dp && v.head_chunk_v == dvp &&
        coopmat_q_staging_fits(v.subgroups * best.m, v.tile_keys, v.head_chunk, v.head_chunk_v);
  }
};

// Where O lives (OREG), where one V chunk holds dv: by default in
// accumulators (2: P V added in place, no round trip through shared
// memory) while a lane's share of the subgroup's TM rows of O stays within
// kCoopmatRegFloats (NVIDIA's d 128: 64 floats; RDNA's wave64 to d 256),
// else in shared memory (0). Registers of a known layout (1: each P V
// block through the subgroup's score rows) need a TM x TN block that
// splits evenly over the lanes and a known subgroup size.
// VKATTN_ATTN_O_REGS=0|1|2 forces one (1 and 2 wherever the layout allows,
// else 0).
// Up to twice kCoopmatRegFloats, O stays in accumulators with q/K staged
// in chunks of half the head dim or less (no loads a tile ahead: their
// registers go to O), so that O in shared memory does not cut the
// workgroup to one subgroup: NVIDIA's d 256 (NAK, GA102: 4 subgroups,
// 128 floats of O a lane, 176 GPRs, no spill, 8 warps/SM; with O in shared
// memory 1 subgroup, 2 warps/SM; with the loads ahead it spilled).
// Past that, where O's share over the subgroups fits the budget (MLA's dv
// 512 on 32 lanes: 256 floats a lane, 64 over 4 subgroups), the subgroups
// share one row block and split its head dim (partial S, summed in the
// softmax) and O's columns (COLS; FlashMLA splits dv over its warpgroups
// the same way): 4 warps where O in shared memory left one.
// VKATTN_ATTN_COL_SPLIT=0|1 forces it off or on (on: wherever the rows and
// O's column blocks split over the subgroups); COLS stages V whole
// (VKATTN_ATTN_HEAD_CHUNK narrowing q/K only: O's accumulators need one V
// chunk).
// q's A fragments in registers (QREG: FlashAttention-2's Q in registers;
// the shared memory it frees lets NVIDIA's 48 KiB hold 64-key tiles at
// d 128) where one chunk holds d and one dv (the shader reads the
// fragments on that path only), its staging fits the K/V tile, and by
// default while a lane's share stays within kCoopmatQRegHalves, counted
// over at most 32 lanes (RDNA3's WMMA repeats A fragments across a
// wave64's halves; navi31's ACO spilled 64-88 VGPRs at d 256 with q's
// fragments held). VKATTN_ATTN_Q_REGS=0|1 forces it off or on (on:
// wherever it fits).
CoopmatPlacement place_coopmat(AttentionVariant& v, const DeviceCaps& caps,
                               const KernelOptions& forced, CoopmatShape best, uint32_t dp,
                               uint32_t dvp) {
  using K = KernelOptions;
  const uint32_t sg = std::max<uint32_t>(caps.subgroup_size, 1);
  const uint32_t mk = std::max<uint32_t>(best.k, 1), mn = std::max<uint32_t>(best.n, 1);
  const uint64_t o_share = uint64_t(best.m) * dvp, o_cap = uint64_t(kCoopmatRegFloats) * sg;
  const bool wide_acc = forced.attn_o_regs == K::kUnset && forced.attn_head_chunk == K::kUnset &&
                        o_share > o_cap && o_share <= 2 * o_cap && narrower_chunk(dp, mk) < dp;
  if (wide_acc) v.head_chunk = narrower_chunk(dp, mk);
  const bool want_cols = forced.attn_col_split != K::kUnset
                             ? forced.attn_col_split != 0
                             : forced.attn_o_regs == K::kUnset && !wide_acc && o_share > o_cap &&
                                   o_share <= o_cap * v.subgroups;
  v.col_split =
      want_cols && v.subgroups > 1 && best.m % v.subgroups == 0 && (dvp / mn) % v.subgroups == 0;
  if (v.col_split) v.head_chunk_v = dvp;
  CoopmatPlacement pl{};
  pl.best = best, pl.sg = sg, pl.dp = dp, pl.dvp = dvp;
  pl.want_o = forced.attn_o_regs != K::kUnset               ? forced.attn_o_regs
              : o_share <= o_cap || wide_acc || v.col_split ? 2u
                                                            : 0u;
  pl.want_q =
      forced.attn_q_regs != K::kUnset
          ? forced.attn_q_regs != 0
          : uint64_t(best.m) * dp <= uint64_t(kCoopmatQRegHalves) * std::min<uint32_t>(sg, 32);
  // (NVK offers 32 only and no control: its size cannot vary.)
  pl.size_known = caps.subgroup_size_control || caps.min_subgroup_size == caps.max_subgroup_size;
  pl.apply(v);
  return pl;
}

// Keys per tile, subgroups and head-dim chunks fitted to shared memory:
// keys per tile halve first (more rows per workgroup read each K/V byte
// for more queries, a shorter tile only costs a barrier per keys), then
// subgroups (not with COLS: fewer would each hold more of O), then the
// chunks staged at a time narrow to powers of two, the larger staged array
// first (MLA's d 576 / dv 512; COLS narrows q/K only); what still does not
// fit, coopmat_declines says.
void fit_coopmat(AttentionVariant& v, const DeviceCaps& caps, const KernelOptions& forced,
                 const CoopmatPlacement& pl, FwdConfig probe) {
  using K = KernelOptions;
  const CoopmatShape best = pl.best;
  const uint32_t step = std::max<uint32_t>({best.n, best.k, 1});
  const uint32_t mk = std::max<uint32_t>(best.k, 1), mn = std::max<uint32_t>(best.n, 1);
  auto fits = [&] {
    probe.var.subgroups = v.subgroups, probe.var.tile_keys = v.tile_keys;
    probe.var.head_chunk = v.head_chunk, probe.var.head_chunk_v = v.head_chunk_v;
    probe.var.o_regs = v.o_regs, probe.var.q_regs = v.q_regs, probe.var.col_split = v.col_split;
    return kCoopmatFamily.shared_bytes(probe) <= caps.max_shared_memory;
  };
  if (forced.attn_tile_keys == K::kUnset)
    while (v.tile_keys > step && v.tile_keys / 2 % step == 0 && !fits())
      v.tile_keys /= 2, pl.apply(v);
  if (forced.attn_subgroups == K::kUnset && !v.col_split)
    while (v.subgroups > 1 && !fits()) v.subgroups /= 2, pl.apply(v);
  if (forced.attn_head_chunk != K::kUnset) return;
  while (!fits()) {
    const uint32_t nd = narrower_chunk(v.head_chunk, mk), nv = narrower_chunk(v.head_chunk_v, mn);
    const uint64_t rows = v.col_split ? best.m : uint64_t(v.subgroups) * best.m;
    const uint64_t staged_qk = (rows + v.tile_keys) * v.head_chunk;
    const uint64_t staged_v = uint64_t(v.tile_keys) * v.head_chunk_v;
    if (nd < v.head_chunk && (staged_qk >= staged_v || nv == v.head_chunk_v || v.col_split))
      v.head_chunk = nd, pl.apply(v);
    else if (nv < v.head_chunk_v && !v.col_split)
      v.head_chunk_v = nv, pl.apply(v);
    else
      break;
  }
}

// The coopmat family's shape (ops/attention/families/coopmat.cpp): the
// device's best matrix shape, subgroups and keys per tile from the device
// table, where O and q live, fitted to shared memory.
void configure_coopmat(AttentionVariant& v, const DeviceCaps& caps, const AttentionDefaults& dev,
                       const KernelOptions& forced, uint32_t head_dim, uint32_t head_dim_v,
                       vkattn_dtype kv_dtype, bool cpu, bool user_mask) {
  using K = KernelOptions;
  v.family = AttentionFamily::kCoopmat;
  const CoopmatShape best = best_coopmat_shape(caps);
  v.coopmat_m = best.m, v.coopmat_n = best.n, v.coopmat_k = best.k;
  const uint32_t sg = std::max<uint32_t>(caps.subgroup_size, 1);
  const uint32_t step = std::max<uint32_t>({best.n, best.k, 1});
  v.subgroups = K::pick(forced.attn_subgroups, dev.coopmat_subgroups);
  v.tile_keys = K::pick(forced.attn_tile_keys, std::max(dev.coopmat_tile_keys, step));
  if (v.subgroups < 1 || v.subgroups > 16 || v.tile_keys < 1 || v.tile_keys > 256)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range for coopmat (",
         v.subgroups, " subgroups, tile keys ", v.tile_keys, ")");
  const uint32_t mk = std::max<uint32_t>(best.k, 1), mn = std::max<uint32_t>(best.n, 1);
  const uint32_t dp = (head_dim + mk - 1) / mk * mk, dvp = (head_dim_v + mn - 1) / mn * mn;
  v.head_chunk = dp, v.head_chunk_v = dvp;
  if (forced.attn_head_chunk != K::kUnset) {
    const uint32_t c = forced.attn_head_chunk;
    if (c == 0 || c % step != 0)
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_HEAD_CHUNK=", c,
           " for coopmat: a multiple of the matrix N and K (", step, ")");
    v.head_chunk = std::min(c, dp), v.head_chunk_v = std::min(c, dvp);
  }
  const CoopmatPlacement pl = place_coopmat(v, caps, forced, best, dp, dvp);
  fit_coopmat(v, caps, forced, pl, probe_config(v, head_dim, head_dim_v, kv_dtype, user_mask));
  v.lanes_per_row = sg;
  // The softmax: every row at once (sg / m lanes a row: 2 on NVIDIA's 32
  // lanes over 16 rows), or more lanes a row over several passes.
  // (COLS: a subgroup's softmax takes m / subgroups rows, sg * subgroups
  // / m lanes each.)
  const uint32_t smr = v.col_split ? best.m / v.subgroups : best.m;
  v.softmax_lanes = K::pick(forced.attn_softmax_lanes, smr > 0 && sg > smr ? sg / smr : 1u);
  v.wg = v.subgroups * sg;
  v.rows = std::max<uint32_t>(best.m, 1);
  v.block_keys = v.tile_keys;
  v.decode_min_keys = 0;  // no decode mode: splits come from target_items
  v.decode_merge = false;
  v.unroll_d = false;
  v.subgroup_ops = false;
  v.f16_math = true;
  v.double_buffer = false;
  // No loop cap to respect: coopmat runs on Mesa 25+ (no 65535-iteration
  // cap) and GPU drivers.
  v.max_keys = 1u << 30;
  if (!cpu) v.min_split_keys = std::min(v.min_split_keys, 4 * v.tile_keys);
  // A prefill whose row tiles fill about 3/4 of the compute units runs
  // unsplit (FlashAttention-2 never splits a prefill's keys; a split adds
  // the combine): the planner splits only below 3/8 of the 2 workgroups a
  // unit it aims at elsewhere (prefill-1k-8h's 128 tiles on 132 SMs).
  if (!cpu && forced.attn_target_items == K::kUnset)
    v.target_items = std::max(1u, dev.target_items * 3 / 8);
  // ... but a causal diagonal's long items are split against its short
  // ones while the tiles are fewer than the device runs at once.
  v.balance_items = K::pick(forced.attn_balance_items, cpu ? 0u : dev.target_items);
}

}  // namespace

namespace {

// The lanes variant of a call (every other family starts from it): rows
// per lane, unrolled head-dim loops, keys per block, the table's and the
// environment's choices, range-checked.
AttentionVariant lanes_variant(const DeviceCaps& caps, const AttentionDefaults& dev, bool cpu,
                               const KernelOptions& forced, uint32_t head_dim, uint32_t head_dim_v,
                               uint32_t max_rows) {
  AttentionVariant v;
  // Lanes are independent (no cross-lane traffic): one subgroup per
  // workgroup (the device table, ops/attention/devices.h).
  v.wg = dev.lanes_wg;
  // Rows per lane: more rows reuse each K/V fetch more, at the cost of
  // registers (q and the accumulator of every row stay in registers) and,
  // on lavapipe, of compile time, which grows steeply with rows x head dim
  // when the head-dim loops are unrolled. Measured on lavapipe (causal
  // 1024 x 1024, 8 heads, d = 128, f16): unrolled R = 8 242 ms (90 s to
  // compile), unrolled R = 4 252 ms (20 s), iterated R = 8 316 ms (10 s).
  uint32_t d4 = (std::max(head_dim, head_dim_v) + 3) / 4;
  v.unroll_d = d4 <= 32;
  v.rows = std::min(v.unroll_d ? (d4 <= 16 ? 8u : 4u) : 8u, dev.lanes_max_rows);
  // Few rows (decode): every lane holds all rows of a tile and the lanes
  // split the keys (decode mode), so R covers the rows of a tile; otherwise
  // do not run lanes that would own no row.
  const bool decode = max_rows <= v.rows;
  if (decode)
    v.rows = pow2_at_least(std::max(max_rows, 1u));
  else
    v.rows = std::min(v.rows, pow2_at_least((max_rows + v.wg - 1) / v.wg));
  // Code-size budget of unrolled head-dim loops: a lane keeps q and the
  // accumulator of its R rows in R x (D4 + DV4) vec4 registers, all live
  // across the unrolled block, and lavapipe's compile time (LLVM's
  // register allocation and coroutine frame over that straight code)
  // grows with about the square of it. Measured cold (a shape's first
  // call, issue E3; d 128 f16, paged): 128 vec4 (R 2 at d 128, R 4 at
  // d 64) compile in 10 s, 256 (R 4 at d 128, R 8 at d 64, the old
  // choice) in 40-60 s, iterated head-dim loops (q and the accumulator in
  // memory) in 1.5-3.5 s. Runtime on lavapipe (vkattn-bench, medians):
  // prefill-1k-8h-causal (d 128) 48 ms at R 4 unrolled, 61 ms at R 2
  // unrolled, 150-168 ms iterated; decode-16x2048 27 ms unrolled (R 4),
  // 42 ms iterated. So prefill keeps unrolled loops with fewer rows, and
  // decode, whose R is the tile's rows, iterates above the budget. Every
  // variant's first call compiles in about 10 s or less: GPUs (lanes takes
  // 1 row there) stay far below the budget.
  const uint32_t row_vec4 = lanes_row_vec4(head_dim, head_dim_v);
  if (v.unroll_d && v.rows * row_vec4 > kLanesUnrolledVec4) {
    if (!decode) v.rows = std::max(1u, pow2_at_most(kLanesUnrolledVec4 / row_vec4));
    if (v.rows * row_vec4 > kLanesUnrolledVec4) v.unroll_d = false;
  }
  // Keys per block: lavapipe runs the whole unrolled block body as straight
  // code (R x BK scores, R x BK x DV4 P.V terms), so a smaller block keeps
  // it nearer the instruction caches. Measured (causal 1024 x 1024, 8
  // heads, d 128, f16, R 4, interleaved A/B, 8 runs each): BK 4 133 ms,
  // BK 8 154 ms, BK 2 151 ms. Decode mode keeps 8 (fewer, longer blocks
  // per lane; its work is reads), and so do iterated head-dim loops, whose
  // per-block loop overhead a smaller block would double (d 256: BK 4
  // 916 ms, BK 8 629 ms).
  v.block_keys = (cpu && !decode && v.unroll_d) ? 4 : 8;
  v.target_items = dev.target_items;
  v.invariant_split_keys =
      KernelOptions::pick(forced.invariant_split_keys, dev.invariant_split_keys);
  // lavapipe gives each thread a contiguous chunk of a dispatch's
  // workgroups: heaviest-first order put the heavy half of a causal
  // prefill on one thread.
  v.static_chunks = dev.static_chunks;

  using K = KernelOptions;
  v.wg = K::pick(forced.attn_wg, v.wg);
  v.rows = K::pick(forced.attn_rows, v.rows);
  v.block_keys = K::pick(forced.attn_block_keys, v.block_keys);
  v.scalar_fetch = K::pick(forced.attn_scalar_fetch, 0) != 0;
  v.unroll_d = K::pick(forced.attn_unroll_d, v.unroll_d ? 1 : 0) != 0;
  v.max_keys = K::pick(forced.attn_split_keys, v.max_keys);
  v.target_items = K::pick(forced.attn_target_items, v.target_items);
  v.balance_items = K::pick(forced.attn_balance_items, 0u);
  v.all_features = K::pick(forced.attn_all_features, 0) != 0;
  v.static_chunks = K::pick(forced.attn_static_chunks, v.static_chunks);
  // Decode mode pays a partial per lane and a combine pass: worth it once
  // every lane gets a few key blocks.
  v.decode_min_keys = K::pick(forced.attn_decode_min_keys, 4 * v.wg * v.block_keys);
  if (v.wg < 1 || v.wg > caps.max_workgroup_invocations || v.rows < 1 || v.rows > 32 ||
      v.block_keys < 1 || v.block_keys > 64 || v.max_keys < 1)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range (wg ", v.wg, ", rows ",
         v.rows, ", block keys ", v.block_keys, ", split keys ", v.max_keys, ")");
  // The decode merge keeps every lane's m, l and accumulators of R rows in
  // shared memory (attention_fwd.comp SMEM_MERGE); the device table says
  // where it pays (not on lavapipe: ops/attention/devices.cpp).
  const uint64_t merge_bytes = uint64_t(v.wg) * v.rows * (((head_dim_v + 3) / 4) * 16 + 8);
  v.decode_merge = K::pick(forced.attn_decode_merge, dev.lanes_decode_merge ? 1 : 0) != 0 &&
                   merge_bytes <= caps.max_shared_memory;
  return v;
}

}  // namespace

AttentionVariant choose_attention_variant(const Device& device, const KernelOptions& forced,
                                          uint32_t head_dim, uint32_t head_dim_v, uint32_t max_rows,
                                          vkattn_dtype kv_dtype, uint32_t group, bool user_mask) {
  // No forced value reaches arithmetic before its range check (a 0 here
  // divided by zero in the decode family's shape).
  if (const std::string why = forced.range_error(); !why.empty())
    fail(VKATTN_ERROR_INVALID_ARGUMENT, why);
  const DeviceCaps& caps = device.caps();
  const bool cpu = device.info().device_type == VKATTN_DEVICE_CPU;
  const AttentionDefaults dev = attention_defaults(device);
  AttentionVariant v = lanes_variant(caps, dev, cpu, forced, head_dim, head_dim_v, max_rows);
  // The families' fit to shared memory, with a mask function's arrays
  // where the call's variant has one.
  auto probe = [&](const AttentionVariant& x) {
    return probe_config(x, head_dim, head_dim_v, kv_dtype, user_mask);
  };
  using K = KernelOptions;
  // A forced minimum split length holds for every family.
  auto finish = [&](AttentionVariant r) {
    if (forced.attn_min_split_keys != K::kUnset)
      r.min_split_keys = std::max(1u, std::min(forced.attn_min_split_keys, r.max_keys));
    return r;
  };
  uint32_t family = K::pick(forced.attn_kernel, static_cast<uint32_t>(dev.family));
  std::string fallback;
  // decode: calls whose sequences have at most kDecodeMaxTokens query
  // tokens, forced or, where the table says so, when the GQA group x
  // tokens takes at most decode_max_tiles tiles. A mixed step (decodes
  // and prefill chunks) is chosen for per class, each class's sequences
  // apart (ops/attention/record.cpp runs the two plans in one call).
  const uint32_t max_tokens = (max_rows + std::max(group, 1u) - 1) / std::max(group, 1u);
  const bool forced_decode = family == static_cast<uint32_t>(AttentionFamily::kDecode);
  if (forced_decode || (forced.attn_kernel == K::kUnset && dev.decode_default)) {
    AttentionVariant d = v;
    configure_decode(d, caps, dev, forced, head_dim, head_dim_v, max_rows);
    std::string why;
    if (max_rows >= kInvariantPrefillRows)
      why = "the batch-invariant part of sequences of more than " +
            std::to_string(kDecodeMaxTokens) + " query tokens";
    else if (max_tokens > kDecodeMaxTokens)
      why = "a sequence has " + std::to_string(max_tokens) + " query tokens, more than the " +
            std::to_string(kDecodeMaxTokens) + " of a decode tile";
    else
      why = kDecodeFamily.declines(caps, probe(d));
    const uint64_t tiles = (uint64_t(std::max(max_rows, 1u)) + d.rows - 1) / d.rows;
    if (why.empty() && (forced_decode || tiles <= dev.decode_max_tiles)) return finish(d);
    if (forced_decode) {
      fallback =
          std::string(kDecodeFamily.name) + " to " + attention_family(dev.family).name + ": " + why;
      family = static_cast<uint32_t>(dev.family);
    }
  }
  // The table's coopmat rows serve prefill; decode (tiles of a few rows)
  // stays on the scalar family, as no GPU has measured coopmat faster there.
  const bool table_coopmat = forced.attn_kernel == K::kUnset && dev.coopmat_prefill &&
                             max_rows > dev.coopmat_min_rows && caps.coopmat.usable() &&
                             coopmat_built();
  if (table_coopmat) family = static_cast<uint32_t>(AttentionFamily::kCoopmat);
  if (family == static_cast<uint32_t>(AttentionFamily::kCoopmat)) {
    if (!coopmat_built())
      fail(VKATTN_ERROR_UNSUPPORTED,
           "VKATTN_ATTN_KERNEL=coopmat: this vkattn was built without -DVKATTN_COOPMAT=ON (the "
           "coopmat shader is not embedded)");
    AttentionVariant c = v;
    configure_coopmat(c, caps, dev, forced, head_dim, head_dim_v, kv_dtype, cpu, user_mask);
    const std::string why = kCoopmatFamily.declines(caps, probe(c));
    if (why.empty()) return finish(c);
    fallback = std::string(kCoopmatFamily.name) + " to " + kTiledFamily.name + ": " + why;
    family = static_cast<uint32_t>(AttentionFamily::kTiled);
  }
  if (family == static_cast<uint32_t>(AttentionFamily::kTiled)) {
    // The tiled family serves the call unless it declines it (a shape the
    // device cannot run): then the lanes variant below, with the reason.
    AttentionVariant t = v;
    configure_tiled(t, caps, dev, forced, head_dim, head_dim_v, max_rows, cpu, user_mask);
    const std::string why = kTiledFamily.declines(caps, probe(t));
    if (why.empty()) {
      t.fallback = fallback;
      return finish(t);
    }
    fallback +=
        (fallback.empty() ? "" : "; ") + std::string(kTiledFamily.name) + " to lanes: " + why;
  }
  v.fallback = fallback;
  v.max_keys = std::min(v.max_keys, attention_max_keys(v, head_dim, head_dim_v));
  v.min_split_keys = std::min(v.min_split_keys, v.max_keys);
  return finish(v);
}

}  // namespace vkattn

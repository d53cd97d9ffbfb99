// The `decode` attention family: shaders/attention_decode.comp (subgroup
// shuffles) and attention_decode_smem.comp (shared-memory sums), body in
// shaders/include/attention_decode.glsl. Flash-decoding for tiles of at
// most kDecodeMaxTokens query tokens of one (sequence, kv head): a tile's R
// rows (the GQA group's heads x the tokens) are split over RS lane sets,
// each lane holding R / RS of them; a key row is spread over LPK lanes
// reading one 16-byte texel each (every lane set reads it: once from
// memory, again from L1), the NKG = WG / (LPK x RS) key groups of a
// workgroup take interleaved keys, the next tile's loads are issued before
// this tile's math, and the key groups merge by lse in shared memory at the
// end. Split key ranges are merged by attention_combine.comp as for every
// family.
//
// Budget (the shapes it serves; GPU defaults of ops/attention/devices.cpp,
// reasoned from FlashInfer's decode kernel, GPU-KERNELS.md section 4, and
// checked by the fake GPUs' compilers, tools/gpu/static_sweep.sh):
//   decode, d 128, f16 K/V, GQA 4-8 (R 4-8), every GPU row: WG 128, LPK 16,
//   8 vec4 of q and accumulators per lane (2 rows), RS = R / 2 (2-4), NKG
//   = 128 / (16 x RS) = 2-4 key groups, 2 keys per group and tile.
//   - registers per lane: q 2 rows x 2 vec4 + accumulators 2 x 2 vec4 = 32
//     floats, K/V words of two tiles 2 x 2 keys x 2 uvec4 = 32, scores, m,
//     l, addresses: measured (Mesa 26.1, 2026-11-27) 84 VGPRs on RDNA3
//     ACO (9 waves/SIMD), 104 GPRs on Ampere NAK (16 warps/SM), GQA 4 and
//     8 alike; before the row splits, 8 rows a lane at GQA 8 took 252
//     VGPRs (3 waves/SIMD) and 232 GPRs (8 warps/SM).
//   - loads in flight per lane: the next tile's 4 16-byte texels while
//     this tile's 4 are consumed: 64-128 bytes a lane, 16 warps a SM:
//     32-64 KiB per SM, above the ~16 KiB per SM that 3.35 TB/s x ~600 ns
//     of latency needs over 132 SMs. The RS lane sets read each texel RS
//     times from L1 (L1 bandwidth is ~5x DRAM's per SM).
//   - shared memory: the merge, NKG x R x 8 B + NKG/2 x R x 2 x 16 x
//     16 B: 4.2 KiB, and paged calls' window of 64 block-table entries
//     (256 B: 1024 keys at pages of 16, refilled with two barriers when an
//     item's keys leave it, so a tile's address chain starts in shared
//     memory, not with a global load a key and tile); no K/V staging.
//     Top-k calls add an item's compacted list, kTopkItemSlots (1024)
//     key positions (4 KiB), and the lanes' scan (WG x 4 B): one list
//     read a slot and a 7-step scan (two barriers a step) before the
//     tile loop, so a pass reads only the listed keys of its own pool
//     buffer. Measured (Mesa 26.1, 2026-11-29, topk-decode-2048-of-131072):
//     navi31 108 VGPRs, 7 waves/SIMD (the dense pipeline: 84, 9); navi21
//     96, 5; ga102 104 GPRs, 16 warps/SM; a740 48 regs; no spill.
//   - workgroups: 2 per SM wanted over the whole step (the planner's
//     target_items = 2 x compute units), splits no shorter than
//     VKATTN_ATTN_MIN_SPLIT_KEYS (128).
//   The H200 (2026-11-27, before the row splits: R 4-8 a lane) measured
//   0.7-9.6 % of its read peak (docs/bench/h200-2026-11-27.md): latency,
//   not bandwidth, is what the occupancy above is for; a GPU decides.
//   lavapipe: WG 8 (one subgroup), LPK 8, 8 keys per tile, RS 1, R up to
//   128 vec4 of q and accumulators per lane (E3's compile budget). A
//   tile's loads are 32 texel fetches of 8 lanes (a called function each,
//   ~50 instructions): more than a core's reorder window, so with listed
//   keys scattered over pages the first rows' misses stalled the rest
//   (perf: 14 % of a top-k call's samples on one load). Top-k tiles
//   therefore also touch the 8 K and 8 V rows of the tile after the next,
//   a key a lane, one texel a 64 bytes: 8 fetches, 64 lines in flight
//   (touch_ahead, VKATTN_ATTN_TOUCH_AHEAD; CPU rows only: on a GPU the
//   touched word's use would stall the warp, and occupancy hides latency).
#include <algorithm>

#include "core/error.h"
#include "core/loop_budget.h"
#include "core/pipeline.h"
#include "ops/attention/family.h"
#include "ops/attention/plan.h"

namespace vkattn {

namespace {

const KernelLayout kDecodeLayout{"attention_decode", fwd_bindings(), sizeof(FwdPush)};
const KernelLayout kDecodeSmemLayout{"attention_decode_smem", fwd_bindings(), sizeof(FwdPush)};

// attention_decode.glsl's specialization constants, in constant_id order.
struct DecodeSpec {
  FwdSpecHead head;        // 0-11, shape = R: rows of a tile; keys = BC: keys per tile
  uint32_t lanes_per_key;  // 12 LPK
  uint32_t row_splits;     // 13 RS
  uint32_t page_window;    // 14 PW
  uint32_t touch_ahead;    // 15 TA
  uint32_t user_rows;      // 16 UEV (FwdConfig::user_rows)
};
static_assert(sizeof(DecodeSpec) == 17 * 4, "attention_decode.glsl has 17 constants");

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

// vec4 chunks of q (qs) and of the accumulator (vs) one lane holds per row
// (attention_decode.glsl QS, VS), the larger of the 16-byte and 4-element
// texel layouts (a call's view alignment may narrow the texels).
struct DecodeLane {
  uint32_t qs, vs;
};
DecodeLane decode_lane(uint32_t head_dim, uint32_t head_dim_v, uint32_t lpk) {
  auto per_lane = [&](uint32_t dim) {
    const uint32_t d4 = (dim + 3) / 4;
    return std::max(ceil_div(ceil_div(d4, 2), lpk) * 2, ceil_div(d4, lpk));
  };
  return {per_lane(head_dim), per_lane(head_dim_v)};
}

std::string decode_declines(const DeviceCaps& caps, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const uint32_t L = v.lanes_per_row;
  if (L == 0 || (L & (L - 1)) != 0 || v.wg % L != 0)
    return "lanes per key " + std::to_string(L) + " must be a power of two dividing the workgroup";
  const uint32_t rs = v.row_splits;
  if (rs == 0 || v.rows % rs != 0 || v.wg % (L * rs) != 0)
    return "row splits " + std::to_string(rs) +
           " must divide the rows and the workgroup's key rows";
  const uint32_t nkg = v.wg / (L * rs);
  if (v.tile_keys == 0 || v.tile_keys % nkg != 0)
    return "a tile of " + std::to_string(v.tile_keys) + " keys is not a multiple of the " +
           std::to_string(nkg) + " key groups";
  if (v.rows == 0 || v.rows > 64) return "rows per tile must be 1-64";
  if (std::string why = exceeds_workgroup(caps, v.wg); !why.empty()) return why;
  if (v.subgroup_ops && !caps.subgroup_shuffle) return "the device has no subgroup shuffles";
  if (v.subgroup_ops &&
      (caps.subgroup_size == 0 || caps.subgroup_size % L != 0 || v.wg % caps.subgroup_size != 0))
    return "subgroup sums need lanes per key | subgroup size | workgroup";
  return exceeds_shared_memory(caps, kDecodeFamily.shared_bytes(cfg));
}

// sh_ml (m, l of every key group and row), sh_acc (the merge tree's upper
// half of the groups' accumulators), plus the partial sums without
// subgroup ops.
uint64_t decode_shared_bytes(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const uint64_t L = std::max<uint32_t>(v.lanes_per_row, 1), rs = std::max(v.row_splits, 1u);
  const uint64_t nkg = std::max<uint64_t>(v.wg / (L * rs), 1);
  const DecodeLane lane = decode_lane(cfg.head_dim, cfg.head_dim_v, static_cast<uint32_t>(L));
  // One key group merges nothing (attention_decode.glsl declares one element each).
  uint64_t bytes = nkg > 1 ? nkg * v.rows * 8 + nkg / 2 * v.rows * lane.vs * L * 16 : 8 + 16;
  // sh_red (every lane's partials of its rows) and sh_sum (each lane
  // set's sums).
  if (!v.subgroup_ops)
    bytes += (uint64_t(v.wg) + nkg * rs) * (v.rows / rs) * (v.tile_keys / nkg) * 4;
  // sh_pages: the item's window of block-table entries.
  if (cfg.paged && v.page_window) bytes += uint64_t(v.page_window) * 4;
  // sh_list and sh_runs: a top-k item's compacted list and the lanes' scan.
  if (cfg.features & kFlagTopk) bytes += (uint64_t(kTopkItemSlots) + v.wg) * 4;
  return bytes;
}

const Pipeline& decode_pipeline(Pipelines& pipes, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const DecodeSpec spec{
      fwd_spec_head(cfg, v.rows, v.tile_keys), v.lanes_per_row,   std::max(v.row_splits, 1u),
      cfg.paged ? v.page_window : 0u,          cfg.touch_ahead(), cfg.user_rows};
  return pipes.get(v.subgroup_ops ? kDecodeLayout : kDecodeSmemLayout, spec_words(spec),
                   decode_shared_bytes(cfg), cfg.user);
}

// Wide rows (MLA: d 576 / dv 512 over one kv head, 16-128 query heads):
// one row alone is past a lane's budget (10 vec4 at 32 lanes a key), so
// the table's 4 row splits hold 4 rows a tile and a 16-head group took 4
// tiles, each reading every key again (the table then gave the call to
// tiled: mla-decode on the H200 read at 1 % of its peak). On GPUs the
// workgroup grows instead: up to 16 row splits of one key group, 256
// lanes, 2 rows a lane, so a 16-head group is one tile and its keys are
// read from memory once (from L1 once per lane set). Rows of the device
// table that set decode_wide_rows only (NVIDIA: M1's compiler spilled 419
// values on this shape).
//
// Budget (d 576 / dv 512 f16, 16 heads, NVIDIA's 32-lane key rows: 8
// splits of 2 rows): q 2 x 6 vec4 + accumulators 2 x 4 vec4 = 80 floats,
// two tiles of 2 keys x 5 texels = 80 words in flight, ~180 registers a
// lane reasoned; measured on GA102's NAK (Mesa 26.1, 2026-11-28,
// tools/gpu/static_sweep.sh, case mla-decode): 224 GPRs (232 with the
// page window), no spill, 8 warps/SM (one 256-lane workgroup: 59 K of 64 K
// registers); 8.7 KB of K/V in flight per workgroup (2 tiles x 2 keys x
// 2176 B), each texel read 8 times from L1. Left alone on CPU devices (their lanes hold 128 vec4)
// and when the workgroup, rows or row splits are forced.
bool widen_for_wide_rows(AttentionVariant& v, const DeviceCaps& caps, const AttentionDefaults& dev,
                         const KernelOptions& forced, const DecodeLane& lane, uint32_t max_rows,
                         uint32_t& max_splits) {
  using K = KernelOptions;
  if (!dev.decode_wide_rows || caps.loop_capped || forced.attn_wg != K::kUnset ||
      forced.attn_rows != K::kUnset || forced.attn_row_splits != K::kUnset ||
      lane.qs + lane.vs <= dev.decode_lane_vec4)
    return false;
  const uint32_t L = v.lanes_per_row, wanted = pow2_at_least(std::max(max_rows, 1u));
  if (wanted <= max_splits) return false;
  uint32_t cap =
      std::min(256u, caps.max_workgroup_invocations ? caps.max_workgroup_invocations : 256u);
  cap = pow2_at_most(std::max(cap, L));
  // Two rows a lane, up to 16 splits and the lanes the cap leaves.
  max_splits =
      std::max(max_splits, std::min({16u, std::max(1u, cap / L), std::max(1u, wanted / 2)}));
  v.wg = L * max_splits;
  return true;
}

}  // namespace

const AttentionFamilyDesc kDecodeFamily{AttentionFamily::kDecode, "decode", decode_declines,
                                        decode_shared_bytes, decode_pipeline};

void configure_decode(AttentionVariant& v, const DeviceCaps& caps, const AttentionDefaults& dev,
                      const KernelOptions& forced, uint32_t head_dim, uint32_t head_dim_v,
                      uint32_t max_rows) {
  using K = KernelOptions;
  v.family = AttentionFamily::kDecode;
  const uint32_t sg = caps.subgroup_size ? caps.subgroup_size : 32;
  // Lanes per key row: enough 16-byte units to cover the longer row in one
  // pass, at most a subgroup (shuffle partners) and 64.
  const uint32_t units =
      std::max(ceil_div((head_dim + 3) / 4, 2), ceil_div((head_dim_v + 3) / 4, 2));
  uint32_t L = K::pick(forced.attn_lanes_per_row,
                       std::min({pow2_at_least(std::max(units, 1u)), pow2_at_most(sg), 64u}));
  v.wg = K::pick(forced.attn_wg, std::max(dev.decode_wg, L));
  // A forced workgroup that one key row's lanes do not divide (VKATTN_ATTN_WG=4
  // where a d 128 row takes 16 lanes) gives the row fewer lanes, unless
  // those are forced too: then the pair is refused below.
  if (forced.attn_lanes_per_row == K::kUnset)
    while (L > 1 && v.wg % L != 0) L /= 2;
  v.lanes_per_row = L;
  if (v.wg % L != 0)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_WG=", v.wg,
         " is not a multiple of VKATTN_ATTN_LANES_PER_ROW=", L, " (decode: a key row's lanes)");
  // Forced values are in their knobs' ranges (choose_attention_variant);
  // the shape's own limits are checked before anything divides by them.
  if (v.wg < 1 || L < 1 || L > 64)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range for decode (wg ", v.wg,
         ", lanes per key ", L, ")");
  // Rows of a tile: the call's largest tile (rounded to a power of two,
  // so that decode steps of 1..8 tokens share few pipelines), at most
  // what the register budget holds per lane times the row splits; a GQA
  // group x tokens above it is cut into several tiles (each reads the keys
  // once). Row splits: as many as the rows past one lane's budget need.
  const DecodeLane lane = decode_lane(head_dim, head_dim_v, L);
  uint32_t budget_rows =
      std::max(1u, pow2_at_most(std::max(1u, dev.decode_lane_vec4 / (lane.qs + lane.vs))));
  uint32_t max_splits = std::max(1u, pow2_at_most(std::max(dev.decode_row_splits, 1u)));
  if (widen_for_wide_rows(v, caps, dev, forced, lane, max_rows, max_splits)) budget_rows = 2;
  v.rows = K::pick(forced.attn_rows,
                   std::min(pow2_at_least(std::max(max_rows, 1u)), budget_rows * max_splits));
  // Splits that divide the rows and the workgroup's key rows of lanes (a
  // wide head dim, MLA's 576, leaves 128 lanes 2 key rows): fewer
  // otherwise, each lane then holding more rows.
  uint32_t splits = std::clamp<uint32_t>(v.rows / budget_rows, 1u, max_splits);
  while (splits > 1 && (v.rows % splits != 0 || v.wg % (L * splits) != 0)) splits /= 2;
  // Fewer splits than the rows need (a key row of lanes fills the
  // workgroup: MLA's d 576 on Adreno's 64 lanes): fewer rows a tile, each
  // tile reading the keys again, rather than rows past the lane's budget
  // (Adreno's ir3 spilled 275 values to private memory at 8 rows).
  v.row_splits = K::pick(forced.attn_row_splits, splits);
  if (forced.attn_rows == K::kUnset)
    v.rows = std::max(v.rows >= v.row_splits ? v.row_splits : 1u,
                      std::min(v.rows, budget_rows * v.row_splits));
  if (v.row_splits < 1 || v.row_splits > 16 || v.rows % v.row_splits != 0 ||
      v.wg % (L * v.row_splits) != 0)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_ROW_SPLITS=", v.row_splits,
         " must divide the tile's ", v.rows, " rows and the workgroup's ", v.wg / L,
         " key rows of lanes");
  const uint32_t nkg = std::max<uint32_t>(v.wg / (L * v.row_splits), 1);
  v.tile_keys = K::pick(forced.attn_tile_keys, nkg * dev.decode_keys_per_group);
  v.block_keys = v.tile_keys;
  v.subgroup_ops =
      caps.subgroup_shuffle && !forced.disable_subgroup_ops && sg % L == 0 && v.wg % sg == 0;
  // Paged calls: 64 block-table entries an item (1024 keys at pages of
  // 16) copied to shared memory when it starts and when its keys leave
  // them, so a tile's address chain starts there (256 bytes; GPUs only:
  // on lavapipe the barriers cost more than the loads they save).
  v.page_window = K::pick(forced.attn_page_window, caps.loop_capped ? 0u : 64u);
  // Top-k calls: touch a later tile's listed rows (CPU devices; see
  // attention_decode.glsl TA).
  v.touch_ahead = K::pick(forced.attn_touch_ahead, dev.decode_touch_ahead);
  v.decode_min_keys = 0;  // its own split rule: items from target_items
  v.decode_merge = false;
  v.unroll_d = true;
  v.f16_math = false;
  v.double_buffer = false;  // (tiled's switch; decode always loads a tile ahead)
  if (v.wg < 1 || L < 1 || v.rows < 1 || v.rows > 64 || v.tile_keys < 1 || v.tile_keys > 1024)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range for decode (wg ", v.wg,
         ", lanes per key ", L, ", rows ", v.rows, ", tile keys ", v.tile_keys, ")");
  // Fewer rows per tile until the merge (and shared-memory sums) fit.
  if (forced.attn_rows == K::kUnset) {
    FwdConfig probe = probe_config(v, head_dim, head_dim_v, VKATTN_F32);
    while (v.rows > 1 && decode_shared_bytes(probe) > caps.max_shared_memory) {
      probe.var.rows = v.rows /= 2;
      if (v.rows % v.row_splits != 0) probe.var.row_splits = v.row_splits = v.rows;
    }
  }
  // The loop cap's bound on keys per item, where the device has the cap
  // (on GPUs it cut 8x32768-paged into 25 splits for nothing).
  if (caps.loop_capped) v.max_keys = std::min(v.max_keys, decode_max_keys(v, head_dim, head_dim_v));
  // No split below 128 keys: a split writes its rows' partials (R x dv x
  // 4 B, read once more by the combine) against the 128 x (d + dv) x 2 B
  // of f16 K/V it reads: d 128 GQA 8 1/16 (1/8 with the combine's read),
  // MLA's 16 rows of dv 512 1/8 (1/4), so splits for occupancy (from
  // target_items) cost little next to the keys they spread.
  v.min_split_keys = K::pick(forced.attn_min_split_keys, 128);
  v.min_split_keys = std::max(1u, std::min(v.min_split_keys, v.max_keys));
}

uint32_t decode_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                         bool lists) {
  // Loops of one invocation of attention_decode.glsl, every one counted as
  // if it stayed rolled (lavapipe's LLVM keeps large unrolled bodies
  // rolled: R 32 x 8 keys per tile over 700 keys passed the cap, measured),
  // an n-iteration loop costing n + 1 (core/loop_budget.h). Units per lane
  // as UK x 1 chunk (an upper bound of UK x CK's loops); kind-0 units add
  // their 4-element gathers; a key's sum as LPK iterations (the shared-
  // memory sums; the shuffles take log2 LPK).
  auto L = [](uint64_t n) { return loop_cost(n); };
  const uint64_t lpk = std::max<uint32_t>(v.lanes_per_row, 1);
  // (R counts every row of the tile: an upper bound of a lane's R / RS.)
  const uint64_t nkg = std::max<uint64_t>(v.wg / (lpk * std::max(v.row_splits, 1u)), 1);
  const uint64_t kpg = std::max<uint64_t>(v.tile_keys / nkg, 1), R = std::max(v.rows, 1u);
  const DecodeLane lane = decode_lane(head_dim, head_dim_v, static_cast<uint32_t>(lpk));
  const uint64_t uk = lane.qs, uv = lane.vs, rk = R * kpg;
  const uint64_t load = L(kpg) + kpg * (L(uk) + uk * L(4) + L(uv) + uv * L(4));
  // The page window's refill loop (paged calls), at most once a tile.
  const uint64_t window = v.page_window ? L((v.page_window + v.wg - 1) / std::max(v.wg, 1u)) : 0;
  const uint64_t per_tile =
      1 + window + load + L(rk) + L(kpg) + kpg * (L(uk) + uk * (L(4) + L(R))) + L(rk) +
      rk * L(lpk) + L(rk) + L(kpg) + kpg * L(R) + L(R) + R * 2 * L(kpg) + L(R) + R * L(uv) +
      L(kpg) + kpg * (L(uv) + uv * (L(4) + L(R))) + L(kpg * uk) + L(kpg * uv) + L(kpg);
  // F_TOPK with touch_ahead, a tile: each lane touches ceil(KPG / LPK)
  // keys' K and V rows, one texel a 64 bytes (at most dim / 16 + 1 a row: f32).
  const uint64_t nx = (kpg + lpk - 1) / lpk;
  const uint64_t touch =
      lists && v.touch_ahead ? L(nx) + nx * (L(head_dim / 16 + 1) + L(head_dim_v / 16 + 1)) : 0;
  // A top-k list's compaction: two runs of ceil(slots / WG) slots a lane
  // and the scan (unrolled; counted as rolled).
  uint64_t wg_log = 0;
  for (uint64_t w = 1; w < std::max(v.wg, 1u); w <<= 1) ++wg_log;
  const uint64_t compact =
      lists ? 2 * L((kTopkItemSlots + std::max(v.wg, 1u) - 1) / std::max(v.wg, 1u)) + L(wg_log) : 0;
  const uint64_t fixed = compact + window + L(R) + R * (L(uk) + uk * L(4) + L(uv)) + load + L(R) +
                         R * (2 * L(nkg) + L(uv)) + L(nkg) * (1 + 2 * R * L(uv)) + L(R) +
                         R * L(uv) * L(4);
  const uint64_t usable = kLoopUsable - loop_cost(0);
  if (fixed + per_tile + touch >= usable) return std::max(v.tile_keys, 1u);
  const uint64_t tiles = (usable - fixed) / (per_tile + touch);
  return static_cast<uint32_t>(std::min<uint64_t>(tiles * std::max(v.tile_keys, 1u), 1u << 30));
}

uint32_t decode_topk_item_slots(const AttentionVariant& v, const DeviceCaps& caps,
                                uint32_t head_dim, uint32_t head_dim_v) {
  uint32_t n = std::min(kTopkItemSlots, std::max(v.max_keys, 1u));
  if (caps.loop_capped) n = std::min(n, decode_max_keys(v, head_dim, head_dim_v, true));
  return std::max(n, 1u);
}

}  // namespace vkattn

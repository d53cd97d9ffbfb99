// Which attention_fwd.comp variant a device gets: workgroup size, rows per
// lane, keys per block, texel fetch width, and how key ranges are split.
// Every field can be forced through the environment (read once per context:
// core/kernel_options.h) so that each variant any device may pick is tested
// on lavapipe:
//   VKATTN_ATTN_WG, VKATTN_ATTN_ROWS, VKATTN_ATTN_BLOCK_KEYS,
//   VKATTN_ATTN_SCALAR_FETCH=1, VKATTN_ATTN_UNROLL_D=0|1, VKATTN_ATTN_SPLIT_KEYS (keys per item),
//   VKATTN_ATTN_TARGET_ITEMS (split key ranges until this many items),
//   VKATTN_ATTN_DECODE_MIN_KEYS (decode mode from this many keys; 0 = never),
//   VKATTN_ATTN_DECODE_MERGE=0 (decode-mode lanes write partials for the
//   combine pass instead of merging in shared memory),
//   VKATTN_ATTN_STATIC_CHUNKS (order a dispatch's items for this many
//   contiguous per-thread chunks; 0 = heaviest first),
//   VKATTN_ATTN_ALL_FEATURES=1 (one pipeline with every optional transform
//   compiled in, switched by the call's flags, instead of one per set of
//   transforms used),
//   VKATTN_ATTN_MIN_SPLIT_KEYS (never split a key range into chunks
//   shorter than this; decode's default 128),
//   VKATTN_ATTN_KERNEL=lanes|tiled|coopmat|decode (the family), for tiled
//   VKATTN_ATTN_LANES_PER_ROW, VKATTN_ATTN_TILE_KEYS and
//   VKATTN_DISABLE_SUBGROUP_OPS=1 (shared-memory sums instead of shuffles),
//   for coopmat VKATTN_ATTN_SUBGROUPS, VKATTN_ATTN_TILE_KEYS and
//   VKATTN_ATTN_HEAD_CHUNK (head-dim columns staged at a time),
//   VKATTN_ATTN_O_REGS=0|1|2 (O in shared memory, in registers, or in
//   cooperative-matrix accumulators), VKATTN_ATTN_Q_REGS=0|1 (q's matrix
//   fragments in registers or q in shared memory), VKATTN_ATTN_COL_SPLIT=0|1
//   (subgroups split one row block's head dim and O's columns), and
//   VKATTN_DISABLE_COOPMAT=1 (no cooperative matrices on the device); for
//   decode VKATTN_ATTN_LANES_PER_ROW (lanes per key row), VKATTN_ATTN_WG,
//   VKATTN_ATTN_TILE_KEYS, VKATTN_ATTN_ROWS (rows per tile) and
//   VKATTN_DISABLE_SUBGROUP_OPS=1; VKATTN_DEVICE_COMPUTE_UNITS=n (the
//   device's compute units, which set target_items: core/device.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "vkattn/vkattn.h"

namespace vkattn {

class Device;
struct KernelOptions;

// Powers of two the variant shapes round to.
inline uint32_t pow2_at_least(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p *= 2;
  return p;
}
inline uint32_t pow2_at_most(uint32_t x) {
  uint32_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// lanes with unrolled head-dim loops keeps q and the accumulator of each of
// its R rows in lanes_row_vec4 vec4 registers; R x that stays within
// kLanesUnrolledVec4 (lanes_variant, variant.cpp: lavapipe's compile time).
constexpr uint32_t kLanesUnrolledVec4 = 128;
inline uint32_t lanes_row_vec4(uint32_t head_dim, uint32_t head_dim_v) {
  return (head_dim + 3) / 4 + (head_dim_v + 3) / 4;
}

// Kernel families (ops/attention/family.h).
enum class AttentionFamily : uint32_t { kLanes = 0, kTiled = 1, kCoopmat = 2, kDecode = 3 };

struct AttentionVariant {
  AttentionFamily family = AttentionFamily::kLanes;
  uint32_t wg = 8;          // lanes per workgroup
  uint32_t rows = 4;        // rows per lane (R)
  uint32_t block_keys = 8;  // keys per online-softmax block (BK)
  bool scalar_fetch = false;
  bool unroll_d = false;          // unroll the head-dim loops (fast code, slow compile)
  uint32_t max_keys = 8192;       // per lane of a work item (lavapipe loop cap)
  uint32_t target_items = 1;      // parallelism wanted from one dispatch
  uint32_t min_split_keys = 256;  // never split into smaller chunks
  // Prefill on GPUs: while a dispatch has fewer tiles than this (the
  // workgroups the device runs at once), key ranges longer than the tiles'
  // mean are split so that the longest (a causal diagonal's last rows) do
  // not set the time alone; 0 = off (CPUs; VKATTN_ATTN_BALANCE_ITEMS).
  uint32_t balance_items = 0;
  // Batch-invariant contexts: keys per split of a decode-shaped sequence
  // (the device table's, or VKATTN_ATTN_INVARIANT_SPLIT_KEYS).
  uint32_t invariant_split_keys = 256;
  uint32_t decode_min_keys = 0;  // tiles of <= R rows over this many keys: decode mode
  bool decode_merge = false;     // decode-mode lanes merge in shared memory (fits, and allowed)
  bool all_features = false;     // compile every optional transform in (FEATURES = all)
  uint32_t static_chunks = 0;    // ScheduleLimits::static_chunks
  // tiled: lanes that share a row (each holds 1/L of its head dims), keys
  // per shared-memory tile, and whether the dot products are summed with
  // subgroup shuffles (else through shared memory).
  uint32_t lanes_per_row = 1;
  uint32_t tile_keys = 0;
  bool subgroup_ops = false;
  // tiled: q, K/V tiles and products in f16 arithmetic (f32 softmax and
  // accumulation; attention_tiled.glsl TILED_F16).
  bool f16_math = false;
  // tiled: the next tile's K/V loads issued into registers before this
  // tile's math (attention_tiled.glsl DBUF).
  bool double_buffer = false;
  // coopmat: subgroups per workgroup (each owns coopmat_m rows) and the
  // matrix shape (A m x k, B k x n); tile_keys is the key tile.
  uint32_t subgroups = 0;
  uint32_t coopmat_m = 0, coopmat_n = 0, coopmat_k = 0;
  // coopmat: head-dim columns of q/k and of v staged in shared memory at a
  // time (0: the whole padded head dim); narrowed where MLA's dims do not fit.
  uint32_t head_chunk = 0, head_chunk_v = 0;
  // coopmat: where O lives: 0 shared memory, 1 registers (a known layout
  // over the subgroup's lanes), 2 accumulators (P V added in place, rows
  // rescaled by a loaded alpha block); 1 and 2 need one V chunk.
  uint32_t o_regs = 0;
  // coopmat: q's A fragments kept in registers (staged once through the
  // K/V tile) instead of q in shared memory; needs one q/K chunk.
  bool q_regs = false;
  // coopmat: the subgroups share one block of coopmat_m rows, splitting
  // S's head dim and O's columns (attention_coopmat.comp COLS: MLA's dv
  // 512, whose O no subgroup's registers hold); needs O in accumulators.
  bool col_split = false;
  // coopmat: lanes a row takes in the softmax (a power of two from
  // subgroup / coopmat_m, every row at once, to the subgroup).
  uint32_t softmax_lanes = 1;
  // Set when the forced family declined this call and this variant is the
  // fallback's: "<family> to <family>: <reason>" (VKATTN_LOG=kernels).
  std::string fallback;
  // decode: the lanes of a key row split a tile's rows this many ways (a
  // lane holds rows / row_splits of them; each split reads the key again,
  // from L1).
  uint32_t row_splits = 1;
  // decode over paged K/V: block-table entries an item keeps in shared
  // memory (attention_decode.glsl PW; 0: every lookup reads the table).
  uint32_t page_window = 0;
  // decode with top-k lists: the tile whose K/V rows a tile's loads touch
  // ahead, in tiles past the one they load (attention_decode.glsl TA; 0:
  // none). A CPU's hardware prefetcher does not follow listed keys.
  uint32_t touch_ahead = 0;
  // decode: lanes_per_row is the lanes per key row, tile_keys the keys of
  // a tile, rows the rows of a tile (each lane holds rows / row_splits).
  uint32_t tile_rows() const {
    if (family == AttentionFamily::kDecode || (family == AttentionFamily::kCoopmat && col_split))
      return rows;
    return wg / (lanes_per_row ? lanes_per_row : 1) * rows;
  }
};

// Keys one lane of attention_fwd.comp may take in one work item within
// lavapipe's loop cap (core/loop_budget.h).
uint32_t attention_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v);
// A lanes item's max_keys (from attention_max_keys) for calls whose
// attention variant has a mask function (the range scans' loops).
uint32_t attention_max_keys_with_mask_scans(uint32_t max_keys, uint32_t block_keys);

// max_rows: the largest t * (H / Hkv) of the batch (small for decode);
// kv_dtype: the dtype K and V are stored in; group: H / Hkv (max_rows /
// group is the largest sequence's query tokens, which decides whether the
// decode family may serve the call); user_mask: the call's attention
// variant has a mask function (tiled and coopmat fit their tiles to shared
// memory with its arrays: FwdConfig::user_mask).
AttentionVariant choose_attention_variant(const Device& device, const KernelOptions& forced,
                                          uint32_t head_dim, uint32_t head_dim_v, uint32_t max_rows,
                                          vkattn_dtype kv_dtype, uint32_t group = 1,
                                          bool user_mask = false);

}  // namespace vkattn

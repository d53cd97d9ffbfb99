#include "ops/attention_variant.h"

#include <algorithm>
#include <thread>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"

namespace vkattn {

namespace {
uint32_t pow2_at_least(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p *= 2;
  return p;
}
}  // namespace

AttentionVariant choose_attention_variant(const Device& device, uint32_t head_dim,
                                          uint32_t head_dim_v, uint32_t max_rows) {
  AttentionVariant v;
  const DeviceCaps& caps = device.caps();
  const bool cpu = device.info().device_type == VKATTN_DEVICE_CPU;
  // Lanes are independent (no cross-lane traffic): one subgroup per
  // workgroup on lavapipe (8 lanes); GPUs get a wider workgroup.
  v.wg = cpu ? 8 : std::clamp<uint32_t>(caps.subgroup_size, 8, 64);
  // Rows per lane: more rows reuse each K/V fetch more, at the cost of
  // registers (q and the accumulator of every row stay in registers) and,
  // on lavapipe, of compile time, which grows steeply with rows x head dim
  // when the head-dim loops are unrolled. Measured on lavapipe (causal
  // 1024 x 1024, 8 heads, d = 128, f16): unrolled R = 8 242 ms (90 s to
  // compile), unrolled R = 4 252 ms (20 s), iterated R = 8 316 ms (10 s).
  uint32_t d4 = (std::max(head_dim, head_dim_v) + 3) / 4;
  v.unroll_d = d4 <= 32;
  v.rows = v.unroll_d ? (d4 <= 16 ? 8 : 4) : 8;
  // Few rows (decode): every lane holds all rows of a tile and the lanes
  // split the keys (decode mode), so R covers the rows of a tile; otherwise
  // do not run lanes that would own no row.
  if (max_rows <= v.rows)
    v.rows = pow2_at_least(std::max(max_rows, 1u));
  else
    v.rows = std::min(v.rows, pow2_at_least((max_rows + v.wg - 1) / v.wg));
  v.block_keys = 8;
  uint32_t threads = std::max(1u, std::thread::hardware_concurrency());
  v.target_items = cpu ? 4 * threads : 256;

  v.wg = env_uint("VKATTN_ATTN_WG", v.wg);
  v.rows = env_uint("VKATTN_ATTN_ROWS", v.rows);
  v.block_keys = env_uint("VKATTN_ATTN_BLOCK_KEYS", v.block_keys);
  v.scalar_fetch = env_uint("VKATTN_ATTN_SCALAR_FETCH", 0) != 0;
  v.unroll_d = env_uint("VKATTN_ATTN_UNROLL_D", v.unroll_d ? 1 : 0) != 0;
  v.max_keys = env_uint("VKATTN_ATTN_SPLIT_KEYS", v.max_keys);
  v.target_items = env_uint("VKATTN_ATTN_TARGET_ITEMS", v.target_items);
  // Decode mode pays a partial per lane and a combine pass: worth it once
  // every lane gets a few key blocks.
  v.decode_min_keys = env_uint("VKATTN_ATTN_DECODE_MIN_KEYS", 4 * v.wg * v.block_keys);
  // Decode-mode items write one partial per lane: allow 8 chunks of a
  // workgroup's lanes, within the combine pass's loop budget (lavapipe).
  v.max_slots = std::max(64u, std::min(8 * v.wg, 60000 / (head_dim_v + 2)));
  if (v.wg < 1 || v.wg > caps.max_workgroup_invocations || v.rows < 1 || v.rows > 32 ||
      v.block_keys < 1 || v.block_keys > 64 || v.max_keys < 1)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_ATTN_* override out of range (wg ", v.wg, ", rows ",
         v.rows, ", block keys ", v.block_keys, ", split keys ", v.max_keys, ")");
  // lavapipe ends a shader's loops after 65535 iterations in total per
  // invocation: bound the key blocks of one work item by what the
  // iterated loops of this variant cost (mirrors attention_fwd.comp).
  const uint32_t dq4 = (head_dim + 3) / 4, dv4 = (head_dim_v + 3) / 4;
  auto chunk = [](uint32_t n4) { return n4 % 4 == 0 ? 4u : n4 % 2 == 0 ? 2u : 1u; };
  uint32_t per_block = 1, fixed = 64;
  if (!v.unroll_d) {
    per_block += dq4 / chunk(dq4) + dv4 / chunk(dv4);
    fixed += v.rows * (dq4 + 2 * dv4);
  }
  uint32_t blocks = (60000 - std::min<uint32_t>(fixed, 50000)) / per_block;
  v.max_keys = std::min(v.max_keys, blocks * v.block_keys);
  v.min_split_keys = std::min(v.min_split_keys, v.max_keys);
  return v;
}

}  // namespace vkattn

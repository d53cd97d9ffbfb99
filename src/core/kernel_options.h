// Kernel choices forced through the environment (tests and tuning;
// docs/guide/environment.md), read once when a context is created: a call never
// consults the environment, and a context's kernels do not change under it.
// An unset or empty variable forces nothing; a malformed value or one
// outside its knob's range (KernelOptions::knobs) fails the context's
// creation with INVALID_ARGUMENT naming the variable (core/env.h). A
// tuning-file entry sets the same knobs (core/tuning_file.h); out of
// range, it is ignored instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/log.h"

namespace vkattn {

struct KernelOptions {
  static constexpr uint32_t kUnset = UINT32_MAX;
  // attention_fwd.comp variant (ops/attention/variant.h names each).
  uint32_t attn_wg = kUnset;               // VKATTN_ATTN_WG
  uint32_t attn_rows = kUnset;             // VKATTN_ATTN_ROWS
  uint32_t attn_block_keys = kUnset;       // VKATTN_ATTN_BLOCK_KEYS
  uint32_t attn_scalar_fetch = kUnset;     // VKATTN_ATTN_SCALAR_FETCH
  uint32_t attn_unroll_d = kUnset;         // VKATTN_ATTN_UNROLL_D
  uint32_t attn_split_keys = kUnset;       // VKATTN_ATTN_SPLIT_KEYS
  uint32_t attn_target_items = kUnset;     // VKATTN_ATTN_TARGET_ITEMS
  uint32_t attn_all_features = kUnset;     // VKATTN_ATTN_ALL_FEATURES
  uint32_t attn_static_chunks = kUnset;    // VKATTN_ATTN_STATIC_CHUNKS
  uint32_t attn_decode_min_keys = kUnset;  // VKATTN_ATTN_DECODE_MIN_KEYS
  uint32_t attn_decode_merge = kUnset;     // VKATTN_ATTN_DECODE_MERGE
  // Splits one combine item merges at most (more make a tree of combine
  // levels); unset: as many as attention_combine.comp takes.
  uint32_t attn_combine_fan_in = kUnset;  // VKATTN_ATTN_COMBINE_FAN_IN
  uint32_t attn_softmax_lanes = kUnset;   // VKATTN_ATTN_SOFTMAX_LANES: coopmat's lanes a row
  uint32_t attn_kernel = kUnset;  // VKATTN_ATTN_KERNEL: 0 lanes, 1 tiled, 2 coopmat, 3 decode
  // Per class of sequences (at most kDecodeMaxTokens query tokens, or
  // more), over VKATTN_ATTN_KERNEL: VKATTN_ATTN_KERNEL_DECODE and
  // VKATTN_ATTN_KERNEL_PREFILL. A call whose two classes get different
  // families runs each class on its own (ops/attention/record.cpp).
  uint32_t attn_kernel_decode = kUnset;
  uint32_t attn_kernel_prefill = kUnset;
  uint32_t attn_min_split_keys = kUnset;  // VKATTN_ATTN_MIN_SPLIT_KEYS
  uint32_t attn_subgroups = kUnset;       // VKATTN_ATTN_SUBGROUPS (coopmat)
  uint32_t attn_lanes_per_row = kUnset;   // VKATTN_ATTN_LANES_PER_ROW (tiled; decode: per key)
  uint32_t attn_tile_keys = kUnset;       // VKATTN_ATTN_TILE_KEYS (tiled, coopmat, decode)
  uint32_t attn_double_buffer = kUnset;   // VKATTN_ATTN_DOUBLE_BUFFER (tiled)
  uint32_t attn_head_chunk = kUnset;      // VKATTN_ATTN_HEAD_CHUNK (coopmat)
  uint32_t attn_o_regs =
      kUnset;  // VKATTN_ATTN_O_REGS (coopmat: 0 shared, 1 registers, 2 accumulators)
  uint32_t attn_q_regs = kUnset;         // VKATTN_ATTN_Q_REGS (coopmat: q's fragments in registers)
  uint32_t attn_balance_items = kUnset;  // VKATTN_ATTN_BALANCE_ITEMS (split long ranges; 0 off)
  uint32_t attn_col_split = kUnset;      // VKATTN_ATTN_COL_SPLIT (coopmat: subgroups split columns)
  uint32_t attn_row_splits = kUnset;     // VKATTN_ATTN_ROW_SPLITS (decode)
  uint32_t attn_page_window = kUnset;    // VKATTN_ATTN_PAGE_WINDOW (decode, paged; 0 off)
  uint32_t attn_touch_ahead = kUnset;    // VKATTN_ATTN_TOUCH_AHEAD (decode, top-k; 0 off)
  bool disable_subgroup_ops = false;     // VKATTN_DISABLE_SUBGROUP_OPS=1
  bool disable_f16_math = false;         // VKATTN_DISABLE_F16_MATH=1
  bool force_f16_math = false;           // VKATTN_FORCE_F16_MATH=1
  uint64_t scratch_bytes = 0;            // VKATTN_SCRATCH_BYTES (0: the default)
  // VKATTN_CONTEXT_BATCH_INVARIANT (or VKATTN_BATCH_INVARIANT=1, which
  // runs test suites so): a sequence's key splits, family and variant
  // depend on its own lengths only (ops/attention/prepare.h PlanPart).
  bool batch_invariant = false;
  // VKATTN_CASCADE (ops/attention/cascade.cpp): 0 off; 1 every group of two
  // or more sequences sharing a full page; unset: groups sharing at least
  // kCascadeMinKeys keys.
  uint32_t cascade = kUnset;
  // Keys per split of a batch-invariant decode-shaped sequence
  // (VKATTN_ATTN_INVARIANT_SPLIT_KEYS; unset: the device table's).
  uint32_t invariant_split_keys = kUnset;
  // VKATTN_LOG=kernels: one stderr line per recorded attention dispatch.
  bool log_kernels = false;
  // VKATTN_SELF_CHECK=0: attention pipelines run without their first-use
  // check (ops/attention/self_check.h).
  bool self_check = true;
  // VKATTN_FAULT_KERNEL=<family>[,<family>...]: those families' kernels
  // write wrong outputs (a specialization constant), so the self-check
  // can be watched catching them; bit (1 << id), ids as attn_kernel.
  uint32_t fault_kernels = 0;
  // VKATTN_FAULT_ODD_STORES=1: every family's 16-bit stores of rows that
  // share words with their neighbours (odd offsets or dims: the atomic
  // path) write wrong values, so the self-check of that path can be
  // watched (ops/attention/self_check.h).
  bool fault_odd_stores = false;
  // VKATTN_FAULT_ROTATION=1: the queries' rotation over a cache with
  // VKATTN_KV_ROTATE_KEYS (ops/attention/rotate_q.h) leaves out its
  // 1 / sqrt(h), so the rotated half of a Q4 self-check can be watched.
  bool fault_rotation = false;
  // VKATTN_FAULT_USER=1: attention variants (user functions) are spliced
  // into the families with odd keys wrong (shaders/include/attention_mask.glsl,
  // USER_FAULT), not into the self-check's table, so the self-check of
  // variant pipelines can be watched catching a bad splice.
  bool fault_user = false;
  // VKATTN_PLAN_MEMORY=host|device: where attention plans (items, combine
  // items, sequence records, page tables) live for the kernels; unset: the
  // device's own (device-local on discrete GPUs, host-visible elsewhere).
  uint32_t plan_memory = kUnset;  // 0 host, 1 device
  // VKATTN_ATTN_COMBINE=rows|words: the split-KV combine's variant
  // (attention_combine_rows.comp: a lane per row, CPU devices' default;
  // attention_combine.comp: (row, word) jobs over every lane, GPUs').
  uint32_t attn_combine = kUnset;  // 0 rows, 1 words

  // Some attention kernel choice is forced through the environment (then
  // the environment wins over tuned choices: VKATTN_LOG=kernels says
  // source=env).
  bool forces_attention() const {
    for (uint32_t v : {attn_wg,
                       attn_rows,
                       attn_block_keys,
                       attn_scalar_fetch,
                       attn_unroll_d,
                       attn_split_keys,
                       attn_target_items,
                       attn_decode_min_keys,
                       attn_decode_merge,
                       attn_kernel,
                       attn_min_split_keys,
                       attn_subgroups,
                       attn_lanes_per_row,
                       attn_tile_keys,
                       attn_double_buffer,
                       attn_head_chunk,
                       attn_row_splits,
                       attn_page_window,
                       attn_touch_ahead,
                       attn_kernel_decode,
                       attn_kernel_prefill,
                       attn_combine_fan_in,
                       attn_combine,
                       attn_softmax_lanes,
                       attn_balance_items,
                       attn_col_split,
                       attn_o_regs,
                       attn_q_regs})
      if (v != kUnset) return true;
    return disable_subgroup_ops || force_f16_math;
  }

  // A knob the environment (VKATTN_ATTN_*) or a tuning-file entry may set,
  // and the values it may take; the families check their own limits after
  // these (a workgroup the device cannot launch, a tile that does not fit
  // shared memory).
  struct Knob {
    uint32_t KernelOptions::*field;
    const char* env;   // the environment variable
    const char* file;  // its name in a tuning-file entry, or nullptr
    uint32_t lo, hi;
  };
  static const std::vector<Knob>& knobs() {
    using K = KernelOptions;
    constexpr uint32_t kMany = 1u << 30;
    static const std::vector<Knob> k = {
        {&K::attn_kernel, "VKATTN_ATTN_KERNEL", "kernel", 0, 3},
        {&K::attn_wg, "VKATTN_ATTN_WG", "wg", 1, 1024},
        {&K::attn_rows, "VKATTN_ATTN_ROWS", "rows", 1, 64},
        {&K::attn_block_keys, "VKATTN_ATTN_BLOCK_KEYS", "block_keys", 1, 64},
        {&K::attn_unroll_d, "VKATTN_ATTN_UNROLL_D", "unroll_d", 0, 1},
        {&K::attn_lanes_per_row, "VKATTN_ATTN_LANES_PER_ROW", "lanes_per_row", 1, 64},
        {&K::attn_tile_keys, "VKATTN_ATTN_TILE_KEYS", "tile_keys", 1, 1024},
        {&K::attn_double_buffer, "VKATTN_ATTN_DOUBLE_BUFFER", "double_buffer", 0, 1},
        {&K::attn_subgroups, "VKATTN_ATTN_SUBGROUPS", "subgroups", 1, 16},
        {&K::attn_min_split_keys, "VKATTN_ATTN_MIN_SPLIT_KEYS", "min_split_keys", 0, kMany},
        {&K::attn_target_items, "VKATTN_ATTN_TARGET_ITEMS", "target_items", 1, kMany},
        {&K::attn_scalar_fetch, "VKATTN_ATTN_SCALAR_FETCH", nullptr, 0, 1},
        {&K::attn_split_keys, "VKATTN_ATTN_SPLIT_KEYS", nullptr, 1, kMany},
        {&K::attn_all_features, "VKATTN_ATTN_ALL_FEATURES", nullptr, 0, 1},
        {&K::attn_static_chunks, "VKATTN_ATTN_STATIC_CHUNKS", nullptr, 0, 1u << 16},
        {&K::attn_decode_min_keys, "VKATTN_ATTN_DECODE_MIN_KEYS", nullptr, 0, kMany},
        {&K::attn_decode_merge, "VKATTN_ATTN_DECODE_MERGE", nullptr, 0, 1},
        {&K::attn_combine_fan_in, "VKATTN_ATTN_COMBINE_FAN_IN", nullptr, 2, 2048},
        {&K::attn_softmax_lanes, "VKATTN_ATTN_SOFTMAX_LANES", nullptr, 1, 64},
        {&K::attn_head_chunk, "VKATTN_ATTN_HEAD_CHUNK", nullptr, 1, 4096},
        {&K::attn_o_regs, "VKATTN_ATTN_O_REGS", nullptr, 0, 2},
        {&K::attn_q_regs, "VKATTN_ATTN_Q_REGS", nullptr, 0, 1},
        {&K::attn_balance_items, "VKATTN_ATTN_BALANCE_ITEMS", "balance_items", 0, kMany},
        {&K::attn_col_split, "VKATTN_ATTN_COL_SPLIT", nullptr, 0, 1},
        {&K::attn_row_splits, "VKATTN_ATTN_ROW_SPLITS", "row_splits", 1, 16},
        {&K::attn_page_window, "VKATTN_ATTN_PAGE_WINDOW", "page_window", 0, 1024},
        {&K::attn_touch_ahead, "VKATTN_ATTN_TOUCH_AHEAD", "touch_ahead", 0, 4},
        {&K::invariant_split_keys, "VKATTN_ATTN_INVARIANT_SPLIT_KEYS", nullptr, 1, kMany},
    };
    return k;
  }

  // The first set knob outside its range, in words ("VKATTN_ATTN_ROWS=0
  // is outside 1..64"; `file`: the tuning file's names, "rows=0 ..."),
  // or "" when every set knob is in range.
  std::string range_error(bool file = false) const {
    for (const Knob& k : knobs()) {
      const uint32_t v = this->*k.field;
      if (v == kUnset || (v >= k.lo && v <= k.hi)) continue;
      return std::string(file && k.file ? k.file : k.env) + "=" + std::to_string(v) +
             " is outside " + std::to_string(k.lo) + ".." + std::to_string(k.hi);
    }
    return "";
  }

  // `forced` if set, else `fallback`.
  static uint32_t pick(uint32_t forced, uint32_t fallback) {
    return forced == kUnset ? fallback : forced;
  }

  // Reads the options and checks every variable a context reads
  // (core/env.h: a malformed value throws INVALID_ARGUMENT naming it).
  static KernelOptions from_env() {
    check_env(EnvVar::kContext);
    KernelOptions o;
    for (const Knob& k : knobs())
      if (k.field != &KernelOptions::attn_kernel)
        o.*k.field = static_cast<uint32_t>(env_number(k.env, kUnset));
    o.attn_kernel = env_name("VKATTN_ATTN_KERNEL", kUnset);
    o.attn_kernel_decode = env_name("VKATTN_ATTN_KERNEL_DECODE", kUnset);
    o.attn_kernel_prefill = env_name("VKATTN_ATTN_KERNEL_PREFILL", kUnset);
    o.attn_combine = env_name("VKATTN_ATTN_COMBINE", kUnset);
    o.plan_memory = env_name("VKATTN_PLAN_MEMORY", kUnset);
    o.fault_kernels = env_names("VKATTN_FAULT_KERNEL");
    o.scratch_bytes = env_number("VKATTN_SCRATCH_BYTES", 0);
    o.batch_invariant = env_switch("VKATTN_BATCH_INVARIANT", false);
    o.cascade = static_cast<uint32_t>(env_number("VKATTN_CASCADE", kUnset));
    o.self_check = env_switch("VKATTN_SELF_CHECK", true);
    o.fault_odd_stores = env_switch("VKATTN_FAULT_ODD_STORES", false);
    o.fault_rotation = env_switch("VKATTN_FAULT_ROTATION", false);
    o.fault_user = env_switch("VKATTN_FAULT_USER", false);
    o.disable_subgroup_ops = env_switch("VKATTN_DISABLE_SUBGROUP_OPS", false);
    o.disable_f16_math = env_switch("VKATTN_DISABLE_F16_MATH", false);
    o.force_f16_math = env_switch("VKATTN_FORCE_F16_MATH", false);
    o.log_kernels = log_enabled(kLogKernels);
    return o;
  }
};

}  // namespace vkattn

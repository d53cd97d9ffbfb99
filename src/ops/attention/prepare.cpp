// prepare_plan(): plan, schedule and variant of an attention call, and
// their device copy (ops/attention/prepare.h).
#include "ops/attention/prepare.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/loop_budget.h"
#include "ops/attention/self_check.h"
#include "ops/attention/tune.h"
#include "ops/attention/user_functions.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

// Default bytes of the split-KV scratch arena of one wave
// (VKATTN_SCRATCH_BYTES overrides; tests use it to force many waves).
constexpr uint64_t kScratchBytes = 64ull << 20;

// Texel width: 0 = one element, 1 = four elements, 2 = eight 16-bit or 8-bit elements.
uint32_t texel_kind(vkattn_dtype dt, uint32_t dim, bool scalar) {
  // A 4-bit cache's rows are whole 32-bit words of 8 codes (two chunks): kind
  // 2 over 32-bit texels (texel_format), whatever the dim.
  if (dt == VKATTN_Q4) return 2;
  if (scalar || dim % 4 != 0) return 0;
  return (dt != VKATTN_F32 && dim % 8 == 0) ? 2 : 1;
}

// attention_combine.comp's MAX_W: the (row, slot) weights of a row chunk.
constexpr uint32_t kCombineMaxWeights = 2048;

// attention_combine.comp's loop iterations for one lane of an item of
// `stride` rows (the worst case) merging n slots of dv elements: its row
// chunks, lanes per row, and per chunk the lse loads, the two reductions
// (their strided loops and trees), the weights and the (row, word) jobs,
// each summing n slots four at a time and then the rest.
uint64_t combine_loop_cost(uint64_t stride, uint64_t dv, uint64_t n) {
  constexpr uint64_t kLanes = 64, kMaxW = kCombineMaxWeights;
  const uint64_t rc = std::min({stride, kLanes, std::max<uint64_t>(1, kMaxW / n)});
  uint64_t lpr = 1, tree = 0, lpr_steps = 0;
  while (lpr * 2 * rc <= kLanes) lpr *= 2, ++lpr_steps;
  for (uint64_t off = lpr / 2; off > 0; off /= 2) ++tree;
  const uint64_t chunks = (stride + rc - 1) / rc, words = (dv + 1) / 2;
  const uint64_t pairs = (rc * n + kLanes - 1) / kLanes, strided = (n + lpr - 1) / lpr;
  const uint64_t jobs = (rc * (words + 1) + kLanes - 1) / kLanes;
  const uint64_t per_chunk = 2 * loop_cost(pairs) + 2 * loop_cost(strided) + 2 * loop_cost(tree) +
                             loop_cost(jobs) + jobs * (loop_cost(n / 4) + loop_cost(n % 4));
  return loop_cost(lpr_steps) + loop_cost(chunks) + chunks * per_chunk;
}

// Splits one item of attention_combine_rows.comp may merge: per lane,
// ceil(stride / 64) rows of 2 (n + 1) + (dv + 1) + dv (n + 1) loop
// iterations (plus the row loop's own), within lavapipe's loop cap.
uint32_t combine_rows_fan_in(uint32_t stride, uint32_t dv) {
  const uint64_t rows = (stride + 63) / 64;
  const uint64_t per_row = (kLoopUsable - loop_cost(0)) / rows - 1;  // minus the row loop
  if (per_row < 3 * uint64_t(dv) + 8) return 2;
  const uint64_t n_plus_1 = (per_row - loop_cost(dv)) / (uint64_t(dv) + 2);
  return static_cast<uint32_t>(std::clamp<uint64_t>(n_plus_1 - 1, 2, 1u << 20));
}

// Splits one item of attention_combine.comp may merge: at most
// kCombineMaxWeights (the shader's shared weights of a row chunk hold one
// row's), and on a device with lavapipe's loop cap within it
// (combine_loop_cost).
uint32_t combine_fan_in(uint32_t stride, uint32_t dv, bool loop_capped) {
  if (!loop_capped) return kCombineMaxWeights;
  uint32_t lo = 2, hi = kCombineMaxWeights;
  while (lo < hi) {  // the largest n whose cost fits (the cost grows with n)
    const uint32_t mid = (lo + hi + 1) / 2;
    if (combine_loop_cost(stride, dv, mid) <= kLoopUsable)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The widest texel kind (at most `kind`) whose width divides the first
// element's index and both strides.
uint32_t aligned_kind(uint32_t kind, const RowLayout& l) {
  for (; kind > 0; --kind) {
    const uint64_t w = kind == 2 ? 8 : 4;
    if ((l.offset / l.es) % w == 0 && l.offset % l.es == 0 && l.tok % w == 0 && l.head % w == 0 &&
        l.page % w == 0)
      return kind;
  }
  return 0;
}

// Rows of [..., heads, dim] from dim `first` (the token dim) on.
RowLayout rows_from(const Tensor& t, uint32_t first, bool* ok) {
  RowLayout l;
  l.es = dtype_size(t.dtype());
  l.offset = t.byte_offset();
  *ok = t.ndim() == first + 3 && t.stride(first + 2) == 1 && l.offset % l.es == 0;
  if (t.ndim() != first + 3) return l;
  l.tok = static_cast<uint64_t>(t.stride(first));
  l.head = static_cast<uint64_t>(t.stride(first + 1));
  l.extent = uint64_t(t.dim(first + 1) - 1) * l.head + uint64_t(t.dim(first + 2));
  // Strides count texels in 32-bit push constants.
  if (l.tok >= (1ull << 31) || l.head >= (1ull << 31)) *ok = false;
  return l;
}

// The call's attention variant defines vkattn_mask_mod.
bool has_mask_function(const AttentionCall& c) {
  return c.user && c.user->has_mask();
}

}  // namespace

RowLayout row_layout(const Tensor& t, bool* ok) {
  const uint32_t first = t.ndim() == 4 ? 1 : 0;
  RowLayout l = rows_from(t, first, ok);
  // Padded [B, S, ...]: one token stride across the batch.
  if (first == 1 && t.dim(0) > 1 && t.stride(0) != t.dim(1) * t.stride(1)) *ok = false;
  return l;
}

RowLayout pool_layout(const Tensor& t, bool* ok) {
  if (t.ndim() != 4) {
    *ok = false;
    return RowLayout{};
  }
  RowLayout l = rows_from(t, 1, ok);
  l.page = static_cast<uint64_t>(t.stride(0));
  l.page_extent = uint64_t(t.dim(1) - 1) * l.tok + l.extent;
  if (l.page >= (1ull << 31)) *ok = false;
  return l;
}

bool rows_bindable(const DeviceCaps& caps, const Tensor& t, bool texel, bool pool) {
  if (!t.buffer() || t.numel() == 0) return true;
  if (!t.words_in_buffer()) return false;
  if (t.plain() && !pool) return true;
  bool ok = false;
  const RowLayout l = pool ? pool_layout(t, &ok) : row_layout(t, &ok);
  if (!ok || (texel && !t.buffer()->texel_usage())) return false;
  // One token (one page of a pool) must fit a window with room to spare.
  const uint64_t limit = texel ? texel_window_limit(caps, 16) : storage_window_limit(caps);
  return (pool ? std::max(l.page, l.page_extent) * l.es : l.unit()) <= limit / 2;
}

VkFormat texel_format(vkattn_dtype dt, uint32_t kind) {
  if (dt == VKATTN_Q4) return VK_FORMAT_R32_UINT;  // 8 codes a texel
  if (is_8bit(dt))                                 // 8, 4 or 1 codes per texel
    return kind == 2 ? VK_FORMAT_R32G32_UINT : kind ? VK_FORMAT_R32_UINT : VK_FORMAT_R8_UINT;
  if (kind == 2) return VK_FORMAT_R32G32B32A32_UINT;
  if (dt == VKATTN_F32) return kind ? VK_FORMAT_R32G32B32A32_UINT : VK_FORMAT_R32_UINT;
  return kind ? VK_FORMAT_R32G32_UINT : VK_FORMAT_R16_UINT;
}

uint32_t call_flags(const AttentionCall& c) {
  const auto& d = c.desc;
  uint32_t flags = 0;
  if (d.causal) flags |= kFlagCausal;
  if (d.window_left >= 0) flags |= kFlagWindow;
  if (d.window_right >= 0) flags |= kFlagWindowRight;
  if (d.chunk_size > 0) flags |= kFlagChunk;
  if (!c.span_indptr.empty()) flags |= kFlagSpan;
  if (!c.tree_indptr.empty()) flags |= kFlagTree;
  if (c.topk) flags |= kFlagTopk;
  if (d.softcap > 0.0f) flags |= kFlagSoftcap;
  if (c.alibi) flags |= kFlagAlibi;
  if (d.mask_type == VKATTN_MASK_BOOL) flags |= kFlagMaskBool;
  if (d.mask_type == VKATTN_MASK_ADDITIVE) flags |= kFlagMaskAdd;
  if (!c.key_valid.empty()) flags |= kFlagKeyValid;
  if (c.lse) flags |= kFlagWriteLse;
  if (c.sinks) flags |= kFlagSinks;
  if (c.out->dtype() == VKATTN_F32 && c.q->dtype() != VKATTN_F32) flags |= kFlagOutF32;
  bool ok = false;
  const RowLayout o = row_layout(*c.out, &ok);
  if (c.out->dtype() != VKATTN_F32 && ((o.offset / o.es) % 2 || o.tok % 2 || o.head % 2))
    flags |= kFlagOutOdd;
  return flags;
}

FwdConfig fwd_config(const Context& ctx, const AttentionCall& c, const PreparedPlan& pp,
                     uint32_t flags) {
  FwdConfig cfg;
  cfg.var = pp.var;
  cfg.head_dim = c.desc.head_dim, cfg.head_dim_v = c.desc.head_dim_v;
  cfg.q_dtype = c.q->dtype(), cfg.kv_dtype = c.kv_dtype();
  cfg.qvec = pp.qvec, cfg.kvec = pp.kvec, cfg.vvec = pp.vvec;
  cfg.paged = c.paged();
  cfg.features = pp.var.all_features ? kCompiledFlags : flags & kCompiledFlags;
  cfg.features |= flags & kFlagOutF32;  // (the out tensor's dtype: never "all features")
  // Top-k lists: the decode and lanes families' only (the others never get
  // a call with them).
  if (!serves_topk(pp.var.family)) cfg.features &= ~uint32_t(kFlagTopk);
  if (ctx.options().fault_kernels >> static_cast<uint32_t>(pp.var.family) & 1u)
    cfg.features |= kFeatureFault;
  if (ctx.options().fault_odd_stores) cfg.features |= kFeatureFaultOdd;
  // (A variant call's pipeline is its family's with the user functions
  // spliced in: the one recorded, and the one the self-check checks.)
  cfg.user = c.user.get();
  cfg.user_mask = has_mask_function(c);
  // (Rows per lane: lanes' and tiled's R, decode's R / RS; their runs of
  // one token's heads start at multiples of the lane's rows.)
  const AttentionFamily fam = pp.var.family;
  cfg.user_head_free = cfg.user_mask && !c.user->mask_reads_head();
  if (cfg.user_head_free && (fam == AttentionFamily::kLanes || fam == AttentionFamily::kTiled ||
                             fam == AttentionFamily::kDecode)) {
    const uint32_t lane_rows = fam == AttentionFamily::kDecode
                                   ? pp.var.rows / std::max(pp.var.row_splits, 1u)
                                   : pp.var.rows;
    cfg.user_rows = std::gcd(c.desc.num_heads / c.desc.num_kv_heads, std::max(lane_rows, 1u));
  }
  return cfg;
}

// The variant of a call whose largest tile has max_rows rows (a
// self-check's call: the pinned one). Top-k lists run on the families
// that gather a tile's keys one at a time, in tiles of one token (its
// list), and without the page window (listed keys are not in order):
// decode by default (it compacts each item's list first), lanes when
// forced or tuned. A forced or tuned family that does not serve them
// (tiled, coopmat: their tiles share keys across rows, which a list per
// row does not) gives the call to decode, which is logged as a decline.
AttentionVariant call_variant(Context& ctx, const AttentionCall& c, KernelOptions opts,
                              uint32_t max_rows) {
  const auto& d = c.desc;
  const uint32_t group = d.num_heads / d.num_kv_heads;
  if (c.topk) {
    opts.attn_page_window = 0;
    if (opts.attn_kernel == KernelOptions::kUnset)
      opts.attn_kernel = static_cast<uint32_t>(AttentionFamily::kDecode);
  }
  auto pick = [&](const KernelOptions& o) {
    return c.pinned ? c.pinned->var
                    : choose_attention_variant(ctx.device(), o, d.head_dim, d.head_dim_v,
                                               c.topk ? group : max_rows, c.kv_dtype(), group,
                                               has_mask_function(c));
  };
  AttentionVariant var = pick(opts);
  // A cascade's prefix call on lanes (lavapipe's prefill family, whose
  // tiles are WG x R rows).
  if (c.prefix_tiles && !c.pinned && var.family == AttentionFamily::kLanes) {
    // A group of 64 rows or more over 1024 shared keys or more on
    // lavapipe is compute-bound: 4 rows a lane (unrolled up to twice
    // lanes_variant's code budget: cold, about 5 s more to compile at
    // d 128) reuse each K/V fetch twice as often as 2. shared-prefix-
    // 16x4096 (d 128): cascade / without 0.42x instead of 0.53x (R 2),
    // interleaved in one process.
    int64_t keys = 0;
    for (uint32_t b = 0; b < c.batch; ++b) keys = std::max(keys, c.cu_k[b + 1] - c.cu_k[b]);
    if (ctx.device().info().device_type == VKATTN_DEVICE_CPU && var.unroll_d && var.rows < 4 &&
        opts.attn_rows == KernelOptions::kUnset && max_rows >= 64 && keys >= 1024 &&
        4 * lanes_row_vec4(d.head_dim, d.head_dim_v) <= 2 * kLanesUnrolledVec4) {
      KernelOptions four = opts;
      four.attn_rows = 4;
      const AttentionVariant v = pick(four);
      if (v.family == AttentionFamily::kLanes) var = v, opts = four;
    }
    // A workgroup wide enough for the largest group's rows, so the shared
    // keys are read once per kv head (its lanes are independent: a wider
    // workgroup costs no exchange).
    if (opts.attn_wg == KernelOptions::kUnset && var.tile_rows() < max_rows) {
      const uint32_t cap = std::min<uint32_t>(64, ctx.device().caps().max_workgroup_invocations);
      const uint32_t want = (max_rows + var.rows - 1) / var.rows;
      uint32_t wg = var.wg;
      while (wg < want && wg * 2 <= cap) wg *= 2;
      KernelOptions wide = opts;
      wide.attn_wg = wg;
      const AttentionVariant v = pick(wide);
      if (v.family == AttentionFamily::kLanes) var = v;
    }
  }
  if (c.topk && !c.pinned && !serves_topk(var.family)) {
    const std::string from = attention_family(var.family).name;
    opts.attn_kernel = static_cast<uint32_t>(AttentionFamily::kDecode);
    var = pick(opts);
    const std::string note = from + " to decode: top-k lists run on the decode and lanes families";
    var.fallback = var.fallback.empty() ? note : note + "; " + var.fallback;
  }
  // Attention variants on coopmat need a compiler that knows
  // GL_KHR_cooperative_matrix; without one, tiled serves (said once).
  if (c.user && !c.pinned && var.family == AttentionFamily::kCoopmat &&
      !c.user->compiler_knows_coopmat()) {
    opts.attn_kernel = static_cast<uint32_t>(AttentionFamily::kTiled);
    var = pick(opts);
    const std::string note =
        "coopmat to tiled: the loaded GLSL compiler does not know GL_KHR_cooperative_matrix "
        "(glslang 14 or later), so attention variants (user functions) do not run on coopmat";
    if (first_time("coopmat declines variants")) log(VKATTN_LOG_WARNING, note);
    var.fallback = var.fallback.empty() ? note : note + "; " + var.fallback;
  }
  if (c.topk && !serves_topk(var.family))
    fail(VKATTN_ERROR_UNSUPPORTED,
         "desc->topk_indices: top-k lists run on the decode and lanes families, which decline "
         "this call (",
         var.fallback, ")");
  // A decode item compacts at most kTopkItemSlots of its list in shared memory.
  if (c.topk && var.family == AttentionFamily::kDecode)
    var.max_keys = decode_topk_item_slots(var, ctx.device().caps(), d.head_dim, d.head_dim_v);
  return var;
}

void choose_variant(Context& ctx, const AttentionCall& c, PlanPart part, PreparedPlan& pp) {
  const auto& d = c.desc;
  const uint32_t group = d.num_heads / d.num_kv_heads;
  // A part's rows are its own sequences' (a batch-invariant part's are
  // set by its class below).
  const bool invariant = part != PlanPart::kAll && ctx.options().batch_invariant;
  uint32_t max_rows = 0;
  int64_t max_t = 0;
  for (uint32_t b = 0; b < c.batch; ++b) {
    const int64_t t = c.cu_q[b + 1] - c.cu_q[b];
    if (part != PlanPart::kAll && part_of(t) != part) continue;
    max_t = std::max(max_t, t);
    max_rows = static_cast<uint32_t>(
        std::min<uint64_t>(UINT32_MAX / 2, std::max<uint64_t>(max_rows, uint64_t(t) * group)));
  }
  // A batch-invariant part's variant follows its class, not its sequences.
  // (decode: a plain decode's rows, one token x the GQA group, the common case;
  // a longer decode-shaped sequence takes more tiles of that shape)
  if (invariant && part == PlanPart::kDecode) max_rows = group;
  if (invariant && part == PlanPart::kPrefill) max_rows = kInvariantPrefillRows;
  const vkattn_dtype kv_dt = c.kv_dtype(), q_dt = c.q->dtype();
  // Row layouts (record_attention packed what they cannot address).
  bool ok = false;
  pp.q = row_layout(*c.q, &ok);
  pp.out = row_layout(*c.out, &ok);
  if (c.pools)
    pp.k = pool_layout(*c.k, &ok), pp.v = pool_layout(*c.v, &ok);
  else if (!c.step)
    pp.k = row_layout(*c.k, &ok), pp.v = row_layout(*c.v, &ok);
  // The variant and its texel widths (a self-check's call: the pinned ones).
  auto choose = [&](const KernelOptions& opts_in) {
    pp.var = call_variant(ctx, c, opts_in, max_rows);
    const bool scalar = pp.var.scalar_fetch;
    pp.kvec = texel_kind(kv_dt, d.head_dim, scalar);
    pp.vvec = texel_kind(kv_dt, d.head_dim_v, scalar);
    pp.qvec = aligned_kind(texel_kind(q_dt, d.head_dim, scalar), pp.q);
    // (Q4 has one texel kind, whatever the stand-in pools of an up-front
    // check look like.)
    if (!c.step && kv_dt != VKATTN_Q4)
      pp.kvec = aligned_kind(pp.kvec, pp.k), pp.vvec = aligned_kind(pp.vvec, pp.v);
    if (c.pinned) {
      pp.qvec = std::min(pp.qvec, c.pinned->qvec);
      if (kv_dt != VKATTN_Q4)  // (one kind only)
        pp.kvec = std::min(pp.kvec, c.pinned->kvec), pp.vvec = std::min(pp.vvec, c.pinned->vvec);
    }
  };
  // Tuned choices of this call's class before the device table, unless
  // the environment forces one (ops/attention/tune.h). A tuning entry is a
  // suggestion: one whose values are out of range, or that this device or
  // build cannot run (a variant the family refuses, coopmat in a build
  // without it), is ignored with one line per process and the call takes
  // the table's choice; an entry whose family declines the call's shape
  // falls back as a forced family does.
  // The class's own family, where the environment names one
  // (VKATTN_ATTN_KERNEL_DECODE / _PREFILL over VKATTN_ATTN_KERNEL).
  KernelOptions opts = ctx.options();
  const bool decode_class =
      part == PlanPart::kAll ? max_t <= int64_t(kDecodeMaxTokens) : part == PlanPart::kDecode;
  const uint32_t class_kernel = decode_class ? opts.attn_kernel_decode : opts.attn_kernel_prefill;
  if (class_kernel != KernelOptions::kUnset) opts.attn_kernel = class_kernel;
  bool tuned_chosen = false;
  pp.source = "table";
  if (c.pinned) {
    pp.source = "check";
  } else if (opts.forces_attention()) {
    pp.source = "env";
  } else if (ctx.tuning().enabled() && !ctx.is_tuner() && !ctx.tuning().empty()) {
    TuningFile::Entry e;
    const std::string key = tune_class(c, part, invariant);
    KernelOptions tuned = opts;
    if (ctx.tuning().find(key, &e) && TuningFile::apply(e.options, &tuned)) {
      std::string why = tuned.range_error(true);
      if (why.empty()) {
        try {
          choose(tuned);
          tuned_chosen = true;
          pp.source = "tuned";
        } catch (const Error& err) {
          if (err.status() != VKATTN_ERROR_INVALID_ARGUMENT &&
              err.status() != VKATTN_ERROR_UNSUPPORTED)
            throw;
          why = err.what();
        }
      }
      if (!why.empty()) ctx.tuning().ignore(key, e, why);
    }
  }
  if (!tuned_chosen) choose(opts);
  // A failed self-check moves the call to the next family with the
  // context's own options (a tuned entry's knobs are its family's).
  if (!c.pinned) settle_checked_variant(ctx, c, pp, opts, choose);
  if (c.topk && !serves_topk(pp.var.family))
    fail(VKATTN_ERROR_UNSUPPORTED,
         "desc->topk_indices: top-k lists run on the decode and lanes families, "
         "which failed their self-checks on this device");
}

// What one token / key / mask element costs in each binding.
CallUnits call_units(const AttentionCall& c, const PreparedPlan& pp) {
  const auto& d = c.desc;
  CallUnits u;
  u.q_token = pp.q.unit();
  u.out_token = pp.out.unit();
  u.lse_token = c.lse ? uint64_t(d.num_heads) * 4 : 0;
  u.k_key = c.paged() ? 0 : pp.k.unit();
  u.v_key = c.paged() ? 0 : pp.v.unit();
  u.key_valid = c.key_valid.empty() ? 0 : 1;
  u.mask_elem = c.mask ? dtype_size(c.mask->dtype()) : 0;
  u.topk = c.topk != nullptr;
  u.group = d.num_heads / d.num_kv_heads;
  u.page_size = c.step ? c.step->cache().desc().page_size : c.pools ? c.pools->page_size : 0;
  return u;
}

// What one dispatch may bind and how much scratch its partials may take.
ScheduleLimits schedule_limits(Context& ctx, const AttentionCall& c, const PreparedPlan& pp) {
  const DeviceCaps& caps = ctx.device().caps();
  const vkattn_dtype kv_dt = c.kv_dtype(), q_dt = c.q->dtype();
  const AttentionVariant& var = pp.var;
  ScheduleLimits lim;
  lim.storage = storage_window_limit(caps);
  lim.q_texel = texel_window_limit(caps, texel_format_bytes(texel_format(q_dt, pp.qvec)));
  lim.k_texel = texel_window_limit(caps, texel_format_bytes(texel_format(kv_dt, pp.kvec)));
  lim.v_texel = texel_window_limit(caps, texel_format_bytes(texel_format(kv_dt, pp.vvec)));
  const uint64_t part_row = uint64_t(c.desc.head_dim_v) * 4;
  lim.arena_rows_max = std::min(lim.storage / part_row, lim.storage / 4);
  lim.arena_rows = std::min(
      lim.arena_rows_max,
      (ctx.options().scratch_bytes ? ctx.options().scratch_bytes : kScratchBytes) / (part_row + 4));
  lim.fan_in = std::min(combine_by_words(ctx)
                            ? combine_fan_in(var.tile_rows(), c.desc.head_dim_v, caps.loop_capped)
                            : combine_rows_fan_in(var.tile_rows(), c.desc.head_dim_v),
                        ctx.options().attn_combine_fan_in);  // (VKATTN_ATTN_COMBINE_FAN_IN)
  lim.static_chunks = var.static_chunks;
  lim.max_groups = uint64_t(caps.max_workgroup_count[0]) *
                   std::min<uint32_t>(caps.max_workgroup_count[1], 65535);
  return lim;
}

// The planner's view of the call: the variant's tiles and key caps, the
// rules that bound key ranges, and what one binding window holds.
PlanShape plan_shape(const AttentionCall& c, const PreparedPlan& pp, const ScheduleLimits& lim,
                     PlanPart part, bool invariant) {
  const auto& d = c.desc;
  const AttentionVariant& var = pp.var;
  const CallUnits& u = pp.units;
  const uint32_t group = u.group;
  PlanShape shape{
      group,  d.num_kv_heads,      d.causal != 0, d.window_left,    var.tile_rows(),   var.rows,
      var.wg, var.decode_min_keys, var.max_keys,  var.target_items, var.min_split_keys};
  shape.decode_merge = var.decode_merge;
  shape.balance_items = var.balance_items;
  shape.window_right = d.window_right;
  shape.chunk_size = d.chunk_size;
  if (!c.span_indptr.empty())
    shape.span_indptr = c.span_indptr.data(), shape.spans = c.spans.data();
  // (A variant's mask function adds lanes' range scans to its loop budget:
  // half the keys the budget allows, within the variant's own cap. Halving
  // the cap itself split every range past 4088 keys in two, and a split
  // the function hides is cheap where the schedule thinks it costs as much
  // as its sibling: lavapipe's threads got the hidden halves on one side.)
  // (tiled: the same scans, a tile at a time.)
  if (has_mask_function(c)) {
    const uint32_t d_qk = c.desc.head_dim, d_v = c.desc.head_dim_v;
    if (var.family == AttentionFamily::kLanes)
      shape.max_keys = std::min(
          shape.max_keys,
          attention_max_keys_with_mask_scans(attention_max_keys(var, d_qk, d_v), var.block_keys));
    if (var.family == AttentionFamily::kTiled)
      shape.max_keys = std::min(shape.max_keys, tiled_max_keys(var, d_qk, d_v, true));
  }
  shape.batch_invariant = invariant;
  if (c.topk) shape.topk = true, shape.topk_k = c.topk_k();
  if (!c.key_skip.empty()) shape.key_skip = c.key_skip.data();
  if (invariant && part == PlanPart::kDecode) shape.fixed_split_keys = var.invariant_split_keys;
  // Item key ranges within one K/V texel window (every lane of a
  // lanes or tiled decode-mode item reads max_keys of them; a decode
  // family item reads its range once).
  if (!c.paged()) {
    const uint64_t lanes = var.family == AttentionFamily::kDecode ? 1 : var.wg;
    const uint64_t keys = std::min(lim.k_texel / std::max<uint64_t>(u.k_key, 1),
                                   lim.v_texel / std::max<uint64_t>(u.v_key, 1)) /
                          lanes;
    shape.max_keys =
        static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(shape.max_keys, keys)));
    shape.min_split_keys = std::min(shape.min_split_keys, shape.max_keys);
  }
  uint64_t tile_tokens = lim.q_texel / std::max<uint64_t>(u.q_token, 1);
  tile_tokens = std::min(tile_tokens, lim.storage / std::max<uint64_t>(u.out_token, 1));
  if (u.lse_token) tile_tokens = std::min(tile_tokens, lim.storage / u.lse_token);
  shape.max_tile_tokens = std::max<uint64_t>(1, tile_tokens);
  shape.mask_window_elems = u.mask_elem ? lim.storage / u.mask_elem : 0;
  return shape;
}

// Whether this context's kernels read plans from device-local memory
// (VKATTN_PLAN_MEMORY=device; by default on discrete GPUs, whose
// host-visible memory is system RAM behind PCIe) or from host-visible
// memory (VKATTN_PLAN_MEMORY=host; by default on UMA and CPU devices,
// where that is the device's memory anyway).
bool plan_on_device(Context& ctx) {
  const uint32_t forced = ctx.options().plan_memory;
  return forced != KernelOptions::kUnset ? forced == 1 : !ctx.device().caps().prefer_host_visible;
}

bool combine_by_words(Context& ctx) {
  const uint32_t forced = ctx.options().attn_combine;
  return forced != KernelOptions::kUnset ? forced == 1
                                         : ctx.device().info().device_type != VKATTN_DEVICE_CPU;
}

// The plan's device copy: items | combine items | sequences | block table,
// in the step's own buffer (reused by every layer) or the recorder's ring
// for this call. Host plans are written in place (host-visible memory);
// device plans keep their bytes in plan_image, copied into device-local
// memory (the step's buffer, or the open batch's device ring) by the
// first call that records the plan (record_attention: stage_plan_uploads).
void upload_plan(Context& ctx, const AttentionCall& c, const std::vector<uint32_t>& table,
                 PreparedPlan* pp) {
  const Plan& plan = pp->plan;
  const Schedule& sched = pp->sched;
  const uint64_t items_bytes = sched.items.size() * sizeof(PlanItem);
  const uint64_t combine_bytes = sched.combine.size() * sizeof(CombineItem);
  const uint64_t seqs_bytes = plan.seqs.size() * sizeof(PlanSeq);
  const uint64_t table_bytes = table.size() * 4;
  const uint64_t o_items = 0, o_combine = round_up(items_bytes, kRegionAlign);
  const uint64_t o_seqs = o_combine + round_up(combine_bytes, kRegionAlign);
  const uint64_t o_table = o_seqs + round_up(seqs_bytes, kRegionAlign);
  const uint64_t bytes = o_table + round_up(std::max<uint64_t>(table_bytes, 16), kRegionAlign);
  const bool on_device = plan_on_device(ctx);
  std::shared_ptr<Buffer> data;
  Buffer* raw = nullptr;
  uint64_t base = 0;
  uint8_t* m = nullptr;
  if (on_device) {
    pp->plan_image.assign(bytes, 0);
    m = pp->plan_image.data();
    if (c.step) {
      data = std::make_shared<Buffer>(ctx.device(), bytes, false, false);
      pp->plan_dst = data.get();
    } else {
      const DeviceSlice d = ctx.recorder().alloc_device(bytes);
      raw = d.buffer, base = d.offset;
      pp->plan_dst = raw;
    }
    pp->plan_dst_offset = base;
    pp->upload_pending = true;
  } else if (c.step) {
    data = std::make_shared<Buffer>(ctx.device(), bytes, true);
    m = data->mapped();
  } else {
    HostSlice s = ctx.recorder().alloc_host(bytes);
    raw = s.buffer;
    base = s.offset;
    m = s.host;
  }
  pp->plan_on_device = on_device;
  std::memset(m, 0, bytes);
  std::memcpy(m + o_items, sched.items.data(), items_bytes);
  if (combine_bytes) std::memcpy(m + o_combine, sched.combine.data(), combine_bytes);
  std::memcpy(m + o_seqs, plan.seqs.data(), seqs_bytes);
  if (table_bytes) std::memcpy(m + o_table, table.data(), table_bytes);
  pp->items = Region{data, raw, base + o_items, std::max<uint64_t>(items_bytes, 16)};
  pp->combine = Region{data, raw, base + o_combine, std::max<uint64_t>(combine_bytes, 16)};
  pp->seqs = Region{data, raw, base + o_seqs, std::max<uint64_t>(seqs_bytes, 16)};
  pp->table = Region{data, raw, base + o_table, std::max<uint64_t>(table_bytes, 16)};
}

// Trees' and top-k lists' fields of every record (span records too: their
// sequence's), and (top-k over pages in several pool buffers) the block
// table once per buffer, the other buffers' entries NO_SLOT (table_buf:
// each entry's buffer).
void set_rule_records(const AttentionCall& c, Plan& plan, const std::vector<uint32_t>& table_buf,
                      std::vector<uint32_t>* table_io, PreparedPlan* pp) {
  std::vector<uint32_t>& table = *table_io;
  for (size_t r = 0; r < plan.seqs.size(); ++r) plan.seqs[r].call_seq = plan.seq_of[r];
  if (c.topk) {
    const uint64_t k = c.topk_k();
    const bool per_head = c.topk->ndim() == 3;
    const uint64_t stride = per_head ? k * c.desc.num_kv_heads : k;
    for (size_t r = 0; r < plan.seqs.size(); ++r) {
      const uint32_t b = plan.seq_of[r];  // (a sequence's own record: b)
      plan.seqs[r].topk_off = static_cast<uint32_t>(uint64_t(c.cu_q[b]) * stride);
      plan.seqs[r].topk_stride = static_cast<uint32_t>(stride);
      plan.seqs[r].topk_hs = per_head ? static_cast<uint32_t>(k) : 0u;
    }
    // Pages in several pool buffers: a table copy per buffer.
    std::vector<uint32_t> bufs(table_buf);
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    if (bufs.size() > 1) {
      pp->table_len = static_cast<uint32_t>(table.size());
      std::vector<uint32_t> all;
      all.reserve(table.size() * bufs.size());
      for (uint32_t i = 0; i < bufs.size(); ++i) {
        pp->table_copy_of[bufs[i]] = i;
        for (size_t e = 0; e < table.size(); ++e)
          all.push_back(table_buf[e] == bufs[i] ? table[e] : kNoSlot);
      }
      table.swap(all);
    }
  }
  if (!c.tree_indptr.empty()) {
    // Trees: each record (span records too) points at its sequence's words.
    for (size_t r = 0; r < plan.seqs.size(); ++r) {
      const uint32_t b = plan.seq_of[r];  // (a sequence's own record: b)
      const bool tree = c.tree_indptr[b + 1] > c.tree_indptr[b];
      plan.seqs[r].tree_off = static_cast<uint32_t>(c.tree_indptr[b]);
      plan.seqs[r].tree_w = tree ? (plan.seqs[r].t + 31) / 32 : 0;
    }
  }
}

std::shared_ptr<PreparedPlan> prepare_plan(Context& ctx, const AttentionCall& c, PlanPart part) {
  host_alloc_point();
  auto pp = std::make_shared<PreparedPlan>();
  std::vector<uint8_t> include;
  if (part != PlanPart::kAll) {
    include.resize(c.batch);
    for (uint32_t b = 0; b < c.batch; ++b)
      include[b] = part_of(c.cu_q[b + 1] - c.cu_q[b]) == part ? 1 : 0;
  }
  const bool invariant = part != PlanPart::kAll && ctx.options().batch_invariant;
  choose_variant(ctx, c, part, *pp);

  pp->units = call_units(c, *pp);
  const CallUnits& u = pp->units;
  const ScheduleLimits lim = schedule_limits(ctx, c, *pp);
  PlanShape shape = plan_shape(c, *pp, lim, part, invariant);
  std::vector<uint32_t> table, table_buf;  // (table_buf: each entry's binding)
  std::vector<std::vector<KeySegment>> segments;
  if (c.pools) {
    // Caller pools are bound in windows of window_pages pages.
    const uint64_t span_k = std::max(pp->k.page, pp->k.page_extent) * pp->k.es;
    const uint64_t span_v = std::max(pp->v.page, pp->v.page_extent) * pp->v.es;
    const uint64_t per = std::min(lim.k_texel / std::max<uint64_t>(span_k, 1),
                                  lim.v_texel / std::max<uint64_t>(span_v, 1));
    if (per == 0)
      fail(VKATTN_ERROR_UNSUPPORTED, "one page of the pools spans ", std::max(span_k, span_v),
           " bytes, more than one binding of this device may cover");
    pp->window_pages = static_cast<uint32_t>(std::min<uint64_t>(per, 1u << 30));
  } else if (c.step) {
    // A cache's pool buffers are bound in windows of window_pages pages of
    // one group (ops/kv_cache.h): as many as this call's K and V views
    // cover (a whole group where they cover the buffer).
    pp->window_pages = c.step->cache().window_pages(std::min(lim.k_texel, lim.v_texel));
  }
  if (c.paged()) {
    // Block tables of pages local to their binding (a window of the cache's
    // pool buffer of every layer, or of the caller's pools); keys cut where
    // that binding changes.
    // 64-bit: page sizes reach 2^32 - 1 (zero-stride caller pools), and
    // uu + ps must not wrap (it emptied the block table: every sequence
    // read page 0).
    const uint64_t ps = u.page_size, wp = pp->window_pages;
    // The binding a page lies in (a window of the cache's page group or of
    // the caller's pools) and its index there.
    auto binding_of = [&](uint32_t page) -> uint32_t {
      return c.step ? c.step->cache().window_of(page, wp) : static_cast<uint32_t>(page / wp);
    };
    auto local_of = [&](uint32_t page) -> uint32_t {
      return c.step ? c.step->cache().page_in_window(page, wp) : static_cast<uint32_t>(page % wp);
    };
    segments.resize(c.batch);
    for (uint32_t b = 0; b < c.batch; ++b) {
      const uint64_t uu = static_cast<uint64_t>(c.cu_k[b + 1] - c.cu_k[b]);
      const uint64_t n_pages = (uu + ps - 1) / ps;
      // Batch invariance: a sequence whose pages lie in several bindings is
      // read from gathered copies (PreparedPlan::gathered), in chunks of one
      // binding's pages from its first page on.
      bool gather = false;
      if (invariant && include[b] && c.cu_q[b + 1] > c.cu_q[b] && !c.topk)
        for (uint64_t i = 1; i < n_pages && !gather; ++i)
          gather = binding_of(c.page(b, i)) != binding_of(c.page(b, 0));
      const uint32_t chunk0 = static_cast<uint32_t>(pp->gather_first.size());
      for (uint64_t i = 0; i < n_pages; ++i) {
        const uint32_t page = c.page(b, i);
        uint32_t buf = binding_of(page), local = local_of(page);
        if (gather) {
          buf = PreparedPlan::kGatherBuffer + chunk0 + static_cast<uint32_t>(i / wp);
          local = static_cast<uint32_t>(i % wp);
          if (local == 0) pp->gather_first.push_back(static_cast<uint32_t>(pp->gathered.size()));
          pp->gathered.push_back(page);
        }
        table.push_back(local);
        table_buf.push_back(buf);
        auto& seg = segments[b];
        const uint32_t k0 = static_cast<uint32_t>(i * ps);  // < uu < 2^31
        const uint32_t k1 = static_cast<uint32_t>(std::min(uu, i * ps + ps));
        if (!seg.empty() && seg.back().buffer == buf)
          seg.back().end = k1;
        else
          seg.push_back({k0, k1, buf});
      }
    }
  }
  pp->plan =
      build_plan(shape, c.batch, c.cu_q.data(), c.cu_k.data(), c.paged() ? &segments : nullptr,
                 part != PlanPart::kAll ? &include : nullptr);
  Plan& plan = pp->plan;
  if (c.paged()) {
    // Paged: a sequence's k_off is its first block-table entry.
    const uint32_t ps = u.page_size;
    uint64_t off = 0;
    for (uint32_t b = 0; b < c.batch; ++b) {
      plan.seqs[b].k_off = static_cast<uint32_t>(off);
      plan.offs[b].k = off;
      off += (uint64_t(plan.seqs[b].u) + ps - 1) / ps;
    }
    for (size_t r = c.batch; r < plan.seqs.size(); ++r) {  // span records: their sequence's
      plan.seqs[r].k_off = plan.seqs[plan.seq_of[r]].k_off;
      plan.offs[r].k = plan.offs[plan.seq_of[r]].k;
    }
  }
  set_rule_records(c, plan, table_buf, &table, pp.get());
  pp->sched = schedule_plan(plan, u, lim);
  const Schedule& sched = pp->sched;
  if (sched.items.empty()) return pp;

  upload_plan(ctx, c, table, pp.get());
  return pp;
}

}  // namespace vkattn

// Recording of the attention forward pass: plan (ops/attention_plan.h),
// schedule (ops/attention_schedule.h), then per wave the forward passes of
// shaders/attention_fwd.comp and the combine levels of
// shaders/attention_combine.comp, every binding a window that fits the
// device. Everything that can fail is acquired before the first command is
// recorded.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/loop_budget.h"
#include "ops/attention.h"
#include "ops/attention_family.h"
#include "ops/attention_plan.h"
#include "ops/attention_schedule.h"
#include "ops/attention_variant.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

const KernelLayout kCombineLayout{
    "attention_combine",
    {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
    36};

struct CombinePush {
  uint32_t n_items, num_heads, num_kv_heads, flags, dv, item_base, seq_base, out_base, lse_base;
};
static_assert(sizeof(CombinePush) == 36, "push constants mirror the shader");

// Default bytes of the split-KV scratch arena of one wave
// (VKATTN_SCRATCH_BYTES overrides; tests use it to force many waves).
constexpr uint64_t kScratchBytes = 64ull << 20;
// Plan data regions start at this alignment (any device's storage offset
// alignment divides it).
constexpr uint64_t kRegionAlign = 256;

// Flags whose transforms are compiled into attention_fwd.comp only when a
// call uses them (spec constant FEATURES).
constexpr uint32_t kCompiledFlags =
    kFlagSoftcap | kFlagAlibi | kFlagMaskBool | kFlagMaskAdd | kFlagKeyValid;

uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// Texel width: 0 = one element, 1 = four elements, 2 = eight 16-bit elements.
uint32_t texel_kind(vkattn_dtype dt, uint32_t dim, bool scalar) {
  if (scalar || dim % 4 != 0) return 0;
  return (dt != VKATTN_F32 && dim % 8 == 0) ? 2 : 1;
}

VkFormat texel_format(vkattn_dtype dt, uint32_t kind) {
  if (kind == 2) return VK_FORMAT_R32G32B32A32_UINT;
  if (dt == VKATTN_F32) return kind ? VK_FORMAT_R32G32B32A32_UINT : VK_FORMAT_R32_UINT;
  return kind ? VK_FORMAT_R32G32_UINT : VK_FORMAT_R16_UINT;
}

// Splits one combine item may merge: attention_combine.comp runs, per lane,
// ceil(stride / 64) rows of 2 (n + 1) + (dv + 1) + dv (n + 1) loop
// iterations (plus the row loop's own).
uint32_t combine_fan_in(uint32_t stride, uint32_t dv) {
  const uint64_t rows = (stride + 63) / 64;
  const uint64_t per_row = (kLoopUsable - loop_cost(0)) / rows - 1;  // minus the row loop
  if (per_row < 3 * uint64_t(dv) + 8) return 2;
  const uint64_t n_plus_1 = (per_row - loop_cost(dv)) / (uint64_t(dv) + 2);
  return static_cast<uint32_t>(std::clamp<uint64_t>(n_plus_1 - 1, 2, 1u << 20));
}

// A plan, its schedule and their device copy: items, combine items,
// sequences and (paged) block tables in one host-visible buffer. Paged
// calls keep it in a buffer of their own, reused by every layer of the
// step; other calls put it in the open batch's host ring.
struct PreparedPlan {
  Plan plan;
  Schedule sched;
  AttentionVariant var;
  CallUnits units;
  uint32_t qvec = 0, kvec = 0, vvec = 0;
  Region items, combine, seqs, table;
};

std::shared_ptr<PreparedPlan> prepare_plan(Context& ctx, const AttentionCall& c) {
  host_alloc_point();
  const auto& d = c.desc;
  const DeviceCaps& caps = ctx.device().caps();
  auto pp = std::make_shared<PreparedPlan>();
  const uint32_t group = d.num_heads / d.num_kv_heads;
  uint32_t max_rows = 0;
  for (uint32_t b = 0; b < c.batch; ++b)
    max_rows = static_cast<uint32_t>(std::min<uint64_t>(
        UINT32_MAX / 2, std::max<uint64_t>(max_rows, uint64_t(c.cu_q[b + 1] - c.cu_q[b]) * group)));
  pp->var =
      choose_attention_variant(ctx.device(), ctx.options(), d.head_dim, d.head_dim_v, max_rows);
  const AttentionVariant& var = pp->var;
  const vkattn_dtype kv_dt = c.kv_dtype(), q_dt = c.q->dtype();
  pp->kvec = texel_kind(kv_dt, d.head_dim, var.scalar_fetch);
  pp->vvec = texel_kind(kv_dt, d.head_dim_v, var.scalar_fetch);
  pp->qvec = texel_kind(q_dt, d.head_dim, var.scalar_fetch);

  // What one token / key / mask element costs in each binding.
  CallUnits& u = pp->units;
  const uint64_t es_q = dtype_size(q_dt), es_kv = dtype_size(kv_dt);
  u.q_token = uint64_t(d.num_heads) * d.head_dim * es_q;
  u.out_token = uint64_t(d.num_heads) * d.head_dim_v * es_q;
  u.lse_token = c.lse ? uint64_t(d.num_heads) * 4 : 0;
  u.k_key = c.step ? 0 : uint64_t(d.num_kv_heads) * d.head_dim * es_kv;
  u.v_key = c.step ? 0 : uint64_t(d.num_kv_heads) * d.head_dim_v * es_kv;
  u.key_valid = c.key_valid.empty() ? 0 : 1;
  u.mask_elem = c.mask ? dtype_size(c.mask->dtype()) : 0;
  u.group = group;
  u.page_size = c.step ? c.step->cache().desc().page_size : 0;

  ScheduleLimits lim;
  lim.storage = storage_window_limit(caps);
  lim.q_texel = texel_window_limit(caps, texel_format_bytes(texel_format(q_dt, pp->qvec)));
  lim.k_texel = texel_window_limit(caps, texel_format_bytes(texel_format(kv_dt, pp->kvec)));
  lim.v_texel = texel_window_limit(caps, texel_format_bytes(texel_format(kv_dt, pp->vvec)));
  const uint64_t part_row = uint64_t(d.head_dim_v) * 4;
  lim.arena_rows_max = std::min(lim.storage / part_row, lim.storage / 4);
  lim.arena_rows = std::min(
      lim.arena_rows_max,
      (ctx.options().scratch_bytes ? ctx.options().scratch_bytes : kScratchBytes) / (part_row + 4));
  lim.fan_in = combine_fan_in(var.tile_rows(), d.head_dim_v);
  lim.static_chunks = var.static_chunks;
  lim.max_groups = uint64_t(caps.max_workgroup_count[0]) *
                   std::min<uint32_t>(caps.max_workgroup_count[1], 65535);

  PlanShape shape{
      group,  d.num_kv_heads,      d.causal != 0, d.window_left,    var.tile_rows(),   var.rows,
      var.wg, var.decode_min_keys, var.max_keys,  var.target_items, var.min_split_keys};
  shape.decode_merge = var.decode_merge;
  // Item key ranges within one K/V texel window (every lane of a
  // decode-mode item reads max_keys of them).
  if (!c.step) {
    const uint64_t keys = std::min(lim.k_texel / std::max<uint64_t>(u.k_key, 1),
                                   lim.v_texel / std::max<uint64_t>(u.v_key, 1)) /
                          var.wg;
    shape.max_keys =
        static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(shape.max_keys, keys)));
    shape.min_split_keys = std::min(shape.min_split_keys, shape.max_keys);
  }
  uint64_t tile_tokens = lim.q_texel / std::max<uint64_t>(u.q_token, 1);
  tile_tokens = std::min(tile_tokens, lim.storage / std::max<uint64_t>(u.out_token, 1));
  if (u.lse_token) tile_tokens = std::min(tile_tokens, lim.storage / u.lse_token);
  shape.max_tile_tokens = std::max<uint64_t>(1, tile_tokens);
  shape.mask_window_elems = u.mask_elem ? lim.storage / u.mask_elem : 0;

  std::vector<uint32_t> table;
  std::vector<std::vector<KeySegment>> segments;
  if (c.step) {
    // Block tables of local pages; keys cut where the page group (the pool
    // buffer of every layer) changes.
    const KvCache& cache = c.step->cache();
    const uint32_t ps = cache.desc().page_size;
    segments.resize(c.batch);
    for (uint32_t b = 0; b < c.batch; ++b) {
      const StepSeq& sq = c.step->seqs()[b];
      const uint32_t uu = static_cast<uint32_t>(sq.len + sq.t);
      const uint32_t n_pages = (uu + ps - 1) / ps;
      for (uint32_t i = 0; i < n_pages; ++i) {
        uint32_t page = sq.pages[i], buf = cache.group_of(page);
        table.push_back(cache.local_page(page));
        auto& seg = segments[b];
        uint32_t k0 = i * ps, k1 = std::min(uu, k0 + ps);
        if (!seg.empty() && seg.back().buffer == buf)
          seg.back().end = k1;
        else
          seg.push_back({k0, k1, buf});
      }
    }
  }
  pp->plan = build_plan(shape, c.batch, c.cu_q.data(), c.cu_k.data(), c.step ? &segments : nullptr);
  Plan& plan = pp->plan;
  if (c.step) {
    // Paged: a sequence's k_off is its first block-table entry.
    const uint32_t ps = c.step->cache().desc().page_size;
    uint64_t off = 0;
    for (uint32_t b = 0; b < c.batch; ++b) {
      plan.seqs[b].k_off = static_cast<uint32_t>(off);
      plan.offs[b].k = off;
      off += (uint64_t(plan.seqs[b].u) + ps - 1) / ps;
    }
  }
  pp->sched = schedule_plan(plan, u, lim);
  const Schedule& sched = pp->sched;
  if (sched.items.empty()) return pp;

  // Device copy: items | combine items | sequences | block table.
  const uint64_t items_bytes = sched.items.size() * sizeof(PlanItem);
  const uint64_t combine_bytes = sched.combine.size() * sizeof(CombineItem);
  const uint64_t seqs_bytes = plan.seqs.size() * sizeof(PlanSeq);
  const uint64_t table_bytes = table.size() * 4;
  const uint64_t o_items = 0, o_combine = round_up(items_bytes, kRegionAlign);
  const uint64_t o_seqs = o_combine + round_up(combine_bytes, kRegionAlign);
  const uint64_t o_table = o_seqs + round_up(seqs_bytes, kRegionAlign);
  const uint64_t bytes = o_table + round_up(std::max<uint64_t>(table_bytes, 16), kRegionAlign);
  std::shared_ptr<Buffer> data;
  Buffer* raw = nullptr;
  uint64_t base = 0;
  uint8_t* m = nullptr;
  if (c.step) {
    data = std::make_shared<Buffer>(ctx.device(), bytes, true);
    m = data->mapped();
  } else {
    HostSlice s = ctx.recorder().alloc_host(bytes);
    raw = s.buffer;
    base = s.offset;
    m = s.host;
  }
  std::memset(m, 0, bytes);
  std::memcpy(m + o_items, sched.items.data(), items_bytes);
  if (combine_bytes) std::memcpy(m + o_combine, sched.combine.data(), combine_bytes);
  std::memcpy(m + o_seqs, plan.seqs.data(), seqs_bytes);
  if (table_bytes) std::memcpy(m + o_table, table.data(), table_bytes);
  pp->items = Region{data, raw, base + o_items, std::max<uint64_t>(items_bytes, 16)};
  pp->combine = Region{data, raw, base + o_combine, std::max<uint64_t>(combine_bytes, 16)};
  pp->seqs = Region{data, raw, base + o_seqs, std::max<uint64_t>(seqs_bytes, 16)};
  pp->table = Region{data, raw, base + o_table, std::max<uint64_t>(table_bytes, 16)};
  return pp;
}

}  // namespace

void record_attention(Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  const int64_t total_q = c.q->dim(0);
  ctx.recorder().check_alive();
  if (total_q == 0 || c.batch == 0) return;

  // The plan: built once per step and shape, reused by every layer.
  std::shared_ptr<PreparedPlan> pp;
  if (c.step) {
    const Step::PlanKey key = {d.num_heads,
                               d.causal,
                               static_cast<uint32_t>(d.window_left),
                               static_cast<uint32_t>(c.q->dtype()),
                               c.lse ? 1u : 0u,
                               d.mask_type,
                               c.mask ? static_cast<uint32_t>(c.mask->dtype()) : 0u};
    auto it = c.step->plans.find(key);
    if (it == c.step->plans.end()) {
      auto fresh = prepare_plan(ctx, c);
      it = c.step->plans.emplace(key, std::move(fresh)).first;
    }
    pp = std::static_pointer_cast<PreparedPlan>(it->second);
  } else {
    pp = prepare_plan(ctx, c);
  }
  const Schedule& sched = pp->sched;
  const AttentionVariant& var = pp->var;
  const CallUnits& u = pp->units;
  if (sched.items.empty()) return;
  const DeviceCaps& caps = ctx.device().caps();
  Recorder& rec = ctx.recorder();
  host_alloc_point();

  uint32_t flags = 0;
  if (d.causal) flags |= kFlagCausal;
  if (d.window_left >= 0) flags |= kFlagWindow;
  if (d.softcap > 0.0f) flags |= kFlagSoftcap;
  if (c.alibi) flags |= kFlagAlibi;
  if (d.mask_type == VKATTN_MASK_BOOL) flags |= kFlagMaskBool;
  if (d.mask_type == VKATTN_MASK_ADDITIVE) flags |= kFlagMaskAdd;
  if (!c.key_valid.empty()) flags |= kFlagKeyValid;
  if (c.lse) flags |= kFlagWriteLse;

  // The split-KV arena in the context's scratch buffer: partial rows, then
  // their lse.
  const Region dummy = Region::whole(ctx.dummy());
  Region part_o = dummy, part_l = dummy;
  if (sched.arena_rows) {
    const uint64_t o_bytes = sched.arena_rows * d.head_dim_v * 4;
    const uint64_t l_off = round_up(o_bytes, kRegionAlign);
    auto scratch = ctx.scratch(l_off + sched.arena_rows * 4);
    part_o = Region{scratch, nullptr, 0, o_bytes};
    part_l = Region{scratch, nullptr, l_off, sched.arena_rows * 4};
  }
  uint64_t skip = 0;
  const BoundBuffer part_o_b = storage_window(caps, part_o, 0, part_o.size, &skip);
  const BoundBuffer part_l_b = storage_window(caps, part_l, 0, part_l.size, &skip);

  const vkattn_dtype kv_dt = c.kv_dtype(), q_dt = c.q->dtype();
  FwdConfig cfg;
  cfg.var = var;
  cfg.head_dim = d.head_dim, cfg.head_dim_v = d.head_dim_v;
  cfg.q_dtype = q_dt, cfg.kv_dtype = kv_dt;
  cfg.qvec = pp->qvec, cfg.kvec = pp->kvec, cfg.vvec = pp->vvec;
  cfg.paged = c.step != nullptr;
  cfg.features = var.all_features ? kCompiledFlags : flags & kCompiledFlags;
  const bool log = ctx.options().log_kernels;
  const AttentionFamilyDesc& family = pick_attention_family(caps, cfg, log);
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& fwd = family.pipeline(pipes, cfg);
  const Pipeline* combine =
      sched.combine.empty() ? nullptr : &pipes.get(kCombineLayout, {static_cast<uint32_t>(q_dt)});

  // Tensors as regions (absent ones: the dummy buffer).
  auto region = [&](const Tensor* t) {
    return t && t->buffer() ? Region::whole(t->buffer()) : dummy;
  };
  const Region q_r = region(c.q), out_r = region(c.out), lse_r = region(c.lse),
               mask_r = region(c.mask);
  const Region k_r = c.step ? dummy : region(c.k), v_r = c.step ? dummy : region(c.v);
  BoundBuffer alibi_b;
  alibi_b.buffer = c.alibi && c.alibi->buffer() ? c.alibi->buffer() : ctx.dummy();
  Region key_valid_r = dummy;
  if (!c.key_valid.empty()) {
    HostSlice s = rec.alloc_host(round_up(c.key_valid.size(), 16));
    std::memset(s.host, 0, s.size);
    std::memcpy(s.host, c.key_valid.data(), c.key_valid.size());
    key_valid_r = Region{nullptr, s.buffer, s.offset, s.size};
  }
  const VkFormat q_fmt = texel_format(q_dt, pp->qvec), k_fmt = texel_format(kv_dt, pp->kvec),
                 v_fmt = texel_format(kv_dt, pp->vvec);
  const uint64_t es_q = dtype_size(q_dt);
  const uint64_t mask_es = std::max<uint64_t>(u.mask_elem, 1);

  FwdPush push{};
  push.num_heads = d.num_heads;
  push.num_kv_heads = d.num_kv_heads;
  push.flags = flags;
  push.scale = d.scale;
  push.softcap = d.softcap;
  push.window_left = d.window_left;
  push.mask_dtype = c.mask ? static_cast<uint32_t>(c.mask->dtype()) : 0u;
  if (c.step) {
    const KvCache& cache = c.step->cache();
    // Page and layer offsets in texels (both are multiples of 16 bytes).
    auto tx = [&](uint64_t bytes, VkFormat f) {
      return static_cast<uint32_t>(bytes / texel_format_bytes(f));
    };
    push.page_size = cache.desc().page_size;
    push.k_page_tx = tx(cache.slab_bytes(), k_fmt);
    push.v_page_tx = tx(cache.slab_bytes(), v_fmt);
  }
  CombinePush cpush{0, d.num_heads, d.num_kv_heads, flags, d.head_dim_v, 0, 0, 0, 0};

  // Out and lse windows of a token span (both passes write them).
  auto out_lse = [&](const Span& tokens, BoundBuffer* out_b, BoundBuffer* lse_b, uint32_t* out_base,
                     uint32_t* lse_base) {
    uint64_t start = 0;
    *out_b = storage_window(caps, out_r, tokens.lo * u.out_token, tokens.hi * u.out_token, &start);
    *out_base = static_cast<uint32_t>(start / es_q);
    if (c.lse) {
      const uint64_t lt = uint64_t(d.num_heads) * 4;
      *lse_b = storage_window(caps, lse_r, tokens.lo * lt, tokens.hi * lt, &start);
      *lse_base = static_cast<uint32_t>(start / 4);
    } else {
      *lse_b = storage_window(caps, dummy, 0, 0, &start);
      *lse_base = 0;
    }
  };

  std::vector<PreparedDispatch> prepared;
  for (const Wave& wave : sched.waves) {
    for (const FwdPass& pass : wave.fwd) {
      const PassSpans& sp = pass.spans;
      uint64_t start = 0;
      BoundBuffer qb = texel_window(caps, q_r, q_fmt, sp.tokens.lo * u.q_token,
                                    sp.tokens.hi * u.q_token, &start);
      push.q_base = static_cast<uint32_t>(start);
      BoundBuffer kb, vb;
      if (c.step) {
        // pass.buffer is a page group: this layer's slabs of it.
        const KvCache& cache = c.step->cache();
        const KvCache::Slabs at = cache.slabs(c.layer, pass.buffer);
        const auto& buf = cache.buffers()[at.buffer];
        kb = texel_window(caps, Region::whole(buf), k_fmt, 0, buf->size(), &start);
        vb = texel_window(caps, Region::whole(buf), v_fmt, 0, buf->size(), &start);
        push.k_base = push.v_base = 0;
        push.k_layer_tx = static_cast<uint32_t>(at.offset / texel_format_bytes(k_fmt));
        push.v_layer_tx =
            static_cast<uint32_t>((at.offset + cache.k_block_bytes()) / texel_format_bytes(v_fmt));
      } else {
        kb = texel_window(caps, k_r, k_fmt, sp.keys.lo * u.k_key, sp.keys.hi * u.k_key, &start);
        push.k_base = static_cast<uint32_t>(start);
        vb = texel_window(caps, v_r, v_fmt, sp.keys.lo * u.v_key, sp.keys.hi * u.v_key, &start);
        push.v_base = static_cast<uint32_t>(start);
      }
      BoundBuffer ob, lb;
      out_lse(sp.tokens, &ob, &lb, &push.out_base, &push.lse_base);
      BoundBuffer ib = storage_window(caps, pp->items, pass.first * sizeof(PlanItem),
                                      (pass.first + pass.count) * sizeof(PlanItem), &start);
      push.item_base =
          static_cast<uint32_t>((pass.first * sizeof(PlanItem) - start) / sizeof(PlanItem));
      BoundBuffer sb = storage_window(caps, pp->seqs, sp.seqs.lo * sizeof(PlanSeq),
                                      sp.seqs.hi * sizeof(PlanSeq), &start);
      push.seq_base = static_cast<uint32_t>(start / sizeof(PlanSeq));
      BoundBuffer mb =
          storage_window(caps, mask_r, sp.mask.lo * mask_es, sp.mask.hi * mask_es, &start);
      push.mask_base = static_cast<uint32_t>(start / mask_es);
      BoundBuffer kvb = storage_window(caps, key_valid_r, sp.keys.lo, sp.keys.hi, &start);
      push.key_valid_base = static_cast<uint32_t>(start);
      BoundBuffer tb = storage_window(caps, pp->table, sp.table.lo * 4, sp.table.hi * 4, &start);
      push.table_base = static_cast<uint32_t>(start / 4);
      push.n_items = pass.count;
      if (log)  // rows: the pass's query rows; keys: the call's; split: combine items
        std::fprintf(stderr,
                     "vkattn: attention family=%s rows=%llu keys=%lld split=%zu items=%u wg=%u "
                     "R=%u BK=%u\n",
                     family.name,
                     static_cast<unsigned long long>((sp.tokens.hi - sp.tokens.lo) * u.group),
                     static_cast<long long>(c.cu_k.back()), sched.combine.size(), pass.count,
                     var.wg, var.rows, var.block_keys);
      prepared.push_back(pipes.prepare(
          rec, fwd, {qb, kb, vb, ob, lb, ib, sb, mb, alibi_b, kvb, part_o_b, part_l_b, tb}, &push,
          sizeof(push), pass.count));
    }
    for (const auto& level : wave.levels) {
      for (const CombinePass& pass : level) {
        uint64_t start = 0;
        BoundBuffer ob, lb;
        out_lse(pass.spans.tokens, &ob, &lb, &cpush.out_base, &cpush.lse_base);
        BoundBuffer ib = storage_window(caps, pp->combine, pass.first * sizeof(CombineItem),
                                        (pass.first + pass.count) * sizeof(CombineItem), &start);
        cpush.item_base =
            static_cast<uint32_t>((pass.first * sizeof(CombineItem) - start) / sizeof(CombineItem));
        BoundBuffer sb = storage_window(caps, pp->seqs, pass.spans.seqs.lo * sizeof(PlanSeq),
                                        pass.spans.seqs.hi * sizeof(PlanSeq), &start);
        cpush.seq_base = static_cast<uint32_t>(start / sizeof(PlanSeq));
        cpush.n_items = pass.count;
        prepared.push_back(pipes.prepare(rec, *combine, {ob, lb, ib, sb, part_o_b, part_l_b},
                                         &cpush, sizeof(cpush), pass.count));
      }
    }
  }
  // Everything is acquired: record (cannot fail).
  for (const PreparedDispatch& pd : prepared) pipes.record(rec, pd);
}

}  // namespace vkattn

// Recording of the attention forward pass: the call's prepared plan
// (ops/attention/prepare.h), the family that serves it
// (ops/attention/family.h), then per wave the forward passes and the
// combine levels of shaders/attention_combine.comp, every binding a window
// that fits the device. Everything that can fail is acquired before the
// first command is recorded.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/log.h"
#include "ops/attention/attention.h"
#include "ops/attention/family.h"
#include "ops/attention/prepare.h"
#include "ops/attention/rotate_q.h"
#include "ops/attention/user_functions.h"
#include "ops/attention/user_params.h"
#include "ops/kv_cache.h"
#include "ops/packed_views.h"

namespace vkattn {

namespace {

// attention_combine.comp ((row, word) jobs over every lane) and
// attention_combine_rows.comp (a lane per row): the same bindings and push
// constants (combine_by_words picks).
const std::vector<BindingKind> kCombineBindings = {
    BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
    BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
    BindingKind::kStorageBuffer};
const KernelLayout kCombineLayout{"attention_combine", kCombineBindings, 44};
const KernelLayout kCombineRowsLayout{"attention_combine_rows", kCombineBindings, 44};

struct CombinePush {
  uint32_t n_items, num_heads, num_kv_heads, flags, dv, item_base, seq_base, out_base, lse_base;
  uint32_t out_tok, out_head;  // out's row strides, elements
};
static_assert(sizeof(CombinePush) == 44, "push constants mirror the shader");

// The plan of a call: built once per step and shape (reused by every
// layer), or for this call alone. The key holds what shapes the plan (its
// texel widths, tile sizes and windows follow from q's and out's strides
// and q's alignment); where q and out lie (their buffers and offsets: one
// layer's slice of an engine's activations, the next layer's slice) is
// bound per call by PassBinder, never taken from the cached plan.
std::shared_ptr<PreparedPlan> plan_of(Context& ctx, const AttentionCall& c, PlanPart part) {
  if (!c.step) return prepare_plan(ctx, c, part);
  const auto& d = c.desc;
  // q's and out's layouts shape the plan (texel kind, window sizes).
  bool ok = false;
  const RowLayout ql = row_layout(*c.q, &ok), ol = row_layout(*c.out, &ok);
  Step::PlanKey key = {d.num_heads,
                       d.causal,
                       static_cast<uint64_t>(d.window_left),
                       static_cast<uint64_t>(c.q->dtype()),
                       c.lse ? 1u : 0u,
                       d.mask_type,
                       c.mask ? static_cast<uint64_t>(c.mask->dtype()) : 0u,
                       ql.tok,
                       ql.head,
                       ql.offset % 16,
                       ol.tok,
                       ol.head,
                       static_cast<uint64_t>(part),
                       static_cast<uint64_t>(d.window_right),
                       d.chunk_size};
  key.insert(key.end(), c.span_indptr.begin(), c.span_indptr.end());
  key.insert(key.end(), c.spans.begin(), c.spans.end());
  // Top-k: K and whether a list per kv head (the records' list offsets).
  key.push_back(c.topk ? uint64_t(c.topk_k()) + 1 : 0);
  key.push_back(c.topk ? c.topk->ndim() : 0);
  key.push_back(c.tree_indptr.size());  // trees: where each sequence's words start
  key.insert(key.end(), c.tree_indptr.begin(), c.tree_indptr.end());
  // Cascade: the keys each part leaves to the other; the prefix call's
  // sequences (its groups) and their pages.
  key.push_back(c.key_skip.size());
  key.insert(key.end(), c.key_skip.begin(), c.key_skip.end());
  key.push_back(c.page_seq.size());
  key.insert(key.end(), c.page_seq.begin(), c.page_seq.end());
  if (!c.page_seq.empty()) {
    key.insert(key.end(), c.cu_q.begin(), c.cu_q.end());
    key.insert(key.end(), c.cu_k.begin(), c.cu_k.end());
  }
  return c.step->cached<PreparedPlan>(key, [&] { return prepare_plan(ctx, c, part); });
}

// The most keys the items of one tile (sequence, kv head, first row) read
// in a pass: what the causal, window and chunk bounds left of its keys
// (VKATTN_LOG=kernels: "read=").
uint64_t max_tile_keys(const Schedule& sched, const FwdPass& pass) {
  std::map<std::array<uint32_t, 3>, uint64_t> per_tile;
  uint64_t most = 0;
  for (uint32_t i = pass.first; i < pass.first + pass.count; ++i) {
    const PlanItem& it = sched.items[i];
    uint64_t& n = per_tile[{it.seq, it.kv_head, it.row0}];
    n += it.k_end - it.k_begin;
    most = std::max(most, n);
  }
  return most;
}

// What the items of a pass read (VKATTN_LOG=kernels): pairs, the (row,
// key) pairs (what every bound, span and split left of the t x u
// rectangle); kv_reads, the K/V rows (each item's key range once: it
// serves one kv head, K and V together, whatever rows it holds; a key two
// items read counts twice, the combine reads none).
struct PassReads {
  uint64_t pairs = 0, kv_reads = 0;
};
PassReads pass_reads(const Schedule& sched, const FwdPass& pass) {
  PassReads n;
  for (uint32_t i = pass.first; i < pass.first + pass.count; ++i) {
    const PlanItem& it = sched.items[i];
    n.kv_reads += it.k_end - it.k_begin;
    n.pairs += uint64_t(it.k_end - it.k_begin) * (it.row_end - it.row0);
  }
  return n;
}

// Whether a call holds decode-shaped sequences (1 .. kDecodeMaxTokens query
// tokens) and longer ones.
bool mixed_classes(const AttentionCall& c) {
  bool decode = false, prefill = false;
  for (uint32_t b = 0; b < c.batch; ++b) {
    const int64_t t = c.cu_q[b + 1] - c.cu_q[b];
    if (t > 0) (part_of(t) == PlanPart::kDecode ? decode : prefill) = true;
  }
  return decode && prefill;
}

// Binds the passes of one call: every tensor as a window of what a pass
// touches, with the window bases in the push constants. q's and out's row
// layouts are this call's (a step's plan may come from another layer). Every family's
// forward shader takes the same bindings and push constants
// (ops/attention/family.h).
class PassBinder {
 public:
  PassBinder(Context& ctx, const AttentionCall& c, const PreparedPlan& pp, uint32_t flags)
      : c_(c),
        pp_(pp),
        u_(pp.units),
        caps_(ctx.device().caps()),
        rec_(ctx.recorder()),
        pipes_(ctx.pipelines()),
        dummy_(Region{ctx.dummy(), nullptr, 0, 16}) {
    const auto& d = c.desc;
    bool ok = false;
    ql_ = row_layout(*c.q, &ok), ol_ = row_layout(*c.out, &ok);
    const Schedule& sched = pp.sched;
    // The split-KV arena in the context's scratch buffer: partial rows, then
    // their lse.
    Region part_o = dummy_, part_l = dummy_;
    if (sched.arena_rows) {
      const uint64_t o_bytes = sched.arena_rows * d.head_dim_v * 4;
      const uint64_t l_off = round_up(o_bytes, kRegionAlign);
      auto scratch = ctx.scratch(l_off + sched.arena_rows * 4);
      part_o = Region{scratch, nullptr, 0, o_bytes};
      part_l = Region{scratch, nullptr, l_off, sched.arena_rows * 4};
    }
    uint64_t skip = 0;
    part_o_b_ = storage_window(caps_, part_o, 0, part_o.size, &skip);
    part_l_b_ = storage_window(caps_, part_l, 0, part_l.size, &skip);

    // Tensors as regions (absent ones: the dummy buffer).
    auto region = [&](const Tensor* t) {
      return t && t->buffer() ? Region::whole(t->buffer()) : dummy_;
    };
    q_r_ = region(c.q), out_r_ = region(c.out), lse_r_ = region(c.lse), mask_r_ = region(c.mask);
    k_r_ = c.step ? dummy_ : region(c.k), v_r_ = c.step ? dummy_ : region(c.v);
    // Optional [H] inputs (packed: they start their buffers), bound for
    // what the shaders read; absent: a stub.
    auto small = [&](const Tensor* t, const char* what) {
      const bool any = t && t->buffer() && t->numel() > 0;
      return small_input(caps_, any ? t->buffer() : nullptr, any ? t->nbytes() : 0, ctx.dummy(),
                         what);
    };
    alibi_b_ = small(c.alibi, "desc->alibi_slopes");
    sinks_b_ = small(c.sinks, "desc->sinks");
    // 8-bit caches: fp8's scale table (int8's scales: per pass, the pool buffer).
    scales_b_ = small_input(caps_, nullptr, 0, ctx.dummy(), "");
    if (c.step && c.step->cache().fp8()) {
      const KvCache& cache = c.step->cache();
      scales_b_ = small_input(caps_, cache.scale_table(), cache.scale_table_bytes(), ctx.dummy(),
                              "the cache's fp8 scale table");
      push_.scale_base = cache.scale_index(c.layer);
    }
    key_valid_r_ = dummy_;
    if (!c.key_valid.empty()) {
      HostSlice s = rec_.alloc_host(round_up(c.key_valid.size(), 16));
      std::memset(s.host, 0, s.size);
      std::memcpy(s.host, c.key_valid.data(), c.key_valid.size());
      key_valid_r_ = Region{nullptr, s.buffer, s.offset, s.size};
    }
    bind_trees_and_lists(ctx, c);
    const vkattn_dtype kv_dt = c.kv_dtype(), q_dt = c.q->dtype();
    q_fmt_ = texel_format(q_dt, pp.qvec), k_fmt_ = texel_format(kv_dt, pp.kvec);
    v_fmt_ = texel_format(kv_dt, pp.vvec);
    es_q_ = dtype_size(q_dt);
    mask_es_ = std::max<uint64_t>(u_.mask_elem, 1);

    push_.num_heads = d.num_heads;
    push_.num_kv_heads = d.num_kv_heads;
    push_.flags = flags;
    push_.scale = d.scale;
    // A denormal cap may be flushed to 0 on the GPU (0/0 at s = 0); at
    // FLT_MIN every capped logit is within 1.2e-38 of 0 either way.
    push_.softcap = d.softcap > 0.0f ? std::max(d.softcap, FLT_MIN) : 0.0f;
    push_.window_left = d.window_left;
    push_.mask_dtype = c.mask ? static_cast<uint32_t>(c.mask->dtype()) : 0u;
    if (c.pools) {
      push_.page_size = c.pools->page_size;
      push_.k_page_tx = static_cast<uint32_t>(pp.k.page * pp.k.es / texel_format_bytes(k_fmt_));
      push_.v_page_tx = static_cast<uint32_t>(pp.v.page * pp.v.es / texel_format_bytes(v_fmt_));
    }
    if (c.step) {
      // The page stride in texels (a multiple of 16 bytes).
      const KvCache& cache = c.step->cache();
      push_.page_size = cache.desc().page_size;
      push_.k_page_tx = static_cast<uint32_t>(cache.slab_bytes() / texel_format_bytes(k_fmt_));
      push_.v_page_tx = static_cast<uint32_t>(cache.slab_bytes() / texel_format_bytes(v_fmt_));
    }
    // Row strides: q, k, v in texels of their kind, out in elements.
    const uint64_t qw = texel_format_bytes(q_fmt_) / ql_.es;
    push_.q_tok = static_cast<uint32_t>(ql_.tok / qw);
    push_.q_head = static_cast<uint32_t>(ql_.head / qw);
    push_.out_tok = static_cast<uint32_t>(ol_.tok);
    push_.out_head = static_cast<uint32_t>(ol_.head);
    if (c.step) {
      // The cache's pages hold [Hkv, page_size, dim] rows (ops/kv_cache.h).
      auto row_tx = [&](uint32_t kind, uint32_t dim) -> uint64_t {
        if (c.step->cache().q4()) return (dim + 7) / 8;  // words of 8 codes
        return kind == 2 ? dim / 8 : kind == 1 ? (dim + 3) / 4 : dim;
      };
      const uint64_t kr = row_tx(pp.kvec, d.head_dim), vr = row_tx(pp.vvec, d.head_dim_v);
      push_.k_tok = static_cast<uint32_t>(kr),
      push_.k_head = static_cast<uint32_t>(kr * push_.page_size);
      push_.v_tok = static_cast<uint32_t>(vr),
      push_.v_head = static_cast<uint32_t>(vr * push_.page_size);
    } else {
      const uint64_t kw = texel_format_bytes(k_fmt_) / pp.k.es,
                     vw = texel_format_bytes(v_fmt_) / pp.v.es;
      push_.k_tok = static_cast<uint32_t>(pp.k.tok / kw),
      push_.k_head = static_cast<uint32_t>(pp.k.head / kw);
      push_.v_tok = static_cast<uint32_t>(pp.v.tok / vw),
      push_.v_head = static_cast<uint32_t>(pp.v.head / vw);
    }
    cpush_ = CombinePush{0, d.num_heads, d.num_kv_heads, flags,         d.head_dim_v, 0, 0,
                         0, 0,           push_.out_tok,  push_.out_head};
    k_page_tx_ = push_.k_page_tx, v_page_tx_ = push_.v_page_tx;
    if (!pp.gathered.empty()) plan_gathers(ctx);
  }

  // Trees: the call's words, bound whole (validate.cpp bounds them by one
  // storage binding); the slice starts aligned, so a record's tree_off
  // indexes the binding directly. Top-k lists: the whole tensor (plain:
  // packed by record_attention).
  void bind_trees_and_lists(Context& ctx, const AttentionCall& c) {
    tree_b_ = small_input(caps_, nullptr, 0, ctx.dummy(), "");
    if (!c.tree_words.empty()) {
      const uint64_t bytes = c.tree_words.size() * 4;
      HostSlice s = rec_.alloc_host(round_up(bytes, 16));
      std::memcpy(s.host, c.tree_words.data(), bytes);
      uint64_t start = 0;
      tree_b_ =
          storage_window(caps_, Region{nullptr, s.buffer, s.offset, s.size}, 0, bytes, &start);
      if (start != 0) fail(VKATTN_ERROR_INTERNAL, "tree words bound from byte ", start);
    }
    // Top-k lists: the whole tensor (plain: packed by record_attention).
    const bool lists = c.topk && c.topk->buffer() && c.topk->numel() > 0;
    topk_b_ = small_input(caps_, lists ? c.topk->buffer() : nullptr, lists ? c.topk->nbytes() : 0,
                          ctx.dummy(), "desc->topk_indices");
  }

  // Attention variants: the call's parameters, packed (record_attention).
  void set_user_params(const BoundBuffer& b) { user_b_ = b; }

  // Batch invariance (PreparedPlan::gathered): the copies of the gathered
  // pages into buffers of their own, recorded before the passes.
  void record_gathers() {
    for (const GatherCopy& g : gather_copies_) rec_.copy_buffer(*g.src, *g.dst, g.regions);
  }

  PreparedDispatch fwd(const Pipeline& p, const FwdPass& pass) {
    const PassSpans& sp = pass.spans;
    uint64_t start = 0;
    BoundBuffer qb = texel_window(caps_, q_r_, q_fmt_, ql_.lo_byte(sp.tokens.lo),
                                  ql_.hi_byte(sp.tokens.lo, sp.tokens.hi), &start);
    push_.q_base = static_cast<uint32_t>(start - ql_.offset / texel_format_bytes(q_fmt_));
    BoundBuffer kb, vb;
    push_.k_page_tx = k_page_tx_, push_.v_page_tx = v_page_tx_;
    if (pass.buffer >= PreparedPlan::kGatherBuffer) {
      // A chunk of gathered pages: its own buffers, local page 0 at 0.
      const uint32_t chunk = pass.buffer - PreparedPlan::kGatherBuffer;
      const auto& kbuf = gather_k_[chunk];
      const auto& vbuf = gather_v_[chunk];
      kb = texel_window(caps_, Region::whole(kbuf), k_fmt_, 0, kbuf->size(), &start);
      vb = texel_window(caps_, Region::whole(vbuf), v_fmt_, 0, vbuf->size(), &start);
      push_.k_base = push_.v_base = 0;
      push_.k_page_tx = static_cast<uint32_t>(gather_stride_k_ / texel_format_bytes(k_fmt_));
      push_.v_page_tx = static_cast<uint32_t>(gather_stride_v_ / texel_format_bytes(v_fmt_));
      push_.k_layer_tx = 0;
      push_.v_layer_tx = static_cast<uint32_t>(gather_v_off_ / texel_format_bytes(v_fmt_));
      if (c_.step && c_.step->cache().scales_in_buffer())
        scales_b_ = storage_window(caps_, Region::whole(kbuf), 0, kbuf->size(), &start);
    } else if (c_.pools) {
      // pass.buffer is a window of window_pages pages of the pools; the
      // block table holds pages local to it.
      const uint64_t p0 = uint64_t(pass.buffer) * pp_.window_pages;
      const uint64_t p1 = std::min<uint64_t>(p0 + pp_.window_pages, uint64_t(c_.k->dim(0)));
      auto bind = [&](const Region& r, VkFormat fmt, const RowLayout& l, uint32_t* layer_tx) {
        const uint64_t lo = l.offset + p0 * l.page * l.es;
        const uint64_t hi = l.offset + ((p1 - 1) * l.page + l.page_extent) * l.es;
        uint64_t first = 0;
        BoundBuffer b = texel_window(caps_, r, fmt, lo, hi, &first);
        *layer_tx = static_cast<uint32_t>(lo / texel_format_bytes(fmt) - first);
        return b;
      };
      kb = bind(k_r_, k_fmt_, pp_.k, &push_.k_layer_tx);
      vb = bind(v_r_, v_fmt_, pp_.v, &push_.v_layer_tx);
      push_.k_base = push_.v_base = 0;
    } else if (c_.step) {
      // pass.buffer is a window of window_pages pages of a page group: this
      // layer's slabs of them (scales_in_buffer: the whole buffer, so the
      // views and the scales' binding both start at byte 0).
      const KvCache& cache = c_.step->cache();
      const uint32_t wp = pp_.window_pages;
      const KvCache::Window w = cache.window(c_.layer, pass.buffer, wp);
      const auto& buf = cache.buffers()[w.buffer];
      const bool whole = cache.scales_in_buffer();
      const uint64_t lo = whole ? 0 : w.offset, hi = whole ? buf->size() : w.end;
      const uint64_t k_tb = texel_format_bytes(k_fmt_), v_tb = texel_format_bytes(v_fmt_);
      uint64_t k_first = 0, v_first = 0;
      kb = texel_window(caps_, Region::whole(buf), k_fmt_, lo, hi, &k_first);
      vb = texel_window(caps_, Region::whole(buf), v_fmt_, lo, hi, &v_first);
      push_.k_base = push_.v_base = 0;
      push_.k_layer_tx = static_cast<uint32_t>(w.offset / k_tb - k_first);
      push_.v_layer_tx = static_cast<uint32_t>((w.offset + cache.k_block_bytes()) / v_tb - v_first);
      if (whole)  // the scales beside the rows, read through the pool buffer
        scales_b_ = storage_window(caps_, Region::whole(buf), 0, buf->size(), &start);
    } else {
      kb = texel_window(caps_, k_r_, k_fmt_, pp_.k.lo_byte(sp.keys.lo),
                        pp_.k.hi_byte(sp.keys.lo, sp.keys.hi), &start);
      push_.k_base = static_cast<uint32_t>(start - pp_.k.offset / texel_format_bytes(k_fmt_));
      vb = texel_window(caps_, v_r_, v_fmt_, pp_.v.lo_byte(sp.keys.lo),
                        pp_.v.hi_byte(sp.keys.lo, sp.keys.hi), &start);
      push_.v_base = static_cast<uint32_t>(start - pp_.v.offset / texel_format_bytes(v_fmt_));
    }
    BoundBuffer ob, lb;
    out_lse(sp.tokens, &ob, &lb, &push_.out_base, &push_.lse_base);
    BoundBuffer ib = storage_window(caps_, pp_.items, pass.first * sizeof(PlanItem),
                                    (pass.first + pass.count) * sizeof(PlanItem), &start);
    push_.item_base =
        static_cast<uint32_t>((pass.first * sizeof(PlanItem) - start) / sizeof(PlanItem));
    BoundBuffer sb = storage_window(caps_, pp_.seqs, sp.seqs.lo * sizeof(PlanSeq),
                                    sp.seqs.hi * sizeof(PlanSeq), &start);
    push_.seq_base = static_cast<uint32_t>(start / sizeof(PlanSeq));
    BoundBuffer mb =
        storage_window(caps_, mask_r_, sp.mask.lo * mask_es_, sp.mask.hi * mask_es_, &start);
    push_.mask_base = static_cast<uint32_t>(start / mask_es_);
    BoundBuffer kvb = storage_window(caps_, key_valid_r_, sp.keys.lo, sp.keys.hi, &start);
    push_.key_valid_base = static_cast<uint32_t>(start);
    // (Top-k over several pool buffers: this buffer's copy of the table.)
    uint64_t copy = 0;
    if (!pp_.table_copy_of.empty())
      copy = uint64_t(pp_.table_copy_of.at(pass.buffer)) * pp_.table_len;
    BoundBuffer tb = storage_window(caps_, pp_.table, (copy + sp.table.lo) * 4,
                                    (copy + sp.table.hi) * 4, &start);
    push_.table_base = static_cast<uint32_t>(start / 4 - copy);
    push_.n_items = pass.count;
    std::vector<BoundBuffer> bound = {qb, kb,       vb,        ob,      lb,        ib,
                                      sb, mb,       alibi_b_,  kvb,     part_o_b_, part_l_b_,
                                      tb, sinks_b_, scales_b_, tree_b_, topk_b_};
    // An attention variant's pipeline: its parameters after them.
    if (p.layout->bindings.size() > bound.size()) bound.push_back(user_b_);
    return pipes_.prepare(rec_, p, bound, &push_, sizeof(push_), pass.count);
  }

  PreparedDispatch combine(const Pipeline& p, const CombinePass& pass) {
    uint64_t start = 0;
    BoundBuffer ob, lb;
    out_lse(pass.spans.tokens, &ob, &lb, &cpush_.out_base, &cpush_.lse_base);
    BoundBuffer ib = storage_window(caps_, pp_.combine, pass.first * sizeof(CombineItem),
                                    (pass.first + pass.count) * sizeof(CombineItem), &start);
    cpush_.item_base =
        static_cast<uint32_t>((pass.first * sizeof(CombineItem) - start) / sizeof(CombineItem));
    BoundBuffer sb = storage_window(caps_, pp_.seqs, pass.spans.seqs.lo * sizeof(PlanSeq),
                                    pass.spans.seqs.hi * sizeof(PlanSeq), &start);
    cpush_.seq_base = static_cast<uint32_t>(start / sizeof(PlanSeq));
    cpush_.n_items = pass.count;
    return pipes_.prepare(rec_, p, {ob, lb, ib, sb, part_o_b_, part_l_b_, sinks_b_}, &cpush_,
                          sizeof(cpush_), pass.count);
  }

 private:
  struct GatherCopy {
    std::shared_ptr<Buffer> src, dst;
    std::vector<VkBufferCopy> regions;
  };
  // Buffers for every chunk of gathered pages and the copies that fill
  // them: a cache's slabs of this layer (K, V and int8 scales, one buffer,
  // the cache's page stride), or the caller pools' pages (K and V apart,
  // a page stride of the page's span rounded to 16 bytes).
  void plan_gathers(Context& ctx) {
    const auto& first = pp_.gather_first;
    auto add = [&](const std::shared_ptr<Buffer>& src, const std::shared_ptr<Buffer>& dst,
                   VkBufferCopy r) {
      for (GatherCopy& g : gather_copies_)
        if (g.src == src && g.dst == dst) return g.regions.push_back(r);
      gather_copies_.push_back({src, dst, {r}});
    };
    if (c_.step) {
      gather_stride_k_ = gather_stride_v_ = c_.step->cache().slab_bytes();
      gather_v_off_ = c_.step->cache().k_block_bytes();
    } else {
      gather_stride_k_ = round_up(std::max(pp_.k.page, pp_.k.page_extent) * pp_.k.es, 16);
      gather_stride_v_ = round_up(std::max(pp_.v.page, pp_.v.page_extent) * pp_.v.es, 16);
      gather_v_off_ = 0;
    }
    for (size_t ch = 0; ch < first.size(); ++ch) {
      const uint32_t p0 = first[ch];
      const uint32_t p1 =
          ch + 1 < first.size() ? first[ch + 1] : static_cast<uint32_t>(pp_.gathered.size());
      if (c_.step) {
        const KvCache& cache = c_.step->cache();
        auto dst = std::make_shared<Buffer>(
            ctx.device(), texel_buffer_bytes((p1 - p0) * cache.slab_bytes()), false);
        rec_.use(dst);
        for (uint32_t i = p0; i < p1; ++i) {
          const KvCache::Slabs at = cache.slab_of(c_.layer, pp_.gathered[i]);
          add(cache.buffers()[at.buffer], dst,
              {at.offset, uint64_t(i - p0) * cache.slab_bytes(), cache.slab_bytes()});
        }
        gather_k_.push_back(dst);
        gather_v_.push_back(dst);
      } else {
        auto one = [&](const Tensor& t, const RowLayout& l, uint64_t stride) {
          auto dst =
              std::make_shared<Buffer>(ctx.device(), texel_buffer_bytes((p1 - p0) * stride), false);
          rec_.use(dst);
          for (uint32_t i = p0; i < p1; ++i)
            add(t.buffer(), dst,
                {l.offset + uint64_t(pp_.gathered[i]) * l.page * l.es, uint64_t(i - p0) * stride,
                 l.page_extent * l.es});
          return dst;
        };
        gather_k_.push_back(one(*c_.k, pp_.k, gather_stride_k_));
        gather_v_.push_back(one(*c_.v, pp_.v, gather_stride_v_));
      }
    }
  }

  // Out and lse windows of a token span (both passes write them).
  void out_lse(const Span& tokens, BoundBuffer* out_b, BoundBuffer* lse_b, uint32_t* out_base,
               uint32_t* lse_base) {
    uint64_t start = 0;
    *out_b = storage_window(caps_, out_r_, ol_.lo_byte(tokens.lo),
                            ol_.hi_byte(tokens.lo, tokens.hi), &start);
    *out_base = static_cast<uint32_t>(start / es_q_ - ol_.offset / es_q_);
    if (c_.lse) {
      const uint64_t lt = uint64_t(c_.desc.num_heads) * 4;
      *lse_b = storage_window(caps_, lse_r_, tokens.lo * lt, tokens.hi * lt, &start);
      *lse_base = static_cast<uint32_t>(start / 4);
    } else {
      *lse_b = storage_window(caps_, dummy_, 0, 0, &start);
      *lse_base = 0;
    }
  }

  const AttentionCall& c_;
  const PreparedPlan& pp_;
  const CallUnits& u_;
  const DeviceCaps& caps_;
  Recorder& rec_;
  Pipelines& pipes_;
  // Absent inputs and outputs: 16 bytes of the context's dummy buffer
  // (never all of it: a binding limit below its size must still work).
  const Region dummy_;
  RowLayout ql_, ol_;  // this call's q and out rows
  Region q_r_, out_r_, lse_r_, mask_r_, k_r_, v_r_, key_valid_r_;
  BoundBuffer part_o_b_, part_l_b_, alibi_b_, sinks_b_, scales_b_, tree_b_, topk_b_;
  BoundBuffer user_b_;  // attention variants' parameters (the binding after fwd_bindings())
  VkFormat q_fmt_ = VK_FORMAT_UNDEFINED, k_fmt_ = VK_FORMAT_UNDEFINED, v_fmt_ = VK_FORMAT_UNDEFINED;
  uint64_t es_q_ = 4, mask_es_ = 1;
  FwdPush push_{};
  CombinePush cpush_{};
  uint32_t k_page_tx_ = 0, v_page_tx_ = 0;  // the call's page strides
  // Batch invariance: gathered pages (plan_gathers).
  std::vector<std::shared_ptr<Buffer>> gather_k_, gather_v_;
  std::vector<GatherCopy> gather_copies_;
  uint64_t gather_stride_k_ = 0, gather_stride_v_ = 0, gather_v_off_ = 0;
};

// The plans of a call: one, or (batch-invariant contexts) one per part
// that has sequences: decode-shaped and the others, each with its own
// variant. Elsewhere one plan, unless the call mixes decode-shaped
// sequences with others and the two classes get different families (the
// device table's decode family for the decodes, tiled or coopmat for a
// prefill chunk): then each class runs on its own family, in the same
// submission.
std::vector<std::shared_ptr<PreparedPlan>> attention_plans(Context& ctx, const AttentionCall& c) {
  std::vector<std::shared_ptr<PreparedPlan>> plans;
  if (ctx.options().batch_invariant) {
    for (PlanPart part : {PlanPart::kDecode, PlanPart::kPrefill})
      for (uint32_t b = 0; b < c.batch; ++b)
        if (part_of(c.cu_q[b + 1] - c.cu_q[b]) == part) {
          plans.push_back(plan_of(ctx, c, part));
          break;
        }
  } else if (mixed_classes(c)) {
    // A step's plans are kept for its other layers, so both parts are
    // planned once; another call compares the parts' variants first.
    std::shared_ptr<PreparedPlan> dec, pre;
    bool split = false;
    if (c.step) {
      dec = plan_of(ctx, c, PlanPart::kDecode), pre = plan_of(ctx, c, PlanPart::kPrefill);
      split = dec->var.family != pre->var.family;
    } else {
      PreparedPlan a, b;
      choose_variant(ctx, c, PlanPart::kDecode, a);
      choose_variant(ctx, c, PlanPart::kPrefill, b);
      split = a.var.family != b.var.family;
      if (split)
        dec = prepare_plan(ctx, c, PlanPart::kDecode),
        pre = prepare_plan(ctx, c, PlanPart::kPrefill);
    }
    if (split)
      plans = {dec, pre};
    else
      plans.push_back(plan_of(ctx, c, PlanPart::kAll));
  } else {
    plans.push_back(plan_of(ctx, c, PlanPart::kAll));
  }
  return plans;
}

// VKATTN_LOG=kernels: one line a forward pass. rows: the pass's query
// rows; keys: the call's; split: combine items; read: the most keys one
// tile of rows reads in this pass; pairs: the (row, key) pairs its items
// read; kv_reads: the (key, kv head) rows of K/V its items load; touch:
// how many tiles ahead a top-k pass touches its listed rows (0: none).
void log_pass(const AttentionCall& c, const PreparedPlan& pp, const FwdConfig& cfg,
              const AttentionFamilyDesc& family, const FwdPass& pass, const char* combine) {
  const Schedule& sched = pp.sched;
  const PassReads reads = pass_reads(sched, pass);
  logf(VKATTN_LOG_DEBUG,
       "attention family=%s rows=%llu keys=%lld read=%llu pairs=%llu split=%zu items=%u wg=%u R=%u "
       "BK=%u L=%u source=%s plan=%s combine=%s kv_reads=%llu touch=%u",
       family.name,
       static_cast<unsigned long long>((pass.spans.tokens.hi - pass.spans.tokens.lo) *
                                       pp.units.group),
       static_cast<long long>(c.cu_k.back()),
       static_cast<unsigned long long>(max_tile_keys(sched, pass)),
       static_cast<unsigned long long>(reads.pairs), sched.combine.size(), pass.count, cfg.var.wg,
       cfg.var.rows, cfg.var.block_keys, cfg.var.lanes_per_row, pp.source,
       pp.plan_on_device ? "device" : "host", combine,
       static_cast<unsigned long long>(reads.kv_reads), cfg.touch_ahead());
}

}  // namespace

void record_attention(Context& ctx, const AttentionCall& call) {
  ctx.recorder().check_alive();
  if (call.q->dim(0) == 0 || call.batch == 0) return;
  // (Not with an attention variant: the cascade's prefix pass would apply
  // a group's rules to rows of several sequences.)
  if (!call.cascade_part && !call.user && record_cascade(ctx, call)) return;
  // Views the kernels cannot bind in place go through packed temporaries.
  // q, k, v and out strided in ways the kernels address (ops/
  // attention/prepare.h RowLayout) are bound in place.
  PackedViews packed(ctx);
  AttentionCall c = call;
  const DeviceCaps& caps = ctx.device().caps();
  auto in = [&](Tensor* t, bool pool) {
    return t && !rows_bindable(caps, *t, true, pool) ? packed.input(t) : t;
  };
  c.k = in(c.k, c.pools != nullptr), c.v = in(c.v, c.pools != nullptr);
  // A cache whose keys were rotated (VKATTN_KV_ROTATE_KEYS): the queries
  // are rotated alike into a temporary first (ops/attention/rotate_q.h),
  // from a plain q (packed only then: the kernels read the temporary).
  std::optional<RotatedQueries> rotated;
  if (c.step && c.step->cache().key_rotation() > 1) {
    rotated.emplace(ctx, packed.input(call.q), c.step->cache().key_rotation());
    c.q = rotated->tensor();
  } else {
    c.q = in(c.q, false);
  }
  c.mask = packed.input(c.mask), c.alibi = packed.input(c.alibi), c.sinks = packed.input(c.sinks);
  // (Bound whole from its first element; K = 0 owns no memory: a stub.)
  if (c.topk && c.topk->numel() > 0) c.topk = packed.input(c.topk);
  if (!rows_bindable(caps, *c.out, false)) c.out = packed.output(c.out);
  c.lse = packed.output(c.lse);
  const std::vector<std::shared_ptr<PreparedPlan>> plans = attention_plans(ctx, c);
  Context::AttentionStats stats;
  for (const auto& pp : plans) {
    uint64_t passes = 0;
    for (const Wave& wave : pp->sched.waves) passes += wave.fwd.size();
    stats.tiles += pp->plan.tiles.size(), stats.items += pp->sched.items.size();
    stats.passes += passes, stats.combine_items += pp->sched.combine.size();
  }
  if (stats.items == 0) return;
  host_alloc_point();
  ctx.last_attention = stats;
  // Device-local plans not yet copied (a step's plan: its first call;
  // others: this call's ring slice): staged now, copied below.
  std::vector<std::pair<PreparedPlan*, HostSlice>> uploads;
  for (const auto& pp : plans)
    if (pp->upload_pending) {
      HostSlice s = ctx.recorder().alloc_host(pp->plan_image.size());
      std::memcpy(s.host, pp->plan_image.data(), pp->plan_image.size());
      uploads.emplace_back(pp.get(), s);
    }

  // Attention variants: the parameters packed into one slice (attention_mask.glsl
  // UserParams: each slot's first word and count, then the elements).
  UserParamsCopy user_params;
  if (c.user) user_params = pack_user_params(ctx, c.user_params);
  const uint32_t flags = call_flags(c);  // pick
  const bool log = ctx.options().log_kernels;
  const bool words = combine_by_words(ctx);
  Pipelines& pipes = ctx.pipelines();
  // Acquire everything that can fail (pipelines, descriptor sets, windows),
  // then record.
  std::vector<PreparedDispatch> prepared;
  std::vector<std::unique_ptr<PassBinder>> binders;
  for (const auto& pp : plans) {
    const Schedule& sched = pp->sched;
    if (sched.items.empty()) continue;
    FwdConfig cfg = fwd_config(ctx, c, *pp, flags);
    if (log && !cfg.var.fallback.empty())
      logf(VKATTN_LOG_DEBUG, "attention fallback from %s", cfg.var.fallback.c_str());
    if (log && !pp->gathered.empty())
      logf(VKATTN_LOG_DEBUG, "attention gathered %zu pages in %zu chunks (batch invariance)",
           pp->gathered.size(), pp->gather_first.size());
    const AttentionFamilyDesc& family = attention_family(cfg.var.family);
    const Pipeline& fwd = family.pipeline(pipes, cfg);
    if (c.pinned && &fwd != &attention_family(c.pinned->var.family).pipeline(pipes, *c.pinned))
      fail(VKATTN_ERROR_INTERNAL, "a self-check ran another pipeline than the one it checks");
    const Pipeline* combine = sched.combine.empty()
                                  ? nullptr
                                  : &pipes.get(words ? kCombineLayout : kCombineRowsLayout,
                                               {static_cast<uint32_t>(c.out->dtype())});
    binders.push_back(std::make_unique<PassBinder>(ctx, c, *pp, flags));
    PassBinder& bind = *binders.back();
    if (c.user) bind.set_user_params(user_params.bound);
    for (const Wave& wave : sched.waves) {
      for (const FwdPass& pass : wave.fwd) {
        if (log) log_pass(c, *pp, cfg, family, pass, words ? "words" : "rows");
        prepared.push_back(bind.fwd(fwd, pass));
      }
      for (const auto& level : wave.levels)
        for (const CombinePass& pass : level) prepared.push_back(bind.combine(*combine, pass));
    }
  }
  for (auto& [pp, staged] : uploads) {
    const VkBufferCopy region{staged.offset, pp->plan_dst_offset, staged.size};
    ctx.recorder().copy_buffer(*staged.buffer, *pp->plan_dst, &region, 1);
    pp->upload_pending = false;
    if (pp->items.buffer) pp->plan_image = {};  // a step's plan: copied for good
  }
  packed.record_inputs();
  record_user_params_copies(ctx, user_params);
  if (rotated) rotated->record();
  for (const auto& b : binders) b->record_gathers();
  for (const PreparedDispatch& pd : prepared) pipes.record(ctx.recorder(), pd);
  packed.record_outputs();
}

}  // namespace vkattn

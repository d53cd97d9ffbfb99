// Cascade attention over shared prefixes (parallel sampling, beams,
// forks of one prompt): sequences whose pages begin with the same full
// pages read those keys once, as one group, instead of once each.
//
// Detection: runs of consecutive sequences of a paged call (a step's block
// tables or caller pools' page_indices) whose leading pages are the same
// page indices form a group; the shared keys P are those full pages, at
// most the keys every member held before this call's queries (so all of
// them are visible to every row under causal). A group needs two members
// with queries and, by default, P >= kCascadeMinKeys (VKATTN_CASCADE=1:
// one full page; =0: never).
//
// Execution, in the call's submission (FlashInfer's cascade, in our terms):
//   1. the main call: every sequence over its own keys, a member's from P
//      on (AttentionCall::key_lo); sinks join here;
//   2. the prefix call: one sequence per group, its members' query tokens
//      (consecutive, so one range of q) over the P shared keys read through
//      the first member's pages (AttentionCall::page_seq), no causal bound
//      (every row sees every shared key), into temporaries; a loner's
//      tokens are a sequence of no keys (out 0, lse -inf);
//   3. vkattn_attention_merge's kernel merges the two by lse into out/lse.
// Both parts write f32 rows and lse (kFlagOutF32 when q is 16-bit) to
// temporaries, so a 16-bit out is rounded once, as without cascade.
// The prefix call's rows are a prefill: its family (tiled, coopmat where
// it serves) reads each shared key once per tile of rows.
//
// Calls the cascade does not split run as before: positional rules other
// than causal (windows, chunks, spans), ALiBi, masks, trees, top-k lists,
// batch invariance, strided out/lse, self-checks.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <memory>

#include "core/context.h"
#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

// Shared keys below which a group is not cascaded by default: below this,
// the extra passes and the merge cost more than the keys they save.
constexpr uint32_t kCascadeMinKeys = 256;

struct CascadeGroup {
  uint32_t first, end;  // sequences [first, end)
  uint32_t keys;        // shared keys P (whole pages)
};

bool cascadable(const Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  if (!c.paged() || c.pinned || c.q4_stand_in || c.batch < 2 || d.head_dim_v == 0) return false;
  if (ctx.options().cascade == 0 || ctx.options().batch_invariant) return false;
  if (d.window_left >= 0 || d.window_right >= 0 || d.chunk_size > 0) return false;
  if (c.alibi || c.mask || c.topk || !c.span_indptr.empty() || !c.tree_indptr.empty()) return false;
  if (!c.key_valid.empty() || !c.out->contiguous() || (c.lse && !c.lse->contiguous())) return false;
  return true;
}

std::vector<CascadeGroup> find_groups(const Context& ctx, const AttentionCall& c) {
  const uint32_t ps = c.step ? c.step->cache().desc().page_size : c.pools->page_size;
  const bool forced = ctx.options().cascade == 1;
  const uint64_t min_keys = forced ? ps : std::max<uint64_t>(ps, kCascadeMinKeys);
  auto t_of = [&](uint32_t b) { return c.cu_q[b + 1] - c.cu_q[b]; };
  // Full pages of keys sequence b held before its first query.
  auto full_pages = [&](uint32_t b) -> uint64_t {
    return uint64_t((c.cu_k[b + 1] - c.cu_k[b]) - t_of(b)) / ps;
  };
  std::vector<CascadeGroup> groups;
  for (uint32_t b = 0; b < c.batch;) {
    uint64_t common = full_pages(b);
    uint32_t e = b + 1, with_rows = t_of(b) > 0 ? 1 : 0;
    for (; e < c.batch; ++e) {
      uint64_t n = std::min(common, full_pages(e));
      for (uint64_t i = 0; i < n; ++i)
        if (c.page(b, i) != c.page(e, i)) n = i;
      if (n * ps < min_keys) break;
      common = n;
      with_rows += t_of(e) > 0 ? 1 : 0;
    }
    if (e - b >= 2 && with_rows >= 2) groups.push_back({b, e, static_cast<uint32_t>(common * ps)});
    b = e;
  }
  return groups;
}

// The parts' results: f32 rows and lse, merged into the call's out/lse
// (rounded once, as the call without cascade rounds them). A step keeps
// its temporaries for its other layers (each layer's parts run after the
// previous layer's merge, barriers between), a pool call makes its own.
struct CascadeTemps {
  std::shared_ptr<Tensor> out_main, lse_main, out_pre, lse_pre;
};
std::shared_ptr<CascadeTemps> temps_of(const AttentionCall& c, int64_t n, int64_t H, int64_t dv) {
  auto make = [&] {
    auto t = std::make_shared<CascadeTemps>();
    auto tensor = [&](std::initializer_list<int64_t> shape) {
      return std::make_shared<Tensor>(c.out->context_ptr(), VKATTN_F32,
                                      static_cast<uint32_t>(shape.size()), shape.begin());
    };
    t->out_main = tensor({n, H, dv}), t->out_pre = tensor({n, H, dv});
    t->lse_main = tensor({n, H}), t->lse_pre = tensor({n, H});
    return t;
  };
  if (!c.step) return make();
  return c.step->cached<CascadeTemps>({~0ull, 1, uint64_t(n), uint64_t(H), uint64_t(dv)}, make);
}

}  // namespace

bool record_cascade(Context& ctx, const AttentionCall& call) {
  if (!cascadable(ctx, call)) return false;
  // A step's groups hold for every layer (its pages are fixed until it
  // ends): found once.
  using Groups = std::vector<CascadeGroup>;
  auto find = [&] { return std::make_shared<Groups>(find_groups(ctx, call)); };
  const std::shared_ptr<Groups> found =
      call.step ? call.step->cached<Groups>({~0ull, 0, ctx.options().cascade}, find) : find();
  const Groups& groups = *found;
  if (groups.empty()) return false;
  const auto& d = call.desc;
  const int64_t n = call.q->dim(0), H = d.num_heads, dv = d.head_dim_v;

  const std::shared_ptr<CascadeTemps> tmp = temps_of(call, n, H, dv);

  // The main call: members from their shared keys on.
  AttentionCall main = call;
  main.cascade_part = true;
  main.key_lo.assign(call.batch, 0);
  for (const CascadeGroup& g : groups)
    for (uint32_t b = g.first; b < g.end; ++b) main.key_lo[b] = g.keys;
  main.out = tmp->out_main.get(), main.lse = tmp->lse_main.get();

  // The prefix call: a sequence per group (its members' tokens over the
  // shared keys, read through its first member's pages), one per loner.
  AttentionCall pre = call;
  pre.cascade_part = true, pre.prefix_tiles = true;
  pre.desc.causal = 0;
  pre.desc.sinks = nullptr, pre.sinks = nullptr;
  pre.cu_q.assign(1, 0);
  pre.cu_k.assign(1, 0);
  size_t gi = 0;
  for (uint32_t b = 0; b < call.batch;) {
    const bool grouped = gi < groups.size() && groups[gi].first == b;
    const uint32_t e = grouped ? groups[gi].end : b + 1;
    pre.cu_q.push_back(call.cu_q[e]);
    pre.cu_k.push_back(pre.cu_k.back() + (grouped ? groups[gi].keys : 0));
    pre.page_seq.push_back(b);
    gi += grouped ? 1 : 0;
    b = e;
  }
  pre.batch = static_cast<uint32_t>(pre.page_seq.size());
  pre.out = tmp->out_pre.get(), pre.lse = tmp->lse_pre.get();

  if (ctx.options().log_kernels) {
    uint64_t shared = 0;
    for (const CascadeGroup& g : groups) shared += g.keys;
    std::fprintf(stderr, "vkattn: attention cascade groups=%zu shared_keys=%llu\n", groups.size(),
                 static_cast<unsigned long long>(shared));
  }
  Recorder& rec = ctx.recorder();
  for (const auto& t : {tmp->out_main, tmp->lse_main, tmp->out_pre, tmp->lse_pre})
    rec.use(t->buffer());
  record_attention(ctx, main);
  record_attention(ctx, pre);
  record_merge(ctx, main.out, main.lse, pre.out, pre.lse, call.out, call.lse);
  return true;
}

}  // namespace vkattn

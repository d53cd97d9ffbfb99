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
//   1. the main call: every sequence over its own keys, a member's without
//      the shared keys the prefix call reads (AttentionCall::key_skip);
//      sinks join here;
//   2. the prefix call: one sequence per group, its members' query tokens
//      (consecutive, so one range of q) over the shared keys every one of
//      them sees, read through the first member's pages
//      (AttentionCall::page_seq), with no positional rule, into
//      temporaries; a loner's tokens are a sequence of no keys (out 0,
//      lse -inf);
//   3. vkattn_attention_merge's kernel merges the two by lse into out/lse.
// Both parts write f32 rows and lse (kFlagOutF32 when q is 16-bit) to
// temporaries, so a 16-bit out is rounded once, as without cascade.
// The prefix call's rows are a prefill: its family (tiled, coopmat where
// it serves) reads each shared key once per tile of rows.
//
// Rules: causal, the right window and trees hide no shared key (they
// precede every query); a span only adds keys. A left window or chunks
// hide the shared keys below the first one a row sees: the prefix call
// reads the group's shared keys from the first its furthest row sees
// (CascadeGroup::seen), the main call each member's below that (a band as
// wide as the members' positions differ). Calls the cascade does not split
// run as before: ALiBi (its bias needs each row's own position), masks,
// top-k lists (a row reads its own keys), padding keys, batch invariance,
// strided out/lse, self-checks.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <memory>

#include "core/context.h"
#include "core/error.h"
#include "core/int_div.h"
#include "core/log.h"
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
  // This call's: shared keys [seen, keys) are visible to every row of the
  // group (the left window or the chunks may hide those below from some).
  uint32_t seen = 0;
};

bool cascadable(const Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  if (!c.paged() || c.pinned || c.q4_stand_in || c.batch < 2 || d.head_dim_v == 0) return false;
  if (ctx.options().cascade == 0 || ctx.options().batch_invariant) return false;
  if (c.alibi || c.mask || c.topk) return false;
  if (!c.key_valid.empty() || !c.out->contiguous() || (c.lse && !c.lse->contiguous())) return false;
  return true;
}

// The first key a row at position p can see under the left window and
// the chunks (every other rule keeps the keys before p visible: causal,
// the right window and trees hide only keys at or past the first query,
// which follow the shared keys; a span only adds keys).
int64_t first_visible(const vkattn_attention_desc& d, int64_t p) {
  int64_t lo = 0;
  if (d.window_left >= 0) lo = std::max<int64_t>(lo, p - d.window_left);
  if (d.chunk_size > 0)
    lo = std::max<int64_t>(lo, floor_div<int64_t>(p, d.chunk_size) * d.chunk_size);
  return lo;
}

uint32_t page_size(const AttentionCall& c) {
  return c.step ? c.step->cache().desc().page_size : c.pools->page_size;
}

// Shared keys a group needs: kCascadeMinKeys or 16 pages, whichever is
// fewer (at least one page), or one page when VKATTN_CASCADE=1 forces
// grouping.
uint64_t min_shared_keys(const Context& ctx, const AttentionCall& c) {
  const uint64_t ps = page_size(c);
  return ctx.options().cascade == 1 ? ps
                                    : std::max(ps, std::min<uint64_t>(kCascadeMinKeys, 16 * ps));
}

std::vector<CascadeGroup> find_groups(const Context& ctx, const AttentionCall& c) {
  const uint32_t ps = page_size(c);
  const uint64_t min_keys = min_shared_keys(ctx, c);
  auto t_of = [&](uint32_t b) { return c.cu_q[b + 1] - c.cu_q[b]; };
  // Full pages of keys sequence b held before its first query: none when
  // it has as many queries as keys or more (t >= u: its first rows sit at
  // positions <= 0), so a group never reaches past a member's own table.
  auto full_pages = [&](uint32_t b) -> uint64_t {
    const int64_t before = (c.cu_k[b + 1] - c.cu_k[b]) - t_of(b);
    return before > 0 ? uint64_t(before) / ps : 0;
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
  const auto& d = call.desc;
  // This call's rules: under a left window or chunks, the group's prefix
  // call reads the shared keys its every row sees (from the first key its
  // last row, the furthest on, sees), the main call the rest.
  const uint64_t min_keys = min_shared_keys(ctx, call);
  Groups groups;
  for (CascadeGroup g : *found) {
    int64_t seen = 0;
    for (uint32_t b = g.first; b < g.end; ++b)
      if (call.cu_q[b + 1] > call.cu_q[b])
        seen = std::max(seen, first_visible(d, call.cu_k[b + 1] - call.cu_k[b] - 1));
    g.seen = static_cast<uint32_t>(std::min<int64_t>(seen, g.keys));
    if (g.keys - g.seen >= min_keys) groups.push_back(g);
  }
  if (groups.empty()) return false;
  const int64_t n = call.q->dim(0), H = d.num_heads, dv = d.head_dim_v;

  const std::shared_ptr<CascadeTemps> tmp = temps_of(call, n, H, dv);

  // The main call: members from their shared keys on.
  AttentionCall main = call;
  main.cascade_part = true;
  main.key_skip.assign(2 * size_t(call.batch), 0);
  for (const CascadeGroup& g : groups)
    for (uint32_t b = g.first; b < g.end; ++b)
      main.key_skip[2 * b] = g.seen, main.key_skip[2 * b + 1] = g.keys;
  main.out = tmp->out_main.get(), main.lse = tmp->lse_main.get();

  // The prefix call: a sequence per group (its members' tokens over the
  // shared keys, read through its first member's pages), one per loner.
  AttentionCall pre = call;
  pre.cascade_part = true, pre.prefix_tiles = true;
  // Every row sees every key of [seen, keys): no positional rule, tree or
  // span applies there.
  pre.desc.causal = 0;
  pre.desc.window_left = pre.desc.window_right = -1, pre.desc.chunk_size = 0;
  pre.span_indptr.clear(), pre.spans.clear();
  pre.tree_indptr.clear(), pre.tree_words.clear();
  pre.desc.sinks = nullptr, pre.sinks = nullptr;
  pre.cu_q.assign(1, 0);
  pre.cu_k.assign(1, 0);
  size_t gi = 0;
  for (uint32_t b = 0; b < call.batch;) {
    const bool grouped = gi < groups.size() && groups[gi].first == b;
    const uint32_t e = grouped ? groups[gi].end : b + 1;
    pre.cu_q.push_back(call.cu_q[e]);
    pre.cu_k.push_back(pre.cu_k.back() + (grouped ? groups[gi].keys : 0));
    pre.key_skip.push_back(0), pre.key_skip.push_back(grouped ? groups[gi].seen : 0);
    pre.page_seq.push_back(b);
    gi += grouped ? 1 : 0;
    b = e;
  }
  pre.batch = static_cast<uint32_t>(pre.page_seq.size());
  pre.out = tmp->out_pre.get(), pre.lse = tmp->lse_pre.get();

  if (ctx.options().log_kernels) {
    uint64_t shared = 0;
    for (const CascadeGroup& g : groups) shared += g.keys - g.seen;
    logf(VKATTN_LOG_DEBUG, "attention cascade groups=%zu shared_keys=%llu", groups.size(),
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

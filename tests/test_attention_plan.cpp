// White-box tests of the host planner and scheduler
// (src/ops/attention/plan.cpp, schedule.cpp): key ranges cut by
// causal/window, splitting, the combine tree, waves within a bounded
// arena, binding windows. No device needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "api/handles.h"
#include "core/context.h"
#include "core/error.h"
#include "core/kernel_options.h"
#include "ops/attention/family.h"
#include "ops/attention/plan.h"
#include "ops/attention/schedule.h"
#include "ops/attention/variant.h"
#include "ops/kv_cache.h"
#include "test_platform.h"

using namespace vkattn;

namespace {
PlanShape shape(uint32_t group, bool causal, int32_t window, uint32_t tile_rows,
                uint32_t max_keys) {
  PlanShape s{group, 2, causal, window, tile_rows, tile_rows, 1, 0, max_keys, 1, 1};
  return s;
}

ScheduleLimits roomy() {
  ScheduleLimits l;
  l.storage = l.q_texel = l.k_texel = l.v_texel = 1ull << 40;
  l.arena_rows = 1ull << 30;
  l.fan_in = 64;
  l.max_groups = 1ull << 32;
  return l;
}

CallUnits units(uint32_t group) {
  CallUnits u;
  u.q_token = u.out_token = 64;
  u.lse_token = 8;
  u.k_key = u.v_key = 32;
  u.group = group;
  return u;
}

// Simulates the schedule on the host: forward items write out rows or
// partials (split l of an item at slot + l * stride), combine items merge
// partials; checks that every output row is produced exactly once, and
// that every partial a combine reads was last written for the same tile
// (not overwritten by another tile in between), within the arena.
void check_dataflow(const Plan& plan, const Schedule& s) {
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;  // (seq, kv head, row0)
  std::map<uint64_t, Key> live;                          // arena row -> tile of its data
  std::set<Key> finals;                                  // (seq, kv head, row)
  std::map<Key, uint32_t> stride_of;
  for (const PlanTile& t : plan.tiles) stride_of[{t.seq, t.kv_head, t.row0}] = t.stride;
  size_t items_seen = 0;
  for (const Wave& w : s.waves) {
    for (const FwdPass& p : w.fwd)
      for (uint32_t i = p.first; i < p.first + p.count; ++i) {
        const PlanItem& it = s.items[i];
        ++items_seen;
        const Key tile{it.seq, it.kv_head, it.row0};
        if (it.slot == kNoSlot) {
          for (uint32_t r = it.row0; r < it.row_end; ++r)
            EXPECT_TRUE(finals.insert({it.seq, it.kv_head, r}).second) << "row written twice";
          continue;
        }
        const uint32_t stride = stride_of[tile];
        for (uint32_t l = 0; l < std::max(it.n_slots, 1u); ++l) {
          ASSERT_LE(it.slot + (l + 1) * uint64_t(stride), s.arena_rows);
          live[it.slot + l * stride] = tile;
        }
      }
    for (const auto& level : w.levels)
      for (const CombinePass& p : level)
        for (uint32_t i = p.first; i < p.first + p.count; ++i) {
          const CombineItem& c = s.combine[i];
          const Key tile{c.seq, c.kv_head, c.row0};
          for (uint32_t k = 0; k < c.n_slots; ++k) {
            auto f = live.find(c.src + k * c.stride);
            ASSERT_TRUE(f != live.end() && f->second == tile) << "combine reads a stale slot";
          }
          if (c.dst == kNoSlot) {
            for (uint32_t r = c.row0; r < c.row_end; ++r)
              EXPECT_TRUE(finals.insert({c.seq, c.kv_head, r}).second) << "row combined twice";
          } else {
            ASSERT_LE(c.dst + uint64_t(c.stride), s.arena_rows);
            live[c.dst] = tile;
          }
        }
  }
  EXPECT_EQ(items_seen, plan.items.size());
  size_t rows = 0;
  for (const PlanTile& t : plan.tiles) rows += t.row_end - t.row0;
  EXPECT_EQ(finals.size(), rows) << "every output row exactly once";
}

}  // namespace

TEST(AttentionPlan, CausalAndWindowBoundKeyRanges) {
  // One sequence, t = 8 queries over u = 20 keys: positions 12..19.
  int64_t cq[2] = {0, 8}, ck[2] = {0, 20};
  Plan p = build_plan(shape(1, true, 3, 4, 1000), 1, cq, ck);
  ASSERT_EQ(p.items.size(), 4u);  // 2 row tiles x 2 kv heads
  for (const auto& it : p.items) {
    // Tile rows 0..3 -> positions 12..15 -> keys [9, 16); rows 4..7 -> [13, 20).
    const uint32_t want_begin = it.row0 == 0 ? 9u : 13u, want_end = it.row0 == 0 ? 16u : 20u;
    EXPECT_EQ(it.k_begin, want_begin);
    EXPECT_EQ(it.k_end, want_end);
    EXPECT_EQ(it.slot, kNoSlot);
    EXPECT_EQ(it.row_end, it.row0 + 4);
  }
}

// Bidirectional spans: rows inside a span get a record of their own (the
// span set) and tiles cut at its edges; a tile of text rows before a span
// never reads it; a tile inside one reads up to its end. One causal
// sequence of 40 tokens over 40 keys, tiles of 8 rows, spans [10, 20) and
// [30, 34); a second sequence with a span wholly before its queries.
TEST(AttentionPlan, SpansCutTilesAndWidenTheirRanges) {
  int64_t cq[3] = {0, 40, 42}, ck[3] = {0, 40, 90};
  const int32_t indptr[3] = {0, 2, 3}, spans[6] = {10, 20, 30, 34, 3, 9};
  PlanShape sh = shape(1, true, -1, 8, 1000);
  sh.span_indptr = indptr, sh.spans = spans;
  Plan p = build_plan(sh, 2, cq, ck);
  ASSERT_EQ(p.seqs.size(), 4u);  // two sequences, two span records
  ASSERT_EQ(p.seq_of.size(), 4u);
  EXPECT_EQ(p.seq_of[2], 0u);
  EXPECT_EQ(p.seq_of[3], 0u);
  EXPECT_EQ(p.seqs[2].span_lo, 10u);
  EXPECT_EQ(p.seqs[2].span_hi, 20u);
  EXPECT_EQ(p.seqs[3].span_lo, 30u);
  EXPECT_EQ(p.seqs[3].span_hi, 34u);
  EXPECT_EQ(p.seqs[0].span_hi, 0u);
  EXPECT_EQ(p.seqs[2].q_off, p.seqs[0].q_off);
  EXPECT_EQ(p.offs[3].k, p.offs[0].k);
  // Sequence 0's tiles (kv head 0): rows [0,8) [8,10) plain, [10,18)
  // [18,20) in span 1, [20,28) [28,30) plain, [30,34) in span 2, [34,40).
  struct Want {
    uint32_t seq, row0, row_end, k_begin, k_end;
  };
  const Want want[] = {{0, 0, 8, 0, 8},    {0, 8, 10, 0, 10},  {2, 10, 18, 0, 20},
                       {2, 18, 20, 0, 20}, {0, 20, 28, 0, 28}, {0, 28, 30, 0, 30},
                       {3, 30, 34, 0, 34}, {0, 34, 40, 0, 40}};
  std::vector<PlanItem> head0;
  for (const PlanItem& it : p.items)
    if (it.kv_head == 0 && p.seq_of[it.seq] == 0) head0.push_back(it);
  ASSERT_EQ(head0.size(), std::size(want));
  for (size_t i = 0; i < head0.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(head0[i].seq, want[i].seq);
    EXPECT_EQ(head0[i].row0, want[i].row0);
    EXPECT_EQ(head0[i].row_end, want[i].row_end);
    EXPECT_EQ(head0[i].k_begin, want[i].k_begin);
    EXPECT_EQ(head0[i].k_end, want[i].k_end);
  }
  // Sequence 1 (2 queries at 48, 49): its span [3, 9) holds no row, no record.
  for (const PlanItem& it : p.items)
    if (p.seq_of[it.seq] == 1) EXPECT_EQ(it.seq, 1u);
  // Windows: a tile inside a span reads from the span's start, not the
  // window's; one before it stops at its causal edge.
  sh.window_left = 2;
  p = build_plan(sh, 2, cq, ck);
  for (const PlanItem& it : p.items) {
    if (it.kv_head != 0 || it.seq == 1) continue;
    if (it.row0 == 10) EXPECT_EQ(it.k_begin, 8u);  // rows 10..17: window from 8, span from 10
    if (it.row0 == 18) EXPECT_EQ(it.k_begin, 10u);
    if (it.row0 == 8) EXPECT_EQ(it.k_end, 10u);  // text rows 8, 9 never read the span
  }
}

TEST(AttentionPlan, QueriesBeforeAllKeysGetEmptyRanges) {
  int64_t cq[2] = {0, 5}, ck[2] = {0, 2};  // t > u: pos = -3..1
  Plan p = build_plan(shape(1, true, -1, 2, 1000), 1, cq, ck);
  for (const auto& it : p.items) {
    EXPECT_LE(it.k_begin, it.k_end);
    if (it.row0 == 0) EXPECT_EQ(it.k_end, 0u);  // rows at -3, -2 see nothing
  }
}

TEST(AttentionPlan, LongRangesSplitAndCombine) {
  int64_t cq[3] = {0, 1, 3}, ck[3] = {0, 1000, 1010};
  Plan p = build_plan(shape(4, false, -1, 8, 300), 2, cq, ck);
  // Sequence 0: 1000 keys -> 4 splits per kv head; sequence 1: 10 keys, no split.
  uint64_t covered = 0;
  for (const PlanTile& t : p.tiles) EXPECT_EQ(t.splits(), t.seq == 0 ? 4u : 1u);
  for (const auto& it : p.items)
    if (it.seq == 0) covered += it.k_end - it.k_begin;
  EXPECT_EQ(covered, 2u * 1000u);
  EXPECT_EQ(p.seqs[1].mask_off, 1000u);  // t0 * u0
  Schedule s = schedule_plan(p, units(4), roomy());
  ASSERT_EQ(s.waves.size(), 1u);
  ASSERT_EQ(s.waves[0].levels.size(), 1u);
  EXPECT_EQ(s.combine.size(), 2u);
  for (const auto& c : s.combine) EXPECT_EQ(c.n_slots, 4u);
  const FwdPass& pass = s.waves[0].fwd[0];
  for (uint32_t i = pass.first + 1; i < pass.first + pass.count; ++i)
    EXPECT_GE(s.items[i - 1].k_end - s.items[i - 1].k_begin, s.items[i].k_end - s.items[i].k_begin)
        << "items must be heaviest first";
  check_dataflow(p, s);
}

// NP: a causal prefill with fewer row tiles than the device runs at once
// splits its diagonal's long ranges to about the tiles' mean (the longest
// item no longer sets the time alone); equal ranges stay whole, and so
// does everything with balance off or past the slots.
TEST(AttentionPlan, BalanceSplitsTheCausalDiagonal) {
  int64_t cq[2] = {0, 1024}, ck[2] = {0, 1024};
  PlanShape sh = shape(1, true, -1, 64, 1u << 20);  // 16 row tiles x 2 kv heads
  sh.min_split_keys = 128, sh.target_items = 1;
  Plan off = build_plan(sh, 1, cq, ck);
  ASSERT_EQ(off.tiles.size(), 32u);
  EXPECT_EQ(off.items.size(), 32u) << "balance off: one item a tile";
  sh.balance_items = 264;
  Plan on = build_plan(sh, 1, cq, ck);
  uint64_t longest = 0, covered = 0;
  for (const auto& it : on.items) {
    longest = std::max<uint64_t>(longest, it.k_end - it.k_begin);
    covered += it.k_end - it.k_begin;
  }
  EXPECT_EQ(covered, 2u * 64u * (16u * 17u / 2u)) << "every key of every tile, once";
  EXPECT_LE(longest, 544u) << "the mean range (64 x 8.5 keys)";
  for (const PlanTile& t : on.tiles) {
    const uint32_t range = (t.row_end / 1 + 63) / 64 * 64;  // causal: keys up to the last row
    EXPECT_EQ(t.splits(), range > 544 ? (range + 543) / 544 : 1u) << "tile rows " << t.row0;
  }
  Schedule s = schedule_plan(on, units(1), roomy());
  check_dataflow(on, s);
  // Too few slots for the cut: it lengthens until the items fit.
  sh.balance_items = 40;
  Plan tight = build_plan(sh, 1, cq, ck);
  EXPECT_LE(tight.items.size(), 40u);
  EXPECT_GT(tight.items.size(), 32u);
  // Equal ranges (no mask) never split; nor do tiles at or past the slots.
  sh.causal = false, sh.balance_items = 264;
  EXPECT_EQ(build_plan(sh, 1, cq, ck).items.size(), 32u);
  sh.causal = true, sh.balance_items = 32;
  EXPECT_EQ(build_plan(sh, 1, cq, ck).items.size(), 32u);
}

// E defect 5: more splits than one combine item may merge (a long range,
// or a decode spanning many pool buffers) are merged by a tree, never
// refused.
TEST(AttentionPlan, ManySplitsMergeThroughATree) {
  int64_t cq[2] = {0, 1}, ck[2] = {0, 100000};
  Plan p = build_plan(shape(1, false, -1, 8, 10), 1, cq, ck);
  ScheduleLimits l = roomy();
  l.fan_in = 3;
  Schedule s = schedule_plan(p, units(1), l);
  EXPECT_GT(s.waves[0].levels.size(), 8u);  // 10000 splits, fan-in 3
  for (const CombineItem& c : s.combine) EXPECT_LE(c.n_slots, 3u);
  check_dataflow(p, s);
}

// E defect 6: a batch whose partials exceed the arena runs in waves, and a
// tile whose partials alone exceed it is merged in chunks through carries.
TEST(AttentionPlan, WavesKeepPartialsWithinTheArena) {
  std::vector<int64_t> cq = {0}, ck = {0};
  for (int b = 0; b < 300; ++b) cq.push_back(cq.back() + 1), ck.push_back(ck.back() + 256);
  Plan p = build_plan(shape(1, false, -1, 8, 64), 300, cq.data(), ck.data());
  ScheduleLimits l = roomy();
  l.arena_rows = 1000;
  l.fan_in = 3;
  Schedule s = schedule_plan(p, units(1), l);
  EXPECT_GT(s.waves.size(), 10u);
  EXPECT_LE(s.arena_rows, 1000u);
  check_dataflow(p, s);

  int64_t cq1[2] = {0, 1}, ck1[2] = {0, 200000};
  Plan big = build_plan(shape(1, false, -1, 1, 10), 1, cq1, ck1);  // 20000 splits x 2 kv heads
  Schedule sb = schedule_plan(big, units(1), l);
  EXPECT_LE(sb.arena_rows, 1000u);
  EXPECT_GT(sb.waves.size(), 40u);
  check_dataflow(big, sb);
}

// E defects 7 and 8: dispatches are cut so that every binding's window
// fits, and a pass's spans cover what its items touch.
TEST(AttentionPlan, PassesFitTheBindingLimits) {
  std::vector<int64_t> cq = {0}, ck = {0};
  for (int b = 0; b < 500; ++b) cq.push_back(cq.back() + 3), ck.push_back(ck.back() + 40);
  Plan p = build_plan(shape(2, true, -1, 4, 1000), 500, cq.data(), ck.data());
  ScheduleLimits l = roomy();
  l.storage = 4096;  // 128 items, 64 tokens of out
  l.q_texel = 2048;
  l.k_texel = l.v_texel = 8192;
  CallUnits u = units(2);
  Schedule s = schedule_plan(p, u, l);
  EXPECT_GT(s.waves[0].fwd.size(), 10u);
  for (const FwdPass& pass : s.waves[0].fwd) {
    EXPECT_LE(pass.count * sizeof(PlanItem), l.storage);
    EXPECT_LE(pass.spans.tokens.size() * u.q_token, l.q_texel);
    EXPECT_LE(pass.spans.tokens.size() * u.out_token, l.storage);
    EXPECT_LE(pass.spans.keys.size() * u.k_key, l.k_texel);
    for (uint32_t i = pass.first; i < pass.first + pass.count; ++i) {
      PassSpans sp = item_spans(p, u, s.items[i]);
      EXPECT_GE(sp.tokens.lo, pass.spans.tokens.lo);
      EXPECT_LE(sp.tokens.hi, pass.spans.tokens.hi);
      if (sp.keys.size()) {
        EXPECT_GE(sp.keys.lo, pass.spans.keys.lo);
        EXPECT_LE(sp.keys.hi, pass.spans.keys.hi);
      }
    }
  }
  check_dataflow(p, s);
}

// A custom mask whose rows for a whole tile would not fit one window cuts
// tiles at fewer tokens.
TEST(AttentionPlan, MaskWindowShrinksTiles) {
  int64_t cq[2] = {0, 16}, ck[2] = {0, 1000};
  PlanShape sh = shape(1, false, -1, 8, 100000);
  sh.mask_window_elems = 2500;  // 2 tokens of 1000 keys
  Plan p = build_plan(sh, 1, cq, ck);
  for (const PlanTile& t : p.tiles) EXPECT_LE(t.row_end - t.row0, 2u);
  EXPECT_EQ(p.tiles.size(), 16u);  // 8 token pairs x 2 kv heads
}

// Paged pools over several buffers: an item never crosses a buffer
// segment, the pieces of a tile cover its keys exactly once, and passes
// come by buffer.
TEST(AttentionPlan, ItemsStayInsideBufferSegments) {
  int64_t cq[3] = {0, 1, 4}, ck[3] = {0, 700, 760};
  std::vector<std::vector<KeySegment>> seg = {{{0, 100, 2}, {100, 640, 0}, {640, 700, 1}},
                                              {{0, 60, 1}}};
  Plan p = build_plan(shape(2, true, -1, 8, 256), 2, cq, ck, &seg);
  std::vector<uint64_t> covered(2, 0);
  for (size_t i = 0; i < p.items.size(); ++i) {
    const PlanItem& it = p.items[i];
    bool inside = false;
    for (const auto& g : seg[it.seq])
      inside =
          inside || (p.item_buffer[i] == g.buffer && g.begin <= it.k_begin && it.k_end <= g.end);
    EXPECT_TRUE(inside) << "item [" << it.k_begin << ", " << it.k_end << ")";
    EXPECT_LE(it.k_end - it.k_begin, 256u);
    covered[it.seq] += it.k_end - it.k_begin;
  }
  EXPECT_EQ(covered[0], 2u * 700u);  // 2 kv heads
  CallUnits u = units(2);
  u.k_key = u.v_key = 0;
  u.page_size = 16;
  Schedule s = schedule_plan(p, u, roomy());
  for (size_t i = 1; i < s.waves[0].fwd.size(); ++i)
    EXPECT_LT(s.waves[0].fwd[i - 1].buffer, s.waves[0].fwd[i].buffer) << "one pass per buffer";
  check_dataflow(p, s);
}

// lavapipe hands each of its P threads one contiguous chunk of floor(n / P)
// workgroups: a pass ordered heaviest first put about 3/4 of a causal
// prefill on one thread. order_pass() must balance the chunks, keep every
// item once, and leave the n % P lightest for last (handed out singly).
TEST(AttentionPlan, PassOrderBalancesStaticChunks) {
  for (uint32_t P : {2u, 3u, 8u}) {
    for (uint32_t n : {1u, 2u, 7u, 64u, 257u}) {
      // Causal-like work: item i sees about i keys; plus random noise.
      std::vector<PlanItem> items(n);
      uint32_t x = 12345 + n * 7 + P;
      for (uint32_t i = 0; i < n; ++i) {
        x = x * 1103515245u + 12345u;
        items[i] = PlanItem{i, 0, 0, kNoSlot, 0, 32 * i + (x >> 20) % 64, 0, 1};
      }
      std::vector<PlanItem> heavy = items;
      order_pass(heavy.begin(), heavy.end(), 0);
      for (uint32_t i = 1; i < n; ++i)
        EXPECT_GE(item_work(heavy[i - 1]), item_work(heavy[i])) << "P 0: heaviest first";
      std::vector<PlanItem> o = items;
      order_pass(o.begin(), o.end(), P);
      std::set<uint32_t> seen;
      for (const PlanItem& it : o) seen.insert(it.seq);
      EXPECT_EQ(seen.size(), n) << "every item once";
      const uint32_t per = n / P;
      if (per == 0) continue;
      uint64_t biggest = 0;
      for (const PlanItem& it : o) biggest = std::max(biggest, item_work(it));
      uint64_t lo = UINT64_MAX, hi = 0;
      for (uint32_t c = 0; c < P; ++c) {
        uint64_t w = 0;
        for (uint32_t i = c * per; i < (c + 1) * per; ++i) w += item_work(o[i]);
        lo = std::min(lo, w);
        hi = std::max(hi, w);
      }
      EXPECT_LE(hi - lo, biggest) << "P " << P << " n " << n << ": chunks " << lo << ".." << hi;
      for (uint32_t i = P * per; i < n; ++i)
        EXPECT_LE(item_work(o[i]), item_work(heavy[n - (n - P * per)])) << "remainder lightest";
    }
  }
}

// f16 arithmetic for tiled: off by default (no GPU has measured it faster),
// on with VKATTN_FORCE_F16_MATH where the device has shaderFloat16, and off
// whenever VKATTN_DISABLE_F16_MATH is set, forced or not.
TEST(AttentionVariantChoice, F16MathSwitches) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn::Device& dev = ctx->impl->device();
  vkattn::KernelOptions o;
  o.attn_kernel = 1;  // tiled
  EXPECT_FALSE(vkattn::choose_attention_variant(dev, o, 128, 128, 1024, VKATTN_F16).f16_math);
  o.force_f16_math = true;
  const vkattn::AttentionVariant forced =
      vkattn::choose_attention_variant(dev, o, 128, 128, 1024, VKATTN_F16);
  EXPECT_EQ(forced.f16_math, dev.caps().shader_float16);
  EXPECT_EQ(forced.family, vkattn::AttentionFamily::kTiled);
  o.disable_f16_math = true;
  EXPECT_FALSE(vkattn::choose_attention_variant(dev, o, 128, 128, 1024, VKATTN_F16).f16_math);
  o.attn_kernel = 0;  // lanes has no f16 arithmetic
  o.disable_f16_math = false;
  EXPECT_FALSE(vkattn::choose_attention_variant(dev, o, 128, 128, 1024, VKATTN_F16).f16_math);
  vkattn_context_destroy(ctx);
}

// A tiled workgroup smaller than the subgroup (NVIDIA's 32-lane warps with
// WG 8 or 16; lavapipe's 8 with WG 4) sums its rows in shared memory and
// stays tiled: an H100 ran such forced shapes on lanes before.
TEST(AttentionVariantChoice, TiledWorkgroupBelowSubgroupStaysTiled) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn::Device& dev = ctx->impl->device();
  const uint32_t sg = dev.caps().subgroup_size;
  ASSERT_GE(sg, 2u);
  vkattn::KernelOptions o;
  o.attn_kernel = 1;  // tiled
  o.attn_lanes_per_row = sg / 2;
  o.attn_wg = sg / 2;
  const vkattn::AttentionVariant v =
      vkattn::choose_attention_variant(dev, o, 64, 64, 1024, VKATTN_F16);
  EXPECT_EQ(v.family, vkattn::AttentionFamily::kTiled) << v.fallback;
  EXPECT_TRUE(v.fallback.empty()) << v.fallback;
  EXPECT_FALSE(v.subgroup_ops);
  vkattn_context_destroy(ctx);
}

// Forcing coopmat: a build without the coopmat shader refuses the call
// (UNSUPPORTED, naming the build option); a device without usable
// cooperative matrices, or K/V in a dtype it has no matrix type for, hands
// the call to tiled with the reason; otherwise coopmat serves it with a
// shape the device offers.
TEST(AttentionVariantChoice, ForcedCoopmat) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn::Device& dev = ctx->impl->device();
  const vkattn::CoopmatSupport& cm = dev.caps().coopmat;
  vkattn::KernelOptions o;
  o.attn_kernel = 2;  // coopmat
  if (!vkattn::coopmat_built()) {
    try {
      vkattn::choose_attention_variant(dev, o, 64, 64, 1024, VKATTN_F16);
      ADD_FAILURE() << "forcing coopmat in a build without it must fail";
    } catch (const vkattn::Error& e) {
      EXPECT_EQ(e.status(), VKATTN_ERROR_UNSUPPORTED);
      EXPECT_NE(std::string(e.what()).find("VKATTN_COOPMAT"), std::string::npos) << e.what();
    }
    vkattn_context_destroy(ctx);
    return;
  }
  const vkattn::AttentionVariant f16 =
      vkattn::choose_attention_variant(dev, o, 64, 64, 1024, VKATTN_F16);
  if (!cm.usable()) {
    EXPECT_EQ(f16.family, vkattn::AttentionFamily::kTiled);
    EXPECT_EQ(f16.fallback, "coopmat to tiled: " + cm.missing());
  } else {
    EXPECT_EQ(f16.family, vkattn::AttentionFamily::kCoopmat) << f16.fallback;
    bool offered = false;
    for (const vkattn::CoopmatShape& s : cm.f16_shapes)
      offered |= s.m == f16.coopmat_m && s.n == f16.coopmat_n && s.k == f16.coopmat_k;
    EXPECT_TRUE(offered);
    EXPECT_EQ(f16.tile_rows(), f16.subgroups * f16.coopmat_m);
    EXPECT_EQ(f16.wg, f16.subgroups * dev.caps().subgroup_size);
    bool enabled = false;
    for (const char* e : dev.enabled_extensions())
      enabled |= std::string(e) == "VK_KHR_cooperative_matrix";
    EXPECT_TRUE(enabled) << "vkattn's own device enables the extension it uses";
    // A CPU device never gets coopmat from the table.
    vkattn::KernelOptions table;
    if (dev.info().device_type == VKATTN_DEVICE_CPU)
      EXPECT_NE(vkattn::choose_attention_variant(dev, table, 64, 64, 1024, VKATTN_F16).family,
                vkattn::AttentionFamily::kCoopmat);
    // Head dims that fit are staged whole; MLA's (d 576 / dv 512) are
    // staged in narrower chunks that fit the device's shared memory, and
    // coopmat still serves them.
    EXPECT_EQ(f16.head_chunk, 64u);
    EXPECT_EQ(f16.head_chunk_v, 64u);
    for (vkattn_dtype kv : {VKATTN_F16, VKATTN_I8, VKATTN_FP8_E4M3}) {
      const vkattn::AttentionVariant mla =
          vkattn::choose_attention_variant(dev, o, 576, 512, 1024, kv);
      ASSERT_EQ(mla.family, vkattn::AttentionFamily::kCoopmat) << mla.fallback;
      vkattn::FwdConfig cfg;
      cfg.var = mla, cfg.head_dim = 576, cfg.head_dim_v = 512, cfg.kv_dtype = kv;
      EXPECT_LE(vkattn::kCoopmatFamily.shared_bytes(cfg), dev.caps().max_shared_memory);
      EXPECT_LT(uint64_t(mla.head_chunk) * mla.head_chunk_v, 576u * 512u)
          << "576/512 whole needs more than " << dev.caps().max_shared_memory << " bytes";
      EXPECT_EQ(mla.head_chunk % mla.coopmat_k, 0u);
      EXPECT_EQ(mla.head_chunk_v % mla.coopmat_n, 0u);
      EXPECT_GE(mla.head_chunk, mla.coopmat_k);
    }
    // O in accumulators while a lane holds at most 64 floats of it (on
    // lavapipe's 8x8 blocks over 8 lanes: dv <= 64), in shared memory past
    // that or wherever V is chunked; VKATTN_ATTN_O_REGS forces any where
    // the layout allows, and the shared-memory count follows.
    const uint32_t sgs = dev.caps().subgroup_size;
    EXPECT_EQ(f16.o_regs, uint64_t(f16.coopmat_m) * 64 <= 64ull * sgs ? 2u : 0u) << "dv 64";
    // Up to twice that, accumulators with q/K in chunks (no loads ahead);
    // past it shared memory (one subgroup here: no column split).
    const vkattn::AttentionVariant wide =
        vkattn::choose_attention_variant(dev, o, 64, 8 * sgs + 8, 1024, VKATTN_F16);
    if (uint64_t(wide.coopmat_m) * (8 * sgs + 8) <= 128ull * sgs) {
      EXPECT_EQ(wide.o_regs, 2u);
      EXPECT_LT(wide.head_chunk, 64u) << "q/K in chunks";
    }
    const vkattn::AttentionVariant wider =
        vkattn::choose_attention_variant(dev, o, 64, 16 * sgs + 8, 1024, VKATTN_F16);
    EXPECT_EQ(wider.o_regs, 0u) << "a lane would hold " << wider.coopmat_m * (16 * sgs + 8) / sgs;
    vkattn::KernelOptions regs = o, no_regs = o;
    regs.attn_o_regs = 1, no_regs.attn_o_regs = 0;
    const vkattn::AttentionVariant r =
        vkattn::choose_attention_variant(dev, regs, 64, 8 * sgs + 8, 1024, VKATTN_F16);
    const vkattn::AttentionVariant nr =
        vkattn::choose_attention_variant(dev, no_regs, 64, 64, 1024, VKATTN_F16);
    EXPECT_FALSE(nr.o_regs);
    if (r.head_chunk_v >= 8 * sgs + 8 && r.coopmat_m * r.coopmat_n % sgs == 0) {
      EXPECT_TRUE(r.o_regs);
      vkattn::FwdConfig a, b;
      a.var = r, b.var = r, b.var.o_regs = 0;
      a.head_dim = b.head_dim = 64, a.head_dim_v = b.head_dim_v = 8 * sgs + 8;
      a.kv_dtype = b.kv_dtype = VKATTN_F16;
      EXPECT_LT(vkattn::kCoopmatFamily.shared_bytes(a), vkattn::kCoopmatFamily.shared_bytes(b));
    }
    vkattn::KernelOptions acc = o;
    acc.attn_o_regs = 2;
    EXPECT_EQ(vkattn::choose_attention_variant(dev, acc, 64, 8 * sgs + 8, 1024, VKATTN_F16).o_regs,
              2u)
        << "accumulators need no known layout";
    // q's fragments in registers where one chunk holds d and q's staging
    // fits the K/V tile; they take sh_q's shared memory away, and a forced
    // pair that cannot stage q is declined with the reason.
    vkattn::KernelOptions q_on = o, q_off = o;
    q_on.attn_q_regs = 1, q_off.attn_q_regs = 0;
    const vkattn::AttentionVariant qr =
        vkattn::choose_attention_variant(dev, q_on, 64, 64, 1024, VKATTN_F16);
    const vkattn::AttentionVariant qs =
        vkattn::choose_attention_variant(dev, q_off, 64, 64, 1024, VKATTN_F16);
    EXPECT_FALSE(qs.q_regs);
    EXPECT_EQ(qr.q_regs, vkattn::coopmat_q_staging_fits(qr.subgroups * qr.coopmat_m, qr.tile_keys,
                                                        qr.head_chunk, qr.head_chunk_v));
    if (qr.q_regs) {
      vkattn::FwdConfig a, b;
      a.var = qr, b.var = qr, b.var.q_regs = false;
      a.head_dim = b.head_dim = a.head_dim_v = b.head_dim_v = 64;
      a.kv_dtype = b.kv_dtype = VKATTN_F16;
      EXPECT_LT(vkattn::kCoopmatFamily.shared_bytes(a), vkattn::kCoopmatFamily.shared_bytes(b));
      // 4 x m rows staged over n keys: q does not fit.
      a.var.tile_keys = qr.coopmat_n, a.var.subgroups = 4, a.var.wg = 4 * sgs;
      const std::string why = vkattn::kCoopmatFamily.declines(dev.caps(), a);
      EXPECT_NE(why.find("q in registers"), std::string::npos) << why;
    }
    // Subgroups splitting one row block's head dim and O's columns (MLA's
    // shape): O in accumulators, q in shared memory, V whole (a forced head
    // chunk narrows q/K only), one row block a tile; declined where O's
    // column blocks do not split over the subgroups.
    vkattn::KernelOptions cols = o;
    cols.attn_col_split = 1, cols.attn_subgroups = 2;
    const vkattn::AttentionVariant cv =
        vkattn::choose_attention_variant(dev, cols, 576, 512, 1024, VKATTN_F16);
    ASSERT_EQ(cv.family, vkattn::AttentionFamily::kCoopmat) << cv.fallback;
    EXPECT_TRUE(cv.col_split);
    EXPECT_EQ(cv.o_regs, 2u);
    EXPECT_FALSE(cv.q_regs);
    EXPECT_EQ(cv.head_chunk_v, 512u);
    EXPECT_EQ(cv.tile_rows(), cv.coopmat_m);
    EXPECT_EQ(cv.softmax_lanes, sgs * 2 / cv.coopmat_m);
    cols.attn_head_chunk = cv.coopmat_k;
    const vkattn::AttentionVariant cc =
        vkattn::choose_attention_variant(dev, cols, 576, 512, 1024, VKATTN_F16);
    EXPECT_TRUE(cc.col_split);
    EXPECT_EQ(cc.head_chunk, cv.coopmat_k);
    EXPECT_EQ(cc.head_chunk_v, 512u) << "V stays whole";
    {
      vkattn::FwdConfig a;
      a.var = cv, a.head_dim = 576, a.head_dim_v = 512, a.kv_dtype = VKATTN_F16;
      EXPECT_EQ(vkattn::kCoopmatFamily.declines(dev.caps(), a), "");
      a.head_dim_v = 512 + cv.coopmat_n;  // an odd number of O's column blocks over 2
      a.var.head_chunk_v = a.head_dim_v;
      const std::string why = vkattn::kCoopmatFamily.declines(dev.caps(), a);
      EXPECT_NE(why.find("splitting columns"), std::string::npos) << why;
    }
    EXPECT_TRUE(vkattn::coopmat_q_staging_fits(64, 64, 128, 128));
    EXPECT_FALSE(vkattn::coopmat_q_staging_fits(64, 32, 128, 128));
    EXPECT_TRUE(vkattn::coopmat_q_staging_fits(32, 16, 64, 256));  // V's wider rows hold q
    // VKATTN_ATTN_HEAD_CHUNK forces the chunks (capped at the padded head
    // dims); a width that is not a multiple of the matrix N and K is refused.
    vkattn::KernelOptions chunked = o;
    const uint32_t step = std::max(f16.coopmat_n, f16.coopmat_k);
    chunked.attn_head_chunk = step;
    const vkattn::AttentionVariant c =
        vkattn::choose_attention_variant(dev, chunked, 64, 2 * step + 1, 1024, VKATTN_F16);
    EXPECT_EQ(c.family, vkattn::AttentionFamily::kCoopmat) << c.fallback;
    EXPECT_EQ(c.head_chunk, step);
    EXPECT_EQ(c.head_chunk_v, step);
    chunked.attn_head_chunk = 1024;
    const vkattn::AttentionVariant whole =
        vkattn::choose_attention_variant(dev, chunked, 40, 24, 1024, VKATTN_F16);
    EXPECT_EQ(whole.head_chunk % whole.coopmat_k, 0u);
    EXPECT_GE(whole.head_chunk, 40u);
    EXPECT_LT(whole.head_chunk, 40u + whole.coopmat_k);
    EXPECT_GE(whole.head_chunk_v, 24u);
    for (uint32_t bad : {0u, step + 4}) {
      chunked.attn_head_chunk = bad;
      try {
        vkattn::choose_attention_variant(dev, chunked, 64, 64, 1024, VKATTN_F16);
        ADD_FAILURE() << "VKATTN_ATTN_HEAD_CHUNK=" << bad << " must be refused";
      } catch (const vkattn::Error& e) {
        EXPECT_EQ(e.status(), VKATTN_ERROR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("VKATTN_ATTN_HEAD_CHUNK"), std::string::npos)
            << e.what();
      }
    }
  }
  for (vkattn_dtype kv : {VKATTN_F32, VKATTN_BF16}) {
    const vkattn::AttentionVariant v = vkattn::choose_attention_variant(dev, o, 64, 64, 1024, kv);
    EXPECT_EQ(v.family, vkattn::AttentionFamily::kTiled);
    EXPECT_EQ(v.fallback.rfind("coopmat to tiled: ", 0), 0u) << v.fallback;
  }
  vkattn_context_destroy(ctx);
}

// A default context made under VKATTN_DISABLE_COOPMAT=1 (read at creation).
vkattn_status create_with_kill_switch(vkattn_context** ctx) {
  vkattn_test::set_env("VKATTN_DISABLE_COOPMAT", "1");
  const vkattn_status s = vkattn_context_create(nullptr, ctx);
  vkattn_test::unset_env("VKATTN_DISABLE_COOPMAT");
  return s;
}

// VKATTN_DISABLE_COOPMAT=1 keeps cooperative matrices off the device (not
// enabled, never chosen), whatever the device offers.
TEST(AttentionVariantChoice, CoopmatKillSwitch) {
  vkattn_context* ctx = nullptr;
  const vkattn_status s = create_with_kill_switch(&ctx);
  ASSERT_EQ(s, VKATTN_SUCCESS);
  vkattn::Device& dev = ctx->impl->device();
  EXPECT_FALSE(dev.caps().coopmat.usable());
  EXPECT_EQ(dev.caps().coopmat.missing(), "VKATTN_DISABLE_COOPMAT=1");
  for (const char* e : dev.enabled_extensions()) EXPECT_STRNE(e, "VK_KHR_cooperative_matrix");
  if (vkattn::coopmat_built()) {
    vkattn::KernelOptions o;
    o.attn_kernel = 2;
    const vkattn::AttentionVariant v =
        vkattn::choose_attention_variant(dev, o, 64, 64, 1024, VKATTN_F16);
    EXPECT_EQ(v.family, vkattn::AttentionFamily::kTiled);
    EXPECT_EQ(v.fallback, "coopmat to tiled: VKATTN_DISABLE_COOPMAT=1");
  }
  vkattn_context_destroy(ctx);
}

// Regression (H100, 2026-11-23): under injected allocation failures the
// 1.3.239 loader's trampoline for vkGetPhysicalDeviceCooperativeMatrix-
// PropertiesKHR jumped to address 0. The kill switch must keep vkattn from
// calling it at all: no shapes, no feature read, even where the device
// offers the extension (lavapipe 26.1: ctest test_attention_plan.mesa26).
TEST(AttentionVariantChoice, CoopmatKillSwitchSkipsThePropertyQuery) {
  vkattn_context* ctx = nullptr;
  const vkattn_status s = create_with_kill_switch(&ctx);
  ASSERT_EQ(s, VKATTN_SUCCESS);
  const vkattn::CoopmatSupport& cm = ctx->impl->device().caps().coopmat;
  EXPECT_TRUE(cm.disabled);
  EXPECT_TRUE(cm.f16_shapes.empty());
  EXPECT_FALSE(cm.feature);
  EXPECT_FALSE(cm.extension);
  vkattn_context_destroy(ctx);
}

// The decode family's split rule over the whole call: about 2 workgroups
// per compute unit (target_items), no split below min_split_keys. An
// H100-sized device (132 SMs) decoding 4096 keys over 8 kv heads: 8 tiles,
// 33 splits wanted per tile, 4096 / 128 = 32 allowed: 256 workgroups of
// 128 keys.
TEST(AttentionPlan, DecodeSplitRuleFillsTheDevice) {
  int64_t cq[2] = {0, 1}, ck[2] = {0, 4096};
  PlanShape s{4, 8, true, -1, 4, 4, 128, 0, 1u << 30, 2 * 132, 128};
  Plan p = build_plan(s, 1, cq, ck);
  EXPECT_EQ(p.tiles.size(), 8u);
  EXPECT_EQ(p.items.size(), 256u);
  for (const PlanItem& it : p.items) EXPECT_EQ(it.k_end - it.k_begin, 128u);
  // 16 sequences of 2048 keys: 128 tiles, 3 splits wanted, 16 allowed.
  std::vector<int64_t> q = {0}, k = {0};
  for (int b = 0; b < 16; ++b) q.push_back(b + 1), k.push_back((b + 1) * 2048);
  p = build_plan(s, 16, q.data(), k.data());
  EXPECT_EQ(p.items.size(), 128u * 3u);
}

// Forcing decode: the family and shape the device table and the forced
// options give, the split count from VKATTN_DEVICE_COMPUTE_UNITS (read
// when the context is created), the decline of a call with a sequence of
// more than 8 query tokens (handed to the table's other family with the
// reason), and the table's choice on this device.
TEST(AttentionVariantChoice, Decode) {
  vkattn_test::set_env("VKATTN_DEVICE_COMPUTE_UNITS", "132");
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn_test::unset_env("VKATTN_DEVICE_COMPUTE_UNITS");
  vkattn::Device& dev = ctx->impl->device();
  EXPECT_EQ(dev.caps().compute_units, 132u);
  vkattn::KernelOptions o;
  o.attn_kernel = 3;  // decode
  // Decode of 32 q / 8 kv heads, d 128: 4 rows per tile.
  vkattn::AttentionVariant v = vkattn::choose_attention_variant(dev, o, 128, 128, 4, VKATTN_F16, 4);
  EXPECT_EQ(v.family, vkattn::AttentionFamily::kDecode) << v.fallback;
  EXPECT_TRUE(v.fallback.empty()) << v.fallback;
  EXPECT_EQ(v.target_items, 264u);
  EXPECT_EQ(v.min_split_keys, 128u);
  // (A lane's budget depends on the lanes a key row takes, up to the
  // subgroup: lavapipe's 8 on x86 gives the 4 rows one tile; arm64's 4
  // lanes, fewer rows a tile.)
  if (dev.caps().subgroup_size == 8) EXPECT_EQ(v.tile_rows(), 4u);
  EXPECT_TRUE(v.tile_rows() >= 1 && v.tile_rows() <= 4 &&
              (v.tile_rows() & (v.tile_rows() - 1)) == 0)
      << v.tile_rows();
  const uint32_t L = v.lanes_per_row;
  EXPECT_EQ(L & (L - 1), 0u);
  EXPECT_LE(L, dev.caps().subgroup_size);
  EXPECT_EQ(v.wg % L, 0u);
  EXPECT_EQ(v.tile_keys % (v.wg / L), 0u);
  // 8 tokens x 4 heads: one tile of 32 rows where the registers hold them.
  v = vkattn::choose_attention_variant(dev, o, 128, 128, 32, VKATTN_F16, 4);
  EXPECT_EQ(v.family, vkattn::AttentionFamily::kDecode);
  EXPECT_LE(v.rows, 32u);
  // 9 tokens: declined, with the reason, to the table's family.
  v = vkattn::choose_attention_variant(dev, o, 128, 128, 36, VKATTN_F16, 4);
  EXPECT_NE(v.family, vkattn::AttentionFamily::kDecode);
  EXPECT_NE(v.fallback.find("decode to "), std::string::npos) << v.fallback;
  EXPECT_NE(v.fallback.find("9 query tokens"), std::string::npos) << v.fallback;
  // A forced minimum split length holds for every family.
  o.attn_min_split_keys = 40;
  EXPECT_EQ(vkattn::choose_attention_variant(dev, o, 64, 64, 4, VKATTN_F16, 4).min_split_keys, 40u);
  o.attn_kernel = 1;
  EXPECT_EQ(vkattn::choose_attention_variant(dev, o, 64, 64, 4, VKATTN_F16, 4).min_split_keys, 40u);
  // The table: decode on GPUs for calls of at most 8 tokens per sequence,
  // never on CPU devices (docs/guide/kernels.md).
  vkattn::KernelOptions table;
  const bool cpu = dev.info().device_type == VKATTN_DEVICE_CPU;
  EXPECT_EQ(vkattn::choose_attention_variant(dev, table, 128, 128, 4, VKATTN_F16, 4).family ==
                vkattn::AttentionFamily::kDecode,
            !cpu);
  EXPECT_NE(vkattn::choose_attention_variant(dev, table, 128, 128, 4096, VKATTN_F16, 4).family,
            vkattn::AttentionFamily::kDecode);
  vkattn_context_destroy(ctx);
}

// A device's caps for the decode family's shape, without the device:
// subgroup shuffles, 1024 lanes a workgroup.
namespace {
DeviceCaps decode_caps(uint32_t subgroup, uint32_t shared_kib, bool loop_capped) {
  DeviceCaps caps;
  caps.subgroup_size = subgroup;
  caps.subgroup_shuffle = true;
  caps.max_shared_memory = shared_kib * 1024;
  caps.max_workgroup_invocations = 1024;
  caps.loop_capped = loop_capped;
  return caps;
}
}  // namespace

// The decode family's shape on a GPU's table row, without the GPU: an
// NVIDIA device's defaults and caps (32-lane subgroups, 48 KiB of shared
// memory, no loop cap). MLA (d 576 / dv 512, 16 heads over one kv head)
// takes one tile of all 16 rows in a 256-lane workgroup of 8 row splits,
// so its keys are read once per group; a GQA-8 decode at d 128 keeps the
// table's 128 lanes and 4 splits; CPU devices and forced shapes keep
// theirs.
TEST(AttentionVariantChoice, DecodeWideRowsGrowTheWorkgroupOnGpus) {
  vkattn_device_info info{};
  info.device_type = VKATTN_DEVICE_DISCRETE_GPU;
  info.vendor_id = 0x10DE;  // the NVIDIA row: decode_wide_rows
  DeviceCaps caps = decode_caps(32, 48, false);
  const AttentionDefaults dev = attention_defaults(info, caps);
  auto shape = [&](const DeviceCaps& c, const KernelOptions& o, uint32_t d, uint32_t dv,
                   uint32_t rows) {
    AttentionVariant v;
    configure_decode(v, c, dev, o, d, dv, rows);
    EXPECT_EQ(kDecodeFamily.declines(c, probe_config(v, d, dv, VKATTN_F16)), "");
    return v;
  };
  KernelOptions none;
  AttentionVariant v = shape(caps, none, 576, 512, 16);
  EXPECT_EQ(v.lanes_per_row, 32u);
  EXPECT_EQ(v.rows, 16u);
  EXPECT_EQ(v.row_splits, 8u);
  EXPECT_EQ(v.wg, 256u);
  EXPECT_EQ(v.tile_keys, dev.decode_keys_per_group);  // one key group
  EXPECT_EQ(v.page_window, 64u);                      // GPUs: the block-table window
  // One key group: no merge arrays.
  EXPECT_LT(kDecodeFamily.shared_bytes(probe_config(v, 576, 512, VKATTN_F16)), 64u);
  // 8 heads: one tile of 8 rows, 2 a lane over 4 splits.
  v = shape(caps, none, 576, 512, 8);
  EXPECT_EQ(v.rows, 8u);
  EXPECT_EQ(v.row_splits, 4u);
  EXPECT_EQ(v.wg, 128u);
  // The GQA-8 decode at d 128 is the table's shape.
  v = shape(caps, none, 128, 128, 8);
  EXPECT_EQ(v.wg, dev.decode_wg);
  EXPECT_EQ(v.rows, 8u);
  EXPECT_EQ(v.row_splits, 4u);
  // Forced row splits keep the workgroup; a CPU device keeps its lanes.
  KernelOptions forced;
  forced.attn_row_splits = 4;
  v = shape(caps, forced, 576, 512, 16);
  EXPECT_EQ(v.wg, dev.decode_wg);
  EXPECT_LT(v.rows, 16u);
  DeviceCaps cpu = caps;
  cpu.loop_capped = true;
  v = shape(cpu, none, 576, 512, 16);
  EXPECT_EQ(v.wg, dev.decode_wg);
  EXPECT_EQ(v.page_window, 0u);  // lavapipe: no window (barriers cost more)
  // A row without decode_wide_rows (no vendor: M1 among them) keeps 4 rows a tile.
  info.vendor_id = 0x106B;
  const AttentionDefaults other = attention_defaults(info, caps);
  EXPECT_FALSE(other.decode_wide_rows);
  AttentionVariant o;
  configure_decode(o, caps, other, none, 576, 512, 16);
  EXPECT_EQ(o.wg, other.decode_wg);
  EXPECT_LT(o.rows, 16u);
}

// Top-k calls on decode touch the listed rows of a later tile on CPU
// devices (whose prefetchers do not follow listed keys) and not on GPUs;
// the environment's value wins; under the loop cap the touches' loops
// leave an item fewer list slots, never more.
TEST(AttentionVariantChoice, TopkRowsTouchedAheadOnCpusOnly) {
  vkattn_device_info info{};
  DeviceCaps caps = decode_caps(8, 32, true);
  info.device_type = VKATTN_DEVICE_CPU;
  const AttentionDefaults cpu = attention_defaults(info, caps);
  KernelOptions none;
  AttentionVariant v;
  configure_decode(v, caps, cpu, none, 128, 128, 4);
  EXPECT_EQ(v.touch_ahead, 1u);
  const uint32_t slots = decode_topk_item_slots(v, caps, 128, 128);
  AttentionVariant off = v;
  off.touch_ahead = 0;
  EXPECT_LE(slots, decode_topk_item_slots(off, caps, 128, 128));
  EXPECT_GE(slots, v.tile_keys);
  KernelOptions forced;
  forced.attn_touch_ahead = 3;
  configure_decode(v, caps, cpu, forced, 128, 128, 4);
  EXPECT_EQ(v.touch_ahead, 3u);
  info.device_type = VKATTN_DEVICE_DISCRETE_GPU;
  info.vendor_id = 0x10DE;
  caps = decode_caps(32, 32, false);
  const AttentionDefaults gpu = attention_defaults(info, caps);
  configure_decode(v, caps, gpu, none, 128, 128, 4);
  EXPECT_EQ(v.touch_ahead, 0u);
}

// An fp8 cache's scale table (read with every key by attention, written by
// the host only when scales are set) is device-local where the device has
// a device-local type the host can map (a discrete GPU's BAR; lavapipe's
// one type), so no kernel reads it from system memory there.
TEST(PlanMemory, Fp8ScaleTablesAreDeviceLocalWhereMappable) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn::Device& dev = ctx->impl->device();
  const VkMemoryPropertyFlags near = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  bool offered = false;
  for (uint32_t i = 0; i < dev.memory_type_count(); ++i)
    offered = offered || (dev.memory_type_flags(i) & near) == near;
  vkattn_kv_cache_desc d;
  vkattn_kv_cache_desc_init(&d);
  d.num_layers = 2, d.num_kv_heads = 2, d.head_dim = 16, d.num_pages = 4;
  d.dtype = VKATTN_FP8_E4M3;
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  const vkattn::Buffer& table = *cache->impl->scale_table();
  const VkMemoryPropertyFlags f = dev.memory_type_flags(table.memory_type());
  EXPECT_EQ((f & near) == near, offered) << "memory type " << table.memory_type();
  EXPECT_NE(table.mapped(), nullptr);
  // Scales set through the mapping read back exactly.
  const float ks[2] = {0.5f, 3.0f}, vs[2] = {0.25f, 8.0f};
  ASSERT_EQ(vkattn_kv_cache_set_scales(cache, 1, 2, ks, vs), VKATTN_SUCCESS) << vkattn_last_error();
  const float* tab = reinterpret_cast<const float*>(table.mapped()) + cache->impl->scale_index(1);
  EXPECT_EQ(tab[0], 0.5f);
  EXPECT_EQ(tab[1], 3.0f);
  EXPECT_EQ(tab[2], 0.25f);
  EXPECT_EQ(tab[3], 8.0f);
  vkattn_kv_cache_destroy(cache);
  vkattn_context_destroy(ctx);
}

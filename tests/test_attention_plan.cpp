// White-box tests of the host planner (src/ops/attention_plan.cpp): key
// ranges cut by causal/window, splitting, order, limits. No device needed.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/attention_plan.h"

using namespace vkattn;

namespace {
PlanShape shape(uint32_t group, bool causal, int32_t window, uint32_t tile_rows,
                uint32_t max_keys) {
  return PlanShape{group, 2, causal, window, tile_rows, max_keys, 64, 1, 1};
}
}  // namespace

TEST(AttentionPlan, CausalAndWindowBoundKeyRanges) {
  // One sequence, t = 8 queries over u = 20 keys: positions 12..19.
  int32_t cq[2] = {0, 8}, ck[2] = {0, 20};
  Plan p = build_plan(shape(1, true, 3, 4, 1000), 1, cq, ck);
  ASSERT_EQ(p.items.size(), 4u);  // 2 row tiles x 2 kv heads
  for (const auto& it : p.items) {
    // Tile rows 0..3 -> positions 12..15 -> keys [9, 16); rows 4..7 -> [13, 20).
    const uint32_t want_begin = it.row0 == 0 ? 9u : 13u, want_end = it.row0 == 0 ? 16u : 20u;
    EXPECT_EQ(it.k_begin, want_begin);
    EXPECT_EQ(it.k_end, want_end);
    EXPECT_EQ(it.slot, kNoSlot);
  }
  EXPECT_TRUE(p.combine.empty());
}

TEST(AttentionPlan, QueriesBeforeAllKeysGetEmptyRanges) {
  int32_t cq[2] = {0, 5}, ck[2] = {0, 2};  // t > u: pos = -3..1
  Plan p = build_plan(shape(1, true, -1, 2, 1000), 1, cq, ck);
  for (const auto& it : p.items) {
    EXPECT_LE(it.k_begin, it.k_end);
    if (it.row0 == 0) EXPECT_EQ(it.k_end, 0u);  // rows at -3, -2 see nothing
  }
}

TEST(AttentionPlan, LongRangesSplitAndCombine) {
  int32_t cq[3] = {0, 1, 3}, ck[3] = {0, 1000, 1010};
  Plan p = build_plan(shape(4, false, -1, 8, 300), 2, cq, ck);
  // Sequence 0: 1000 keys -> 4 splits per kv head; sequence 1: 10 keys, no split.
  EXPECT_EQ(p.num_slots, 8u);
  EXPECT_EQ(p.combine.size(), 2u);
  for (const auto& c : p.combine) EXPECT_EQ(c.n_slots, 4u);
  uint64_t covered = 0;
  for (const auto& it : p.items)
    if (it.seq == 0) covered += it.k_end - it.k_begin;
  EXPECT_EQ(covered, 2u * 1000u);
  for (size_t i = 1; i < p.items.size(); ++i)
    EXPECT_GE(p.items[i - 1].k_end - p.items[i - 1].k_begin, p.items[i].k_end - p.items[i].k_begin)
        << "items must be heaviest first";
  EXPECT_EQ(p.seqs[1].mask_off, 1000u);  // t0 * u0
}

TEST(AttentionPlan, TooManySplitsIsUnsupported) {
  int32_t cq[2] = {0, 1}, ck[2] = {0, 100000};
  try {
    build_plan(shape(1, false, -1, 8, 10), 1, cq, ck);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), VKATTN_ERROR_UNSUPPORTED);
  }
}

// Paged pools over several buffers: an item never crosses a buffer
// segment, the pieces of a tile cover its keys exactly once, and items come
// grouped by buffer (one dispatch each).
TEST(AttentionPlan, ItemsStayInsideBufferSegments) {
  int32_t cq[3] = {0, 1, 4}, ck[3] = {0, 700, 760};
  std::vector<std::vector<KeySegment>> seg = {{{0, 100, 2}, {100, 640, 0}, {640, 700, 1}},
                                              {{0, 60, 1}}};
  Plan p = build_plan(shape(2, true, -1, 8, 256), 2, cq, ck, &seg);
  std::vector<uint64_t> covered(2, 0);
  for (const auto& it : p.items) {
    bool inside = false;
    for (const auto& g : seg[it.seq])
      inside = inside || (it.buffer == g.buffer && g.begin <= it.k_begin && it.k_end <= g.end);
    EXPECT_TRUE(inside) << "item [" << it.k_begin << ", " << it.k_end << ") buffer " << it.buffer;
    EXPECT_LE(it.k_end - it.k_begin, 256u);
    covered[it.seq] += it.k_end - it.k_begin;
  }
  EXPECT_EQ(covered[0], 2u * 700u);  // 2 kv heads
  for (size_t i = 1; i < p.items.size(); ++i)
    EXPECT_LE(p.items[i - 1].buffer, p.items[i].buffer) << "items grouped by buffer";
  // Sequence 0's tiles (2 kv heads) are split across 3 buffers -> combined.
  uint32_t slots = 0;
  for (const auto& c : p.combine)
    if (c.seq == 0) slots += c.n_slots;
  EXPECT_GE(slots, 2u * 5u);  // 100 | 256 + 256 + 28 | 60
}

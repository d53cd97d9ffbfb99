#include "ops/attention_plan.h"

#include <algorithm>

#include "core/error.h"

namespace vkattn {

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

struct Tile {
  uint32_t seq, kv_head, row0, k_begin, k_end;
};
}  // namespace

Plan build_plan(const PlanShape& s, uint32_t batch, const int32_t* cu_q, const int32_t* cu_k,
                const std::vector<std::vector<KeySegment>>* segments) {
  Plan plan;
  plan.seqs.resize(batch);
  std::vector<Tile> tiles;
  uint64_t mask_off = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    PlanSeq& sq = plan.seqs[b];
    sq = {};
    sq.q_off = static_cast<uint32_t>(cu_q[b]);
    sq.k_off = static_cast<uint32_t>(cu_k[b]);
    sq.t = static_cast<uint32_t>(cu_q[b + 1] - cu_q[b]);
    sq.u = static_cast<uint32_t>(cu_k[b + 1] - cu_k[b]);
    sq.mask_off = static_cast<uint32_t>(mask_off);
    mask_off += static_cast<uint64_t>(sq.t) * sq.u;
    const uint64_t rows = static_cast<uint64_t>(sq.t) * s.group;
    for (uint64_t row0 = 0; row0 < rows; row0 += s.tile_rows) {
      // Keys any row of the tile can see: causal and window bound them.
      int64_t first_tok = static_cast<int64_t>(row0 / s.group);
      int64_t last_tok =
          static_cast<int64_t>((std::min<uint64_t>(rows, row0 + s.tile_rows) - 1) / s.group);
      int64_t off = static_cast<int64_t>(sq.u) - sq.t;
      int64_t hi = sq.u, lo = 0;
      if (s.causal) hi = std::min<int64_t>(hi, off + last_tok + 1);
      if (s.window_left >= 0) lo = std::max<int64_t>(0, off + first_tok - s.window_left);
      if (hi < lo) hi = lo;
      for (uint32_t h = 0; h < s.num_kv_heads; ++h)
        tiles.push_back({b, h, static_cast<uint32_t>(row0), static_cast<uint32_t>(lo),
                         static_cast<uint32_t>(std::max<int64_t>(hi, 0))});
    }
  }
  // Split long key ranges (loop cap) and, while the batch has too few
  // items to fill the device, split further (flash-decoding).
  uint64_t parallel_split = 1;
  if (!tiles.empty() && tiles.size() < s.target_items)
    parallel_split = ceil_div(s.target_items, tiles.size());
  for (const Tile& t : tiles) {
    uint64_t range = t.k_end - t.k_begin;
    uint64_t n = std::max<uint64_t>(1, ceil_div(range, s.max_keys));
    uint64_t by_parallel =
        std::min<uint64_t>(parallel_split, std::max<uint64_t>(1, range / s.min_split_keys));
    n = std::max(n, by_parallel);
    const uint64_t chunk = std::max<uint64_t>(1, ceil_div(range, n));
    // Pieces of the key range: whole, or cut where the pool buffer changes.
    std::vector<KeySegment> pieces;
    if (segments) {
      for (const KeySegment& g : (*segments)[t.seq]) {
        uint32_t b = std::max(g.begin, t.k_begin), e = std::min(g.end, t.k_end);
        if (b < e) pieces.push_back({b, e, g.buffer});
      }
    }
    if (pieces.empty()) pieces.push_back({t.k_begin, t.k_end, 0});
    uint64_t total = 0;
    for (const KeySegment& g : pieces)
      total += ceil_div(std::max<uint64_t>(1, g.end - g.begin), chunk);
    if (total > s.max_slots)
      fail(VKATTN_ERROR_UNSUPPORTED, "a sequence with ", range, " visible keys needs ", total,
           " key splits; at most ", s.max_slots, " x ", s.max_keys,
           " keys per query are supported");
    if (total == 1) {
      plan.items.push_back(
          {t.seq, t.kv_head, t.row0, kNoSlot, pieces[0].begin, pieces[0].end, 0, pieces[0].buffer});
      continue;
    }
    uint32_t first = plan.num_slots;
    for (const KeySegment& g : pieces) {
      for (uint64_t b = g.begin; b < g.end; b += chunk) {
        uint32_t e = static_cast<uint32_t>(std::min<uint64_t>(g.end, b + chunk));
        plan.items.push_back(
            {t.seq, t.kv_head, t.row0, plan.num_slots++, static_cast<uint32_t>(b), e, 0, g.buffer});
      }
    }
    plan.combine.push_back({t.seq, t.kv_head, t.row0, first, 0, 0, plan.num_slots - first, 0});
  }
  // By buffer (one dispatch each), heaviest first within a buffer, so the
  // device's last workgroups are short ones.
  std::stable_sort(plan.items.begin(), plan.items.end(), [](const PlanItem& a, const PlanItem& b) {
    if (a.buffer != b.buffer) return a.buffer < b.buffer;
    return a.k_end - a.k_begin > b.k_end - b.k_begin;
  });
  return plan;
}

}  // namespace vkattn

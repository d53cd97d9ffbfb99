#include "ops/attention/plan.h"

#include <algorithm>

#include "core/error.h"
#include "core/int_div.h"

namespace vkattn {

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// Tokens [begin, end) of one sequence whose rows share a record: outside
// every span (lo == hi), or inside span [lo, hi).
struct TokenRun {
  uint64_t begin, end;
  uint32_t lo, hi;
};

// The sequence's t tokens (at positions u - t + i) cut at its spans' edges.
std::vector<TokenRun> token_runs(const PlanShape& s, uint32_t b, uint32_t t, uint32_t u) {
  std::vector<TokenRun> runs;
  const int64_t off = int64_t(u) - t;
  uint64_t next = 0;  // first token not yet in a run
  if (s.span_indptr) {
    for (int32_t n = s.span_indptr[b]; n < s.span_indptr[b + 1]; ++n) {
      const int64_t lo = s.spans[2 * int64_t(n)], hi = s.spans[2 * int64_t(n) + 1];
      const uint64_t a = uint64_t(std::clamp<int64_t>(lo - off, 0, t));
      const uint64_t e = uint64_t(std::clamp<int64_t>(hi - off, 0, t));
      if (a >= e) continue;  // wholly before (or after) this call's queries
      if (next < a) runs.push_back({next, a, 0, 0});
      runs.push_back({a, e, uint32_t(lo), uint32_t(hi)});
      next = e;
    }
  }
  if (next < t || runs.empty()) runs.push_back({next, t, 0, 0});
  return runs;
}
// The tiles of one run of a sequence's tokens, on record `rec`: blocks of
// at most `toks` tokens, tiles of at most tile_rows rows, each with the
// key range its rows can see (kept in first_item/n_items until the items
// exist).
void plan_run_tiles(const PlanShape& s, Plan& plan, uint32_t rec, const TokenRun& run,
                    uint64_t toks) {
  const PlanSeq& sq = plan.seqs[rec];
  for (uint64_t tok0 = run.begin; tok0 < run.end; tok0 += toks) {
    const uint64_t r_begin = tok0 * s.group;
    const uint64_t r_end = std::min<uint64_t>(run.end, tok0 + toks) * s.group;
    for (uint64_t row0 = r_begin; row0 < r_end; row0 += s.tile_rows) {
      const uint64_t row_end = std::min<uint64_t>(r_end, row0 + s.tile_rows);
      // Keys any row of the tile can see: causal, the windows and the
      // chunks bound them (rows at positions p0..p1); a span adds its keys.
      const int64_t first_tok = static_cast<int64_t>(row0 / s.group);
      const int64_t last_tok = static_cast<int64_t>((row_end - 1) / s.group);
      const int64_t off = static_cast<int64_t>(sq.u) - sq.t;
      const int64_t p0 = off + first_tok, p1 = off + last_tok;
      int64_t hi = sq.u, lo = 0;
      if (s.causal) hi = std::min<int64_t>(hi, p1 + 1);
      if (s.window_left >= 0) lo = std::max<int64_t>(lo, p0 - s.window_left);
      if (s.window_right >= 0) hi = std::min<int64_t>(hi, p1 + s.window_right + 1);
      if (s.chunk_size > 0) {
        const int64_t c = s.chunk_size;
        lo = std::max<int64_t>(lo, floor_div(p0, c) * c);
        hi = std::min<int64_t>(hi, (floor_div(p1, c) + 1) * c);
      }
      hi = std::max<int64_t>(hi, 0);
      if (hi < lo) hi = lo;
      if (run.hi > run.lo) {
        lo = hi > lo ? std::min<int64_t>(lo, run.lo) : run.lo;
        hi = std::max<int64_t>(hi, run.hi);
      }
      // Cascade: a skipped run at either end of the range shortens it (one
      // inside it is cut out of the items: range_pieces).
      if (s.key_skip) {
        const uint32_t* skip = s.key_skip + 2 * plan.seq_of[rec];
        if (lo >= skip[0] && lo < skip[1]) lo = skip[1];
        if (hi > skip[0] && hi <= skip[1]) hi = skip[0];
        hi = std::max(hi, lo);
      }
      // Top-k: the token's list slots (no keys: none of them is visible).
      if (s.topk) lo = 0, hi = sq.u > 0 ? s.topk_k : 0;
      for (uint32_t h = 0; h < s.num_kv_heads; ++h) {
        PlanTile tile{};
        tile.seq = rec;
        tile.kv_head = h;
        tile.row0 = static_cast<uint32_t>(row0);
        tile.row_end = static_cast<uint32_t>(row_end);
        tile.first_item = static_cast<uint32_t>(lo);
        tile.n_items = static_cast<uint32_t>(hi);
        plan.tiles.push_back(tile);
      }
    }
  }
}
// Pieces of a tile's key range [k_begin, k_end): whole, or cut where the
// pool buffer changes (segs: the sequence's keys by buffer, or null) and
// around the keys a cascade's part skips (skip: [lo, hi) or null).
// Top-k: listed keys may lie anywhere, so the whole list once per buffer
// the sequence's pages lie in (each pass reads the keys of its own).
void range_pieces(const PlanShape& s, const std::vector<KeySegment>* segs, const uint32_t* skip,
                  uint32_t k_begin, uint32_t k_end, std::vector<KeySegment>* pieces) {
  pieces->clear();
  static const std::vector<KeySegment> kWhole = {{0, ~0u, 0}};  // one buffer
  for (const KeySegment& g : segs ? *segs : kWhole) {
    if (s.topk) {
      bool seen = false;
      for (const KeySegment& p : *pieces) seen = seen || p.buffer == g.buffer;
      if (!seen && k_begin < k_end) pieces->push_back({k_begin, k_end, g.buffer});
      continue;
    }
    // The segment's part of the range less the skipped keys: the skip may
    // cover either end of a segment, not only of the whole range (windows
    // of a pool buffer cut a prefix's pages into several segments).
    const uint32_t b = std::max(g.begin, k_begin), e = std::min(g.end, k_end);
    if (b >= e) continue;
    if (skip && skip[0] < skip[1]) {
      if (b < skip[0]) pieces->push_back({b, std::min(e, skip[0]), g.buffer});
      if (e > skip[1]) pieces->push_back({std::max(b, skip[1]), e, g.buffer});
    } else {
      pieces->push_back({b, e, g.buffer});
    }
  }
  if (pieces->empty()) pieces->push_back({k_begin, k_end, 0});
}
}  // namespace

Plan build_plan(const PlanShape& s, uint32_t batch, const int64_t* cu_q, const int64_t* cu_k,
                const std::vector<std::vector<KeySegment>>* segments,
                const std::vector<uint8_t>* include) {
  Plan plan;
  plan.seqs.resize(batch);
  plan.offs.resize(batch);
  plan.seq_of.resize(batch);
  uint64_t mask_off = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    PlanSeq& sq = plan.seqs[b];
    sq = {};
    sq.q_off = static_cast<uint32_t>(cu_q[b]);
    sq.k_off = static_cast<uint32_t>(cu_k[b]);
    sq.t = static_cast<uint32_t>(cu_q[b + 1] - cu_q[b]);
    sq.u = static_cast<uint32_t>(cu_k[b + 1] - cu_k[b]);
    sq.mask_off = static_cast<uint32_t>(mask_off);  // low 32 bits (see PlanSeq)
    sq.window_right = s.window_right;
    sq.chunk_size = s.chunk_size;
    plan.offs[b] = {static_cast<uint64_t>(cu_q[b]), static_cast<uint64_t>(cu_k[b]), mask_off};
    plan.seq_of[b] = b;
    mask_off += static_cast<uint64_t>(sq.t) * sq.u;
    if (include && !(*include)[b]) continue;  // planned in the call's other part
    // Token blocks: a tile never spans more tokens than one binding window
    // of q/out (and of the mask's rows) may hold.
    uint64_t toks = sq.t;
    if (s.max_tile_tokens) toks = std::min<uint64_t>(toks, s.max_tile_tokens);
    if (s.mask_window_elems && sq.u)
      toks = std::min<uint64_t>(toks, std::max<uint64_t>(1, s.mask_window_elems / sq.u));
    toks = std::max<uint64_t>(toks, 1);
    if (s.topk) toks = 1;  // a token's own list per tile
    // (Records are appended below: sq is not used past this line.)
    const std::vector<TokenRun> runs = token_runs(s, b, sq.t, sq.u);
    for (const TokenRun& run : runs) {
      uint32_t rec = b;
      if (run.hi > run.lo) {  // rows inside a span: a record of their own
        rec = static_cast<uint32_t>(plan.seqs.size());
        PlanSeq copy = plan.seqs[b];
        copy.span_lo = run.lo, copy.span_hi = run.hi;
        plan.seqs.push_back(copy);
        plan.offs.push_back(plan.offs[b]);
        plan.seq_of.push_back(b);
      }
      plan_run_tiles(s, plan, rec, run, toks);
    }
  }
  // Split long key ranges (loop cap) and, while the batch has too few
  // tiles to fill the device, split further (flash-decoding).
  uint64_t parallel_split = 1;
  if (!s.batch_invariant && !plan.tiles.empty() && plan.tiles.size() < s.target_items)
    parallel_split = ceil_div(s.target_items, plan.tiles.size());
  // Balance (prefill on GPUs): while the tiles are fewer than the
  // workgroups the device runs at once, a dispatch lasts as long as its
  // longest item; a causal prefill's last row tiles read every key while
  // its first read one tile's worth (FlashAttention-3 and FlashInfer
  // balance the same diagonal). Ranges longer than the tiles' mean (at
  // least min_split_keys) are cut to about the mean, the cut lengthened
  // until the items fit the slots. Equal ranges (no mask, one length)
  // are never cut.
  uint64_t balance_keys = 0;
  if (!s.batch_invariant && s.balance_items > 0 && !plan.tiles.empty() &&
      plan.tiles.size() < s.balance_items) {
    uint64_t total = 0;
    for (const PlanTile& t : plan.tiles) total += t.n_items - t.first_item;
    balance_keys = std::max<uint64_t>({1, s.min_split_keys, ceil_div(total, plan.tiles.size())});
    auto items_at = [&](uint64_t len) {
      uint64_t n = 0;
      for (const PlanTile& t : plan.tiles) n += ceil_div(t.n_items - t.first_item, len);
      return n;
    };
    while (items_at(balance_keys) > s.balance_items) balance_keys += balance_keys / 4 + 1;
  }
  std::vector<KeySegment> pieces;
  for (PlanTile& t : plan.tiles) {
    const uint32_t k_begin = t.first_item, k_end = t.n_items;
    const uint32_t* skip = s.key_skip ? s.key_skip + 2 * plan.seq_of[t.seq] : nullptr;
    range_pieces(s, segments ? &(*segments)[plan.seq_of[t.seq]] : nullptr, skip, k_begin, k_end,
                 &pieces);
    uint64_t range = 0;  // keys the tile reads (a cascade's skipped run cut out)
    for (const KeySegment& g : pieces) range += g.end - g.begin;
    if (s.topk) range = k_end - k_begin;
    const uint32_t rows = t.row_end - t.row0;
    // Decode mode: the tile's rows fit one lane, so the lanes split the keys.
    const bool decode =
        s.decode_min_keys > 0 && s.wg > 1 && rows <= s.rows_per_lane && range >= s.decode_min_keys;
    const uint32_t lanes = decode ? s.wg : 1;
    const uint64_t max_keys = static_cast<uint64_t>(s.max_keys) * lanes;
    uint64_t n = std::max<uint64_t>(1, ceil_div(range, max_keys));
    const uint64_t by_parallel =
        std::min<uint64_t>(parallel_split, std::max<uint64_t>(1, range / s.min_split_keys));
    n = std::max(n, by_parallel);
    if (balance_keys && range > balance_keys) n = std::max(n, ceil_div(range, balance_keys));
    if (s.fixed_split_keys) n = std::max(n, ceil_div(range, s.fixed_split_keys));
    const uint64_t chunk = std::max<uint64_t>(1, ceil_div(range, n));
    t.first_item = static_cast<uint32_t>(plan.items.size());
    for (const KeySegment& g : pieces) {
      for (uint64_t b = g.begin; b < std::max<uint64_t>(g.end, g.begin + 1); b += chunk) {
        uint32_t e = static_cast<uint32_t>(std::min<uint64_t>(g.end, b + chunk));
        plan.items.push_back(
            {t.seq, t.kv_head, t.row0, 0, static_cast<uint32_t>(b), e, lanes, t.row_end});
        plan.item_buffer.push_back(g.buffer);
      }
    }
    t.n_items = static_cast<uint32_t>(plan.items.size()) - t.first_item;
    // Splits: one per lane, or one per item when its lanes merge in
    // shared memory (the item's n_slots still says decode mode).
    t.lanes = decode && s.decode_merge ? 1 : lanes;
    // Partial rows of one split: the rows of one lane in decode mode, else
    // the tile's rows rounded up to whole lanes (lane l writes rows
    // [l * R, l * R + R) of the tile).
    t.stride = decode ? s.rows_per_lane
                      : static_cast<uint32_t>(ceil_div(rows, s.rows_per_lane) * s.rows_per_lane);
    if (t.splits() == 1) plan.items[t.first_item].slot = kNoSlot;
  }
  return plan;
}

}  // namespace vkattn

#include "ops/attention/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

#include "core/error.h"

namespace vkattn {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// Whether one dispatch with these spans and `count` items fits every
// binding (forward passes bind q, k, v, mask, key validity and the block
// table too; combine passes only out, lse, items and sequences).
bool fits(const PassSpans& s, uint64_t count, bool fwd, const CallUnits& u,
          const ScheduleLimits& l) {
  const uint64_t tok = s.tokens.size(), keys = s.keys.size();
  if (count * sizeof(PlanItem) > l.storage || count > l.max_groups) return false;
  if (s.seqs.size() * sizeof(PlanSeq) > l.storage) return false;
  if (tok * u.out_token > l.storage || tok * u.lse_token > l.storage) return false;
  if (!fwd) return true;
  if (tok * u.q_token > l.q_texel) return false;
  if (keys * u.k_key > l.k_texel || keys * u.v_key > l.v_texel || keys * u.key_valid > l.storage)
    return false;
  if (s.mask.size() * u.mask_elem > l.storage) return false;
  if (s.table.size() * 4 > l.storage) return false;
  return true;
}

PassSpans merged(const PassSpans& a, const PassSpans& b) {
  PassSpans m = a;
  m.tokens.add(b.tokens);
  m.keys.add(b.keys);
  m.mask.add(b.mask);
  m.table.add(b.table);
  m.seqs.add(b.seqs);
  return m;
}

// A wave under construction.
struct Building {
  std::vector<uint32_t> items;                   // indices into the plan's items
  std::vector<std::vector<CombineItem>> levels;  // combine items per level
  uint64_t used = 0;                             // arena rows allocated from 0
};

}  // namespace

PassSpans item_spans(const Plan& plan, const CallUnits& u, const PlanItem& it) {
  PassSpans sp;
  const PlanSeq& sq = plan.seqs[it.seq];
  const SeqOffsets& o = plan.offs[it.seq];
  const uint64_t tok_first = it.row0 / u.group, tok_last = (it.row_end - 1) / u.group;
  sp.tokens.add(o.q + tok_first, o.q + tok_last + 1);
  sp.seqs.add(it.seq, it.seq + 1ull);
  // (Top-k: the listed keys may be any of the sequence's.)
  const uint64_t k_begin = u.topk ? 0 : it.k_begin, k_end = u.topk ? sq.u : it.k_end;
  if (it.k_end > it.k_begin && k_end > k_begin) {
    if (u.page_size)
      sp.table.add(o.k + k_begin / u.page_size, o.k + (k_end - 1) / u.page_size + 1);
    else
      sp.keys.add(o.k + k_begin, o.k + k_end);
    if (u.mask_elem)
      sp.mask.add(o.mask + tok_first * sq.u + k_begin, o.mask + tok_last * sq.u + k_end);
  }
  return sp;
}

PassSpans combine_spans(const Plan& plan, const CallUnits& u, const CombineItem& c) {
  PassSpans sp;
  const uint64_t q = plan.offs[c.seq].q;
  sp.tokens.add(q + c.row0 / u.group, q + (c.row_end - 1) / u.group + 1ull);
  sp.seqs.add(c.seq, c.seq + 1ull);
  return sp;
}

uint64_t item_work(const PlanItem& it) {
  const uint64_t keys = it.k_end > it.k_begin ? it.k_end - it.k_begin : 0;
  return ceil_div(keys, std::max<uint32_t>(1, it.n_slots)) + 16;
}

void order_pass(std::vector<PlanItem>::iterator first, std::vector<PlanItem>::iterator last,
                uint32_t static_chunks) {
  std::stable_sort(first, last, [](const PlanItem& a, const PlanItem& b) {
    return item_work(a) > item_work(b);
  });
  const uint64_t n = static_cast<uint64_t>(last - first), P = static_chunks;
  if (P < 2 || n / P == 0) return;
  const uint64_t per = n / P, placed = n - n % P;
  // Greedy on the lightest chunk with room (a full chunk leaves the heap);
  // chunk c fills slots [c * per, (c + 1) * per); the remainder stays last.
  std::vector<PlanItem> sorted(first, last);
  std::vector<uint64_t> next(P);
  using Load = std::pair<uint64_t, uint64_t>;  // (work, chunk)
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> lightest;
  for (uint64_t c = 0; c < P; ++c) {
    next[c] = c * per;
    lightest.push({0, c});
  }
  for (uint64_t i = 0; i < placed; ++i) {
    const auto [work, c] = lightest.top();
    lightest.pop();
    first[next[c]++] = sorted[i];
    if (next[c] < (c + 1) * per) lightest.push({work + item_work(sorted[i]), c});
  }
}

namespace {

// Arena rows of a merge tree over n partials, `fan_in` merged at a time.
uint64_t tree_rows(uint64_t n, uint64_t stride, uint64_t fan_in) {
  uint64_t rows = n * stride;
  while (n > fan_in) {
    n = ceil_div(n, fan_in);
    rows += n * stride;
  }
  return rows;
}

// Merges n splits of tile t at arena rows src (stride apart) into dst
// (kNoSlot: out/lse), allocating inner levels from w.used.
void emit_tree(Building& w, const PlanTile& t, uint64_t src, uint64_t n, uint64_t dst,
               uint64_t fan_in) {
  const uint64_t F = fan_in;
  for (size_t level = 0;; ++level) {
    if (w.levels.size() <= level) w.levels.emplace_back();
    if (n <= F) {
      w.levels[level].push_back({t.seq, t.kv_head, t.row0, t.row_end, uint32_t(src), t.stride,
                                 uint32_t(n), uint32_t(dst)});
      return;
    }
    const uint64_t groups = ceil_div(n, F), out0 = w.used;
    w.used += groups * t.stride;
    for (uint64_t g = 0; g < groups; ++g)
      w.levels[level].push_back({t.seq, t.kv_head, t.row0, t.row_end,
                                 uint32_t(src + g * F * t.stride), t.stride,
                                 uint32_t(std::min(F, n - g * F)), uint32_t(out0 + g * t.stride)});
    src = out0;
    n = groups;
  }
}

// Turns built waves into the schedule's passes: one call's plan, its
// units and limits, and the items with their arena slots.
struct WaveCloser {
  const Plan& plan;
  const CallUnits& units;
  const ScheduleLimits& limits;
  const std::vector<PlanItem>& items;
  Schedule& sch;

  // Forward passes: by pool buffer, then plan order; cut where a binding
  // would overflow; ordered for the device's scheduler within a pass.
  void forward_passes(Building& w, Wave& wave) {
    std::stable_sort(w.items.begin(), w.items.end(), [&](uint32_t a, uint32_t b) {
      return plan.item_buffer[a] < plan.item_buffer[b];
    });
    size_t i = 0;
    while (i < w.items.size()) {
      FwdPass pass;
      pass.buffer = plan.item_buffer[w.items[i]];
      pass.first = static_cast<uint32_t>(sch.items.size());
      for (; i < w.items.size() && plan.item_buffer[w.items[i]] == pass.buffer; ++i) {
        const PlanItem& it = items[w.items[i]];
        PassSpans next = merged(pass.spans, item_spans(plan, units, it));
        if (!fits(next, pass.count + 1, true, units, limits)) {
          if (pass.count == 0)
            fail(VKATTN_ERROR_UNSUPPORTED, "one attention work item's data exceeds what one ",
                 "binding may cover on this device");
          break;
        }
        pass.spans = next;
        ++pass.count;
        sch.items.push_back(it);
      }
      order_pass(sch.items.begin() + pass.first, sch.items.end(), limits.static_chunks);
      wave.fwd.push_back(pass);
    }
  }

  // Combine passes, a level at a time, cut where a binding would overflow.
  void combine_passes(const Building& w, Wave& wave) {
    for (const auto& level : w.levels) {
      wave.levels.emplace_back();
      size_t j = 0;
      while (j < level.size()) {
        CombinePass pass;
        pass.first = static_cast<uint32_t>(sch.combine.size());
        for (; j < level.size(); ++j) {
          PassSpans next = merged(pass.spans, combine_spans(plan, units, level[j]));
          if (!fits(next, pass.count + 1, false, units, limits)) {
            if (pass.count == 0)
              fail(VKATTN_ERROR_UNSUPPORTED, "one attention combine item's data exceeds what ",
                   "one binding may cover on this device");
            break;
          }
          pass.spans = next;
          ++pass.count;
          sch.combine.push_back(level[j]);
        }
        wave.levels.back().push_back(pass);
      }
    }
  }

  void close(Building& w) {
    if (w.items.empty() && w.levels.empty()) return;
    Wave wave;
    forward_passes(w, wave);
    combine_passes(w, wave);
    sch.waves.push_back(std::move(wave));
    sch.arena_rows = std::max(sch.arena_rows, w.used);
    w = Building{};
  }
};

}  // namespace

Schedule schedule_plan(const Plan& plan, const CallUnits& units, const ScheduleLimits& limits) {
  Schedule sch;
  const uint64_t F = std::max<uint32_t>(2, limits.fan_in);
  // The arena must hold one item's partials beside a carry (the chunked
  // merge below); the target size yields to that, the hard limit does not.
  uint64_t A = limits.arena_rows;
  for (const PlanTile& t : plan.tiles)
    if (t.splits() > 1) A = std::max<uint64_t>(A, tree_rows(1 + t.lanes, t.stride, F) + t.stride);
  if (limits.arena_rows_max && A > limits.arena_rows_max)
    fail(VKATTN_ERROR_UNSUPPORTED, "split-KV partials of one work item need ", A,
         " scratch rows, above what one binding may cover (", limits.arena_rows_max, ")");
  std::vector<PlanItem> items = plan.items;
  WaveCloser waves{plan, units, limits, items, sch};

  Building w;
  for (const PlanTile& t : plan.tiles) {
    if (t.splits() == 1) {
      w.items.push_back(t.first_item);
      continue;
    }
    const uint64_t per_item = uint64_t(t.lanes) * t.stride;
    // Whether and how a tile's partials are merged in chunks depends on
    // the tile alone (the target arena or its own floor), never on the
    // other tiles of the batch: the merge order, and so the rounding, of a
    // sequence is the same in any batch (VKATTN_CONTEXT_BATCH_INVARIANT).
    const uint64_t At = std::max<uint64_t>(std::min<uint64_t>(limits.arena_rows, A),
                                           tree_rows(1 + t.lanes, t.stride, F) + t.stride);
    if (tree_rows(t.splits(), t.stride, F) <= At) {
      if (w.used + tree_rows(t.splits(), t.stride, F) > A) waves.close(w);
      const uint64_t leaf0 = w.used;
      w.used += uint64_t(t.splits()) * t.stride;
      for (uint32_t k = 0; k < t.n_items; ++k) {
        items[t.first_item + k].slot = uint32_t(leaf0 + k * per_item);
        w.items.push_back(t.first_item + k);
      }
      emit_tree(w, t, leaf0, t.splits(), kNoSlot, F);
      continue;
    }
    // Too many splits for one arena: chunks of items, one wave each. Arena
    // row set 0 carries the merge of every chunk so far: chunk c > 0 merges
    // the carry with its own splits back into it (in place is safe: each
    // lane reads a row's every split before it writes that row), the last
    // chunk into out/lse.
    waves.close(w);
    uint64_t per_chunk = (At / t.stride - 1) / t.lanes;
    while (per_chunk > 1 && tree_rows(1 + per_chunk * t.lanes, t.stride, F) + t.stride > At)
      --per_chunk;
    for (uint64_t k0 = 0; k0 < t.n_items; k0 += per_chunk) {
      const uint64_t k1 = std::min<uint64_t>(t.n_items, k0 + per_chunk);
      for (uint64_t k = k0; k < k1; ++k) {
        items[t.first_item + k].slot = uint32_t(t.stride + (k - k0) * per_item);
        w.items.push_back(uint32_t(t.first_item + k));
      }
      w.used = t.stride + (k1 - k0) * per_item;
      const uint64_t leaves = (k1 - k0) * t.lanes;
      const bool last = k1 == t.n_items;
      if (k0 == 0)
        emit_tree(w, t, t.stride, leaves, last ? kNoSlot : 0, F);
      else
        emit_tree(w, t, 0, 1 + leaves, last ? kNoSlot : 0, F);
      waves.close(w);
    }
  }
  waves.close(w);
  return sch;
}

}  // namespace vkattn

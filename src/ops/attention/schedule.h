// From a plan (ops/attention/plan.h) to dispatches that fit the device.
// Pure host code: no Vulkan.
//
// Waves: tiles are taken in plan order; the partial results of the split
// tiles of one wave fit a scratch arena of bounded size (the arena is reused
// by the next wave). Within a wave, forward passes (one or more dispatches
// of attention_fwd.comp per pool buffer) write outputs and partials, then
// combine levels (dispatches of attention_combine.comp) merge the partials:
// a tile with more splits than one combine item may merge (the fan-in, from
// the loop cap) is merged by a tree, level by level. A tile whose partials
// alone exceed the arena is merged in chunks: each chunk's wave reduces its
// splits, together with a carry row set holding the merge of the chunks
// before it, back into the carry (the last chunk into out/lse). So no
// number of splits and no batch size is refused.
//
// Windows: every dispatch's bindings (q, k, v as texel views; out, lse,
// mask, key validity, items, sequences, block table as storage buffers)
// cover only the rows its items touch, and each such span fits what one
// binding may cover on the device; passes are cut where a span would not.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/attention/plan.h"

namespace vkattn {

// A range [lo, hi) of some index space (tokens, keys, mask elements, table
// entries, sequences); empty while lo >= hi.
struct Span {
  uint64_t lo = UINT64_MAX, hi = 0;
  void add(uint64_t a, uint64_t b) {
    if (a >= b) return;
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
  void add(const Span& o) { add(o.lo, o.hi); }
  uint64_t size() const { return hi > lo ? hi - lo : 0; }
};

// Bytes per unit of each span, for one call (0: the binding is absent or
// not windowed).
struct CallUnits {
  uint64_t q_token = 0;    // q bytes per token (H * d * size)
  uint64_t out_token = 0;  // out bytes per token (H * dv * size)
  uint64_t lse_token = 0;  // lse bytes per token (H * 4)
  uint64_t k_key = 0;      // k bytes per key (Hkv * d * size); 0 paged
  uint64_t v_key = 0;
  uint64_t key_valid = 0;  // bytes of key validity per key (1 when padded)
  uint64_t mask_elem = 0;  // bytes per custom-mask element
  uint32_t group = 1;      // H / Hkv
  uint32_t page_size = 0;  // paged: tokens per page (table spans); 0 unpaged
  bool topk = false;       // items count list slots: they may read any key of their sequence
};

struct ScheduleLimits {
  uint64_t storage = 0;  // bytes one storage window may cover
  uint64_t q_texel = 0;  // bytes one texel window of q may cover
  uint64_t k_texel = 0, v_texel = 0;
  uint64_t arena_rows = 0;      // partial rows of one wave's arena (target)
  uint64_t arena_rows_max = 0;  // ... and what one binding may cover (0: no bound)
  uint32_t fan_in = 2;          // splits one combine item merges at most
  uint64_t max_groups = 0;      // workgroups of one dispatch at most
  // The device hands each of this many threads one contiguous chunk of a
  // dispatch's workgroups (lavapipe: core/host.h cpu_device_threads()):
  // passes are ordered so the chunks carry equal work. 0 or 1: heaviest
  // first (a GPU, or any scheduler that hands out workgroups as it goes).
  uint32_t static_chunks = 0;
};

// Spans of one pass in index spaces: tokens (q/out/lse), keys (k/v and key
// validity, as k_off + key), mask elements, block-table entries, sequences.
struct PassSpans {
  Span tokens, keys, mask, table, seqs;
};

struct FwdPass {
  uint32_t buffer = 0;            // pool buffer (0 unpaged)
  uint32_t first = 0, count = 0;  // Schedule::items[first, first + count), see order_pass()
  PassSpans spans;
};

struct CombinePass {
  uint32_t first = 0, count = 0;  // Schedule::combine[first, first + count)
  PassSpans spans;
};

struct Wave {
  std::vector<FwdPass> fwd;
  std::vector<std::vector<CombinePass>> levels;  // run in order, after fwd
};

struct Schedule {
  std::vector<PlanItem> items;  // every item once, slots assigned, in pass order
  std::vector<CombineItem> combine;
  std::vector<Wave> waves;
  uint64_t arena_rows = 0;  // the largest arena a wave uses
};

// Spans of one forward item / combine item.
PassSpans item_spans(const Plan& plan, const CallUnits& u, const PlanItem& it);
PassSpans combine_spans(const Plan& plan, const CallUnits& u, const CombineItem& c);

// Orders the items of one forward pass for the device's scheduler:
// heaviest first, or, with static_chunks = P > 1, so that each of the P
// contiguous chunks of floor(n / P) items carries about equal work (the
// heaviest items placed greedily on the lightest chunk that has room, the
// n % P lightest last). Work of an item: the keys one lane walks, plus a
// fixed cost for its q loads and stores.
void order_pass(std::vector<PlanItem>::iterator first, std::vector<PlanItem>::iterator last,
                uint32_t static_chunks);
uint64_t item_work(const PlanItem& it);

// Throws UNSUPPORTED only if a single item's bindings exceed the limits
// (the plan's caps make that impossible for any shape the API accepts).
Schedule schedule_plan(const Plan& plan, const CallUnits& units, const ScheduleLimits& limits);

}  // namespace vkattn

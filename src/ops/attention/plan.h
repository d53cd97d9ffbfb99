// Host-side planning of a packed attention batch, in two steps. Pure host
// code: no Vulkan.
//
// build_plan: per-sequence records, tiles of query rows (token, head of the
// GQA group) per kv head with the key range their rows can see, and the
// work items of shaders/attention_fwd.comp: a tile's key range cut where
// the loop cap, the parallelism target, a pool-buffer boundary (paged KV
// cache) or a binding window requires. A tile whose range is cut has
// several "splits", each writing a partial result (rows normalized, plus
// their lse) that shaders/attention_combine.comp merges.
//
// schedule_plan (ops/attention/schedule.h) then orders the items into
// dispatches whose bindings fit the device and whose partials fit a
// bounded scratch arena.
#pragma once

#include <cstdint>
#include <vector>

namespace vkattn {

// Runtime flags; mirrored in shaders/include/attention_common.glsl.
enum AttentionFlags : uint32_t {
  kFlagCausal = 1,
  kFlagWindow = 2,
  kFlagSoftcap = 4,
  kFlagAlibi = 8,
  kFlagMaskBool = 16,
  kFlagMaskAdd = 32,
  kFlagKeyValid = 64,
  kFlagWriteLse = 128,
  // 16-bit out rows may start on an odd element (a strided view): stores
  // take the atomic path even when dv is even.
  kFlagOutOdd = 256,
  // desc->sinks: the final writes (forward pass or combine) join the
  // head's sink to the row (never compiled out: it costs only the epilogue).
  kFlagSinks = 512,
  // desc->window_right >= 0 (Seq::window_right) and desc->chunk_size > 0
  // (Seq::chunk_size): compiled in only when a call uses them.
  kFlagWindowRight = 1024,
  kFlagChunk = 2048,
  // desc->spans: rows inside a bidirectional span run on a record of their
  // own (PlanSeq::span_lo/span_hi); compiled in only when a call has spans.
  kFlagSpan = 4096,
  // desc->tree_indptr (PlanSeq::tree_off/tree_w; the words: binding 15);
  // compiled in only when a call has trees.
  kFlagTree = 8192,
  // desc->topk_indices (PlanSeq::topk_*; the lists: binding 16): items
  // count list slots; the decode family only, compiled in only when a
  // call has lists.
  kFlagTopk = 16384,
  // out is f32 while q is 16-bit: the parts of a cascade (ops/attention/
  // cascade.cpp) keep their results in f32 until the merge rounds them
  // once. Compiled in (FEATURES) whenever set; never asked for by a caller.
  kFlagOutF32 = 32768,
};

constexpr uint32_t kNoSlot = 0xffffffffu;

// std430 records shared with the shaders (struct Item / Seq / CombineItem
// in shaders/include/attention_common.glsl).
//
// Forward item: rows [row0, row_end) of one (sequence, kv head) against
// keys [k_begin, k_end). `slot` is the first partial row it writes in the
// scratch arena (kNoSlot: it writes out/lse directly). `n_slots` is the
// number of lanes that share the rows and split the keys: 0/1 (each lane
// owns R rows; partial rows of lane l at slot + l * R) or the workgroup size
// (decode mode: every lane serves all rows, at most R, over a 1/WG share of
// the keys and writes its own partial at slot + lane * R).
struct PlanItem {
  uint32_t seq, kv_head, row0, slot;
  uint32_t k_begin, k_end, n_slots, row_end;
};
// q_off: first token; k_off: first key (paged: first block-table entry);
// mask_off: first mask element, low 32 bits (shaders compute indices modulo
// 2^32 and subtract the window base, so only the low bits matter).
// window_right and chunk_size: the call's (the same in every record).
// [span_lo, span_hi): the bidirectional span every row of this record's
// items lies in (empty: none). tree_w: words per row of the sequence's
// tree (0: none), row 0's first at word tree_off of the call's tree words.
// Top-k: token i's list for kv head h at element topk_off + i * topk_stride
// + h * topk_hs of the call's lists (Hkv lists a token: topk_hs = K, else 0).
// call_seq: the batch sequence (the `seq` of attention variants). A sequence's rows
// inside a span get a copy of its record with the span set (Plan::seq_of says whose).
struct PlanSeq {
  uint32_t q_off, k_off, t, u;
  uint32_t mask_off;
  int32_t window_right;
  uint32_t chunk_size, span_lo;
  uint32_t span_hi, tree_off, tree_w, call_seq;
  uint32_t topk_off, topk_stride, topk_hs, pad3;
};
// Combine item: merges n_slots partials of rows [row0, row_end) of a tile,
// split s at arena row src + s * stride + r, into the partial at dst + r, or
// into out/lse when dst == kNoSlot.
struct CombineItem {
  uint32_t seq, kv_head, row0, row_end;
  uint32_t src, stride, n_slots, dst;
};
static_assert(sizeof(PlanItem) == 32 && sizeof(PlanSeq) == 64 && sizeof(CombineItem) == 32,
              "std430 layout");

struct PlanShape {
  uint32_t group;  // H / Hkv: query heads per kv head
  uint32_t num_kv_heads;
  bool causal;
  int32_t window_left;       // -1: none
  uint32_t tile_rows;        // rows (token, head) per tile at most
  uint32_t rows_per_lane;    // R: a tile with at most R rows may run in decode mode
  uint32_t wg;               // lanes per workgroup
  uint32_t decode_min_keys;  // decode mode for key ranges at least this long (0: never)
  uint32_t max_keys;         // keys per lane of one item at most (loop cap, K/V windows)
  uint32_t target_items;     // split key ranges further while fewer tiles than this
  uint32_t min_split_keys;   // ... but never into chunks below this
  // While fewer tiles than this, split key ranges longer than the tiles'
  // mean (AttentionVariant::balance_items); 0 = off.
  uint32_t balance_items = 0;
  // Tokens a tile may span at most (q/out/lse rows of one item must fit
  // one binding window); 0 = no bound.
  uint64_t max_tile_tokens = 0;
  // Decode-mode items merge their lanes in shared memory: one result (or
  // one partial of R rows) per item instead of one per lane.
  bool decode_merge = false;
  // Elements of a custom mask one item may span (its rows' mask rows must
  // fit one binding window: a tile then spans at most this / u tokens of a
  // sequence with u keys); 0 = no mask.
  uint64_t mask_window_elems = 0;
  // Batch invariance (VKATTN_CONTEXT_BATCH_INVARIANT): key ranges are cut
  // only by the loop cap, the pool-buffer boundaries of the sequence's own
  // pages and, when nonzero, into chunks of at most this many keys; never
  // by target_items (which would make a sequence's splits depend on the
  // rest of the batch).
  bool batch_invariant = false;
  uint32_t fixed_split_keys = 0;
  int32_t window_right = -1;  // -1: none
  uint32_t chunk_size = 0;    // 0: off
  // Bidirectional spans, validated (vkattn_attention_desc's layout:
  // sequence b's (start, end) pairs at spans[2 * span_indptr[b] ..
  // 2 * span_indptr[b + 1])); null: none.
  const int32_t* span_indptr = nullptr;
  const int32_t* spans = nullptr;
  // Top-k lists (desc->topk_indices): tiles of one token whose items split
  // the K slots of its list (each over every pool buffer its sequence's
  // pages lie in) instead of a key range.
  bool topk = false;
  uint32_t topk_k = 0;
  // Cascade: sequence b's tiles read no key of [key_skip[2b],
  // key_skip[2b + 1]) (the other part of the cascade reads them); null:
  // every key they see.
  const uint32_t* key_skip = nullptr;
};

// A tile: rows [row0, row_end) of (seq, kv_head); its items are
// plan.items[first_item, first_item + n_items). splits = n_items * lanes;
// split s writes `stride` partial rows (R in decode mode, else tile_rows).
struct PlanTile {
  uint32_t seq, kv_head, row0, row_end;
  uint32_t first_item, n_items, lanes, stride;
  uint32_t splits() const { return n_items * lanes; }
};

// The items of tiles with one split write out directly (slot kNoSlot);
// the others get their slots from the schedule.
// All 64 bits of a sequence's offsets (PlanSeq holds the low 32 bits).
struct SeqOffsets {
  uint64_t q = 0, k = 0, mask = 0;
};

struct Plan {
  // Records: one per sequence of the batch, then one per run of a
  // sequence's rows inside a bidirectional span (a copy with the span set).
  std::vector<PlanSeq> seqs;
  std::vector<SeqOffsets> offs;       // per record (paged: k = first block-table entry)
  std::vector<uint32_t> seq_of;       // per record: the batch sequence it belongs to
  std::vector<PlanTile> tiles;        // by sequence, then row0, then kv head
  std::vector<PlanItem> items;        // by tile, keys ascending within a tile
  std::vector<uint32_t> item_buffer;  // pool buffer of each item (0 unpaged)
};

// Keys [begin, end) of a sequence that live in pool buffer `buffer` (paged
// KV cache). A work item reads one buffer, so its key range never crosses
// a segment boundary.
struct KeySegment {
  uint32_t begin, end, buffer;
};

// cu_q/cu_k: validated prefix sums of batch + 1 entries. segments: per
// sequence, its keys cut by pool buffer (paged), or null (one buffer).
// include: per sequence, whether its rows get tiles (null: all; a
// batch-invariant call plans its decode-shaped and its other sequences
// apart). Never refuses: any number of splits is merged by the schedule's
// combine tree.
Plan build_plan(const PlanShape& shape, uint32_t batch, const int64_t* cu_q, const int64_t* cu_k,
                const std::vector<std::vector<KeySegment>>* segments = nullptr,
                const std::vector<uint8_t>* include = nullptr);

}  // namespace vkattn

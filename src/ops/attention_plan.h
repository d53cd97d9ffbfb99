// Host-side planning of a packed attention batch: per-sequence records and
// the work list of (sequence, kv head, row tile, key range) items that one
// dispatch of shaders/attention_fwd.comp runs, plus the tiles whose key
// range was split and must be merged by shaders/attention_combine.comp.
// Pure host code: no Vulkan.
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
};

constexpr uint32_t kNoSlot = 0xffffffffu;

// std430 records shared with the shaders (struct Item / struct Seq).
struct PlanItem {
  uint32_t seq, kv_head, row0, slot;
  uint32_t k_begin, k_end, n_slots, buffer;
};
struct PlanSeq {
  uint32_t q_off, k_off, t, u;  // paged: k_off = first block-table entry
  uint32_t mask_off, pad0, pad1, pad2;
};
static_assert(sizeof(PlanItem) == 32 && sizeof(PlanSeq) == 32, "std430 layout");

struct PlanShape {
  uint32_t group;  // H / Hkv: query heads per kv head
  uint32_t num_kv_heads;
  bool causal;
  int32_t window_left;      // -1: none
  uint32_t tile_rows;       // rows (token, head) per work item
  uint32_t max_keys;        // keys per work item at most (loop cap)
  uint32_t max_slots;       // splits per tile at most (combine loop cap)
  uint32_t target_items;    // split key ranges further while fewer items than this
  uint32_t min_split_keys;  // ... but never into chunks below this
};

struct Plan {
  std::vector<PlanSeq> seqs;
  std::vector<PlanItem> items;    // heaviest first
  std::vector<PlanItem> combine;  // tiles to merge (slot = first, n_slots)
  uint32_t num_slots = 0;         // partial rows = num_slots * tile_rows
};

// Keys [begin, end) of a sequence that live in pool buffer `buffer` (paged
// KV cache). A work item reads one buffer, so its key range never crosses
// a segment boundary; the item's `pad` field carries the buffer.
struct KeySegment {
  uint32_t begin, end, buffer;
};

// cu_q/cu_k: validated prefix sums of batch + 1 entries. segments: per
// sequence, its keys cut by pool buffer (paged), or null (one buffer).
// Items come sorted by buffer, heaviest first within a buffer. Throws
// VKATTN_ERROR_UNSUPPORTED when a sequence needs more than max_slots splits.
Plan build_plan(const PlanShape& shape, uint32_t batch, const int32_t* cu_q, const int32_t* cu_k,
                const std::vector<std::vector<KeySegment>>* segments = nullptr);

}  // namespace vkattn

// The paged KV cache (vkattn_kv_cache) and its steps (vkattn_step): page
// pool, reference-counted pages, sequences and their block tables, all on
// the host; the device only holds the pool. Appends are recorded by
// ops/kv_append.cpp (shaders/kv_append.comp), paged attention by
// ops/attention/validate.cpp.
//
// Pool layout (chosen for shaders/attention_fwd.comp): one layer of one
// page is a slab [K: Hkv][page_size][d] followed by [V: Hkv][page_size][dv],
// each rounded up to 16 bytes. A work item of the attention kernel serves
// one kv head, so the keys it reads from a page are one contiguous run of
// page_size * d elements, and every row starts 16-byte aligned whenever d
// (dv) is a multiple of 8 halves or 4 floats, which is what the kernel's
// widest texel fetches need.
//
// 8-bit caches (VKATTN_I8, VKATTN_FP8_E4M3) hold one byte per element;
// int8 follows each block's rows with their scales, f32 [Hkv][page_size]
// (16-byte rounded), which the append kernel writes and attention reads.
// fp8 keeps per-layer scales [layer][K, V][Hkv] in a small buffer of its
// own (scale_table()), set before a layer's first append.
//
// 4-bit caches (VKATTN_Q4): rows of codes, 8 to a 32-bit word (element e
// in bits 4 (e % 8) of word e / 8, two's complement -8..7), each row
// ceil(dim / 8) words; then the rows' block scales, f16 [Hkv][page_size]
// [ceil(dim / 32)] (16-byte rounded), which the append kernel
// (shaders/kv_append_q4.comp) writes. Its byte offsets play the role of
// elements in the append's geometry (elem_size() is 1).
//
// Pool buffers, layer-major: pages are cut into groups of pages_per_group
// consecutive ids (one group unless one layer of the whole pool exceeds a
// buffer), and a buffer holds one group's slabs of one or more consecutive
// layers, layer by layer: [layer][local page][slab]. So one layer of every
// page usually lies in one buffer, and a layer's attention or append is one
// dispatch whatever pages its sequences own (a page-major split put the 16
// sequences of a 32-layer decode step in 9 buffers: 9 passes and a merge
// per layer). A buffer never exceeds the device's maxMemoryAllocationSize,
// the widest view attention binds (maxTexelBufferElements 16-byte texels,
// fp8 8-byte) and 2 GiB (or VKATTN_KV_BUFFER_BYTES, a test override), so a pool of any
// size works; int8 and q4 caches, whose scales attention reads through a
// storage binding of the whole buffer, also not maxStorageBufferRange.
//
// Binding windows: a buffer larger than one binding (appends write through
// storage bindings, attention reads through texel views; lavapipe and NVIDIA
// cover 128 MiB and 2^27 texels) is bound in windows of window_pages(bytes)
// consecutive pages of one group, each dispatch one window (its block table
// local to the window). A 131072-token f16 layer of 8 kv heads (512 MiB)
// was 5 pool buffers on lavapipe, 5 attention passes a call; it is one
// buffer, and one pass wherever a texel view of 16-byte texels covers it.
// VKATTN_KV_WINDOW_BYTES (a test override) caps a window's bytes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/context.h"
#include "core/tensor.h"
#include "vkattn/vkattn.h"

namespace vkattn {

class Step;

struct KvSeq {
  int32_t len = 0;
  std::vector<uint32_t> pages;  // block table: page of tokens [i*ps, (i+1)*ps)
};

class KvCache {
 public:
  KvCache(std::shared_ptr<Context> ctx, const vkattn_kv_cache_desc& desc);

  Context& context() const { return *ctx_; }
  const vkattn_kv_cache_desc& desc() const { return desc_; }  // head_dim_v resolved
  uint32_t elem_size() const { return elem_size_; }
  uint64_t k_block_bytes() const { return k_block_; }  // one layer's K, 16-byte rounded
  uint64_t v_block_bytes() const { return v_block_; }
  // Bytes of a block's rows: an int8 block's scales follow at this offset.
  uint64_t k_rows_bytes() const { return k_rows_; }
  uint64_t v_rows_bytes() const { return v_rows_; }
  bool int8() const { return desc_.dtype == VKATTN_I8; }
  bool fp8() const { return desc_.dtype == VKATTN_FP8_E4M3; }
  bool q4() const { return desc_.dtype == VKATTN_Q4; }
  // int8 and q4: each block's scales follow its rows in the pool buffer,
  // and attention reads them through one storage binding of the whole
  // buffer, addressed from byte 0 (so such buffers are never windowed).
  bool scales_in_buffer() const { return int8() || q4(); }
  // VKATTN_KV_ROTATE_KEYS: the size h of the Walsh-Hadamard groups keys
  // are rotated by (the largest power of two dividing head_dim), 1 = none.
  uint32_t key_rotation() const {
    return desc_.flags & VKATTN_KV_ROTATE_KEYS ? desc_.head_dim & (0u - desc_.head_dim) : 1u;
  }
  // The multiply that ends shaders/include/hadamard.glsl's passes for
  // groups of `group`: sqrt(2) when log2(group) is odd, else 1 (its even
  // passes halve their inputs, so the passes alone give the normalized
  // transform times 1 or 1 / sqrt(2)).
  static float hadamard_final_scale(uint32_t group) {
    uint32_t passes = 0;
    for (uint32_t len = 1; len < group; len *= 2) ++passes;
    return passes % 2 ? 1.41421356237309515f : 1.0f;
  }
  // Q4: bytes of one row of codes (ceil(dim / 8) words) and blocks a row
  // of that dim has.
  static uint64_t q4_row_bytes(uint32_t dim) { return (dim + 7) / 8 * 4; }
  static uint32_t q4_blocks(uint32_t dim) { return (dim + 31) / 32; }
  // fp8: the scales of every layer, [layer][K, V][Hkv] floats, and whether
  // a layer's are set / the layer has been appended (scales then frozen).
  void set_scales(uint32_t layer, uint32_t n, const float* k, const float* v);
  const std::shared_ptr<Buffer>& scale_table() const { return scale_table_; }
  // ... and its bytes of scales (the buffer may be larger).
  uint64_t scale_table_bytes() const {
    return uint64_t(desc_.num_layers) * 2 * desc_.num_kv_heads * 4;
  }
  // fp8: the scale table's first entry for `layer` (its K scales; V's
  // follow after Hkv).
  uint32_t scale_index(uint32_t layer) const { return layer * 2 * desc_.num_kv_heads; }
  bool scales_set(uint32_t layer) const { return !scales_set_.empty() && scales_set_[layer]; }
  void mark_appended(uint32_t layer) {
    if (!appended_.empty()) appended_[layer] = true;
  }
  void read_scales(uint32_t layer, int64_t id, int32_t start, int32_t count, float* k, float* v);
  void read_block_scales(uint32_t layer, int64_t id, int32_t start, int32_t count, float* k,
                         size_t k_count, float* v, size_t v_count);
  // Bytes of one slab (one layer of one page): the page stride in a buffer.
  uint64_t slab_bytes() const { return k_block_ + v_block_; }
  uint32_t num_groups() const { return num_groups_; }
  uint32_t pages_per_group() const { return pages_per_group_; }
  uint32_t group_of(uint32_t page) const { return page / pages_per_group_; }
  uint32_t local_page(uint32_t page) const { return page % pages_per_group_; }
  // Where layer `l` of page group `g` lives: its buffer, and the byte
  // offset of its local page 0's slab (local page i's slab follows at
  // i * slab_bytes(); V at + k_block_bytes()).
  struct Slabs {
    uint32_t buffer;
    uint64_t offset;
  };
  Slabs slabs(uint32_t l, uint32_t g) const {
    return {(l / layers_per_buffer_) * num_groups_ + g,
            uint64_t(l % layers_per_buffer_) * pages_in_group(g) * slab_bytes()};
  }
  // Where layer `l` of page `page` lives: its buffer and its slab's offset.
  Slabs slab_of(uint32_t l, uint32_t page) const {
    Slabs s = slabs(l, group_of(page));
    s.offset += uint64_t(local_page(page)) * slab_bytes();
    return s;
  }
  uint32_t pages_in_group(uint32_t g) const {
    return std::min(pages_per_group_, desc_.num_pages - g * pages_per_group_);
  }
  // Pages of one binding window whose slabs take at most `bytes` (a
  // binding's limit; VKATTN_KV_WINDOW_BYTES caps it): at least 1, at most a
  // group; a whole group where scales_in_buffer().
  uint32_t window_pages(uint64_t bytes) const {
    if (scales_in_buffer()) return pages_per_group_;
    const uint64_t per = std::min(bytes, window_cap_) / slab_bytes();
    return static_cast<uint32_t>(std::clamp<uint64_t>(per, 1, pages_per_group_));
  }
  // With windows of wp pages: windows per group, the window (binding)
  // holding page p and p's index in it. (wp = pages_per_group(): the groups.)
  uint32_t windows_per_group(uint32_t wp) const { return (pages_per_group_ + wp - 1) / wp; }
  uint32_t window_of(uint32_t page, uint32_t wp) const {
    return group_of(page) * windows_per_group(wp) + local_page(page) / wp;
  }
  uint32_t page_in_window(uint32_t page, uint32_t wp) const { return local_page(page) % wp; }
  // Where layer `l` of window `w` (of wp pages) lives: its buffer and the
  // bytes [offset, end) of its pages' slabs.
  struct Window {
    uint32_t buffer;
    uint64_t offset, end;
  };
  Window window(uint32_t l, uint32_t w, uint32_t wp) const {
    const uint32_t n = windows_per_group(wp), g = w / n, first = (w % n) * wp;
    const Slabs at = slabs(l, g);
    const uint64_t offset = at.offset + uint64_t(first) * slab_bytes();
    return {at.buffer, offset, offset + std::min(wp, pages_in_group(g) - first) * slab_bytes()};
  }
  const std::vector<std::shared_ptr<Buffer>>& buffers() const { return buffers_; }

  int32_t length(int64_t id) const;
  const KvSeq* find(int64_t id) const;
  void remove(int64_t id);
  void fork(int64_t src, int64_t dst);
  void truncate(int64_t id, int32_t new_length);
  uint32_t num_free_pages() const { return free_count_; }
  void read(uint32_t layer, int64_t id, int32_t start, int32_t count, void* k_dst, size_t k_bytes,
            void* v_dst, size_t v_bytes);

  // Step support (one open step at a time).
  Step* open_step = nullptr;
  void require_no_step(const char* what) const;
  // Takes a free page from group `near` if it has one, else from the group
  // with the most free pages (keeps a sequence's pages in few groups, so
  // attention items are split rarely). Refcount -> 1.
  uint32_t alloc_page(uint32_t near);
  void release_page(uint32_t page);  // refcount - 1, freed at 0
  uint32_t refcount(uint32_t page) const { return refs_[page]; }
  std::unordered_map<int64_t, KvSeq>& seqs() { return seqs_; }

 private:
  std::shared_ptr<Context> ctx_;
  vkattn_kv_cache_desc desc_;
  uint32_t elem_size_ = 0;
  uint64_t k_block_ = 0, v_block_ = 0, k_rows_ = 0, v_rows_ = 0;
  std::shared_ptr<Buffer> scale_table_;  // fp8
  std::vector<bool> scales_set_, appended_;
  // The sequence, once layer, id and tokens [start, start + count) are
  // checked (read and read_scales).
  const KvSeq* checked_range(uint32_t layer, int64_t id, int32_t start, int32_t count);
  // Q4 (read): the rows of codes unpacked into one int8 per element.
  void read_q4(uint32_t layer, const KvSeq& s, int32_t start, int32_t count, int8_t* k_dst,
               int8_t* v_dst);
  // Copies the K and V runs of `row` bytes at block offsets off(h, slot) of
  // tokens [start, start + count) of a layer into k_dst / v_dst [count,
  // Hkv, row] (read and read_scales).
  void gather(uint32_t layer, const KvSeq& s, int32_t start, int32_t count, uint64_t k_row,
              uint64_t v_row, uint64_t k_base, uint64_t v_base, uint8_t* k_dst, uint8_t* v_dst);
  uint32_t pages_per_group_ = 0, num_groups_ = 0, layers_per_buffer_ = 0;
  uint64_t window_cap_ = ~uint64_t(0);  // VKATTN_KV_WINDOW_BYTES
  std::vector<std::shared_ptr<Buffer>> buffers_;
  std::vector<uint32_t> refs_;
  std::vector<std::vector<uint32_t>> free_;  // per group, a stack of free pages
  uint32_t free_count_ = 0;
  std::unordered_map<int64_t, KvSeq> seqs_;
};

// Rows one kv_append.comp workgroup may take for rows of at most
// `max_units` units (the loop cap; ops/kv_append.cpp).
uint64_t append_rows_per_group(uint32_t max_units);

// One sequence of an open step.
struct StepSeq {
  int64_t id = 0;
  int32_t len = 0;              // committed tokens before the step
  int32_t t = 0;                // new tokens
  int32_t new_off = 0;          // first row of its new tokens in the packed tensors
  std::vector<uint32_t> pages;  // block table covering len + t tokens
};

class Step {
 public:
  // Reserves pages (copy-on-write copies are recorded here); throws
  // CACHE_FULL / INVALID_ARGUMENT with the cache unchanged.
  Step(std::shared_ptr<KvCache> cache, uint32_t n, const int64_t* ids, const int32_t* t);
  ~Step();  // an uncommitted step is aborted

  KvCache& cache() const { return *cache_; }
  const std::vector<StepSeq>& seqs() const { return seqs_; }
  int64_t total_new() const { return total_new_; }
  bool appended(uint32_t layer) const { return appended_[layer]; }
  bool is_open() const { return open_; }

  // `rope` (NULL = none) rotates the keys first (vkattn_step_append_rope).
  void append(uint32_t layer, Tensor* k_new, Tensor* v_new, const vkattn_rope_desc* rope = nullptr);
  void commit();
  void abort();

 private:
  std::shared_ptr<KvCache> cache_;  // first: destroyed after everything below

 public:
  // Attention plans of this step, by what shapes them (H, causal, window,
  // dtypes, lse, mask; ops/attention/record.cpp): built at the first layer
  // that needs one, reused by the others (a fixed-size key: no allocation
  // per layer).
  // ..., the plan's part (PlanPart), right window, chunk, then the spans (indptr, pairs)
  // A cascade's groups and temporaries (ops/attention/cascade.cpp) are kept
  // here too, under keys that begin with ~0 (a plan key never does).
  using PlanKey = std::vector<uint64_t>;
  std::map<PlanKey, std::shared_ptr<void>> plans;
  // plans[key] as a T, made by make() the first time.
  template <class T, class Make>
  std::shared_ptr<T> cached(const PlanKey& key, Make&& make) {
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make()).first;
    return std::static_pointer_cast<T>(it->second);
  }

 private:
  std::vector<StepSeq> seqs_;
  std::vector<uint32_t> reserved_;            // pages allocated by the step
  std::vector<uint32_t> cow_sources_;         // released at commit
  std::unordered_map<int64_t, KvSeq> fresh_;  // entries of new sequences, moved in at commit
  std::vector<bool> appended_;
  int64_t total_new_ = 0;
  bool open_ = true;
};

}  // namespace vkattn

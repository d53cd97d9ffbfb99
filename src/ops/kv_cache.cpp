#include "ops/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/binding_window.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/tensor.h"
#include "reference/dtype_util.h"

namespace vkattn {

namespace {
uint64_t round16(uint64_t x) {
  return (x + 15) / 16 * 16;
}
}  // namespace

KvCache::KvCache(std::shared_ptr<Context> ctx, const vkattn_kv_cache_desc& d)
    : ctx_(std::move(ctx)), desc_(d) {
  check_env(EnvVar::kCache);  // the variables a cache reads, before anything is made
  for (uint32_t r : d.reserved) require(r == 0, "desc->reserved must be 0");
  require(d.num_layers >= 1, "desc->num_layers must be >= 1");
  require(d.num_kv_heads >= 1, "desc->num_kv_heads must be >= 1");
  require(d.head_dim >= 1 && d.head_dim <= VKATTN_MAX_HEAD_DIM, "desc->head_dim ", d.head_dim,
          " is not in 1..", VKATTN_MAX_HEAD_DIM);
  require(d.head_dim_v <= VKATTN_MAX_HEAD_DIM, "desc->head_dim_v ", d.head_dim_v, " is not in 0..",
          VKATTN_MAX_HEAD_DIM);
  require(d.page_size >= 1, "desc->page_size must be >= 1");
  require(d.num_pages >= 1, "desc->num_pages must be >= 1");
  const int64_t dt = raw_enum(d.dtype);
  // dt is the raw value: the enum is read only once it is a known dtype.
  require(known_dtype(dt) && (dt <= VKATTN_BF16 || is_8bit(vkattn_dtype(dt)) || dt == VKATTN_Q4),
          "desc->dtype must be f32, f16, bf16, i8, fp8_e4m3 or q4");
  if (desc_.head_dim_v == 0) desc_.head_dim_v = desc_.head_dim;
  require((d.flags & ~uint32_t(VKATTN_KV_ROTATE_KEYS)) == 0, "desc->flags ", d.flags,
          " has bits vkattn does not know (VKATTN_KV_ROTATE_KEYS is 1)");
  require(!(d.flags & VKATTN_KV_ROTATE_KEYS) || q4(),
          "desc->flags: VKATTN_KV_ROTATE_KEYS is for VKATTN_Q4 caches only");
  const uint64_t rows = static_cast<uint64_t>(d.num_kv_heads) * d.page_size;
  if (q4()) {
    elem_size_ = 1;  // byte offsets (ops/kv_cache.h)
    k_rows_ = round16(rows * q4_row_bytes(desc_.head_dim));
    v_rows_ = round16(rows * q4_row_bytes(desc_.head_dim_v));
    k_block_ = k_rows_ + round16(rows * 2 * q4_blocks(desc_.head_dim));  // f16 per block
    v_block_ = v_rows_ + round16(rows * 2 * q4_blocks(desc_.head_dim_v));
  } else {
    elem_size_ = static_cast<uint32_t>(dtype_size(d.dtype));
    k_rows_ = round16(rows * desc_.head_dim * elem_size_);
    v_rows_ = round16(rows * desc_.head_dim_v * elem_size_);
    const uint64_t scales = int8() ? round16(rows * 4) : 0;  // f32 per row
    k_block_ = k_rows_ + scales;
    v_block_ = v_rows_ + scales;
  }
  if (fp8()) {
    // Read with every key by attention: device-local where the host can
    // still map it (a discrete GPU's BAR), not system memory.
    scale_table_ = std::make_shared<Buffer>(
        ctx_->device(), std::max<uint64_t>(16, scale_table_bytes()), true, true, true);
    scales_set_.assign(d.num_layers, false);
    appended_.assign(d.num_layers, false);
  }

  // One binding must cover a page's slab: a storage binding (appends) and
  // a texel view of single elements, the narrowest (attention, odd dims).
  // Buffers may be larger (bound in windows, ops/kv_cache.h) up to the
  // widest view attention takes (16-byte texels; fp8 8: two words of four
  // codes) and 2 GiB; int8 and q4 caches' buffers stay within one storage
  // binding (bound whole).
  const DeviceCaps& caps = ctx_->device().caps();
  const uint64_t texels = std::min<uint64_t>(caps.max_texel_buffer_elements, (1ull << 31) - 1);
  const uint64_t binding = std::min<uint64_t>(caps.max_storage_buffer_range, texels * elem_size_);
  uint64_t limit = binding;
  if (!scales_in_buffer())
    limit = std::max(limit, std::min(texel_window_limit(caps, fp8() ? 8 : 16), uint64_t(1) << 31));
  if (caps.max_allocation_size) limit = std::min(limit, caps.max_allocation_size);
  limit = std::min<uint64_t>(limit, env_number("VKATTN_KV_BUFFER_BYTES", ~uint64_t(0)));
  window_cap_ = env_number("VKATTN_KV_WINDOW_BYTES", ~uint64_t(0));
  if (window_cap_ == 0) window_cap_ = ~uint64_t(0);
  const uint64_t slab = slab_bytes();
  // A buffer's bytes: padded as texel_buffer_bytes says where that stays
  // within the limit (a buffer bound whole must fit one binding).
  auto pool_bytes = [&](uint64_t bytes) {
    return texel_buffer_bytes(bytes) <= limit ? texel_buffer_bytes(bytes) : bytes;
  };
  if (slab > std::min(limit, binding))
    fail(VKATTN_ERROR_UNSUPPORTED, "one layer of a page (", slab,
         " bytes) does not fit one device buffer binding (at most ", std::min(limit, binding),
         " bytes); use fewer tokens per page");
  pages_per_group_ = static_cast<uint32_t>(std::min<uint64_t>(limit / slab, d.num_pages));
  num_groups_ = (d.num_pages + pages_per_group_ - 1) / pages_per_group_;
  layers_per_buffer_ = static_cast<uint32_t>(
      std::clamp<uint64_t>(limit / (uint64_t(pages_per_group_) * slab), 1, d.num_layers));
  free_.resize(num_groups_);
  for (uint32_t l0 = 0; l0 < d.num_layers; l0 += layers_per_buffer_) {
    const uint64_t layers = std::min(layers_per_buffer_, d.num_layers - l0);
    for (uint32_t g = 0; g < num_groups_; ++g)
      buffers_.push_back(std::make_shared<Buffer>(
          ctx_->device(), pool_bytes(layers * pages_in_group(g) * slab), false));
  }
  for (uint32_t g = 0; g < num_groups_; ++g) {
    // Stack: the lowest page on top.
    const uint32_t first = g * pages_per_group_;
    for (uint32_t i = pages_in_group(g); i-- > 0;) free_[g].push_back(first + i);
  }
  refs_.assign(d.num_pages, 0);
  free_count_ = d.num_pages;
}

const KvSeq* KvCache::find(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

int32_t KvCache::length(int64_t id) const {
  const KvSeq* s = find(id);
  return s ? s->len : 0;
}

void KvCache::require_no_step(const char* what) const {
  require(open_step == nullptr, "cannot ", what, " while a step is open (commit or abort it)");
}

uint32_t KvCache::alloc_page(uint32_t near) {
  if (free_count_ == 0) fail(VKATTN_ERROR_INTERNAL, "page pool exhausted after reservation");
  uint32_t b = near;
  if (b >= free_.size() || free_[b].empty()) {
    b = 0;
    for (uint32_t i = 1; i < free_.size(); ++i)
      if (free_[i].size() > free_[b].size()) b = i;
  }
  uint32_t p = free_[b].back();
  free_[b].pop_back();
  --free_count_;
  refs_[p] = 1;
  return p;
}

void KvCache::release_page(uint32_t p) {
  if (refs_[p] == 0) fail(VKATTN_ERROR_INTERNAL, "page ", p, " released twice");
  if (--refs_[p] == 0) {
    free_[group_of(p)].push_back(p);
    ++free_count_;
  }
}

void KvCache::remove(int64_t id) {
  require_no_step("remove a sequence");
  auto it = seqs_.find(id);
  require(it != seqs_.end(), "sequence ", id, " does not exist");
  for (uint32_t p : it->second.pages) release_page(p);
  seqs_.erase(it);
}

void KvCache::fork(int64_t src, int64_t dst) {
  require_no_step("fork");
  const KvSeq* s = find(src);
  require(s != nullptr, "source sequence ", src, " does not exist");
  require(find(dst) == nullptr, "destination sequence ", dst, " already exists");
  host_alloc_point();
  auto it = seqs_.emplace(dst, *s).first;  // may throw: nothing changed yet
  for (uint32_t p : it->second.pages) ++refs_[p];
}

void KvCache::truncate(int64_t id, int32_t new_length) {
  require_no_step("truncate");
  auto it = seqs_.find(id);
  require(it != seqs_.end(), "sequence ", id, " does not exist");
  KvSeq& s = it->second;
  require(new_length >= 0 && new_length <= s.len, "new_length ", new_length, " is not in 0..",
          s.len, " (the sequence's length)");
  const size_t keep = (static_cast<size_t>(new_length) + desc_.page_size - 1) / desc_.page_size;
  for (size_t i = keep; i < s.pages.size(); ++i) release_page(s.pages[i]);
  s.pages.resize(keep);
  s.len = new_length;
}

const KvSeq* KvCache::checked_range(uint32_t layer, int64_t id, int32_t start, int32_t count) {
  require(layer < desc_.num_layers, "layer ", layer, " is not below num_layers ", desc_.num_layers);
  const KvSeq* s = find(id);
  require(s != nullptr, "sequence ", id, " does not exist");
  require(start >= 0 && count >= 0, "start and count must be >= 0 (got ", start, ", ", count, ")");
  require(static_cast<int64_t>(start) + count <= s->len, "tokens [", start, ", ",
          static_cast<int64_t>(start) + count, ") are beyond the sequence's length ", s->len);
  return s;
}

// Q4: the stored rows of codes unpacked, one int8 (-8..7) per element.
void KvCache::read_q4(uint32_t layer, const KvSeq& s, int32_t start, int32_t count, int8_t* k_dst,
                      int8_t* v_dst) {
  const uint64_t hkv = desc_.num_kv_heads, d = desc_.head_dim, dv = desc_.head_dim_v;
  const uint64_t kr = q4_row_bytes(desc_.head_dim), vr = q4_row_bytes(desc_.head_dim_v);
  std::vector<uint8_t> k(count * hkv * kr), v(count * hkv * vr);
  gather(layer, s, start, count, kr, vr, 0, 0, k.data(), v.data());
  auto unpack = [](const std::vector<uint8_t>& rows, uint64_t n, uint64_t row, uint64_t dim,
                   int8_t* out) {
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t e = 0; e < dim; ++e) {
        const uint8_t nib = (rows[r * row + e / 2] >> (4 * (e % 2))) & 15;
        out[r * dim + e] = static_cast<int8_t>(nib >= 8 ? int(nib) - 16 : int(nib));
      }
  };
  unpack(k, count * hkv, kr, d, k_dst);
  unpack(v, count * hkv, vr, dv, v_dst);
}

void KvCache::read(uint32_t layer, int64_t id, int32_t start, int32_t count, void* k_dst,
                   size_t k_bytes, void* v_dst, size_t v_bytes) {
  const KvSeq* s = checked_range(layer, id, start, count);
  const uint64_t hkv = desc_.num_kv_heads, d = desc_.head_dim, dv = desc_.head_dim_v;
  if (q4()) {
    require(k_bytes == count * hkv * d, "k_bytes is ", k_bytes, ", expected ", count * hkv * d,
            " (count x Hkv x d: one int8 code per element of a q4 cache)");
    require(v_bytes == count * hkv * dv, "v_bytes is ", v_bytes, ", expected ", count * hkv * dv,
            " (count x Hkv x dv: one int8 code per element of a q4 cache)");
    if (count == 0) return;
    require(k_dst && v_dst, "k_dst and v_dst must not be NULL");
    read_q4(layer, *s, start, count, static_cast<int8_t*>(k_dst), static_cast<int8_t*>(v_dst));
    return;
  }
  const uint64_t k_row = d * elem_size_, v_row = dv * elem_size_;
  const uint64_t k_want = count * hkv * k_row, v_want = count * hkv * v_row;
  require(k_bytes == k_want, "k_bytes is ", k_bytes, ", expected ", k_want, " (count x Hkv x d x ",
          elem_size_, ")");
  require(v_bytes == v_want, "v_bytes is ", v_bytes, ", expected ", v_want, " (count x Hkv x dv x ",
          elem_size_, ")");
  if (count == 0) return;
  require(k_dst && v_dst, "k_dst and v_dst must not be NULL");
  gather(layer, *s, start, count, k_row, v_row, 0, 0, static_cast<uint8_t*>(k_dst),
         static_cast<uint8_t*>(v_dst));
}

void KvCache::read_scales(uint32_t layer, int64_t id, int32_t start, int32_t count, float* k,
                          float* v) {
  require(is_8bit(desc_.dtype), "the cache is ", dtype_name(desc_.dtype),
          ": only 8-bit caches (i8, fp8_e4m3) have scales");
  const KvSeq* s = checked_range(layer, id, start, count);
  if (count == 0) return;
  require(k && v, "k_scales and v_scales must not be NULL");
  const uint32_t hkv = desc_.num_kv_heads;
  if (fp8()) {
    // A layer with tokens was appended, so its scales are set.
    const float* tab = reinterpret_cast<const float*>(scale_table_->mapped()) + scale_index(layer);
    for (int32_t i = 0; i < count; ++i)
      for (uint32_t h = 0; h < hkv; ++h) {
        k[uint64_t(i) * hkv + h] = tab[h];
        v[uint64_t(i) * hkv + h] = tab[hkv + h];
      }
    return;
  }
  gather(layer, *s, start, count, 4, 4, k_rows_, v_rows_, reinterpret_cast<uint8_t*>(k),
         reinterpret_cast<uint8_t*>(v));
}

void KvCache::read_block_scales(uint32_t layer, int64_t id, int32_t start, int32_t count, float* k,
                                size_t k_count, float* v, size_t v_count) {
  require(q4(), "the cache is ", dtype_name(desc_.dtype),
          ": only q4 caches have block scales (8-bit caches: vkattn_kv_cache_read_scales)");
  const KvSeq* s = checked_range(layer, id, start, count);
  const uint64_t hkv = desc_.num_kv_heads, nbk = q4_blocks(desc_.head_dim),
                 nbv = q4_blocks(desc_.head_dim_v);
  require(k_count == count * hkv * nbk, "k_count is ", k_count, ", expected ", count * hkv * nbk,
          " (count x Hkv x ceil(d / 32))");
  require(v_count == count * hkv * nbv, "v_count is ", v_count, ", expected ", count * hkv * nbv,
          " (count x Hkv x ceil(dv / 32))");
  if (count == 0) return;
  require(k && v, "k_scales and v_scales must not be NULL");
  std::vector<uint16_t> kh(k_count), vh(v_count);
  gather(layer, *s, start, count, nbk * 2, nbv * 2, k_rows_, v_rows_,
         reinterpret_cast<uint8_t*>(kh.data()), reinterpret_cast<uint8_t*>(vh.data()));
  for (size_t i = 0; i < k_count; ++i) k[i] = vkattn_ref::f16_to_f32(kh[i]);
  for (size_t i = 0; i < v_count; ++i) v[i] = vkattn_ref::f16_to_f32(vh[i]);
}

void KvCache::set_scales(uint32_t layer, uint32_t n, const float* k, const float* v) {
  require(fp8(), "the cache is ", dtype_name(desc_.dtype),
          ": only fp8_e4m3 caches take scales (int8 computes its own per token)");
  require(layer < desc_.num_layers, "layer ", layer, " is not below num_layers ", desc_.num_layers);
  const uint32_t hkv = desc_.num_kv_heads;
  require(n == 1 || n == hkv, "num_scales is ", n, ", must be 1 (per layer) or ", hkv,
          " (per kv head)");
  require(k && v, "k_scales and v_scales must not be NULL");
  for (uint32_t i = 0; i < n; ++i)
    require(std::isfinite(k[i]) && k[i] > 0.0f && std::isfinite(v[i]) && v[i] > 0.0f,
            "scales must be finite and > 0 (k_scales[", i, "] = ", k[i], ", v_scales[", i,
            "] = ", v[i], ")");
  require(!appended_[layer], "layer ", layer,
          " has been appended to: its fp8 scales are fixed (set them before the first append)");
  float* tab = reinterpret_cast<float*>(scale_table_->mapped()) + scale_index(layer);
  for (uint32_t h = 0; h < hkv; ++h) {
    tab[h] = k[n == 1 ? 0 : h];
    tab[hkv + h] = v[n == 1 ? 0 : h];
  }
  scales_set_[layer] = true;
}

void KvCache::gather(uint32_t layer, const KvSeq& s, int32_t start, int32_t count, uint64_t k_row,
                     uint64_t v_row, uint64_t k_base, uint64_t v_base, uint8_t* kd, uint8_t* vd) {
  if (count <= 0) return;  // (the page arithmetic below needs a token)
  const uint64_t hkv = desc_.num_kv_heads;
  Recorder& rec = ctx_->recorder();
  for (const auto& b : buffers_) rec.wait_for(b->last_use);
  const uint32_t ps = desc_.page_size;
  // Token i's rows out of the slab holding it (one layer of its page).
  auto copy_token = [&](int32_t i, const uint8_t* slab) {
    const uint64_t slot = (start + i) % ps;
    for (uint64_t h = 0; h < hkv; ++h) {
      const uint64_t row = h * ps + slot;
      std::memcpy(kd + (i * hkv + h) * k_row, slab + k_base + row * k_row, k_row);
      std::memcpy(vd + (i * hkv + h) * v_row, slab + k_block_ + v_base + row * v_row, v_row);
    }
  };
  if (buffers_[0]->mapped()) {
    for (int32_t i = 0; i < count; ++i) {
      const Slabs at = slab_of(layer, s.pages[(start + i) / ps]);
      copy_token(i, buffers_[at.buffer]->mapped() + at.offset);
    }
    return;
  }
  // Device-local pool: copy the slabs of the pages the range touches (one
  // region per page, merged where slabs are contiguous) into a staging
  // buffer, then gather the rows on the host. Per-row regions would be
  // count x Hkv x 2 copies: millions for a long sequence.
  const uint32_t first_page = static_cast<uint32_t>(start / ps);
  const uint32_t n_pages = static_cast<uint32_t>((start + count - 1) / ps) + 1 - first_page;
  const uint64_t sb = slab_bytes();
  auto staging = std::make_shared<Buffer>(ctx_->device(), n_pages * sb, true);
  std::vector<std::vector<VkBufferCopy>> regions(buffers_.size());
  for (uint32_t j = 0; j < n_pages; ++j) {
    const Slabs at = slab_of(layer, s.pages[first_page + j]);
    regions[at.buffer].push_back({at.offset, j * sb, sb});
  }
  rec.use(staging);
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (!regions[b].empty()) rec.use(buffers_[b]);
  for (size_t b = 0; b < buffers_.size(); ++b) rec.copy_buffer(*buffers_[b], *staging, regions[b]);
  rec.wait_for(rec.open_serial());
  const uint8_t* st = staging->mapped();
  for (int32_t i = 0; i < count; ++i)
    copy_token(i, st + uint64_t((start + i) / ps - first_page) * sb);
}

// ---------------------------------------------------------------------------

Step::Step(std::shared_ptr<KvCache> cache, uint32_t n, const int64_t* ids, const int32_t* t)
    : cache_(std::move(cache)) {
  KvCache& c = *cache_;
  require(c.open_step == nullptr, "the cache already has an open step (commit or abort it first)");
  require(n == 0 || (ids && t), "seq_ids and num_new_tokens must not be NULL");
  host_alloc_point();
  const uint32_t ps = c.desc().page_size;
  // Plan everything before touching the cache: a failure changes nothing.
  std::unordered_map<int64_t, uint32_t> seen;
  struct Need {
    uint32_t fresh = 0;  // new pages
    bool cow = false;    // copy the last (shared, partial) page first
  };
  std::vector<Need> need(n);
  uint64_t pages_needed = 0;
  int64_t total = 0;
  seqs_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    require(t[i] >= 0, "num_new_tokens[", i, "] is ", t[i], ", must be >= 0");
    auto [where, fresh] = seen.emplace(ids[i], i);
    require(fresh, "sequence ", ids[i], " appears twice in the step (at ", where->second, " and ",
            i, ")");
    const KvSeq* s = c.find(ids[i]);
    StepSeq& ss = seqs_[i];
    ss.id = ids[i];
    ss.len = s ? s->len : 0;
    ss.t = t[i];
    require(static_cast<int64_t>(ss.len) + ss.t <= INT32_MAX, "sequence ", ids[i],
            " would exceed INT32_MAX tokens");
    ss.new_off = static_cast<int32_t>(total);
    total += ss.t;
    require(total <= INT32_MAX, "the step has more than INT32_MAX new tokens");
    const uint64_t have = s ? s->pages.size() : 0;
    const uint64_t want = (static_cast<uint64_t>(ss.len) + ss.t + ps - 1) / ps;
    need[i].fresh = static_cast<uint32_t>(want - have);
    // A partial last page that any other sequence also holds is copied
    // before the first write, even when every other holder copies it away
    // in this same step: writing in place would overwrite tokens another
    // holder has committed past this sequence's length (a truncated fork),
    // and an abort must find every committed token as it was.
    need[i].cow = ss.t > 0 && ss.len % ps != 0 && c.refcount(s->pages.back()) > 1;
    pages_needed += need[i].fresh + (need[i].cow ? 1 : 0);
  }
  if (pages_needed > c.num_free_pages())
    fail(VKATTN_ERROR_CACHE_FULL, "the step needs ", pages_needed, " free pages, the cache has ",
         c.num_free_pages());
  for (StepSeq& ss : seqs_) {
    const KvSeq* s = c.find(ss.id);
    ss.pages.reserve((s ? s->pages.size() : 0) + need[&ss - seqs_.data()].fresh);
    if (s) ss.pages = s->pages;
  }
  reserved_.reserve(pages_needed);
  cow_sources_.reserve(pages_needed);
  // Entries of new sequences, made now so that commit cannot fail.
  for (const StepSeq& ss : seqs_)
    if (!c.find(ss.id)) fresh_.emplace(ss.id, KvSeq{});
  c.seqs().reserve(c.seqs().size() + fresh_.size());
  appended_.assign(c.desc().num_layers, false);
  uint32_t n_copies = 0;
  for (const Need& x : need) n_copies += x.cow ? 1 : 0;
  // Per copied page and layer: (source buffer, destination buffer, region).
  struct SlabCopy {
    uint32_t src, dst;
    VkBufferCopy region;
  };
  std::vector<SlabCopy> copies;
  copies.reserve(uint64_t(n_copies) * c.desc().num_layers);
  std::vector<VkBufferCopy> regions;  // one vkCmdCopyBuffer's regions
  regions.reserve(copies.capacity());
  Recorder& rec = c.context().recorder();
  if (n_copies) {
    // Acquire the batch and keep every pool buffer alive before any page
    // changes hands: nothing below can fail.
    for (const auto& b : c.buffers()) rec.use(b);
  }

  // Commit to the reservation.
  for (uint32_t i = 0; i < n; ++i) {
    StepSeq& ss = seqs_[i];
    uint32_t near = ss.pages.empty() ? UINT32_MAX : c.group_of(ss.pages.back());
    if (need[i].cow) {
      uint32_t src = ss.pages.back();
      uint32_t dst = c.alloc_page(near);
      reserved_.push_back(dst);
      cow_sources_.push_back(src);
      const uint64_t sb = c.slab_bytes();
      for (uint32_t l = 0; l < c.desc().num_layers; ++l) {
        const KvCache::Slabs from = c.slab_of(l, src), to = c.slab_of(l, dst);
        copies.push_back({from.buffer, to.buffer, {from.offset, to.offset, sb}});
      }
      ss.pages.back() = dst;
      near = c.group_of(dst);
    }
    for (uint32_t k = 0; k < need[i].fresh; ++k) {
      uint32_t p = c.alloc_page(near);
      reserved_.push_back(p);
      ss.pages.push_back(p);
      near = c.group_of(p);
    }
  }
  total_new_ = total;
  c.open_step = this;

  // Copy-on-write copies of whole pages (every layer's slab), on the
  // device: one vkCmdCopyBuffer per pair of buffers.
  std::sort(copies.begin(), copies.end(), [](const SlabCopy& a, const SlabCopy& b) {
    return std::make_pair(a.src, a.dst) < std::make_pair(b.src, b.dst);
  });
  for (size_t i = 0; i < copies.size();) {
    size_t j = i;
    regions.clear();
    for (; j < copies.size() && copies[j].src == copies[i].src && copies[j].dst == copies[i].dst;
         ++j)
      regions.push_back(copies[j].region);
    rec.copy_buffer(*c.buffers()[copies[i].src], *c.buffers()[copies[i].dst], regions.data(),
                    regions.size());
    i = j;
  }
}

Step::~Step() {
  if (open_) abort();
}

void Step::commit() {
  require(open_, "the step is no longer open");
  KvCache& c = *cache_;
  for (uint32_t p : cow_sources_) c.release_page(p);
  // Nothing below allocates: new sequences' entries were made by the
  // constructor, and the table has room for them.
  for (StepSeq& ss : seqs_) {
    auto it = c.seqs().find(ss.id);
    if (it == c.seqs().end()) it = c.seqs().insert(fresh_.extract(ss.id)).position;
    it->second.len = ss.len + ss.t;
    it->second.pages = std::move(ss.pages);
  }
  reserved_.clear();
  cow_sources_.clear();
  open_ = false;
  c.open_step = nullptr;
}

void Step::abort() {
  if (!open_) return;
  KvCache& c = *cache_;
  for (uint32_t p : reserved_) c.release_page(p);
  reserved_.clear();
  open_ = false;
  c.open_step = nullptr;
}

}  // namespace vkattn

// vkattn_step_append: validation and recording of shaders/kv_append.comp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_set>

#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/host.h"
#include "core/loop_budget.h"
#include "core/tensor.h"
#include "ops/attention/attention.h"
#include "ops/attention/check.h"
#include "ops/attention/prepare.h"
#include "ops/kv_cache.h"
#include "ops/packed_views.h"
#include "ops/rope.h"

namespace vkattn {

namespace {

// kv_append.comp (16/32-bit caches and pools) and kv_append_q8.comp (8-bit
// caches): the same bindings and push constants.
const std::vector<BindingKind> kAppendBindings(7, BindingKind::kStorageBuffer);
const KernelLayout kAppendLayout{"kv_append", kAppendBindings, 112};
const KernelLayout kAppendQ8Layout{"kv_append_q8", kAppendBindings, 112};
const KernelLayout kAppendQ4Layout{"kv_append_q4", kAppendBindings, 112};

struct AppendPush {
  uint32_t n_units, hkv, d, dv, uk, uv, page_size, page_elems, k_off, v_off, in_dt, cache_dt;
  uint32_t k_skip, v_skip;  // elements of the k_new / v_new windows before the first row
  uint32_t v_page_elems, k_tok, k_head, v_tok, v_head, pairs;
  uint32_t rope_rd, rope_off, rope_gptj;  // RoPE of the keys (rd 0 = none)
  uint32_t k_scale_off, v_scale_off;      // int8: bytes from a K (V) block to its scales
  uint32_t scale_base;                    // fp8: the layer's first entry of the scale table
  uint32_t k_rot;                         // q4 VKATTN_KV_ROTATE_KEYS: Hadamard group (1 = none)
  float k_rot_scale;                      // ... and KvCache::hadamard_final_scale(k_rot)
};
static_assert(sizeof(AppendPush) == 112, "push constants mirror kv_append.comp");

// kv_append_q4.comp's loop iterations for one row of `dim` elements whose
// keys are rotated in groups of `rot`: staging (dim / 8 per lane), the
// butterflies (log2 rot passes of dim / 16) and the normalization, the
// block scales (ceil(blocks / 8) blocks of 32), the words of codes (8
// codes each: the unroll the shader asks for is not counted on; lavapipe
// keeps that loop, and rows past the cap went unwritten when it was).
uint64_t q4_row_iterations(uint32_t dim, uint32_t rot) {
  const uint64_t per_lane = (dim + 7) / 8, pairs = (dim / 2 + 7) / 8;
  uint64_t stages = 0;
  for (uint32_t len = 1; len < rot; len *= 2) ++stages;
  const uint64_t blocks = (KvCache::q4_blocks(dim) + 7) / 8;
  const uint64_t words = ((dim + 7) / 8 + 7) / 8;
  return loop_cost(per_lane) + loop_cost(stages) + stages * loop_cost(pairs) +
         (rot > 1 ? loop_cost(per_lane) : 0) + loop_cost(blocks) + blocks * loop_cost(32) +
         loop_cost(words) + words * loop_cost(8);
}

// Where one append writes: the pools' dtype and geometry, and per page
// group (a pool buffer of the cache, a window of caller pools) the K and V
// bindings with the element of local page 0 in each.
struct AppendTarget {
  vkattn_dtype dtype;
  uint32_t hkv, d, dv, page_size;
  uint64_t k_page, v_page, k_tok, k_head, v_tok, v_head;  // elements
  bool pairs;                                             // 16-bit rows all start on even elements
  uint64_t k_scale_off = 0, v_scale_off = 0;              // int8 caches (kv_append_q8.comp)
  std::shared_ptr<Buffer> fp8_scales;                     // fp8 caches: the scale table
  uint64_t fp8_table_bytes = 0;                           // ... and its bytes of scales
  uint32_t scale_base = 0;
  uint32_t k_rot = 1;  // q4: the keys' Hadamard group (KvCache::key_rotation())
  std::function<void(uint32_t group, BoundBuffer* k, BoundBuffer* v, uint64_t* k_off,
                     uint64_t* v_off)>
      bind;
};

// The job list of jobs [j0, j1) of one pool buffer's list `jb` (pairs of
// source row, destination) in ring memory, rows relative to the first.
BoundBuffer upload_jobs(Recorder& rec, const std::vector<uint32_t>& jb, uint64_t j0, uint64_t j1) {
  const uint64_t first_row = jb[2 * j0];
  HostSlice s = rec.alloc_host((j1 - j0) * 8);
  auto* dst = reinterpret_cast<uint32_t*>(s.host);
  for (uint64_t j = j0; j < j1; ++j) {
    dst[2 * (j - j0)] = static_cast<uint32_t>(jb[2 * j] - first_row);
    dst[2 * (j - j0) + 1] = jb[2 * j + 1];
  }
  BoundBuffer b;
  b.raw = s.buffer, b.offset = s.offset, b.range = s.size;
  return b;
}

// The RoPE table (cos, sin of each rotary pair) of jobs [j0, j1), at the
// positions `pos` gives their source rows, in ring memory.
BoundBuffer upload_rope_table(Recorder& rec, const Rope& rope, const std::vector<int64_t>& pos,
                              const std::vector<uint32_t>& jb, uint64_t j0, uint64_t j1) {
  const uint64_t half = rope.rotary_dim() / 2;
  HostSlice t = rec.alloc_host((j1 - j0) * half * 8);
  auto* tab = reinterpret_cast<float*>(t.host);
  for (uint64_t j = j0; j < j1; ++j) rope.fill(tab + (j - j0) * half * 2, pos[jb[2 * j]]);
  BoundBuffer b;
  b.buffer = nullptr;
  b.raw = t.buffer, b.offset = t.offset, b.range = t.size;
  return b;
}

// Records kv_append.comp over jobs[group] = (row of k_new/v_new, local
// page * page_size + slot) pairs, rows increasing. With `rope`, keys are
// rotated first, the job of row r sitting at position pos[r]. Everything
// that can fail happens before the first command.
void record_append(Context& ctx, const AppendTarget& tg,
                   const std::vector<std::vector<uint32_t>>& jobs, Tensor* k, Tensor* v,
                   PackedViews& packed, const Rope* rope = nullptr,
                   const std::vector<int64_t>* pos = nullptr) {
  const bool wide = tg.dtype != VKATTN_F32;
  const bool q8 = is_8bit(tg.dtype), q4 = tg.dtype == VKATTN_Q4;
  const uint32_t uk = wide && tg.d % 2 == 0 && tg.pairs ? tg.d / 2 : tg.d;
  const uint32_t uv = wide && tg.dv % 2 == 0 && tg.pairs ? tg.dv / 2 : tg.dv;
  // 8-bit rows run two loops of ceil(dim / 8) (the absmax, the codes) where
  // others run one of ceil(units / 8): a bound that covers both. 4-bit
  // rows: q4_row_iterations, as units (8 per iteration of a lane).
  const uint32_t wide_dim = std::max(tg.d, tg.dv);
  const uint64_t q4_iters =
      std::max(q4_row_iterations(tg.d, tg.k_rot), q4_row_iterations(tg.dv, 1));
  const uint32_t budget_units = q4   ? static_cast<uint32_t>(8 * q4_iters)
                                : q8 ? 2 * wide_dim + 16
                                     : std::max(uk, uv);
  const uint64_t in_es = dtype_size(k->dtype());
  const uint64_t k_row = uint64_t(tg.hkv) * tg.d * in_es;
  const uint64_t v_row = uint64_t(tg.hkv) * tg.dv * in_es;
  const DeviceCaps& caps = ctx.device().caps();
  const uint64_t limit = storage_window_limit(caps);
  if (std::max(k_row, v_row) > limit)
    fail(VKATTN_ERROR_UNSUPPORTED, "one token's k_new/v_new row of ", std::max(k_row, v_row),
         " bytes exceeds what one storage binding may cover (", limit, " bytes)");
  const uint64_t rows_per_group = append_rows_per_group(budget_units);
  const uint64_t max_groups =
      uint64_t(caps.max_workgroup_count[0]) * std::min<uint64_t>(caps.max_workgroup_count[1], 4096);
  // Jobs per dispatch: the job list, the k_new/v_new windows, the 32-bit
  // row counter and the workgroup grid all bound it.
  const uint64_t rows_per_job = uint64_t(tg.hkv) * 2;
  const uint64_t max_jobs =
      std::max<uint64_t>(1, std::min({limit / 8, (uint64_t(1) << 31) / rows_per_job,
                                      max_groups * rows_per_group / rows_per_job}));

  const uint64_t min_groups = busy_workgroups(ctx.device().info().device_type == VKATTN_DEVICE_CPU);
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(q4 ? kAppendQ4Layout : q8 ? kAppendQ8Layout : kAppendLayout, {});
  Recorder& rec = ctx.recorder();
  std::vector<PreparedDispatch> dispatches;
  for (size_t b = 0; b < jobs.size(); ++b) {
    const std::vector<uint32_t>& jb = jobs[b];
    const uint64_t n_jobs = jb.size() / 2;
    if (!n_jobs) continue;
    BoundBuffer pool_k, pool_v;
    uint64_t k_off = 0, v_off = 0;
    tg.bind(static_cast<uint32_t>(b), &pool_k, &pool_v, &k_off, &v_off);
    for (uint64_t j0 = 0; j0 < n_jobs;) {
      // Extend the chunk while the rows it reads stay within one window.
      const uint64_t first_row = jb[2 * j0];
      uint64_t j1 = j0 + 1;
      while (j1 < n_jobs && j1 - j0 < max_jobs) {
        const uint64_t span = jb[2 * j1] - first_row + 1;
        if (span * std::max(k_row, v_row) > limit) break;
        ++j1;
      }
      const uint64_t last_row = jb[2 * (j1 - 1)];
      const uint64_t rows = (j1 - j0) * rows_per_job;
      const BoundBuffer jobs_bound = upload_jobs(rec, jb, j0, j1);
      const BoundBuffer rope_bound = rope ? upload_rope_table(rec, *rope, *pos, jb, j0, j1)
                                          : small_input(caps, nullptr, 0, ctx.dummy(), "");
      const BoundBuffer fp8_bound = small_input(caps, tg.fp8_scales, tg.fp8_table_bytes,
                                                ctx.dummy(), "the cache's fp8 scale table");
      uint64_t k_start = 0, v_start = 0;
      BoundBuffer kb = storage_window(caps, Region::whole(k->buffer()), first_row * k_row,
                                      (last_row + 1) * k_row, &k_start);
      BoundBuffer vb = storage_window(caps, Region::whole(v->buffer()), first_row * v_row,
                                      (last_row + 1) * v_row, &v_start);
      AppendPush push{static_cast<uint32_t>(rows),
                      tg.hkv,
                      tg.d,
                      tg.dv,
                      uk,
                      uv,
                      tg.page_size,
                      static_cast<uint32_t>(tg.k_page),
                      static_cast<uint32_t>(k_off),
                      static_cast<uint32_t>(v_off),
                      static_cast<uint32_t>(k->dtype()),
                      static_cast<uint32_t>(tg.dtype),
                      static_cast<uint32_t>((first_row * k_row - k_start) / in_es),
                      static_cast<uint32_t>((first_row * v_row - v_start) / in_es),
                      static_cast<uint32_t>(tg.v_page),
                      static_cast<uint32_t>(tg.k_tok),
                      static_cast<uint32_t>(tg.k_head),
                      static_cast<uint32_t>(tg.v_tok),
                      static_cast<uint32_t>(tg.v_head),
                      tg.pairs ? 1u : 0u,
                      rope ? rope->rotary_dim() : 0u,
                      rope ? rope->offset() : 0u,
                      rope && rope->interleaved() ? 1u : 0u,
                      static_cast<uint32_t>(tg.k_scale_off),
                      static_cast<uint32_t>(tg.v_scale_off),
                      tg.scale_base,
                      tg.k_rot,
                      KvCache::hadamard_final_scale(tg.k_rot)};
      // Rows are strided over the workgroups; each takes at most
      // rows_per_group of them (the loop cap), over at least
      // busy_workgroups() (a 16-token decode append took 1.5 ms on
      // lavapipe with 256).
      const uint64_t groups = std::min<uint64_t>(
          rows, std::max<uint64_t>(min_groups, (rows + rows_per_group - 1) / rows_per_group));
      dispatches.push_back(
          pipes.prepare(rec, p, {pool_k, kb, vb, jobs_bound, pool_v, rope_bound, fp8_bound}, &push,
                        sizeof(push), groups));
      j0 = j1;
    }
  }
  // Everything is acquired: record (cannot fail).
  packed.record_inputs();
  for (const PreparedDispatch& pd : dispatches) pipes.record(rec, pd);
  packed.record_outputs();
}

// Workgroups are this many lanes (kv_append.comp local_size_x).
constexpr uint32_t kLanes = 8;

void require_rows(const Tensor* t, const char* name, int64_t n, uint32_t hkv, uint32_t dim) {
  bool ok = t->ndim() == 3 && t->dim(0) == n && t->dim(1) == hkv && t->dim(2) == dim;
  require(ok, name, " must be [", n, ", ", hkv, ", ", dim, "] (the step's new tokens, Hkv, ",
          name[0] == 'k' ? "d" : "dv", "), got ndim ", t->ndim(), " [", t->dim(0), ", ", t->dim(1),
          ", ", t->dim(2), "]");
}

// k_new [n, Hkv, d] and v_new [n, Hkv, dv], f32/f16/bf16, one dtype.
void check_new_rows(Tensor* k, Tensor* v, int64_t n, uint32_t hkv, uint32_t d, uint32_t dv) {
  for (const Tensor* t : {k, v})
    require(t->dtype() == VKATTN_F32 || t->dtype() == VKATTN_F16 || t->dtype() == VKATTN_BF16,
            "k_new and v_new must be f32, f16 or bf16");
  require(k->dtype() == v->dtype(), "k_new and v_new must share a dtype");
  require_rows(k, "k_new", n, hkv, d);
  require_rows(v, "v_new", n, hkv, dv);
}

}  // namespace

// Rows (token, kv head, K or V) one workgroup may take: kv_append.comp runs
// an outer loop over its rows and, per row, an inner loop of
// ceil(units / 8) iterations per lane.
uint64_t append_rows_per_group(uint32_t max_units) {
  const uint64_t per_row = 1 + loop_cost((max_units + kLanes - 1) / kLanes);
  return (kLoopUsable - loop_cost(0)) / per_row;
}

void Step::append(uint32_t layer, Tensor* k, Tensor* v, const vkattn_rope_desc* rope_desc) {
  require(open_, "the step is no longer open");
  KvCache& c = *cache_;
  const auto& d = c.desc();
  require(layer < d.num_layers, "layer ", layer, " is not below num_layers ", d.num_layers);
  require(k && v, "k_new and v_new must not be NULL");
  Context& ctx = c.context();
  require(&k->context() == &ctx && &v->context() == &ctx,
          "k_new and v_new must belong to the cache's context");
  check_new_rows(k, v, total_new_, d.num_kv_heads, d.head_dim, d.head_dim_v);
  std::optional<Rope> rope;
  if (rope_desc) rope.emplace(rope_desc, d.head_dim);
  require(!c.fp8() || c.scales_set(layer), "layer ", layer,
          " of this fp8 cache has no scales: call vkattn_kv_cache_set_scales before its first "
          "append");
  ctx.recorder().check_alive();
  if (total_new_ == 0) {
    appended_[layer] = true;
    c.mark_appended(layer);
    return;
  }
  host_alloc_point();
  // Views kv_append.comp cannot bind in place go through packed copies.
  PackedViews packed(ctx);
  k = packed.input(k), v = packed.input(v);

  // Jobs per binding window (ops/kv_cache.h: wp pages of a page group, one
  // storage binding; the group where its buffer is one): (row of the new
  // token, page in the window * ps + slot), rows increasing.
  const uint32_t ps = d.page_size;
  const DeviceCaps& caps = ctx.device().caps();
  const uint32_t wp = c.window_pages(storage_window_limit(caps));
  std::vector<std::vector<uint32_t>> jobs(size_t(c.num_groups()) * c.windows_per_group(wp));
  std::vector<int64_t> positions(rope ? total_new_ : 0);  // of each new row (RoPE)
  for (const StepSeq& s : seqs_)
    for (int32_t i = 0; i < s.t; ++i) {
      int32_t pos = s.len + i;
      if (rope) positions[s.new_off + i] = pos;
      uint32_t page = s.pages[pos / ps];
      auto& j = jobs[c.window_of(page, wp)];
      j.push_back(static_cast<uint32_t>(s.new_off + i));
      j.push_back(c.page_in_window(page, wp) * ps + pos % ps);
    }
  // The cache's pages: [Hkv, page_size, dim] rows of K, then of V, per
  // layer slab (ops/kv_cache.h); 16-byte aligned blocks, so 16-bit rows of
  // even length start on even elements.
  const uint32_t es = c.elem_size();
  AppendTarget tg;
  tg.dtype = d.dtype;
  tg.hkv = d.num_kv_heads, tg.d = d.head_dim, tg.dv = d.head_dim_v, tg.page_size = ps;
  tg.k_page = tg.v_page = c.slab_bytes() / es;
  tg.k_tok = d.head_dim, tg.k_head = uint64_t(ps) * d.head_dim;
  tg.v_tok = d.head_dim_v, tg.v_head = uint64_t(ps) * d.head_dim_v;
  if (c.q4()) {  // rows of words of 8 codes, in bytes (elem_size 1)
    tg.k_tok = KvCache::q4_row_bytes(d.head_dim), tg.k_head = ps * tg.k_tok;
    tg.v_tok = KvCache::q4_row_bytes(d.head_dim_v), tg.v_head = ps * tg.v_tok;
  }
  tg.pairs = true;
  tg.k_scale_off = c.k_rows_bytes(), tg.v_scale_off = c.v_rows_bytes();
  tg.k_rot = c.key_rotation();
  if (c.fp8()) {
    tg.fp8_scales = c.scale_table(), tg.scale_base = c.scale_index(layer);
    tg.fp8_table_bytes = c.scale_table_bytes();
  }
  tg.bind = [&](uint32_t window, BoundBuffer* kb, BoundBuffer* vb, uint64_t* k_off,
                uint64_t* v_off) {
    const KvCache::Window w = c.window(layer, window, wp);
    const auto& buf = c.buffers()[w.buffer];
    uint64_t start = 0;
    *kb = storage_window(caps, Region::whole(buf), w.offset, w.end, &start);
    *vb = *kb;
    *k_off = (w.offset - start) / es;
    *v_off = (w.offset + c.k_block_bytes() - start) / es;
  };
  record_append(ctx, tg, jobs, k, v, packed, rope ? &*rope : nullptr, &positions);
  appended_[layer] = true;
  c.mark_appended(layer);
}

namespace {

// Caller pools of vkattn_paged_append: [num_pages, page_size, Hkv, d|dv],
// of one 16/32-bit dtype, overlapping neither each other nor k_new/v_new.
struct PoolDims {
  int64_t np = 0, hkv = 0, d = 0, dv = 0;
};
PoolDims check_pools(Context& ctx, uint32_t page_size, Tensor* k_new, Tensor* v_new,
                     Tensor* k_pages, Tensor* v_pages) {
  require(k_new && v_new && k_pages && v_pages,
          "k_new, v_new, k_pages and v_pages must not be NULL");
  for (const Tensor* t : {k_new, v_new, k_pages, v_pages})
    require(&t->context() == &ctx, "a tensor belongs to another context");
  require(page_size >= 1, "page_size must be >= 1");
  require(k_pages->ndim() == 4 && v_pages->ndim() == 4,
          "k_pages and v_pages must be [num_pages, page_size, Hkv, d|dv]");
  PoolDims p;
  p.np = k_pages->dim(0), p.hkv = k_pages->dim(2), p.d = k_pages->dim(3), p.dv = v_pages->dim(3);
  const int64_t np = p.np, hkv = p.hkv, d = p.d, dv = p.dv;
  require(k_pages->dim(1) == page_size && v_pages->dim(0) == np && v_pages->dim(1) == page_size &&
              v_pages->dim(2) == hkv,
          "k_pages and v_pages must be [num_pages, page_size, Hkv, d|dv] with page_size ",
          page_size);
  require(hkv >= 1 && d >= 1 && dv >= 1 && hkv <= 65536 && d <= VKATTN_MAX_HEAD_DIM &&
              dv <= VKATTN_MAX_HEAD_DIM,
          "pool dims Hkv ", hkv, ", d ", d, ", dv ", dv, " out of range");
  require(k_pages->dtype() == v_pages->dtype(), "k_pages and v_pages must share a dtype");
  for (const Tensor* t : {k_pages, v_pages}) {
    if (is_8bit(t->dtype()))
      fail(VKATTN_ERROR_UNSUPPORTED, "8-bit caller pools (", dtype_name(t->dtype()),
           ") are not supported yet: use a vkattn_kv_cache of that dtype");
    require(t->dtype() == VKATTN_F32 || t->dtype() == VKATTN_F16 || t->dtype() == VKATTN_BF16,
            "pools must be f32, f16 or bf16");
  }
  require(!self_overlapping(*k_pages) && !self_overlapping(*v_pages),
          "k_pages and v_pages must not have overlapping elements");
  require(!elements_overlap(k_pages, v_pages) && !elements_overlap(k_pages, k_new) &&
              !elements_overlap(k_pages, v_new) && !elements_overlap(v_pages, k_new) &&
              !elements_overlap(v_pages, v_new),
          "the pools must not overlap each other or k_new / v_new");
  return p;
}

}  // namespace

void record_paged_append(Context& ctx, uint32_t batch, const int32_t* cu_new,
                         const int32_t* seq_lens_before, const int32_t* page_indptr,
                         const int32_t* page_indices, uint32_t page_size, Tensor* k_new,
                         Tensor* v_new, Tensor* k_pages, Tensor* v_pages,
                         const vkattn_rope_desc* rope_desc) {
  const PoolDims pools = check_pools(ctx, page_size, k_new, v_new, k_pages, v_pages);
  const int64_t np = pools.np, hkv = pools.hkv, d = pools.d, dv = pools.dv;
  std::optional<Rope> rope;
  if (rope_desc) rope.emplace(rope_desc, uint32_t(d));
  require(cu_new != nullptr, "cu_seqlens_new is NULL");
  require(seq_lens_before != nullptr || batch == 0, "seq_lens_before is NULL");
  require(cu_new[0] == 0, "cu_seqlens_new[0] must be 0");
  std::vector<int32_t> lens(batch);
  for (uint32_t b = 0; b < batch; ++b) {
    require(cu_new[b + 1] >= cu_new[b], "cu_seqlens_new decreases at ", b + 1);
    require(seq_lens_before[b] >= 0, "seq_lens_before[", b, "] is negative");
    require(int64_t(seq_lens_before[b]) + (cu_new[b + 1] - cu_new[b]) <= INT32_MAX, "sequence ", b,
            " grows past 2^31 - 1 tokens");
    lens[b] = seq_lens_before[b] + (cu_new[b + 1] - cu_new[b]);
  }
  const int64_t total = cu_new[batch];
  check_new_rows(k_new, v_new, total, uint32_t(hkv), uint32_t(d), uint32_t(dv));
  auto table = check_page_table(batch, lens.data(), page_indptr, page_indices, page_size, np);
  ctx.recorder().check_alive();
  // Two new tokens on one pool slot would race: refused.
  std::unordered_set<uint64_t> slots;
  for (uint32_t b = 0; b < batch; ++b)
    for (int32_t i = cu_new[b]; i < cu_new[b + 1]; ++i) {
      const int64_t pos = seq_lens_before[b] + (i - cu_new[b]);
      const uint64_t page = table->pages[table->first[b] + pos / page_size];
      const uint64_t slot = page * page_size + uint64_t(pos % page_size);
      require(slots.insert(slot).second, "new token ", i, " (sequence ", b, ", position ", pos,
              ") maps to pool page ", page, " slot ", pos % page_size,
              ", which another new token of this call also writes");
    }
  if (total == 0) return;
  host_alloc_point();
  PackedViews packed(ctx);
  k_new = packed.input(k_new), v_new = packed.input(v_new);
  // Pools written in place when their strides fit 32 bits (else packed in
  // and out: the slower path).
  const DeviceCaps& caps = ctx.device().caps();
  auto pool = [&](Tensor* t) {
    if (rows_bindable(caps, *t, false, true)) return t;
    Tensor* p = packed.input(t);
    packed.output(t);
    return p;
  };
  Tensor* kp = pool(k_pages);
  Tensor* vp = pool(v_pages);
  bool ok = false;
  const RowLayout kl = pool_layout(*kp, &ok), vl = pool_layout(*vp, &ok);
  const uint64_t limit = storage_window_limit(caps);
  const uint64_t span =
      std::max({kl.page * kl.es, kl.page_extent * kl.es, vl.page * vl.es, vl.page_extent * vl.es});
  if (span > limit)
    fail(VKATTN_ERROR_UNSUPPORTED, "one page of the pools spans ", span,
         " bytes, more than one storage binding of this device may cover");
  const uint64_t wp =
      std::max<uint64_t>(1, std::min<uint64_t>(limit / std::max<uint64_t>(span, 1), 1u << 30));
  std::vector<std::vector<uint32_t>> jobs((np + wp - 1) / wp);
  std::vector<int64_t> positions(rope ? cu_new[batch] : 0);  // of each new row (RoPE)
  for (uint32_t b = 0; b < batch; ++b)
    for (int32_t i = cu_new[b]; i < cu_new[b + 1]; ++i) {
      const int64_t pos = seq_lens_before[b] + (i - cu_new[b]);
      if (rope) positions[i] = pos;
      const uint32_t page = table->pages[table->first[b] + pos / page_size];
      // The slot within its window of pages, in 64 bits: the shader counts
      // it in 32 (windows of pages keep it there; refused, not wrapped).
      const uint64_t slot = (page % wp) * uint64_t(page_size) + uint64_t(pos % page_size);
      if (slot > UINT32_MAX)
        fail(VKATTN_ERROR_UNSUPPORTED, "new token ", i, " lands at slot ", slot,
             " of its binding window of the pools, past the 2^32 slots a dispatch addresses");
      auto& j = jobs[page / wp];
      j.push_back(static_cast<uint32_t>(i));
      j.push_back(static_cast<uint32_t>(slot));
    }
  AppendTarget tg;
  tg.dtype = k_pages->dtype();
  tg.hkv = uint32_t(hkv), tg.d = uint32_t(d), tg.dv = uint32_t(dv), tg.page_size = page_size;
  tg.k_page = kl.page, tg.v_page = vl.page;
  tg.k_tok = kl.tok, tg.k_head = kl.head, tg.v_tok = vl.tok, tg.v_head = vl.head;
  auto even = [](const RowLayout& l) {
    return (l.offset / l.es) % 2 == 0 && l.page % 2 == 0 && l.tok % 2 == 0 && l.head % 2 == 0;
  };
  tg.pairs = even(kl) && even(vl);
  tg.bind = [&](uint32_t group, BoundBuffer* kb, BoundBuffer* vb, uint64_t* k_off,
                uint64_t* v_off) {
    const uint64_t p0 = uint64_t(group) * wp, p1 = std::min<uint64_t>(p0 + wp, uint64_t(np));
    auto one = [&](Tensor* t, const RowLayout& l, BoundBuffer* b, uint64_t* off) {
      const uint64_t lo = l.offset + p0 * l.page * l.es;
      const uint64_t hi = l.offset + ((p1 - 1) * l.page + l.page_extent) * l.es;
      uint64_t start = 0;
      *b = storage_window(caps, Region::whole(t->buffer()), lo, hi, &start);
      *off = (lo - start) / l.es;
    };
    one(kp, kl, kb, k_off);
    one(vp, vl, vb, v_off);
  };
  record_append(ctx, tg, jobs, k_new, v_new, packed, rope ? &*rope : nullptr, &positions);
}

}  // namespace vkattn

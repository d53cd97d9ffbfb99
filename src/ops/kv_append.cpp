// vkattn_step_append: validation and recording of shaders/kv_append.comp.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

const KernelLayout kAppendLayout{"kv_append",
                                 {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
                                  BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
                                 48};

struct AppendPush {
  uint32_t n_units, hkv, d, dv, uk, uv, page_size, page_elems, k_off, v_off, in_dt, cache_dt;
};
static_assert(sizeof(AppendPush) == 48, "push constants mirror kv_append.comp");

void require_rows(const Tensor* t, const char* name, int64_t n, uint32_t hkv, uint32_t dim) {
  bool ok = t->ndim() == 3 && t->dim(0) == n && t->dim(1) == hkv && t->dim(2) == dim;
  require(ok, name, " must be [", n, ", ", hkv, ", ", dim, "] (the step's new tokens, Hkv, ",
          name[0] == 'k' ? "d" : "dv", "), got ndim ", t->ndim(), " [", t->dim(0), ", ", t->dim(1),
          ", ", t->dim(2), "]");
}

}  // namespace

void Step::append(uint32_t layer, Tensor* k, Tensor* v) {
  require(open_, "the step is no longer open");
  KvCache& c = *cache_;
  const auto& d = c.desc();
  require(layer < d.num_layers, "layer ", layer, " is not below num_layers ", d.num_layers);
  require(k && v, "k_new and v_new must not be NULL");
  Context& ctx = c.context();
  require(&k->context() == &ctx && &v->context() == &ctx,
          "k_new and v_new must belong to the cache's context");
  for (const Tensor* t : {k, v})
    require(t->dtype() == VKATTN_F32 || t->dtype() == VKATTN_F16 || t->dtype() == VKATTN_BF16,
            "k_new and v_new must be f32, f16 or bf16");
  require(k->dtype() == v->dtype(), "k_new and v_new must share a dtype");
  require_rows(k, "k_new", total_new_, d.num_kv_heads, d.head_dim);
  require_rows(v, "v_new", total_new_, d.num_kv_heads, d.head_dim_v);
  const DeviceCaps& caps = ctx.device().caps();
  for (const Tensor* t : {k, v})
    if (t->nbytes() > caps.max_storage_buffer_range)
      fail(VKATTN_ERROR_UNSUPPORTED, "a tensor of ", t->nbytes(),
           " bytes exceeds the device's maxStorageBufferRange");
  appended_[layer] = true;
  if (total_new_ == 0) return;

  // Jobs per pool buffer: (row of the new token, local page * ps + slot).
  const uint32_t ps = d.page_size;
  std::vector<std::vector<uint32_t>> jobs(c.buffers().size());
  for (const StepSeq& s : seqs_)
    for (int32_t i = 0; i < s.t; ++i) {
      int32_t pos = s.len + i;
      uint32_t page = s.pages[pos / ps];
      auto& j = jobs[c.buffer_of(page)];
      j.push_back(static_cast<uint32_t>(s.new_off + i));
      j.push_back(c.local_page(page) * ps + pos % ps);
    }

  const bool wide = d.dtype != VKATTN_F32;
  const uint32_t uk = wide && d.head_dim % 2 == 0 ? d.head_dim / 2 : d.head_dim;
  const uint32_t uv = wide && d.head_dim_v % 2 == 0 ? d.head_dim_v / 2 : d.head_dim_v;
  const uint32_t es = c.elem_size();
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kAppendLayout, {});
  Recorder& rec = ctx.recorder();
  for (size_t b = 0; b < jobs.size(); ++b) {
    if (jobs[b].empty()) continue;
    const uint64_t n_jobs = jobs[b].size() / 2;
    const uint64_t rows = n_jobs * d.num_kv_heads * 2;  // one workgroup each
    require(rows < (1ull << 32), "too many rows in one append");
    HostSlice s = rec.alloc_host((jobs[b].size() * 4 + 15) / 16 * 16);
    std::memset(s.host, 0, s.size);
    std::memcpy(s.host, jobs[b].data(), jobs[b].size() * 4);
    BoundBuffer jb;
    jb.raw = s.buffer;
    jb.offset = s.offset;
    jb.range = s.size;
    BoundBuffer pool, kb, vb;
    pool.buffer = c.buffers()[b];
    kb.buffer = k->buffer();
    vb.buffer = v->buffer();
    AppendPush push{static_cast<uint32_t>(rows),
                    d.num_kv_heads,
                    d.head_dim,
                    d.head_dim_v,
                    uk,
                    uv,
                    ps,
                    static_cast<uint32_t>(c.page_bytes() / es),
                    static_cast<uint32_t>(c.k_layer_offset(layer) / es),
                    static_cast<uint32_t>(c.v_layer_offset(layer) / es),
                    static_cast<uint32_t>(k->dtype()),
                    static_cast<uint32_t>(d.dtype)};
    // Rows are strided over the workgroups; a workgroup's loops stay within
    // lavapipe's loop cap (65535 iterations per invocation).
    const uint64_t per_row = (std::max(uk, uv) + 7) / 8 + 1;
    const uint64_t rows_per_group = 60000 / per_row;
    const uint64_t groups = std::min<uint64_t>(
        rows, std::max<uint64_t>(256, (rows + rows_per_group - 1) / rows_per_group));
    pipes.dispatch(rec, p, {pool, kb, vb, jb}, &push, sizeof(push), groups);
  }
}

}  // namespace vkattn

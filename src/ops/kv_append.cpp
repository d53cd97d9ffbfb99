// vkattn_step_append: validation and recording of shaders/kv_append.comp.
#include <algorithm>
#include <cstring>

#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/host.h"
#include "core/loop_budget.h"
#include "core/tensor.h"
#include "ops/kv_cache.h"
#include "ops/packed_views.h"

namespace vkattn {

namespace {

const KernelLayout kAppendLayout{"kv_append",
                                 {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
                                  BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
                                 56};

struct AppendPush {
  uint32_t n_units, hkv, d, dv, uk, uv, page_size, page_elems, k_off, v_off, in_dt, cache_dt;
  uint32_t k_skip, v_skip;  // elements of the k_new / v_new windows before the first row
};
static_assert(sizeof(AppendPush) == 56, "push constants mirror kv_append.comp");

// Workgroups are this many lanes (kv_append.comp local_size_x).
constexpr uint32_t kLanes = 8;

void require_rows(const Tensor* t, const char* name, int64_t n, uint32_t hkv, uint32_t dim) {
  bool ok = t->ndim() == 3 && t->dim(0) == n && t->dim(1) == hkv && t->dim(2) == dim;
  require(ok, name, " must be [", n, ", ", hkv, ", ", dim, "] (the step's new tokens, Hkv, ",
          name[0] == 'k' ? "d" : "dv", "), got ndim ", t->ndim(), " [", t->dim(0), ", ", t->dim(1),
          ", ", t->dim(2), "]");
}

}  // namespace

// Rows (token, kv head, K or V) one workgroup may take: kv_append.comp runs
// an outer loop over its rows and, per row, an inner loop of
// ceil(units / 8) iterations per lane.
uint64_t append_rows_per_group(uint32_t max_units) {
  const uint64_t per_row = 1 + loop_cost((max_units + kLanes - 1) / kLanes);
  return (kLoopUsable - loop_cost(0)) / per_row;
}

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
  ctx.recorder().check_alive();
  if (total_new_ == 0) {
    appended_[layer] = true;
    return;
  }
  host_alloc_point();
  // Views kv_append.comp cannot bind in place go through packed copies.
  PackedViews packed(ctx);
  k = packed.input(k), v = packed.input(v);

  // Jobs per page group (one pool buffer of this layer): (row of the new
  // token, local page * ps + slot), rows increasing.
  const uint32_t ps = d.page_size;
  std::vector<std::vector<uint32_t>> jobs(c.num_groups());
  for (const StepSeq& s : seqs_)
    for (int32_t i = 0; i < s.t; ++i) {
      int32_t pos = s.len + i;
      uint32_t page = s.pages[pos / ps];
      auto& j = jobs[c.group_of(page)];
      j.push_back(static_cast<uint32_t>(s.new_off + i));
      j.push_back(c.local_page(page) * ps + pos % ps);
    }

  const bool wide = d.dtype != VKATTN_F32;
  const uint32_t uk = wide && d.head_dim % 2 == 0 ? d.head_dim / 2 : d.head_dim;
  const uint32_t uv = wide && d.head_dim_v % 2 == 0 ? d.head_dim_v / 2 : d.head_dim_v;
  const uint32_t es = c.elem_size();
  const uint64_t in_es = dtype_size(k->dtype());
  const uint64_t k_row = uint64_t(d.num_kv_heads) * d.head_dim * in_es;
  const uint64_t v_row = uint64_t(d.num_kv_heads) * d.head_dim_v * in_es;
  const DeviceCaps& caps = ctx.device().caps();
  const uint64_t limit = storage_window_limit(caps);
  if (std::max(k_row, v_row) > limit)
    fail(VKATTN_ERROR_UNSUPPORTED, "one token's k_new/v_new row of ", std::max(k_row, v_row),
         " bytes exceeds what one storage binding may cover (", limit, " bytes)");
  const uint64_t rows_per_group = append_rows_per_group(std::max(uk, uv));
  const uint64_t max_groups =
      uint64_t(caps.max_workgroup_count[0]) * std::min<uint64_t>(caps.max_workgroup_count[1], 4096);
  // Jobs per dispatch: the job list, the k_new/v_new windows, the 32-bit
  // row counter and the workgroup grid all bound it.
  const uint64_t rows_per_job = uint64_t(d.num_kv_heads) * 2;
  const uint64_t max_jobs =
      std::max<uint64_t>(1, std::min({limit / 8, (uint64_t(1) << 31) / rows_per_job,
                                      max_groups * rows_per_group / rows_per_job}));

  const uint64_t min_groups = busy_workgroups(ctx.device().info().device_type == VKATTN_DEVICE_CPU);
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kAppendLayout, {});
  Recorder& rec = ctx.recorder();
  std::vector<PreparedDispatch> dispatches;
  for (size_t b = 0; b < jobs.size(); ++b) {
    const std::vector<uint32_t>& jb = jobs[b];
    const uint64_t n_jobs = jb.size() / 2;
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
      HostSlice s = rec.alloc_host((j1 - j0) * 8);
      auto* dst = reinterpret_cast<uint32_t*>(s.host);
      for (uint64_t j = j0; j < j1; ++j) {
        dst[2 * (j - j0)] = static_cast<uint32_t>(jb[2 * j] - first_row);
        dst[2 * (j - j0) + 1] = jb[2 * j + 1];
      }
      BoundBuffer jobs_bound;
      jobs_bound.raw = s.buffer;
      jobs_bound.offset = s.offset;
      jobs_bound.range = s.size;
      const KvCache::Slabs at = c.slabs(layer, static_cast<uint32_t>(b));
      BoundBuffer pool;
      pool.buffer = c.buffers()[at.buffer];
      uint64_t k_start = 0, v_start = 0;
      BoundBuffer kb = storage_window(caps, Region::whole(k->buffer()), first_row * k_row,
                                      (last_row + 1) * k_row, &k_start);
      BoundBuffer vb = storage_window(caps, Region::whole(v->buffer()), first_row * v_row,
                                      (last_row + 1) * v_row, &v_start);
      AppendPush push{static_cast<uint32_t>(rows),
                      d.num_kv_heads,
                      d.head_dim,
                      d.head_dim_v,
                      uk,
                      uv,
                      ps,
                      static_cast<uint32_t>(c.slab_bytes() / es),
                      static_cast<uint32_t>(at.offset / es),
                      static_cast<uint32_t>((at.offset + c.k_block_bytes()) / es),
                      static_cast<uint32_t>(k->dtype()),
                      static_cast<uint32_t>(d.dtype),
                      static_cast<uint32_t>((first_row * k_row - k_start) / in_es),
                      static_cast<uint32_t>((first_row * v_row - v_start) / in_es)};
      // Rows are strided over the workgroups; each takes at most
      // rows_per_group of them (the loop cap), over at least
      // busy_workgroups() (a 16-token decode append took 1.5 ms on
      // lavapipe with 256).
      const uint64_t groups = std::min<uint64_t>(
          rows, std::max<uint64_t>(min_groups, (rows + rows_per_group - 1) / rows_per_group));
      dispatches.push_back(
          pipes.prepare(rec, p, {pool, kb, vb, jobs_bound}, &push, sizeof(push), groups));
      j0 = j1;
    }
  }
  // Everything is acquired: record (cannot fail), then mark the layer.
  packed.record_inputs();
  for (const PreparedDispatch& pd : dispatches) pipes.record(rec, pd);
  appended_[layer] = true;
}

}  // namespace vkattn

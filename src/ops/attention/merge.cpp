// vkattn_attention_merge: validation and recording of
// shaders/attention_merge.comp. Rows are dispatched in chunks whose windows
// of every input and output fit one binding (f16 outputs with dv = 1 have
// lse tensors twice their size, for instance).
#include <algorithm>

#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "ops/attention/attention.h"
#include "ops/attention/check.h"
#include "ops/packed_views.h"

namespace vkattn {

namespace {

const KernelLayout kMergeLayout{
    "attention_merge",
    {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
    28};

struct MergePush {
  uint32_t rows, dv, words, has_lse_out, out_skip, lse_skip, in_skip;
};
static_assert(sizeof(MergePush) == 28, "push constants mirror attention_merge.comp");

}  // namespace

void record_attention_merge(Context& ctx, Tensor* out_a, Tensor* lse_a, Tensor* out_b,
                            Tensor* lse_b, Tensor* out, Tensor* lse) {
  require(out_a && lse_a && out_b && lse_b && out,
          "out_a, lse_a, out_b, lse_b and out must not be NULL");
  for (auto [t, n] : {std::pair<Tensor*, const char*>{out_a, "out_a"},
                      {lse_a, "lse_a"},
                      {out_b, "out_b"},
                      {lse_b, "lse_b"},
                      {out, "out"},
                      {lse, "lse"}})
    require_same_context(ctx, t, n);
  require(out_a->ndim() == 3, "out_a must be [n, H, dv], got ", shape_str(*out_a));
  const int64_t n = out_a->dim(0), H = out_a->dim(1), dv = out_a->dim(2);
  require(is_float(out_a->dtype()), "out_a must be f32, f16 or bf16");
  require(out_b->dtype() == out_a->dtype() && out->dtype() == out_a->dtype(),
          "out_a, out_b and out must share a dtype");
  require_shape(*out_b, "out_b", {n, H, dv});
  require_shape(*out, "out", {n, H, dv});
  for (auto [t, nm] :
       {std::pair<Tensor*, const char*>{lse_a, "lse_a"}, {lse_b, "lse_b"}, {lse, "lse"}}) {
    if (!t) continue;
    require(t->dtype() == VKATTN_F32, nm, " must be f32");
    require_shape(*t, nm, {n, H});
  }
  for (auto [t, nm] : {std::pair<Tensor*, const char*>{out_a, "out_a"},
                       {lse_a, "lse_a"},
                       {out_b, "out_b"},
                       {lse_b, "lse_b"},
                       {out, "out"},
                       {lse, "lse"}})
    require(!t || t->contiguous(), nm, " must be contiguous (a dense view)");
  require(!elements_overlap(out, lse_a) && !elements_overlap(out, lse_b) &&
              !elements_overlap(lse, out_a) && !elements_overlap(lse, out_b),
          "outputs alias inputs of another kind");
  record_merge(ctx, out_a, lse_a, out_b, lse_b, out, lse);
}

void record_merge(Context& ctx, Tensor* out_a, Tensor* lse_a, Tensor* out_b, Tensor* lse_b,
                  Tensor* out, Tensor* lse) {
  const int64_t n = out_a->dim(0), H = out_a->dim(1), dv = out_a->dim(2);
  // f32 a and b into a 16-bit out: elements of their own windows.
  const bool in_f32 = out_a->dtype() == VKATTN_F32 && out->dtype() != VKATTN_F32;
  Recorder& rec = ctx.recorder();
  rec.check_alive();
  const uint64_t rows = static_cast<uint64_t>(n) * H;
  if (rows == 0) return;
  // Views at an offset (or caller buffers without texel usage) go through
  // packed temporaries; an output that is also an input stays one tensor.
  PackedViews packed(ctx);
  out_a = packed.input(out_a), lse_a = packed.input(lse_a);
  out_b = packed.input(out_b), lse_b = packed.input(lse_b);
  out = packed.output(out), lse = packed.output(lse);
  if (dv == 0 && !lse) return;
  host_alloc_point();

  const DeviceCaps& caps = ctx.device().caps();
  const uint32_t dt = static_cast<uint32_t>(out->dtype());
  const uint64_t es = dtype_size(out->dtype());
  const uint64_t row_bytes = uint64_t(dv) * es;
  // Rows per dispatch: every window within one binding, every invocation
  // (one per output word and per lse row) within the grid; even, so a
  // 16-bit chunk starts on a word.
  const uint64_t limit = storage_window_limit(caps);
  const uint64_t max_groups = uint64_t(caps.max_workgroup_count[0]) *
                              std::min<uint32_t>(caps.max_workgroup_count[1], 65535);
  const uint64_t in_row_bytes = in_f32 ? uint64_t(dv) * 4 : row_bytes;
  uint64_t chunk = std::min(limit / std::max<uint64_t>(in_row_bytes, 1), limit / 4);
  chunk = std::min(chunk, max_groups * 64 / std::max<uint64_t>(1, (row_bytes + 3) / 4 + 1));
  chunk = std::max<uint64_t>(2, chunk / 2 * 2);
  chunk = std::min(chunk, rows);

  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kMergeLayout, {dt, in_f32 ? 1u : 0u});
  // The lse output is read by other invocations' rows: when it aliases an
  // input lse it is written to scratch first and copied afterwards.
  const bool lse_alias = lse && (elements_overlap(lse, lse_a) || elements_overlap(lse, lse_b));
  std::shared_ptr<Buffer> scratch = lse_alias ? ctx.scratch((chunk + 64) * 4) : nullptr;
  const Region dummy = Region::whole(ctx.dummy());
  auto region = [&](const Tensor* t) {
    return t && t->buffer() ? Region::whole(t->buffer()) : dummy;
  };
  std::vector<PreparedDispatch> prepared;
  std::vector<VkBufferCopy> copies;
  if (lse_alias) rec.use(lse->buffer());
  for (uint64_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint64_t r1 = std::min(rows, r0 + chunk);
    const uint64_t e0 = r0 * dv, e1 = r1 * dv;
    const uint64_t w0 = es == 4 ? e0 : e0 / 2, w1 = es == 4 ? e1 : (e1 + 1) / 2;
    uint64_t os = 0, ls = 0, is = 0, dummy_start = 0;
    std::vector<BoundBuffer> b(6);
    for (auto [i, t] : {std::pair<int, Tensor*>{0, out_a}, {2, out_b}})
      b[i] = in_f32 ? storage_window(caps, region(t), e0 * 4, e1 * 4, &is)
                    : storage_window(caps, region(t), w0 * 4, w1 * 4, &os);
    b[4] = storage_window(caps, region(out), w0 * 4, w1 * 4, &os);
    for (auto [i, t] : {std::pair<int, Tensor*>{1, lse_a}, {3, lse_b}})
      b[i] = storage_window(caps, region(t), r0 * 4, r1 * 4, &ls);
    const uint64_t lse_skip = (r0 * 4 - ls) / 4;
    if (lse_alias) {
      b[5] =
          storage_window(caps, Region::whole(scratch), 0, (lse_skip + r1 - r0) * 4, &dummy_start);
      copies.push_back({lse_skip * 4, r0 * 4, (r1 - r0) * 4});
    } else {
      b[5] = lse ? storage_window(caps, region(lse), r0 * 4, r1 * 4, &dummy_start)
                 : storage_window(caps, dummy, 0, 0, &dummy_start);
    }
    MergePush push{static_cast<uint32_t>(r1 - r0),
                   static_cast<uint32_t>(dv),
                   static_cast<uint32_t>(w1 - w0),
                   lse ? 1u : 0u,
                   static_cast<uint32_t>((w0 * 4 - os) / 4),
                   static_cast<uint32_t>(lse_skip),
                   static_cast<uint32_t>(in_f32 ? (e0 * 4 - is) / 4 : 0)};
    const uint64_t groups = (std::max(w1 - w0, r1 - r0) + 63) / 64;
    prepared.push_back(pipes.prepare(rec, p, b, &push, sizeof(push), groups));
  }
  // Everything is acquired: record (cannot fail).
  packed.record_inputs();
  for (size_t i = 0; i < prepared.size(); ++i) {
    pipes.record(rec, prepared[i]);
    if (lse_alias) {
      VkBufferCopy region = copies[i];
      rec.copy_buffer(*scratch, *lse->buffer(), &region, 1);
    }
  }
  packed.record_outputs();
}

}  // namespace vkattn

#include "ops/attention/rotate_q.h"

#include <algorithm>
#include <cmath>

#include "core/binding_window.h"
#include "core/context.h"
#include "core/error.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

const KernelLayout kRotateLayout{
    "attention_rotate_q", {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer}, 32};

struct RotatePush {
  uint32_t rows, dim, group, dt, x_skip, out_skip;
  float norm;
  uint32_t pad;
};
static_assert(sizeof(RotatePush) == 32, "push constants mirror attention_rotate_q.comp");

}  // namespace

RotatedQueries::RotatedQueries(Context& ctx, Tensor* q, uint32_t group) : ctx_(ctx) {
  require(q->plain() && q->ndim() == 3, "internal: rotated queries need a plain [n, H, d] q");
  const uint32_t dim = static_cast<uint32_t>(q->dim(2));
  require(group >= 2 && (group & (group - 1)) == 0 && dim % group == 0,
          "internal: the Hadamard group ", group, " does not divide the head dim ", dim);
  out_ = std::make_shared<Tensor>(q->context_ptr(), q->dtype(), 3, q->shape());
  Recorder& rec = ctx.recorder();
  rec.use(q->buffer());
  rec.use(out_->buffer());
  const DeviceCaps& caps = ctx.device().caps();
  const uint64_t es = dtype_size(q->dtype()), row_bytes = uint64_t(dim) * es;
  const uint64_t rows = uint64_t(q->dim(0)) * uint64_t(q->dim(1));
  // Rows per dispatch: both windows within one binding, the grid's ids
  // within 32 bits.
  const uint64_t limit = storage_window_limit(caps);
  const uint64_t chunk = std::max<uint64_t>(1, std::min<uint64_t>(limit / row_bytes, 1u << 30));
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kRotateLayout, {});
  for (uint64_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint64_t r1 = std::min(rows, r0 + chunk);
    const uint64_t lo = r0 * row_bytes, hi = r1 * row_bytes;
    uint64_t xs = 0, os = 0;
    const BoundBuffer xb = storage_window(caps, Region::whole(q->buffer()), lo, hi, &xs);
    const BoundBuffer ob = storage_window(caps, Region::whole(out_->buffer()), lo, hi, &os);
    const RotatePush push{
        static_cast<uint32_t>(r1 - r0), dim, group, static_cast<uint32_t>(q->dtype()),
        static_cast<uint32_t>((lo - xs) / es), static_cast<uint32_t>((lo - os) / es),
        // (VKATTN_FAULT_ROTATION: times sqrt(group), the unnormalized
        // transform: a wrong q)
        KvCache::hadamard_final_scale(group) *
            (ctx.options().fault_rotation ? static_cast<float>(std::sqrt(double(group))) : 1.0f),
        0};
    prepared_.push_back(pipes.prepare(rec, p, {xb, ob}, &push, sizeof(push), r1 - r0));
  }
}

void RotatedQueries::record() {
  for (const PreparedDispatch& pd : prepared_) ctx_.pipelines().record(ctx_.recorder(), pd);
}

}  // namespace vkattn

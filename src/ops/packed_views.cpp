#include "ops/packed_views.h"

#include <cstdio>

namespace vkattn {

Tensor* PackedViews::pack(Tensor* t, bool is_output) {
  if (!t || t->numel() == 0 || t->plain()) return t;
  for (Packed& p : packed_) {
    if (p.view != t) continue;
    (is_output ? p.copy_out : p.copy_in) = true;
    return p.temp.get();
  }
  if (ctx_.options().log_kernels)
    logf(VKATTN_LOG_DEBUG, "packed copy of a %s view (%u-D, %lld elements)",
         is_output ? "written" : "read", t->ndim(), static_cast<long long>(t->numel()));
  Packed p{t, std::make_shared<Tensor>(t->context_ptr(), t->dtype(), t->ndim(), t->shape()),
           t->copy_regions(0, true), !is_output, is_output};
  Recorder& rec = ctx_.recorder();
  rec.use(t->buffer());
  rec.use(p.temp->buffer());
  packed_.push_back(std::move(p));
  return packed_.back().temp.get();
}

void PackedViews::record_inputs() {
  Recorder& rec = ctx_.recorder();
  for (const Packed& p : packed_)
    if (p.copy_in) rec.copy_buffer(*p.view->buffer(), *p.temp->buffer(), p.regions);
}

void PackedViews::record_outputs() {
  Recorder& rec = ctx_.recorder();
  for (Packed& p : packed_) {
    if (!p.copy_out) continue;
    for (VkBufferCopy& r : p.regions) std::swap(r.srcOffset, r.dstOffset);
    rec.copy_buffer(*p.temp->buffer(), *p.view->buffer(), p.regions);
  }
}

}  // namespace vkattn

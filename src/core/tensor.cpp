#include "core/tensor.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace vkattn {

size_t dtype_size(vkattn_dtype dtype) {
  switch (dtype) {
    case VKATTN_F32:
    case VKATTN_I32:
      return 4;
    case VKATTN_F16:
    case VKATTN_BF16:
      return 2;
    case VKATTN_U8:
      return 1;
  }
  return 0;
}

const char* dtype_name(vkattn_dtype dtype) {
  switch (dtype) {
    case VKATTN_F32:
      return "f32";
    case VKATTN_F16:
      return "f16";
    case VKATTN_BF16:
      return "bf16";
    case VKATTN_U8:
      return "u8";
    case VKATTN_I32:
      return "i32";
  }
  return "unknown";
}

Tensor::Tensor(std::shared_ptr<Context> ctx, vkattn_dtype dtype, uint32_t ndim,
               const int64_t* shape)
    : ctx_(std::move(ctx)), dtype_(dtype), ndim_(ndim) {
  size_t es = dtype_size(dtype);
  require(es != 0, "unknown dtype ", static_cast<int>(dtype));
  require(ndim >= 1 && ndim <= 4, "ndim must be 1..4, got ", ndim);
  require(shape != nullptr, "shape is NULL");
  const int64_t limit = std::numeric_limits<int64_t>::max() / 8;
  numel_ = 1;
  for (uint32_t i = 0; i < ndim; ++i) {
    require(shape[i] >= 0, "shape[", i, "] = ", shape[i], " is negative");
    shape_[i] = shape[i];
    if (shape[i] != 0 && numel_ > limit / shape[i])
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "tensor too large");
    numel_ *= shape[i];
  }
  nbytes_ = static_cast<size_t>(numel_) * es;
  if (nbytes_) {
    // Round up so 32-bit texel and storage views of 16-bit data stay in range.
    buffer_ = std::make_shared<Buffer>(ctx_->device(), (nbytes_ + 15) / 16 * 16, false);
  }
}

void Tensor::write(const void* src) {
  if (!nbytes_) return;
  Recorder& rec = ctx_->recorder();
  if (buffer_->mapped() && !rec.busy(buffer_->last_use)) {
    std::memcpy(buffer_->mapped(), src, nbytes_);
    return;
  }
  // Recorded work may still read or write this tensor: record the copy too.
  HostSlice s = rec.alloc_host(nbytes_);
  rec.use(buffer_);
  std::memcpy(s.host, src, nbytes_);
  const VkBufferCopy region{s.offset, 0, nbytes_};
  rec.copy_buffer(*s.buffer, *buffer_, &region, 1);
}

void Tensor::read(void* dst) {
  if (!nbytes_) return;
  Recorder& rec = ctx_->recorder();
  rec.wait_for(buffer_->last_use);
  if (buffer_->mapped()) {
    std::memcpy(dst, buffer_->mapped(), nbytes_);
    return;
  }
  // Device-local memory: copy through a staging buffer owned by this call.
  auto staging = std::make_shared<Buffer>(ctx_->device(), nbytes_, true);
  rec.use(buffer_);
  rec.use(staging);
  const VkBufferCopy region{0, 0, nbytes_};
  rec.copy_buffer(*buffer_, *staging, &region, 1);
  rec.wait_for(rec.open_serial());
  std::memcpy(dst, staging->mapped(), nbytes_);
}

}  // namespace vkattn

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
    case VKATTN_I8:
    case VKATTN_FP8_E4M3:
      return 1;
    case VKATTN_Q4:  // half a byte and a share of a block scale: cache-only
      return 0;
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
    case VKATTN_I8:
      return "i8";
    case VKATTN_FP8_E4M3:
      return "fp8_e4m3";
    case VKATTN_Q4:
      return "q4";
  }
  return "unknown";
}

void dense_strides(uint32_t ndim, const int64_t* shape, int64_t* strides) {
  int64_t s = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    require(shape[i] >= 0, "shape[", i, "] = ", shape[i], " is negative");
    strides[i] = s;
    if (shape[i] > 1 && s > std::numeric_limits<int64_t>::max() / 8 / shape[i])
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "tensor too large");
    s *= shape[i] ? shape[i] : 1;
  }
}

void Tensor::init_shape(uint32_t ndim, const int64_t* shape) {
  size_t es = dtype_size(dtype_);
  require(dtype_ != VKATTN_Q4, "q4 is a KV cache dtype only (vkattn_kv_cache_desc::dtype)");
  require(es != 0, "unknown dtype ", static_cast<int>(dtype_));
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
}

Tensor::Tensor(std::shared_ptr<Context> ctx, vkattn_dtype dtype, uint32_t ndim,
               const int64_t* shape)
    : ctx_(std::move(ctx)), dtype_(dtype), ndim_(ndim) {
  init_shape(ndim, shape);
  dense_strides(ndim, shape_, strides_);
  extent_bytes_ = nbytes_;
  if (nbytes_) {
    // Round up so 32-bit texel and storage views of 16-bit data stay in
    // range (and no view need be a power of two: texel_buffer_bytes).
    buffer_ = std::make_shared<Buffer>(ctx_->device(), texel_buffer_bytes(nbytes_), false);
    ctx_->device().register_buffer(buffer_);
  }
}

Tensor::Tensor(std::shared_ptr<Context> ctx, std::shared_ptr<Buffer> buffer, uint64_t byte_offset,
               vkattn_dtype dtype, uint32_t ndim, const int64_t* shape, const int64_t* strides)
    : ctx_(std::move(ctx)), dtype_(dtype), ndim_(ndim), byte_offset_(byte_offset) {
  init_shape(ndim, shape);
  int64_t dense = 1;
  uint64_t last = 0;  // element offset of the last element
  for (uint32_t i = ndim; i-- > 0;) {
    strides_[i] = strides[i];
    if (shape_[i] > 1 && strides[i] != dense) contiguous_ = false;
    dense *= shape_[i];
    if (numel_) last += uint64_t(shape_[i] - 1) * uint64_t(strides[i]);
  }
  extent_bytes_ = numel_ ? (last + 1) * dtype_size(dtype) : 0;
  if (numel_) buffer_ = std::move(buffer);
}

StridedSpan Tensor::span() const {
  StridedSpan s;
  s.offset = byte_offset_;
  s.es = dtype_size(dtype_);
  s.ndim = ndim_;
  for (uint32_t i = 0; i < ndim_; ++i) s.shape[i] = shape_[i], s.strides[i] = strides_[i];
  return s;
}

std::vector<VkBufferCopy> Tensor::copy_regions(uint64_t packed_offset, bool to_packed) const {
  std::vector<VkBufferCopy> regions;
  if (!numel_) return regions;
  const uint64_t es = dtype_size(dtype_);
  // The innermost dims that are dense form one run.
  uint32_t inner = ndim_;
  int64_t run = 1;
  while (inner > 0 && (shape_[inner - 1] <= 1 || strides_[inner - 1] == run)) {
    run *= shape_[inner - 1];
    --inner;
  }
  const uint64_t runs = uint64_t(numel_ / run);
  regions.reserve(runs);
  int64_t idx[4] = {0, 0, 0, 0};
  for (uint64_t r = 0; r < runs; ++r) {
    uint64_t off = 0;
    for (uint32_t i = 0; i < inner; ++i) off += uint64_t(idx[i]) * uint64_t(strides_[i]);
    const uint64_t view = byte_offset_ + off * es, packed = packed_offset + r * run * es;
    regions.push_back(to_packed ? VkBufferCopy{view, packed, run * es}
                                : VkBufferCopy{packed, view, run * es});
    for (uint32_t i = inner; i-- > 0;) {
      if (++idx[i] < shape_[i]) break;
      idx[i] = 0;
    }
  }
  return regions;
}

void Tensor::write(const void* src) {
  if (!nbytes_) return;
  Recorder& rec = ctx_->recorder();
  if (buffer_->mapped() && !rec.busy(buffer_->last_use)) {
    if (contiguous_) {
      std::memcpy(buffer_->mapped() + byte_offset_, src, nbytes_);
    } else {
      for (const VkBufferCopy& r : copy_regions(0, false))
        std::memcpy(buffer_->mapped() + r.dstOffset, static_cast<const uint8_t*>(src) + r.srcOffset,
                    r.size);
    }
    return;
  }
  // Recorded work may still read or write this tensor: record the copy too.
  std::vector<VkBufferCopy> regions = copy_regions(0, false);
  HostSlice s = rec.alloc_host(nbytes_);
  rec.use(buffer_);
  std::memcpy(s.host, src, nbytes_);
  for (VkBufferCopy& r : regions) r.srcOffset += s.offset;
  rec.copy_buffer(*s.buffer, *buffer_, regions);
}

void Tensor::read(void* dst) {
  if (!nbytes_) return;
  Recorder& rec = ctx_->recorder();
  rec.wait_for(buffer_->last_use);
  if (buffer_->mapped()) {
    if (contiguous_) {
      std::memcpy(dst, buffer_->mapped() + byte_offset_, nbytes_);
    } else {
      for (const VkBufferCopy& r : copy_regions(0, true))
        std::memcpy(static_cast<uint8_t*>(dst) + r.dstOffset, buffer_->mapped() + r.srcOffset,
                    r.size);
    }
    return;
  }
  // Device-local memory: copy through a staging buffer owned by this call.
  std::vector<VkBufferCopy> regions = copy_regions(0, true);
  auto staging = std::make_shared<Buffer>(ctx_->device(), nbytes_, true);
  rec.use(buffer_);
  rec.use(staging);
  rec.copy_buffer(*buffer_, *staging, regions);
  rec.wait_for(rec.open_serial());
  std::memcpy(dst, staging->mapped(), nbytes_);
}

}  // namespace vkattn

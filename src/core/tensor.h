// The C++ side of vkattn_tensor: shape, strides, dtype and a device buffer
// (none when the tensor has zero elements) with the byte of its first
// element: a tensor made by vkattn_tensor_create owns a dense buffer; a
// wrapped caller buffer or a view shares one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/context.h"
#include "core/overlap.h"
#include "vkattn/vkattn.h"

namespace vkattn {

size_t dtype_size(vkattn_dtype dtype);  // 0 for unknown
// A value of vkattn_dtype (raw: as the caller passed it).
inline bool known_dtype(int64_t raw) {
  return raw >= VKATTN_F32 && raw <= VKATTN_Q4;
}
// The 8-bit KV cache dtypes (codes that a scale dequantizes).
inline bool is_8bit(vkattn_dtype dtype) {
  return dtype == VKATTN_I8 || dtype == VKATTN_FP8_E4M3;
}
// The cache-only dtypes whose codes scales dequantize: 8-bit and 4-bit.
inline bool is_quantized(vkattn_dtype dtype) {
  return is_8bit(dtype) || dtype == VKATTN_Q4;
}

// Row-major strides (elements) of `shape`, a zero dim counting as 1.
// Throws INVALID_ARGUMENT on a negative dim or a stride past 2^63 / 8.
void dense_strides(uint32_t ndim, const int64_t* shape, int64_t* strides);
const char* dtype_name(vkattn_dtype dtype);

class Tensor {
 public:
  // A new row-major tensor with a buffer of its own.
  Tensor(std::shared_ptr<Context> ctx, vkattn_dtype dtype, uint32_t ndim, const int64_t* shape);
  // A tensor over part of `buffer`: its first element at byte `byte_offset`,
  // strides in elements (vkattn_tensor_wrap_vk_buffer, vkattn_tensor_view).
  // The caller has checked that every element lies inside the buffer.
  Tensor(std::shared_ptr<Context> ctx, std::shared_ptr<Buffer> buffer, uint64_t byte_offset,
         vkattn_dtype dtype, uint32_t ndim, const int64_t* shape, const int64_t* strides);

  Context& context() const { return *ctx_; }
  const std::shared_ptr<Context>& context_ptr() const { return ctx_; }
  vkattn_dtype dtype() const { return dtype_; }
  uint32_t ndim() const { return ndim_; }
  int64_t dim(uint32_t i) const { return i < ndim_ ? shape_[i] : -1; }
  int64_t stride(uint32_t i) const { return i < ndim_ ? strides_[i] : 0; }
  const int64_t* shape() const { return shape_; }
  const int64_t* strides() const { return strides_; }
  int64_t numel() const { return numel_; }
  // Bytes of the elements packed (what read and write take).
  size_t nbytes() const { return nbytes_; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  // Byte of the first element in buffer(), and bytes from there to the end
  // of the last element (0 without elements).
  uint64_t byte_offset() const { return byte_offset_; }
  uint64_t extent_bytes() const { return extent_bytes_; }
  // Its elements as a span of its buffer (core/overlap.h).
  StridedSpan span() const;
  // Row-major and dense (a view may still start at an offset).
  bool contiguous() const { return contiguous_; }
  // The 32-bit words that hold its elements lie inside its buffer. Kernels
  // read and write 16-bit and 8-bit data as words; a caller's buffer range
  // whose last element ends mid-word (an odd count of f16 at its end) has
  // no bytes vkattn may touch after it, so such a tensor is never bound in
  // place: it goes through a packed copy, which copies its bytes exactly.
  bool words_in_buffer() const {
    return !buffer_ || (byte_offset_ + extent_bytes_ + 3) / 4 * 4 <= buffer_->size();
  }
  // Kernels may bind it as their own tensors: dense, from byte 0 of a
  // buffer that allows texel views, its words inside the buffer.
  bool plain() const {
    return contiguous_ && byte_offset_ == 0 && buffer_ && buffer_->texel_usage() &&
           words_in_buffer();
  }

  // Stream-ordered whole-tensor copies (see vkattn.h); views copy their
  // elements packed, row-major.
  void write(const void* src);
  void read(void* dst);

  // The copy regions between this tensor's elements (in buffer()) and the
  // same elements packed from byte `packed_offset` of another buffer.
  // to_packed: src is this tensor.
  std::vector<VkBufferCopy> copy_regions(uint64_t packed_offset, bool to_packed) const;

 private:
  void init_shape(uint32_t ndim, const int64_t* shape);
  std::shared_ptr<Context> ctx_;  // declared first: outlives buffer_
  vkattn_dtype dtype_;
  uint32_t ndim_;
  int64_t shape_[4] = {0, 0, 0, 0};
  int64_t strides_[4] = {0, 0, 0, 0};
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  uint64_t byte_offset_ = 0;
  uint64_t extent_bytes_ = 0;
  bool contiguous_ = true;
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace vkattn

// The C handle of a tensor (api/handles.h has the others): here, beside
// the object it holds, so the ops that read a descriptor's optional
// tensors need nothing from the API layer.
struct vkattn_tensor {
  std::shared_ptr<vkattn::Tensor> impl;
};

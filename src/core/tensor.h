// The C++ side of vkattn_tensor: shape, dtype and a device buffer (none when
// the tensor has zero elements).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/context.h"
#include "vkattn/vkattn.h"

namespace vkattn {

size_t dtype_size(vkattn_dtype dtype);  // 0 for unknown
const char* dtype_name(vkattn_dtype dtype);

class Tensor {
 public:
  Tensor(std::shared_ptr<Context> ctx, vkattn_dtype dtype, uint32_t ndim, const int64_t* shape);

  Context& context() const { return *ctx_; }
  vkattn_dtype dtype() const { return dtype_; }
  uint32_t ndim() const { return ndim_; }
  int64_t dim(uint32_t i) const { return i < ndim_ ? shape_[i] : -1; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // Stream-ordered whole-tensor copies (see vkattn.h).
  void write(const void* src);
  void read(void* dst);

 private:
  std::shared_ptr<Context> ctx_;  // declared first: outlives buffer_
  vkattn_dtype dtype_;
  uint32_t ndim_;
  int64_t shape_[4] = {0, 0, 0, 0};
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace vkattn

// Opaque handles of the C ABI.
struct vkattn_context {
  std::shared_ptr<vkattn::Context> impl;
};
struct vkattn_tensor {
  std::shared_ptr<vkattn::Tensor> impl;
};

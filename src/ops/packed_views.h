// The slower path for tensors a kernel cannot bind in place: strided views,
// views or wrapped buffers that start at an offset, and caller buffers
// made without texel usage are packed into contiguous temporaries before
// the op (inputs) and copied back after it (outputs). Temporaries are made
// when the op asks (so a failure records nothing); the copies are recorded
// by record_inputs() / record_outputs() around the op's own commands.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace vkattn {

class PackedViews {
 public:
  explicit PackedViews(Context& ctx) : ctx_(ctx) {}
  // `t` itself when kernels can bind it (Tensor::plain()), else a packed
  // temporary filled from `t` by record_inputs(). NULL stays NULL.
  Tensor* input(Tensor* t) { return pack(t, false); }
  // Same, for a tensor the op writes (every element): the temporary is
  // copied into `t` by record_outputs(). A tensor asked for as both gets
  // one temporary, copied in and back.
  Tensor* output(Tensor* t) { return pack(t, true); }
  void record_inputs();
  void record_outputs();

 private:
  struct Packed {
    Tensor* view;
    std::shared_ptr<Tensor> temp;
    std::vector<VkBufferCopy> regions;  // view -> temp
    bool copy_in, copy_out;
  };
  Tensor* pack(Tensor* t, bool is_output);
  Context& ctx_;
  std::vector<Packed> packed_;
};

}  // namespace vkattn

// The queries of vkattn_step_attention over a cache with
// VKATTN_KV_ROTATE_KEYS: rotated by the transform the append gave the keys
// (the normalized Walsh-Hadamard transform of each group of `group`
// elements) into a temporary, which the attention then reads as q
// (shaders/attention_rotate_q.comp).
#pragma once

#include <memory>
#include <vector>

#include "core/pipeline.h"
#include "core/tensor.h"

namespace vkattn {

class RotatedQueries {
 public:
  // q: [n, H, d], plain (contiguous from its buffer's start: a packed
  // copy where the caller's is not); group: a power of two dividing d.
  // Acquires everything (may fail); records nothing.
  RotatedQueries(Context& ctx, Tensor* q, uint32_t group);
  Tensor* tensor() const { return out_.get(); }
  // Records the rotation (after q's packed copy, before the attention).
  void record();

 private:
  Context& ctx_;
  std::shared_ptr<Tensor> out_;
  std::vector<PreparedDispatch> prepared_;
};

}  // namespace vkattn

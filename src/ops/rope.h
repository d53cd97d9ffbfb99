// RoPE: the descriptor's checks, the host cos/sin tables (double, through
// reference/rope_ref.h's Hugging Face frequencies), and vkattn_rope's
// recording of shaders/rope.comp. The append kernel rotates keys with the
// same tables (ops/kv_append.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "reference/rope_ref.h"
#include "vkattn/vkattn.h"

namespace vkattn {

// A checked rotation for rows of `head_dim` elements.
class Rope {
 public:
  Rope(const vkattn_rope_desc* desc, uint32_t head_dim);
  uint32_t rotary_dim() const { return rd_; }
  uint32_t offset() const { return off_; }
  bool interleaved() const { return gptj_; }
  // rd / 2 (cos, sin) pairs of position `pos`, attention factor applied.
  void fill(float* dst, int64_t pos) const;

 private:
  uint32_t rd_ = 0, off_ = 0;
  bool gptj_ = false;
  std::vector<double> inv_freq_;
  double factor_ = 1;
};

void record_rope(Context& ctx, const vkattn_rope_desc* desc, uint32_t batch,
                 const int32_t* cu_seqlens, const int32_t* start_positions, Tensor* x, Tensor* out);

}  // namespace vkattn

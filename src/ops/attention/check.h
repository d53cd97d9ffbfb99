// Argument checks shared by the attention ops (ops/attention/validate.cpp,
// ops/attention/merge.cpp).
#pragma once

#include <initializer_list>
#include <string>

#include "core/tensor.h"

namespace vkattn {

bool is_float(vkattn_dtype dt);
std::string shape_str(const Tensor& t);
// Requires `t` to have exactly `want` as its shape.
void require_shape(const Tensor& t, const char* name, std::initializer_list<int64_t> want);
void require_same_context(Context& ctx, const Tensor* t, const char* name);
// `cu` (batch + 1 host ints) is a prefix sum from 0 to `total`, the first
// dim of `tensor`.
void check_prefix_sums(const char* name, uint32_t batch, const int32_t* cu, int64_t total,
                       const char* tensor = "the tensor");
// Some element of `a` shares a byte with an element of `b` in one VkBuffer
// (exact for strided views, core/overlap.h: interleaved views whose
// elements are disjoint do not overlap).
bool elements_overlap(const Tensor* a, const Tensor* b);
// Some element of `t` shares memory with another (written tensors must not).
bool self_overlapping(const Tensor& t);

}  // namespace vkattn

// Whether strided tensors share memory, element by element (not by the
// byte span from first to last element): vLLM's combined K/V pool gives k
// and v as views whose spans interleave page by page, and a fused QKV
// buffer holds q and out in disjoint columns of the same rows; neither
// shares an element. The test is exact: it searches for indices i of `a`
// and j of `b` with offset_a + sum i_k sa_k = offset_b + sum j_k sb_k (in
// bytes, each element covering its es bytes), a bounded linear Diophantine
// problem, dims with equal strides merged and every branch pruned by the
// range the remaining dims can still reach. Layouts that tile memory in
// the usual ways take a few dozen steps; a search that passes its step
// budget answers "overlap" (conservative: the call is refused, never run
// on racing memory).
#pragma once

#include <cstdint>

namespace vkattn {

// The elements of a tensor: its first byte, bytes per element, and per dim
// its size and stride in elements (>= 0).
struct StridedSpan {
  uint64_t offset = 0;
  uint64_t es = 1;
  uint32_t ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
};

// Steps a search may take before it answers conservatively.
constexpr uint64_t kOverlapSearchBudget = 1u << 16;

// Some byte of an element of `a` is a byte of an element of `b` (both in
// one buffer). Empty spans overlap nothing.
bool spans_overlap(const StridedSpan& a, const StridedSpan& b,
                   uint64_t budget = kOverlapSearchBudget);

// Two different indices of `a` address the same element (a zero stride, or
// strides that interleave into each other): such a tensor cannot be written.
bool span_self_overlaps(const StridedSpan& a, uint64_t budget = kOverlapSearchBudget);

}  // namespace vkattn

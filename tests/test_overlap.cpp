// The element overlap test of strided views (src/core/overlap.h) against
// brute force over random small layouts (zero, equal and interleaving
// strides, odd offsets, different element sizes), and on the layouts
// engines pass at full size, where it must answer exactly and quickly.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/overlap.h"

using vkattn::span_self_overlaps;
using vkattn::spans_overlap;
using vkattn::StridedSpan;

namespace {

// Every byte of every element.
std::set<uint64_t> bytes_of(const StridedSpan& s) {
  std::set<uint64_t> out;
  int64_t idx[4] = {0, 0, 0, 0};
  for (uint32_t k = 0; k < s.ndim; ++k)
    if (s.shape[k] == 0) return out;
  while (true) {
    uint64_t e = 0;
    for (uint32_t k = 0; k < s.ndim; ++k) e += uint64_t(idx[k] * s.strides[k]);
    for (uint64_t b = 0; b < s.es; ++b) out.insert(s.offset + e * s.es + b);
    uint32_t k = s.ndim;
    while (k-- > 0) {
      if (++idx[k] < s.shape[k]) break;
      idx[k] = 0;
    }
    if (k == UINT32_MAX) return out;
  }
}

bool brute_self(const StridedSpan& s) {
  std::set<uint64_t> seen;
  int64_t n = 1;
  for (uint32_t k = 0; k < s.ndim; ++k) n *= s.shape[k];
  StridedSpan one = s;
  one.es = 1;
  return int64_t(bytes_of(one).size()) != n;
}

StridedSpan random_span(std::mt19937& rng, uint64_t es) {
  StridedSpan s;
  s.es = es;
  s.ndim = 1 + rng() % 3;
  s.offset = (rng() % 24) * (rng() % 2 ? 1 : es);  // some offsets mid-element
  for (uint32_t k = 0; k < s.ndim; ++k) {
    s.shape[k] = rng() % 4 + (rng() % 5 == 0 ? 0 : 1);
    s.strides[k] = k + 1 == s.ndim ? 1 : rng() % 13;
  }
  return s;
}

TEST(Overlap, MatchesBruteForceOnRandomLayouts) {
  std::mt19937 rng(12345);
  int overlapping = 0, disjoint = 0, self = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const uint64_t ea = rng() % 2 ? 2 : 4, eb = rng() % 3 ? ea : (ea == 2 ? 4 : 2);
    StridedSpan a = random_span(rng, ea), b = random_span(rng, eb);
    const std::set<uint64_t> ba = bytes_of(a), bb = bytes_of(b);
    bool want = false;
    for (uint64_t x : ba) want = want || bb.count(x) > 0;
    ASSERT_EQ(spans_overlap(a, b), want) << "iteration " << iter;
    ASSERT_EQ(spans_overlap(b, a), want) << "iteration " << iter;
    (want ? overlapping : disjoint)++;
    const bool ws = brute_self(a);
    ASSERT_EQ(span_self_overlaps(a), ws) << "iteration " << iter;
    self += ws;
  }
  // The grid covers both answers plentifully.
  EXPECT_GT(overlapping, 2000);
  EXPECT_GT(disjoint, 2000);
  EXPECT_GT(self, 1000);
}

// Full-size layouts: vLLM's combined K/V pool halves, a fused QKV row
// buffer's q and out columns, and HND pools, all disjoint; the same views
// shifted by one element overlap.
TEST(Overlap, EngineLayoutsAtFullSize) {
  const int64_t np = 1 << 20, ps = 16, hkv = 8, d = 128, half = ps * hkv * d;
  StridedSpan k{0, 2, 4, {np, ps, hkv, d}, {2 * half, hkv * d, d, 1}};
  StridedSpan v = k;
  v.offset = uint64_t(half) * 2;
  EXPECT_FALSE(spans_overlap(k, v));
  EXPECT_FALSE(span_self_overlaps(k));
  v.offset -= 2;  // one element into k's last row of each page
  EXPECT_TRUE(spans_overlap(k, v));
  v.offset += 1;  // half an element: shares a byte
  EXPECT_TRUE(spans_overlap(k, v));
  // q [T, H, d] and out [T, H, dv] as columns of [T, H d + H dv].
  const int64_t T = 1 << 16, H = 32, W = H * d + H * d;
  StridedSpan q{0, 2, 3, {T, H, d}, {W, d, 1}};
  StridedSpan out{uint64_t(H * d) * 2, 2, 3, {T, H, d}, {W, d, 1}};
  EXPECT_FALSE(spans_overlap(q, out));
  out.offset -= 2;
  EXPECT_TRUE(spans_overlap(q, out));
  // HND pool [np, hkv, ps, d] viewed as [np, ps, hkv, d].
  StridedSpan hnd{0, 4, 4, {np, ps, hkv, d}, {hkv * ps * d, d, ps * d, 1}};
  EXPECT_FALSE(span_self_overlaps(hnd));
  hnd.strides[1] = d / 2;  // tokens half a row apart
  EXPECT_TRUE(span_self_overlaps(hnd));
}

// A search that passes its budget answers "overlap" (the conservative
// side); with enough budget the same question is answered exactly.
TEST(Overlap, ExhaustedSearchIsConservative) {
  StridedSpan a{0, 1, 3, {40, 40, 40}, {1000, 1001, 1}};
  StridedSpan b{500, 1, 1, {1}, {1}};  // between a's runs of 40 bytes
  EXPECT_FALSE(spans_overlap(a, b));
  EXPECT_TRUE(spans_overlap(a, b, 1));
  b.offset = 1000 * 3 + 1001 * 5 + 7;  // a's element (3, 5, 7)
  EXPECT_TRUE(spans_overlap(a, b));
}

}  // namespace

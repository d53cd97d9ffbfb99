// The K4 accuracy data (issue K4), shared by the host measurement
// (test_quant_accuracy.cpp) and the device's (test_kv_cache_accuracy.cpp):
// realistic keys (Gaussian rows plus a few outlier channels 10-50x
// larger, as real LLM keys have), Gaussian queries and values, and the
// error measure (relative L2 per output row).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace vkattn_test {

struct Shape {  // head dim, kv heads, GQA group, query tokens, keys
  int d, hkv, g, t, u;
};

// Gaussian keys with outlier channels: d / 32 fixed channels (at least
// 2) that carry an offset 10-50x the others' spread, the same sign in
// every key (the massive channels of real LLM keys: they set a 4-bit
// block's scale but, nearly constant over the keys, move every score of a
// row alike), plus the same unit noise; queries and values Gaussian.
struct Data {
  std::vector<float> q, k, v;
};
inline Data realistic(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::uniform_real_distribution<float> big(10.0f, 50.0f);
  std::vector<float> offset(s.d, 0.0f);
  for (int c = 0; c < std::max(2, s.d / 32); ++c)
    offset[(c * 37 + 5) % s.d] = (c % 2 ? -1.0f : 1.0f) * big(rng);
  Data x;
  const int h = s.hkv * s.g;
  x.q.resize(size_t(s.t) * h * s.d);
  x.k.resize(size_t(s.u) * s.hkv * s.d);
  x.v.resize(size_t(s.u) * s.hkv * s.d);
  for (float& e : x.q) e = g(rng);
  for (size_t i = 0; i < x.k.size(); ++i) x.k[i] = g(rng) + offset[i % s.d];
  for (float& e : x.v) e = g(rng);
  return x;
}

// Relative L2 error of every (token, head) row of `got` against `want`.
inline void row_errors(const std::vector<float>& got, const std::vector<float>& want, int d,
                       std::vector<double>* errs) {
  for (size_t r = 0; r < want.size() / d; ++r) {
    double num = 0, den = 0;
    for (int i = 0; i < d; ++i) {
      const double e = double(got[r * d + i]) - want[r * d + i];
      num += e * e;
      den += double(want[r * d + i]) * want[r * d + i];
    }
    errs->push_back(std::sqrt(num / std::max(den, 1e-30)));
  }
}

inline double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0 : x[x.size() / 2];
}

}  // namespace vkattn_test

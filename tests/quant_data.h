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

#include "reference/attention_ref.h"

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

// The f64 reference's causal attention of shape s's one sequence, as f32.
inline std::vector<float> attend(const Shape& s, const std::vector<float>& q,
                                 const std::vector<float>& k, const std::vector<float>& v) {
  vkattn::ref::AttentionParams p;
  p.num_heads = s.hkv * s.g, p.num_kv_heads = s.hkv, p.head_dim = s.d, p.causal = true;
  const int32_t cu_q[2] = {0, s.t}, cu_k[2] = {0, s.u};
  std::vector<float> out(size_t(s.t) * p.num_heads * s.d);
  vkattn::ref::attention_varlen(p, 1, cu_q, cu_k, q.data(), k.data(), v.data(), out.data(),
                                nullptr);
  return out;
}

// The K4 accuracy grid: d 64 and 128, 2 kv heads, GQA 1 and 8, 1 and 8
// query tokens over 128, 1024 and 8192 keys (24 shapes); f(shape, data,
// reference output) for each, the data drawn from seeds seed, seed + 1, ...
template <typename F>
void for_each_shape(uint32_t seed, F&& f) {
  for (int d : {64, 128})
    for (int g : {1, 8})
      for (int t : {1, 8})
        for (int u : {128, 1024, 8192}) {
          const Shape s{d, 2, g, t, u};
          const Data x = realistic(s, seed++);
          f(s, x, attend(s, x.q, x.k, x.v));
        }
}

inline double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0 : x[x.size() / 2];
}

}  // namespace vkattn_test

// A host model of the paged KV cache for the tests: what every sequence
// must hold (bytes in the cache dtype, per layer), and a driver that runs
// steps on a real cache and on the model side by side.
#pragma once

#include <map>
#include <random>
#include <vector>

#include "reference/dtype_util.h"
#include "test_util.h"

namespace vkattn_test {

struct KvShape {
  uint32_t layers = 2, hkv = 2, d = 8, dv = 8, page_size = 16, pages = 64;
  vkattn_dtype dtype = VKATTN_F16;
};

// The descriptor of a cache of shape `s`.
inline vkattn_kv_cache_desc kv_cache_desc(const KvShape& s) {
  vkattn_kv_cache_desc d;
  vkattn_kv_cache_desc_init(&d);
  d.num_layers = s.layers;
  d.num_kv_heads = s.hkv;
  d.head_dim = s.d;
  d.head_dim_v = s.dv;
  d.page_size = s.page_size;
  d.num_pages = s.pages;
  d.dtype = s.dtype;
  return d;
}

inline size_t dtype_bytes(vkattn_dtype dt) {
  return vkattn_dtype_size(dt);
}

// How far the dequantized value of appended x may be from x: int8, half a
// code of its row's scale (row_amax / 127); fp8 with scale s, half an e4m3
// step of x / s (x / s past 448 saturates: `want` becomes +-448 s).
inline double quantized_tolerance(vkattn_dtype dt, double x, double row_amax, double scale,
                                  double* want) {
  *want = x;
  if (dt == VKATTN_I8) return 0.5 * row_amax / 127.0 * (1 + 1e-5) + 1e-7 * std::fabs(x);
  const double y = std::fabs(x) / scale;
  if (y >= 448) {
    *want = std::copysign(448.0 * scale, x);
    return 1e-6 * std::fabs(*want);
  }
  const double step = y < 0.015625 ? std::ldexp(1.0, -9) : ulp_of(1, y) * std::ldexp(1.0, 20);
  return 0.5 * step * (1 + 1e-5) * scale + 1e-7 * std::fabs(x);
}

class KvModel {
 public:
  explicit KvModel(const KvShape& s) : s_(s) {}
  struct Seq {
    std::vector<std::vector<uint8_t>> k, v;  // per layer, [len, hkv, d|dv] cache bytes
    int32_t len = 0;
  };
  std::map<int64_t, Seq> seqs;

  size_t k_row() const { return s_.hkv * s_.d * dtype_bytes(s_.dtype); }
  size_t v_row() const { return s_.hkv * s_.dv * dtype_bytes(s_.dtype); }
  Seq& get(int64_t id) {
    Seq& q = seqs[id];
    if (q.k.empty()) q.k.resize(s_.layers), q.v.resize(s_.layers);
    return q;
  }

 private:
  KvShape s_;
};

// Random finite values rounded to `dt`; their bytes in `dt` and in the cache dtype.
struct NewTokens {
  std::vector<uint8_t> in_bytes;     // what is written to the tensor
  std::vector<uint8_t> cache_bytes;  // what the cache must hold afterwards
};

inline NewTokens random_tokens(std::mt19937& rng, size_t n, vkattn_dtype in_dt,
                               vkattn_dtype cache_dt) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    // Every 7th value is tiny: f16 subnormals and their rounding.
    x[i] = round_to(in_dt, u(rng) * (i % 7 == 3 ? 1e-5f : 1.0f));
  }
  NewTokens t;
  t.in_bytes = encode_bytes(in_dt, x);
  // Same dtype: the same bits; else through f32 with round to nearest even.
  t.cache_bytes = in_dt == cache_dt ? t.in_bytes : encode_bytes(cache_dt, x);
  return t;
}

}  // namespace vkattn_test

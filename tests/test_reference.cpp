// The reference attention and the host dtype helpers, checked on small cases whose answer is
// known by construction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

using vkattn::ref::AttentionParams;
using namespace vkattn_test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = dist(gen);
  return x;
}

AttentionParams params(int h, int hkv, int d, int dv = 0) {
  AttentionParams p;
  p.num_heads = h;
  p.num_kv_heads = hkv;
  p.head_dim = d;
  p.head_dim_v = dv;
  return p;
}

struct Result {
  std::vector<float> out, lse;
};

// Runs the reference on a packed batch; out and lse are sized from the prefix sums.
Result run(const AttentionParams& p, const std::vector<int32_t>& cu_q,
           const std::vector<int32_t>& cu_k, const std::vector<float>& q,
           const std::vector<float>& k, const std::vector<float>& v) {
  const int dv = p.head_dim_v ? p.head_dim_v : p.head_dim;
  const size_t rows = static_cast<size_t>(cu_q.back()) * p.num_heads;
  Result r{std::vector<float>(rows * dv, 123.0f), std::vector<float>(rows, 123.0f)};
  vkattn::ref::attention_varlen(p, static_cast<int>(cu_q.size()) - 1, cu_q.data(), cu_k.data(),
                                q.data(), k.data(), v.data(), r.out.data(), r.lse.data());
  return r;
}

// Single sequence of t queries and u keys.
Result run1(const AttentionParams& p, int t, int u, const std::vector<float>& q,
            const std::vector<float>& k, const std::vector<float>& v) {
  return run(p, {0, t}, {0, u}, q, k, v);
}

double dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Row `row` (of width n) of x equals y[0, n).
void expect_row(const std::vector<float>& x, int row, int n, const float* y) {
  for (int c = 0; c < n; ++c)
    EXPECT_FLOAT_EQ(x[row * n + c], y[c]) << "row " << row << " col " << c;
}

void expect_hidden_row(const Result& r, int row, int dv) {
  for (int c = 0; c < dv; ++c) EXPECT_EQ(r.out[row * dv + c], 0.0f);
  EXPECT_EQ(r.lse[row], -kInf);
}

}  // namespace

TEST(Reference, OneKeyGivesItsValue) {
  const int d = 5, dv = 3;
  auto q = random_vec(d, 1), k = random_vec(d, 2), v = random_vec(dv, 3);
  Result r = run1(params(1, 1, d, dv), 1, 1, q, k, v);
  for (int c = 0; c < dv; ++c) EXPECT_EQ(r.out[c], v[c]);
  EXPECT_FLOAT_EQ(r.lse[0], static_cast<float>(dot(q.data(), k.data(), d) / std::sqrt(5.0)));
}

TEST(Reference, EqualScoresGiveMeanOfValues) {
  const int d = 4, u = 4;
  std::vector<float> q(d, 0.0f);
  auto k = random_vec(u * d, 1), v = random_vec(u * d, 2);
  Result r = run1(params(1, 1, d), 1, u, q, k, v);
  for (int c = 0; c < d; ++c) {
    EXPECT_FLOAT_EQ(r.out[c], (v[c] + v[d + c] + v[2 * d + c] + v[3 * d + c]) / 4);
  }
  EXPECT_FLOAT_EQ(r.lse[0], std::log(4.0f));
}

TEST(Reference, CausalHidesTheFuture) {
  const int d = 8, n = 3;
  auto q = random_vec(n * d, 1), k = random_vec(n * d, 2), v = random_vec(n * d, 3);
  AttentionParams p = params(1, 1, d);
  Result full = run1(p, n, n, q, k, v);
  p.causal = true;
  Result causal = run1(p, n, n, q, k, v);
  expect_row(causal.out, 0, d, v.data());
  EXPECT_FLOAT_EQ(causal.lse[0], static_cast<float>(dot(&q[0], &k[0], d) / std::sqrt(8.0)));
  expect_row(causal.out, 2, d, &full.out[2 * d]);  // the last query sees every key
  EXPECT_EQ(causal.lse[2], full.lse[2]);
}

TEST(Reference, CausalMoreQueriesThanKeysHidesRows) {
  const int d = 4, t = 3, u = 1;  // pos(i) = -2, -1, 0
  auto q = random_vec(t * d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  AttentionParams p = params(1, 1, d);
  p.causal = true;
  Result r = run1(p, t, u, q, k, v);
  expect_hidden_row(r, 0, d);
  expect_hidden_row(r, 1, d);
  expect_row(r.out, 2, d, v.data());
}

TEST(Reference, WindowZeroSeesOnlyItsOwnKey) {
  const int d = 4, n = 4;
  auto q = random_vec(n * d, 1), k = random_vec(n * d, 2), v = random_vec(n * d, 3);
  AttentionParams p = params(1, 1, d);
  p.causal = true;
  p.window_left = 0;
  Result r = run1(p, n, n, q, k, v);
  for (int i = 0; i < n; ++i) expect_row(r.out, i, d, &v[i * d]);
}

// Window right 0 without causal: a row sees its own key and those before.
// Chunks of 2 with t > u: positions -2, -1 lie in chunk -1 (floor
// division) and see nothing; positions 0 and 1 see keys 0..1, position 2
// sees key 2 alone.
TEST(Reference, RightWindowAndChunks) {
  const int d = 4, t = 5, u = 3;
  auto q = random_vec(t * d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  AttentionParams p = params(1, 1, d);
  p.window_right = 0, p.window_left = 0;
  Result w = run1(p, u, u, q, k, v);
  for (int i = 0; i < u; ++i) expect_row(w.out, i, d, &v[i * d]);
  p = params(1, 1, d);
  p.chunk_size = 2;
  Result r = run1(p, t, u, q, k, v);
  expect_hidden_row(r, 0, d);
  expect_hidden_row(r, 1, d);
  expect_row(r.out, 4, d, &v[2 * d]);
  p.causal = true;
  Result c = run1(p, t, u, q, k, v);
  expect_row(c.out, 2, d, &v[0]);  // position 0: key 0 alone
}

TEST(Reference, BoolMaskHidingAllKeysGivesEmptyRow) {
  const int d = 4, t = 2, u = 3;
  auto q = random_vec(t * d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  const std::vector<uint8_t> mask = {0, 0, 0, 0, 1, 0};  // row 1 sees key 1 only
  AttentionParams p = params(1, 1, d);
  p.mask_type = 1;
  p.bool_mask = mask.data();
  Result r = run1(p, t, u, q, k, v);
  expect_hidden_row(r, 0, d);
  expect_row(r.out, 1, d, &v[d]);
}

TEST(Reference, AdditiveMaskAddsAndMinusInfHides) {
  const int d = 4, u = 3;
  auto q = random_vec(d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  k[0] = v[0] = kNaN;  // key 0 is hidden by -inf
  const std::vector<float> mask = {-kInf, 0.5f, -kInf};
  AttentionParams p = params(1, 1, d);
  p.mask_type = 2;
  p.add_mask = mask.data();
  Result r = run1(p, 1, u, q, k, v);
  expect_row(r.out, 0, d, &v[d]);
  EXPECT_FLOAT_EQ(r.lse[0], static_cast<float>(dot(&q[0], &k[d], d) / 2.0 + 0.5));
}

TEST(Reference, NaNInCausallyHiddenKeyDoesNotLeak) {
  const int d = 4, n = 3;
  auto q = random_vec(n * d, 1), k = random_vec(n * d, 2), v = random_vec(n * d, 3);
  AttentionParams p = params(1, 1, d);
  p.causal = true;
  Result clean = run1(p, n, n, q, k, v);
  k[2 * d] = kNaN;  // key 2 is visible to query 2 only
  v[2 * d + 1] = kInf;
  v[2 * d + 2] = kNaN;
  Result dirty = run1(p, n, n, q, k, v);
  for (int c = 0; c < 2 * d; ++c) EXPECT_EQ(dirty.out[c], clean.out[c]);
  EXPECT_EQ(dirty.lse[0], clean.lse[0]);
  EXPECT_EQ(dirty.lse[1], clean.lse[1]);
}

TEST(Reference, PaddingKeysAreSkippedAcrossBatch) {
  // Two sequences; the second holds a NaN padding key at its index 1.
  const int d = 4;
  auto q = random_vec(3 * d, 1), k = random_vec(5 * d, 2), v = random_vec(5 * d, 3);
  std::vector<float> k_pad = k, v_pad = v;
  k_pad.insert(k_pad.begin() + 3 * d, d, kNaN);
  v_pad.insert(v_pad.begin() + 3 * d, d, kNaN);
  const std::vector<int32_t> valid = {1, 1, 1, 0, 1, 1};
  AttentionParams p = params(1, 1, d);
  Result want = run(p, {0, 2, 3}, {0, 2, 5}, q, k, v);
  p.key_valid = valid.data();
  Result got = run(p, {0, 2, 3}, {0, 2, 6}, q, k_pad, v_pad);
  for (size_t i = 0; i < want.out.size(); ++i) EXPECT_FLOAT_EQ(got.out[i], want.out[i]);
  for (size_t i = 0; i < want.lse.size(); ++i) EXPECT_FLOAT_EQ(got.lse[i], want.lse[i]);
}

TEST(Reference, EmptySequencesInBatch) {
  const int d = 4;  // sequences: (t=1, u=0), (t=0, u=2), (t=1, u=1)
  auto q = random_vec(2 * d, 1), k = random_vec(3 * d, 2), v = random_vec(3 * d, 3);
  Result r = run(params(1, 1, d), {0, 1, 1, 2}, {0, 0, 2, 3}, q, k, v);
  expect_hidden_row(r, 0, d);
  expect_row(r.out, 1, d, &v[2 * d]);
}

TEST(Reference, GroupedQueryHeadsShareKvHead) {
  const int h = 4, hkv = 2, d = 4, t = 2, u = 3;
  auto q = random_vec(t * h * d, 1), k = random_vec(u * hkv * d, 2), v = random_vec(u * hkv * d, 3);
  for (int i = 0; i < t; ++i) {  // heads 0 and 1 (kv head 0) get the same query
    for (int c = 0; c < d; ++c) q[(i * h + 1) * d + c] = q[(i * h + 0) * d + c];
  }
  Result r = run1(params(h, hkv, d), t, u, q, k, v);
  for (int i = 0; i < t; ++i) expect_row(r.out, i * h + 1, d, &r.out[(i * h + 0) * d]);
  // Head 3 equals single-head attention over kv head 1.
  std::vector<float> q3, k1, v1;
  for (int i = 0; i < t; ++i) q3.insert(q3.end(), &q[(i * h + 3) * d], &q[(i * h + 4) * d]);
  for (int j = 0; j < u; ++j) {
    k1.insert(k1.end(), &k[(j * hkv + 1) * d], &k[(j * hkv + 2) * d]);
    v1.insert(v1.end(), &v[(j * hkv + 1) * d], &v[(j * hkv + 2) * d]);
  }
  Result single = run1(params(1, 1, d), t, u, q3, k1, v1);
  for (int i = 0; i < t; ++i) expect_row(r.out, i * h + 3, d, &single.out[i * d]);
}

TEST(Reference, MergeOfHalvesEqualsWhole) {
  const int h = 2, d = 4, t = 2, u = 6;
  auto q = random_vec(t * h * d, 1), k = random_vec(u * h * d, 2), v = random_vec(u * h * d, 3);
  AttentionParams p = params(h, h, d);
  Result whole = run1(p, t, u, q, k, v);
  const size_t half = static_cast<size_t>(u / 2) * h * d;
  std::vector<float> ka(k.begin(), k.begin() + half), kb(k.begin() + half, k.end());
  std::vector<float> va(v.begin(), v.begin() + half), vb(v.begin() + half, v.end());
  Result a = run1(p, t, u / 2, q, ka, va), b = run1(p, t, u / 2, q, kb, vb);
  // Merge in place into a: out and lse may alias an input.
  vkattn::ref::attention_merge(t * h, d, a.out.data(), a.lse.data(), b.out.data(), b.lse.data(),
                               a.out.data(), a.lse.data());
  for (size_t i = 0; i < whole.out.size(); ++i) EXPECT_NEAR(a.out[i], whole.out[i], 1e-6);
  for (size_t i = 0; i < whole.lse.size(); ++i) EXPECT_NEAR(a.lse[i], whole.lse[i], 1e-6);
}

TEST(Reference, MergeWithEmptySideReturnsTheOther) {
  const int dv = 3;  // row 0: a empty; row 1: b empty; row 2: both empty
  const std::vector<float> out_a = {kNaN, kNaN, kNaN, 1.5f, -2.0f, 0.25f, kNaN, 7.0f, kInf};
  const std::vector<float> out_b = {0.5f, kInf, -3.0f, kNaN, kNaN, kNaN, 1.0f, kNaN, 2.0f};
  const std::vector<float> lse_a = {-kInf, 0.75f, -kInf}, lse_b = {2.5f, -kInf, -kInf};
  std::vector<float> out(9, 99.0f), lse(3, 99.0f);
  vkattn::ref::attention_merge(3, dv, out_a.data(), lse_a.data(), out_b.data(), lse_b.data(),
                               out.data(), lse.data());
  for (int c = 0; c < dv; ++c) {
    EXPECT_EQ(out[c], out_b[c]);
    EXPECT_EQ(out[dv + c], out_a[dv + c]);
    EXPECT_EQ(out[2 * dv + c], 0.0f);
  }
  EXPECT_EQ(lse[0], 2.5f);
  EXPECT_EQ(lse[1], 0.75f);
  EXPECT_EQ(lse[2], -kInf);
}

TEST(Reference, SoftcapBoundsScores) {
  const int d = 4;
  std::vector<float> q(d, 3.0f), k(d, 2.0f), v = random_vec(d, 1);  // S = 24 / 2 = 12
  AttentionParams p = params(1, 1, d);
  p.softcap = 5.0;
  Result r = run1(p, 1, 1, q, k, v);
  EXPECT_FLOAT_EQ(r.lse[0], static_cast<float>(5.0 * std::tanh(12.0 / 5.0)));
  EXPECT_LE(r.lse[0], 5.0f);
  expect_row(r.out, 0, d, v.data());
}

TEST(Reference, AlibiShiftsLseByDistance) {
  const int d = 4, u = 4;  // one query at pos 3 that sees key 0 only: distance 3
  auto q = random_vec(d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  const std::vector<uint8_t> mask = {1, 0, 0, 0};
  const float slope = 0.25f;
  AttentionParams p = params(1, 1, d);
  p.mask_type = 1;
  p.bool_mask = mask.data();
  Result plain = run1(p, 1, u, q, k, v);
  p.alibi_slopes = &slope;
  Result alibi = run1(p, 1, u, q, k, v);
  EXPECT_FLOAT_EQ(alibi.lse[0], plain.lse[0] - 0.75f);
  expect_row(alibi.out, 0, d, v.data());
}

TEST(Reference, ExplicitScale) {
  const int d = 4, u = 3;
  auto q = random_vec(d, 1), k = random_vec(u * d, 2), v = random_vec(u * d, 3);
  AttentionParams p = params(1, 1, d);
  Result implicit = run1(p, 1, u, q, k, v);
  p.scale = 0.5;  // = 1/sqrt(4)
  Result explicit_scale = run1(p, 1, u, q, k, v);
  EXPECT_EQ(implicit.out, explicit_scale.out);
  EXPECT_EQ(implicit.lse, explicit_scale.lse);
}

TEST(DtypeUtil, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // max finite
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the halfway point to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway, ties to even: inf
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // min normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 0: even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.01f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units: even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) * 1.01f), 0x3c01);
  const uint16_t nan = f32_to_f16(kNaN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(nan)));
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0xfc00), -kInf);
}

TEST(DtypeUtil, Bf16KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // 1 + 2^-8, halfway: even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // 1 + 3 * 2^-8, halfway: even
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.01f, -8)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::ldexp(1.0f, -133)), 0x0001);  // subnormal kept exactly
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(kNaN))));
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(DtypeUtil, RoundTripEveryBitPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = f16_to_f32(bits), b = bf16_to_f32(bits);
    EXPECT_TRUE(std::isnan(f) || f32_to_f16(f) == bits) << std::hex << h;
    EXPECT_TRUE(std::isnan(b) || f32_to_bf16(b) == bits) << std::hex << h;
  }
}

TEST(DtypeUtil, RoundToAndUlp) {
  EXPECT_EQ(round_to(1, 0.1f), 0.1f);
  EXPECT_EQ(round_to(2, 1.0f + std::ldexp(1.0f, -12)), 1.0f);
  EXPECT_EQ(round_to(3, 1.0f + std::ldexp(1.0f, -9)), 1.0f);
  EXPECT_EQ(ulp_of(1, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of(2, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(2, 1000.0), 0.5);
  EXPECT_EQ(ulp_of(2, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_of(2, 1e-7), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_of(3, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_of(3, -3.0), std::ldexp(1.0, -6));
}

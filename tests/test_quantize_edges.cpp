// 8-bit caches at their edges (issue E3): codes are x / scale rounded to
// nearest even exactly, ties included (every pair of neighbouring e4m3
// codes, every half-integer of int8, and the values one ulp either side),
// and a K row holding inf gives, in an int8 cache and in an f16 cache,
// what the reference gives on the rows each cache returns.
#include <cmath>
#include <limits>

#include "kv_model.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

using namespace vkattn_test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

class QuantizeEdges : public ContextTest {
 protected:
  void TearDown() override {
    if (cache) vkattn_kv_cache_destroy(cache);
    ContextTest::TearDown();
  }
  void create(const KvShape& s) {
    shape = s;
    vkattn_kv_cache_desc d = kv_cache_desc(s);
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  }
  vkattn_tensor* f32(std::vector<int64_t> shape, const std::vector<float>& x) {
    vkattn_tensor* t = tensor(VKATTN_F32, shape);
    EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return t;
  }
  // One token (one kv head) of `row` appended to every layer of sequence
  // 1, and its K codes and scales read back per layer.
  void append_row(const std::vector<float>& row, std::vector<std::vector<uint8_t>>* codes,
                  std::vector<float>* scales) {
    const int64_t id = 1;
    const int32_t one = 1;
    vkattn_step* step = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &one, &step), VKATTN_SUCCESS);
    vkattn_tensor* k = f32({1, 1, int64_t(row.size())}, row);
    for (uint32_t l = 0; l < shape.layers; ++l)
      ASSERT_EQ(vkattn_step_append(step, l, k, k), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
    codes->assign(shape.layers, std::vector<uint8_t>(row.size()));
    scales->assign(shape.layers, 0.0f);
    std::vector<uint8_t> v(row.size());
    for (uint32_t l = 0; l < shape.layers; ++l) {
      ASSERT_EQ(vkattn_kv_cache_read(cache, l, id, 0, 1, (*codes)[l].data(), row.size(), v.data(),
                                     v.size()),
                VKATTN_SUCCESS);
      float vs = 0.0f;
      ASSERT_EQ(vkattn_kv_cache_read_scales(cache, l, id, 0, 1, &(*scales)[l], &vs),
                VKATTN_SUCCESS);
    }
  }
  KvShape shape;
  vkattn_kv_cache* cache = nullptr;
};

// Every midpoint m between neighbouring finite e4m3 codes, as x = m x scale
// for scales whose products with m are exact floats (so x / scale is the
// tie itself), and the floats next to x: 12.6875 with scale 7 is 1.8125,
// between 1.75 (even) and 1.875. Positive and negative.
TEST_F(QuantizeEdges, Fp8RoundsExactTiesToEven) {
  const std::vector<float> scales = {7.0f, 3.0f, 0.75f, 1.25f};
  std::vector<float> row;
  for (int sign : {1, -1})
    for (int c = 0; c < 0x7e; ++c) {
      const float m = 0.5f * (e4m3_to_f32(uint8_t(c)) + e4m3_to_f32(uint8_t(c + 1)));
      row.push_back(sign * m);  // scaled per layer below
    }
  const size_t n = row.size();
  KvShape s;
  s.layers = uint32_t(scales.size()), s.hkv = 1, s.d = s.dv = uint32_t(n), s.pages = 4;
  s.dtype = VKATTN_FP8_E4M3;
  create(s);
  for (uint32_t l = 0; l < s.layers; ++l)
    ASSERT_EQ(vkattn_kv_cache_set_scales(cache, l, 1, &scales[l], &scales[l]), VKATTN_SUCCESS);
  for (int shift : {0, 1, -1}) {  // the tie, the float above it, the one below
    // A sequence per shift; layer l's row is scaled by its own scale.
    const int64_t id = 10 + shift;
    const int32_t one = 1;
    vkattn_step* step = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &one, &step), VKATTN_SUCCESS);
    std::vector<std::vector<float>> xs(s.layers);
    for (uint32_t l = 0; l < s.layers; ++l) {
      for (float m : row) {
        float x = m * scales[l];
        ASSERT_EQ(double(x), double(m) * scales[l]) << "not exact";
        if (shift) x = std::nextafter(x, shift * kInf);
        xs[l].push_back(x);
      }
      vkattn_tensor* k = f32({1, 1, int64_t(n)}, xs[l]);
      ASSERT_EQ(vkattn_step_append(step, l, k, k), VKATTN_SUCCESS) << vkattn_last_error();
    }
    ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
    for (uint32_t l = 0; l < s.layers; ++l) {
      std::vector<uint8_t> kc(n), vc(n);
      ASSERT_EQ(vkattn_kv_cache_read(cache, l, id, 0, 1, kc.data(), n, vc.data(), n),
                VKATTN_SUCCESS);
      int bad = 0;
      for (size_t i = 0; i < n && bad < 5; ++i) {
        const double q = double(xs[l][i]) / scales[l];
        if (kc[i] != e4m3_round(q) || vc[i] != e4m3_round(q))
          ++bad, ADD_FAILURE() << xs[l][i] << " / " << scales[l] << " = " << q << ": code 0x"
                               << std::hex << int(kc[i]) << ", want 0x" << int(e4m3_round(q))
                               << std::dec;
      }
    }
  }
}

// int8: a row whose absmax is 127 x s has scale s (s = 0.875, 0.4375:
// 1 / s is not a float, so x * (1 / s) rounds twice), and its elements
// (k + 0.5) x s are exact ties between codes k and k + 1; with the floats
// next to them. Codes are checked against the stored scale.
TEST_F(QuantizeEdges, Int8RoundsExactTiesToEven) {
  for (float sc : {0.875f, 0.4375f}) {
    SCOPED_TRACE("scale " + std::to_string(sc));
    std::vector<float> row = {127.0f * sc};
    for (int k = 0; k < 127; ++k) {
      const float t = (k + 0.5f) * sc;
      row.push_back(t);
      row.push_back(std::nextafter(t, kInf));
      row.push_back(-std::nextafter(t, 0.0f));
    }
    if (cache) vkattn_kv_cache_destroy(cache), cache = nullptr;
    KvShape s;
    s.layers = 1, s.hkv = 1, s.d = s.dv = uint32_t(row.size()), s.pages = 2;
    s.dtype = VKATTN_I8;
    create(s);
    std::vector<std::vector<uint8_t>> codes;
    std::vector<float> scales;
    append_row(row, &codes, &scales);
    EXPECT_EQ(scales[0], sc) << "127 x s / 127 in f32";
    int bad = 0;
    for (size_t i = 0; i < row.size() && bad < 5; ++i) {
      const int8_t want = i8_round(row[i], scales[0]);
      if (int8_t(codes[0][i]) != want)
        ++bad, ADD_FAILURE() << row[i] << " / " << scales[0] << ": code "
                             << int(int8_t(codes[0][i])) << ", want " << int(want);
    }
  }
}

// A K row holding +inf: in an f16 cache the key keeps it (its score is
// +inf or -inf per query head, or NaN), in an int8 cache the row is stored
// with a NaN scale (the header's rule) and reads back as NaN. Each cache's
// outputs equal the reference on the rows that cache returns: NaN exactly
// where the reference has NaN, finite and close elsewhere. Query head 0
// meets +inf (NaN rows), head 1 -inf (the key adds nothing), and the
// query that cannot see the key is finite in both.
TEST_F(QuantizeEdges, InfInAKeyRowFollowsTheReferenceInF16AndInt8) {
  const int H = 2, d = 8, n = 6, t = 3;
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16 cache" : "int8 cache");
    if (cache) vkattn_kv_cache_destroy(cache), cache = nullptr;
    KvShape s;
    s.layers = 1, s.hkv = 1, s.d = s.dv = d, s.pages = 2, s.dtype = dt;
    create(s);
    std::vector<float> k(n * d), v(n * d), q(t * H * d);
    for (int i = 0; i < n * d; ++i)
      k[i] = 0.125f * (i % 7) - 0.25f, v[i] = 0.5f - 0.0625f * (i % 9);
    k[4 * d + 0] = kInf;  // token 4's key
    for (int i = 0; i < t * H * d; ++i) q[i] = 0.25f;
    for (int r = 0; r < t; ++r) q[(r * H + 1) * d + 0] = -0.5f;  // head 1: -inf
    // Sequence 1: 3 prefill tokens, then 3 more with queries (t = 3: the
    // first query, at position 3, does not see token 4).
    const int64_t id = 1;
    for (int part = 0; part < 2; ++part) {
      const int32_t cnt = 3;
      vkattn_step* step = nullptr;
      ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &cnt, &step), VKATTN_SUCCESS);
      std::vector<float> kp(k.begin() + part * 3 * d, k.begin() + (part + 1) * 3 * d);
      std::vector<float> vp(v.begin() + part * 3 * d, v.begin() + (part + 1) * 3 * d);
      ASSERT_EQ(vkattn_step_append(step, 0, f32({3, 1, d}, kp), f32({3, 1, d}, vp)),
                VKATTN_SUCCESS);
      if (part == 1) {
        vkattn_attention_desc desc;
        vkattn_attention_desc_init(&desc);
        desc.num_heads = H, desc.num_kv_heads = 1, desc.head_dim = d, desc.causal = 1;
        vkattn_tensor* out = tensor(VKATTN_F32, {t, H, d});
        ASSERT_EQ(vkattn_step_attention(step, 0, &desc, f32({t, H, d}, q), out), VKATTN_SUCCESS)
            << vkattn_last_error();
        ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
        // The rows the cache returns, as floats.
        std::vector<uint8_t> kb(n * d * 2), vb(n * d * 2);
        const size_t row_bytes = dt == VKATTN_F16 ? 2 : 1;
        kb.resize(n * d * row_bytes), vb.resize(n * d * row_bytes);
        ASSERT_EQ(
            vkattn_kv_cache_read(cache, 0, id, 0, n, kb.data(), kb.size(), vb.data(), vb.size()),
            VKATTN_SUCCESS);
        std::vector<float> kr(n * d), vr(n * d);
        if (dt == VKATTN_F16) {
          kr = decode_bytes(2, kb), vr = decode_bytes(2, vb);
          EXPECT_EQ(kr[4 * d], kInf) << "f16 keeps inf";
        } else {
          std::vector<float> ks(n), vs(n);
          ASSERT_EQ(vkattn_kv_cache_read_scales(cache, 0, id, 0, n, ks.data(), vs.data()),
                    VKATTN_SUCCESS);
          EXPECT_TRUE(std::isnan(ks[4])) << "int8: the row's scale is NaN";
          for (int i = 0; i < n * d; ++i)
            kr[i] = dequantize(6, kb[i], ks[i / d]), vr[i] = dequantize(6, vb[i], vs[i / d]);
        }
        vkattn::ref::AttentionParams p;
        p.num_heads = H, p.num_kv_heads = 1, p.head_dim = d, p.causal = true;
        const int32_t cu_q[2] = {0, t}, cu_k[2] = {0, n};
        std::vector<float> want(t * H * d);
        vkattn::ref::attention_varlen(p, 1, cu_q, cu_k, q.data(), kr.data(), vr.data(), want.data(),
                                      nullptr);
        std::vector<float> got(t * H * d);
        ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
        int nans = 0, finite = 0;
        for (int i = 0; i < t * H * d; ++i) {
          if (std::isnan(want[i])) {
            ++nans;
            EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i] << ", want NaN";
          } else {
            ++finite;
            EXPECT_NEAR(got[i], want[i], 2e-2) << "element " << i;
          }
        }
        // Both kinds of rows occur: the rule is exercised, not vacuous.
        EXPECT_GT(nans, 0);
        EXPECT_GT(finite, 0);
      } else {
        ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
      }
    }
  }
}

}  // namespace

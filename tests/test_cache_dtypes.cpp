// One serving step over a cache of every dtype (f32, f16, bf16, int8, fp8,
// q4) with f32 and f16 queries: a prompt of 37 tokens and a decode, GQA 2,
// against the reference over the K/V the cache holds (read back
// dequantized). Small on purpose: tools/cross.sh runs it under qemu over
// both arm64 Mesas (each dtype compiles its own pipelines there: minutes),
// where Debian 12's compiler aborted on every f16 conversion (the
// _soft_f16 variants, DeviceCaps::soft_f16); here it runs as it is and
// under VKATTN_SOFT_F16=1 (ctest test_cache_dtypes.soft_f16).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cache_contents.h"
#include "core/tensor.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

struct Case {
  vkattn_dtype cache, q;
};

class CacheDtypes : public ContextTest, public testing::WithParamInterface<Case> {};

TEST_P(CacheDtypes, OneStepMatchesTheReference) {
  const Case c = GetParam();
  const uint32_t H = 4, Hkv = 2, d = 32;
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = 1, cd.num_kv_heads = Hkv, cd.head_dim = d, cd.page_size = 16, cd.num_pages = 8;
  cd.dtype = c.cache;
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  if (c.cache == VKATTN_FP8_E4M3) {  // (values in [-1, 1]: codes up to 256)
    const float ks = 1.0f / 256, vs = 1.0f / 256;
    ASSERT_EQ(vkattn_kv_cache_set_scales(cache, 0, 1, &ks, &vs), VKATTN_SUCCESS)
        << vkattn_last_error();
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto rows = [&](int64_t n, uint32_t heads, vkattn_dtype dt) {
    std::vector<float> x(size_t(n) * heads * d);
    for (float& v : x) v = round_to(dt, uni(rng));
    vkattn_tensor* t = tensor(dt, {n, int64_t(heads), int64_t(d)});
    const std::vector<uint8_t> b = encode_bytes(dt, x);
    EXPECT_EQ(vkattn_tensor_write(t, b.data(), b.size()), VKATTN_SUCCESS);
    return std::make_pair(t, x);
  };
  const int64_t ids[2] = {1, 2};
  const int32_t t[2] = {37, 1};
  // Sequence 2 holds 20 tokens before its decode.
  {
    const int64_t id = 2;
    const int32_t n = 20;
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &n, &st), VKATTN_SUCCESS) << vkattn_last_error();
    auto k = rows(n, Hkv, VKATTN_F32), v = rows(n, Hkv, VKATTN_F32);
    ASSERT_EQ(vkattn_step_append(st, 0, k.first, v.first), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  }
  vkattn_step* st = nullptr;
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &st), VKATTN_SUCCESS) << vkattn_last_error();
  auto k = rows(38, Hkv, VKATTN_F32), v = rows(38, Hkv, VKATTN_F32);
  auto q = rows(38, H, c.q);
  ASSERT_EQ(vkattn_step_append(st, 0, k.first, v.first), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_tensor* out = tensor(c.q, {38, int64_t(H), int64_t(d)});
  vkattn_tensor* lse = tensor(VKATTN_F32, {38, int64_t(H)});
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d, ad.causal = 1, ad.lse = lse;
  ASSERT_EQ(vkattn_step_attention(st, 0, &ad, q.first, out), VKATTN_SUCCESS) << vkattn_last_error();
  std::vector<uint8_t> ob(vkattn_tensor_nbytes(out));
  std::vector<float> got_lse(38 * H);
  ASSERT_EQ(vkattn_tensor_read(out, ob.data(), ob.size()), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(lse, got_lse.data(), got_lse.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  const std::vector<float> got = decode_bytes(c.q, ob);
  // The reference over what the cache holds, dequantized.
  std::vector<float> rk, rv;
  const int32_t lens[2] = {37, 21};
  for (int b = 0; b < 2; ++b)
    ASSERT_NO_FATAL_FAILURE(
        append_cache_contents(cache, c.cache, ids[b], lens[b], Hkv, d, &rk, &rv));
  vkattn::ref::AttentionParams p;
  p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d, p.causal = true;
  const int32_t cu_q[3] = {0, 37, 38}, cu_k[3] = {0, 37, 58};
  std::vector<float> want(got.size()), want_lse(got_lse.size());
  vkattn::ref::attention_varlen(p, 2, cu_q, cu_k, q.second.data(), rk.data(), rv.data(),
                                want.data(), want_lse.data());
  // f32 accumulation over at most 37 keys: 16-bit outputs round once.
  const double tol = c.q == VKATTN_F32 ? 2e-5 : 2e-3;
  double err = 0, lerr = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  for (size_t i = 0; i < got_lse.size(); ++i)
    lerr = std::max(lerr, double(std::fabs(got_lse[i] - want_lse[i])));
  EXPECT_LT(err, tol) << "out";
  EXPECT_LT(lerr, 1e-4) << "lse";
  vkattn_kv_cache_destroy(cache);
}

std::string name_of(const testing::TestParamInfo<Case>& i) {
  return std::string(vkattn::dtype_name(i.param.cache)) + "_q_" + vkattn::dtype_name(i.param.q);
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, CacheDtypes,
                         testing::Values(Case{VKATTN_F32, VKATTN_F32}, Case{VKATTN_F16, VKATTN_F32},
                                         Case{VKATTN_F16, VKATTN_F16},
                                         Case{VKATTN_BF16, VKATTN_F32}, Case{VKATTN_I8, VKATTN_F32},
                                         Case{VKATTN_FP8_E4M3, VKATTN_F16},
                                         Case{VKATTN_Q4, VKATTN_F32}),
                         name_of);

}  // namespace

// RoPE (vkattn_rope, vkattn_step_append_rope, vkattn_paged_append_rope)
// against src/reference/rope_ref.h: NeoX and GPT-J pairs, partial rotary
// dims at an offset (MLA), every dtype, in place and out of place, Llama-3
// and YaRN scaling, positions from start_positions / cache lengths /
// seq_lens_before; bad descriptors refused with nothing recorded. The
// scalings' frequencies are checked against a numpy copy of Hugging Face's
// formulas in bindings/python/test.
#include <cmath>
#include <random>
#include <vector>

#include "kv_model.h"
#include "reference/dtype_util.h"
#include "reference/rope_ref.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

vkattn::ref::RopeParams params_of(const vkattn_rope_desc& d, int head_dim) {
  vkattn::ref::RopeParams p;
  p.interleaved = d.layout == VKATTN_ROPE_GPTJ;
  p.rotary_offset = int(d.rotary_offset);
  p.rotary_dim = d.rotary_dim ? int(d.rotary_dim) : (head_dim - p.rotary_offset) / 2 * 2;
  p.theta = d.theta, p.scaling = int(d.scaling), p.factor = d.factor;
  p.low_freq_factor = d.low_freq_factor, p.high_freq_factor = d.high_freq_factor;
  p.original_max_position = d.original_max_position;
  p.beta_fast = d.beta_fast, p.beta_slow = d.beta_slow;
  p.attention_factor = d.attention_factor, p.truncate = d.yarn_truncate != 0;
  return p;
}

std::vector<float> random_rows(size_t n, vkattn_dtype dt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(n);
  for (float& e : x) e = round_to(dt, u(rng));
  return x;
}

// |device - reference| within one rounding of the dtype plus f32 error.
void expect_rows(const std::vector<float>& got, const std::vector<float>& want, vkattn_dtype dt,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = (dt == VKATTN_F32 ? 0.0 : ulp_of(dt, std::fabs(want[i]))) + 2e-5;
    if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i];
  }
}

class Rope : public ContextTest {
 protected:
  vkattn_tensor* filled(vkattn_dtype dt, std::vector<int64_t> shape, const std::vector<float>& x) {
    vkattn_tensor* t = tensor(dt, shape);
    auto b = encode_bytes(dt, x);
    EXPECT_EQ(vkattn_tensor_write(t, b.data(), b.size()), VKATTN_SUCCESS) << vkattn_last_error();
    return t;
  }
  std::vector<float> read(vkattn_tensor* t, vkattn_dtype dt) {
    std::vector<uint8_t> b(vkattn_tensor_nbytes(t));
    EXPECT_EQ(vkattn_tensor_read(t, b.data(), b.size()), VKATTN_SUCCESS) << vkattn_last_error();
    return decode_bytes(dt, b);
  }

  // vkattn_rope over sequences of (t, start) against the reference.
  void run(const vkattn_rope_desc& d, vkattn_dtype dt, int heads, int dim, bool in_place,
           uint32_t seed) {
    const std::vector<std::pair<int, int>> seqs = {{3, 0}, {0, 7}, {5, 100}, {1, 70000}};
    std::vector<int32_t> cu{0}, start;
    std::vector<int64_t> pos;
    for (auto [t, s] : seqs) {
      cu.push_back(cu.back() + t), start.push_back(s);
      for (int i = 0; i < t; ++i) pos.push_back(s + i);
    }
    const int64_t n = cu.back();
    std::vector<float> x = random_rows(size_t(n) * heads * dim, dt, seed);
    vkattn_tensor* xt = filled(dt, {n, heads, dim}, x);
    vkattn_tensor* ot =
        in_place ? xt : filled(dt, {n, heads, dim}, std::vector<float>(x.size(), NAN));
    ASSERT_EQ(vkattn_rope(ctx, &d, uint32_t(seqs.size()), cu.data(), start.data(), xt, ot),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    std::vector<float> want = x;
    vkattn::ref::rope_apply(params_of(d, dim), n, heads, dim, pos.data(), want.data());
    for (float& e : want) e = round_to(dt, e);
    expect_rows(read(ot, dt), want, dt, "out");
    if (!in_place) expect_rows(read(xt, dt), x, dt, "x (unchanged)");
  }
};

}  // namespace

TEST_F(Rope, LayoutsDtypesAndPartialDims) {
  vkattn_rope_desc d;
  vkattn_rope_desc_init(&d);
  uint32_t seed = 1;
  for (vkattn_dtype dt : {VKATTN_F32, VKATTN_F16, VKATTN_BF16})
    for (uint32_t layout : {VKATTN_ROPE_NEOX, VKATTN_ROPE_GPTJ}) {
      SCOPED_TRACE(testing::Message() << "dtype " << dt << " layout " << layout);
      d.layout = layout;
      d.rotary_dim = 0, d.rotary_offset = 0;
      run(d, dt, 3, 64, true, seed++);
      // MLA: 64 rotated dims after 512 plain ones; an odd head dim with a
      // partial rotary part at an odd offset (16-bit rows share words).
      d.rotary_offset = 512, d.rotary_dim = 64;
      run(d, dt, 2, 576, false, seed++);
      d.rotary_offset = 3, d.rotary_dim = 10;
      run(d, dt, 3, 17, dt != VKATTN_F16, seed++);
    }
}

TEST_F(Rope, Llama3AndYarnScaling) {
  vkattn_rope_desc d;
  vkattn_rope_desc_init(&d);
  d.theta = 500000.0f, d.scaling = VKATTN_ROPE_SCALING_LLAMA3, d.factor = 8.0f;
  d.original_max_position = 8192;  // Llama 3.1
  run(d, VKATTN_F32, 2, 128, false, 11);
  vkattn_rope_desc_init(&d);
  d.scaling = VKATTN_ROPE_SCALING_YARN, d.factor = 40.0f, d.original_max_position = 4096;
  d.layout = VKATTN_ROPE_GPTJ, d.rotary_offset = 512, d.rotary_dim = 64;  // DeepSeek-V3 keys
  run(d, VKATTN_F32, 1, 576, true, 12);
  d.attention_factor = 1.25f, d.yarn_truncate = 0, d.layout = VKATTN_ROPE_NEOX;
  run(d, VKATTN_F16, 2, 576, false, 13);
  d.scaling = VKATTN_ROPE_SCALING_LINEAR, d.factor = 4.0f;
  run(d, VKATTN_BF16, 2, 576, true, 14);
}

TEST_F(Rope, BadInputRecordsNothing) {
  vkattn_rope_desc d;
  vkattn_rope_desc_init(&d);
  std::vector<float> x(2 * 2 * 8, 1.0f);
  vkattn_tensor* xt = filled(VKATTN_F32, {2, 2, 8}, x);
  int32_t cu[2] = {0, 2}, start[1] = {0};
  auto bad = d;
  bad.rotary_dim = 7;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "rotary_dim 7 must be even");
  bad = d, bad.rotary_offset = 2, bad.rotary_dim = 8;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "exceeds the head dim 8");
  bad = d, bad.scaling = VKATTN_ROPE_SCALING_LLAMA3, bad.factor = 8;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "original_max_position");
  bad = d, bad.scaling = 9;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "scaling 9 is unknown");
  bad = d, bad.theta = 1.0f;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "theta");
  bad = d, bad.struct_size = 12;
  EXPECT_INVALID(vkattn_rope(ctx, &bad, 1, cu, start, xt, xt), "struct_size");
  EXPECT_INVALID(vkattn_rope(ctx, nullptr, 1, cu, start, xt, xt), "rope is NULL");
  int32_t neg[1] = {-1}, cu_bad[2] = {0, 3};
  EXPECT_INVALID(vkattn_rope(ctx, &d, 1, cu, neg, xt, xt), "start_positions[0] is negative");
  EXPECT_INVALID(vkattn_rope(ctx, &d, 1, cu_bad, start, xt, xt), "must equal x's first dim");
  vkattn_tensor* other = tensor(VKATTN_F16, {2, 2, 8});
  EXPECT_INVALID(vkattn_rope(ctx, &d, 1, cu, start, xt, other), "out must have x's dtype");
  EXPECT_EQ(read(xt, VKATTN_F32), x);  // nothing was recorded
}

// Keys rotated on their way into the cache (step) and into caller pools:
// the cache returns the rotated keys at positions len + i, values as given.
TEST_F(Rope, AppendRotatesKeysOnly) {
  KvShape s;
  s.layers = 1, s.hkv = 2, s.d = 24, s.dv = 8, s.page_size = 4, s.pages = 16;
  s.dtype = VKATTN_F32;
  vkattn_kv_cache_desc cd = kv_cache_desc(s);
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_rope_desc d;
  vkattn_rope_desc_init(&d);
  d.layout = VKATTN_ROPE_GPTJ, d.rotary_offset = 8, d.rotary_dim = 16;
  const vkattn::ref::RopeParams p = params_of(d, 24);
  std::vector<float> k_all, v_all;  // every appended row, unrotated, in position order
  for (int round = 0; round < 2; ++round) {
    const int t = round == 0 ? 6 : 3;
    const int64_t id = 7;
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &t, &st), VKATTN_SUCCESS) << vkattn_last_error();
    std::vector<float> k = random_rows(size_t(t) * 2 * 24, VKATTN_F32, 20 + round);
    std::vector<float> v = random_rows(size_t(t) * 2 * 8, VKATTN_F32, 30 + round);
    ASSERT_EQ(vkattn_step_append_rope(st, 0, &d, filled(VKATTN_F32, {t, 2, 24}, k),
                                      filled(VKATTN_F32, {t, 2, 8}, v)),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS) << vkattn_last_error();
    k_all.insert(k_all.end(), k.begin(), k.end());
    v_all.insert(v_all.end(), v.begin(), v.end());
  }
  std::vector<int64_t> pos(9);
  for (int i = 0; i < 9; ++i) pos[i] = i;
  std::vector<float> want = k_all;
  vkattn::ref::rope_apply(p, 9, 2, 24, pos.data(), want.data());
  std::vector<float> kr(9 * 2 * 24), vr(9 * 2 * 8);
  ASSERT_EQ(
      vkattn_kv_cache_read(cache, 0, 7, 0, 9, kr.data(), kr.size() * 4, vr.data(), vr.size() * 4),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  expect_rows(kr, want, VKATTN_F32, "cached k");
  EXPECT_EQ(vr, v_all);
  vkattn_kv_cache_destroy(cache);

  // Caller pools [np, ps, Hkv, d] in f16: two sequences after 5 and 0 keys.
  const int np = 6, ps = 4;
  vkattn_tensor* kp = filled(VKATTN_F16, {np, ps, 2, 24}, std::vector<float>(np * ps * 48, 0));
  vkattn_tensor* vp = filled(VKATTN_F16, {np, ps, 2, 8}, std::vector<float>(np * ps * 16, 0));
  int32_t cu[3] = {0, 2, 5}, before[2] = {5, 0}, indptr[3] = {0, 2, 3}, indices[3] = {4, 1, 2};
  std::vector<float> k = random_rows(5 * 2 * 24, VKATTN_F16, 40);
  std::vector<float> v = random_rows(5 * 2 * 8, VKATTN_F16, 41);
  ASSERT_EQ(vkattn_paged_append_rope(ctx, &d, 2, cu, before, indptr, indices, ps,
                                     filled(VKATTN_F16, {5, 2, 24}, k),
                                     filled(VKATTN_F16, {5, 2, 8}, v), kp, vp),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<int64_t> ppos = {5, 6, 0, 1, 2};
  want = k;
  vkattn::ref::rope_apply(p, 5, 2, 24, ppos.data(), want.data());
  for (float& e : want) e = round_to(VKATTN_F16, e);
  const std::vector<float> pool = read(kp, VKATTN_F16);
  std::vector<float> got;
  for (int i = 0; i < 5; ++i) {
    const int b = i < 2 ? 0 : 1, pos_i = int(ppos[i]);
    const int page = indices[indptr[b] + pos_i / ps], slot = pos_i % ps;
    got.insert(got.end(), pool.begin() + (page * ps + slot) * 48,
               pool.begin() + (page * ps + slot + 1) * 48);
  }
  expect_rows(got, want, VKATTN_F16, "pool k");
  vkattn_rope_desc bad = d;
  bad.rotary_dim = 30;  // past d 24
  EXPECT_INVALID(vkattn_paged_append_rope(ctx, &bad, 2, cu, before, indptr, indices, ps,
                                          filled(VKATTN_F16, {5, 2, 24}, k),
                                          filled(VKATTN_F16, {5, 2, 8}, v), kp, vp),
                 "exceeds the head dim 24");
}

// Scores at the edges of f32 (issue E4, items 3 and 4), in every kernel
// family, with and without key splits (the combine pass, the lanes
// family's shared-memory merge, batch-invariant splits), over f32, f16 and
// bf16 K/V, against the f64 reference of src/reference:
//   - a visible key whose score is NaN or +inf makes that query's out and
//     lse NaN; a -inf score adds nothing; queries that do not see the key
//     are untouched (the key is hidden from them);
//   - S = scale * dot(q, k) is formed without intermediate overflow: q of
//     1e19 against keys of 2e-38 under scale 1e20 gives logits of +-20;
//   - vkattn_attention_merge: a NaN lse on either side gives NaN.
// The family comes from VKATTN_ATTN_KERNEL when the suite runs under one
// (the coopmat suite on lavapipe 26.1); else each family is forced in turn.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

struct Problem {
  int H = 4, Hkv = 2, d = 8;
  std::vector<std::pair<int, int>> seqs;  // (t, u)
  bool causal = false;
  float scale = 0;
  vkattn_dtype qdt = VKATTN_F32, kdt = VKATTN_F32;
  std::vector<float> q, k, v;  // packed, already representable in their dtypes
  int total_q() const {
    int n = 0;
    for (auto s : seqs) n += s.first;
    return n;
  }
  int total_k() const {
    int n = 0;
    for (auto s : seqs) n += s.second;
    return n;
  }
};

// Random values in [-1, 1) rounded to their dtypes.
void fill_random(Problem* p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>* x, size_t n, vkattn_dtype dt) {
    x->resize(n);
    for (float& e : *x) e = vkattn_ref::round_to(dt, uni(rng));
  };
  fill(&p->q, size_t(p->total_q()) * p->H * p->d, p->qdt);
  fill(&p->k, size_t(p->total_k()) * p->Hkv * p->d, p->kdt);
  fill(&p->v, size_t(p->total_k()) * p->Hkv * p->d, p->kdt);
}

vkattn_tensor* upload(vkattn_context* ctx, vkattn_dtype dt, std::vector<int64_t> shape,
                      const std::vector<float>& x) {
  vkattn_tensor* t = nullptr;
  EXPECT_EQ(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &t), VKATTN_SUCCESS)
      << vkattn_last_error();
  const std::vector<uint8_t> b = vkattn_ref::encode_bytes(dt, x);
  EXPECT_EQ(vkattn_tensor_write(t, b.data(), b.size()), VKATTN_SUCCESS) << vkattn_last_error();
  return t;
}

std::vector<float> download(vkattn_tensor* t, vkattn_dtype dt) {
  std::vector<uint8_t> b(vkattn_tensor_nbytes(t));
  EXPECT_EQ(vkattn_tensor_read(t, b.data(), b.size()), VKATTN_SUCCESS) << vkattn_last_error();
  return vkattn_ref::decode_bytes(dt, b);
}

// The tolerance of a finite value: f32 accumulation, or f16 arithmetic
// (coopmat, forced f16 math) and 16-bit outputs.
double tolerance(const Problem& p) {
  double tol = 2e-5;
  if (p.qdt != VKATTN_F32) tol = 4e-3;
  return tol + 8 * f16_math_slack();
}

struct Seen {
  int nan_rows = 0, neg_inf_rows = 0, finite_rows = 0;
};

// Runs p on ctx and compares every out element and lse with the
// reference: NaN where it is NaN, -inf where it is -inf, else close.
Seen run_and_check(vkattn_context* ctx, const Problem& p) {
  const int T = p.total_q(), U = p.total_k();
  std::vector<int32_t> cu_q{0}, cu_k{0};
  for (auto s : p.seqs) {
    cu_q.push_back(cu_q.back() + s.first);
    cu_k.push_back(cu_k.back() + s.second);
  }
  vkattn_tensor* q = upload(ctx, p.qdt, {T, p.H, p.d}, p.q);
  vkattn_tensor* k = upload(ctx, p.kdt, {U, p.Hkv, p.d}, p.k);
  vkattn_tensor* v = upload(ctx, p.kdt, {U, p.Hkv, p.d}, p.v);
  const std::vector<float> nan_out(size_t(T) * p.H * p.d, NAN), nan_lse(size_t(T) * p.H, NAN);
  vkattn_tensor* out = upload(ctx, p.qdt, {T, p.H, p.d}, nan_out);
  vkattn_tensor* lse = upload(ctx, VKATTN_F32, {T, p.H}, nan_lse);
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = uint32_t(p.H), desc.num_kv_heads = uint32_t(p.Hkv);
  desc.head_dim = uint32_t(p.d), desc.causal = p.causal ? 1 : 0, desc.scale = p.scale;
  desc.lse = lse;
  Seen seen;
  EXPECT_EQ(vkattn_attention_varlen(ctx, &desc, uint32_t(p.seqs.size()), cu_q.data(), cu_k.data(),
                                    q, k, v, out),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  const std::vector<float> got = download(out, p.qdt), got_lse = download(lse, VKATTN_F32);
  for (vkattn_tensor* t : {q, k, v, out, lse}) vkattn_tensor_destroy(t);
  vkattn::ref::AttentionParams prm;
  prm.num_heads = p.H, prm.num_kv_heads = p.Hkv, prm.head_dim = p.d, prm.head_dim_v = p.d;
  prm.scale = p.scale, prm.causal = p.causal;
  std::vector<float> want(got.size()), want_lse(got_lse.size());
  vkattn::ref::attention_varlen(prm, int(p.seqs.size()), cu_q.data(), cu_k.data(), p.q.data(),
                                p.k.data(), p.v.data(), want.data(), want_lse.data());
  const double tol = tolerance(p);
  int bad = 0;
  for (size_t r = 0; r < want_lse.size(); ++r) {
    const double w = want_lse[r], g = got_lse[r];
    if (std::isnan(w))
      ++seen.nan_rows;
    else if (std::isinf(w))
      ++seen.neg_inf_rows;
    else
      ++seen.finite_rows;
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= tol * (1 + std::fabs(w));
    for (int c = 0; c < p.d; ++c) {
      const double wo = want[r * p.d + c], go = got[r * p.d + c];
      ok =
          ok && (std::isnan(wo) ? std::isnan(go) : std::fabs(go - wo) <= tol * (1 + std::fabs(wo)));
    }
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << "row " << r << " (token " << r / p.H << ", head " << r % p.H << "): lse "
                    << g << " want " << w << "; out[0] " << got[r * p.d] << " want "
                    << want[r * p.d];
  }
  EXPECT_EQ(bad, 0) << "rows that differ from the reference";
  return seen;
}

// The families to run: the one the suite forces, else each in turn, each
// also with its keys split (small items: the combine pass; lanes also with
// its shared-memory merge) and batch-invariant (fixed splits).
struct Config {
  std::string name;
  ScopedEnv::Vars env;
};
std::vector<Config> configs() {
  std::vector<Config> out;
  const char* forced = std::getenv("VKATTN_ATTN_KERNEL");
  std::vector<const char*> families = {"lanes", "tiled", "decode"};
  if (forced && *forced) families = {forced};
  for (const char* f : families) {
    out.push_back({std::string(f), {{"VKATTN_ATTN_KERNEL", f}}});
    out.push_back({std::string(f) + " split",
                   {{"VKATTN_ATTN_KERNEL", f},
                    {"VKATTN_ATTN_SPLIT_KEYS", "64"},
                    {"VKATTN_ATTN_TARGET_ITEMS", "64"},
                    {"VKATTN_ATTN_MIN_SPLIT_KEYS", "16"}}});
    out.push_back({std::string(f) + " batch-invariant",
                   {{"VKATTN_ATTN_KERNEL", f},
                    {"VKATTN_BATCH_INVARIANT", "1"},
                    {"VKATTN_ATTN_INVARIANT_SPLIT_KEYS", "128"}}});
  }
  if (!forced || !*forced || std::strcmp(forced, "lanes") == 0)
    out.push_back({"lanes merged in shared memory",
                   {{"VKATTN_ATTN_KERNEL", "lanes"},
                    {"VKATTN_ATTN_DECODE_MERGE", "1"},
                    {"VKATTN_ATTN_DECODE_MIN_KEYS", "0"}}});
  return out;
}

const vkattn_dtype kDtypes[3] = {VKATTN_F32, VKATTN_F16, VKATTN_BF16};

// A prefill-shaped batch (causal: some queries see a key, some do not)
// and a decode-shaped one (the decode family's).
std::vector<std::vector<std::pair<int, int>>> shapes() {
  return {{{40, 601}, {3, 200}}, {{1, 601}, {4, 300}}};
}

// Puts `x` (NaN, +inf or -inf) into K of key `key` (packed index), kv head
// 0: component 0, the others 0 so that q's sign decides the score's.
void poison_key(Problem* p, int key, float x) {
  for (int c = 0; c < p->d; ++c) p->k[(size_t(key) * p->Hkv) * p->d + c] = c == 0 ? x : 0.0f;
}

// Runs body(cfg, index, ctx) once per configuration, under its
// environment and on a context made there.
template <class Body>
void for_each_config(Body body) {
  const std::vector<Config> all = configs();
  for (size_t ci = 0; ci < all.size(); ++ci) {
    ScopedEnv env(all[ci].env);
    ForcedContext fc;
    ASSERT_NE(fc.ctx, nullptr);
    body(all[ci], ci, fc.ctx);
  }
}

}  // namespace

// A visible NaN score: NaN out and lse for every query that sees the key
// (head 0's group), whichever family, split or not, dtype; the others as
// the reference.
TEST(NumericEdges, VisibleNanScoreMakesTheRowNan) {
  for_each_config([](const Config& cfg, size_t ci, vkattn_context* ctx) {
    // One K/V dtype per configuration, in turn (each costs compiles).
    for (vkattn_dtype kdt : {kDtypes[ci % 3]}) {
      for (const auto& shape : shapes()) {
        SCOPED_TRACE(cfg.name + ", K/V " + std::to_string(int(kdt)) + ", t " +
                     std::to_string(shape[0].first));
        Problem p;
        p.seqs = shape, p.causal = true, p.kdt = test_kv_dtype(kdt);
        fill_random(&p, 7);
        const int u0 = shape[0].second;
        poison_key(&p, u0 - 21, NAN);  // seen by the last 21 positions' queries
        poison_key(&p, u0 + 150, NAN);
        const Seen s = run_and_check(ctx, p);
        EXPECT_GT(s.nan_rows, 0);
        EXPECT_GT(s.finite_rows, 0);
      }
    }
  });
}

// A row whose only visible key scores NaN is NaN too (the reference once
// read it as empty: its max dropped the NaN; the fuzzer's numeric edges
// found it). Sequence 0 holds 4 queries over 1 key: rows at positions -3
// .. -1 see nothing (-inf), the last sees key 0, poisoned; sequence 1's
// rows stay finite.
TEST(NumericEdges, OnlyNanScoresMakeTheRowNan) {
  for_each_config([](const Config& cfg, size_t ci, vkattn_context* ctx) {
    SCOPED_TRACE(cfg.name);
    Problem p;
    p.seqs = {{4, 1}, {3, 5}}, p.causal = true, p.kdt = test_kv_dtype(kDtypes[ci % 3]);
    fill_random(&p, 11);
    poison_key(&p, 0, NAN);
    const Seen s = run_and_check(ctx, p);
    EXPECT_GT(s.nan_rows, 0);
    EXPECT_GT(s.neg_inf_rows, 0);
    EXPECT_GT(s.finite_rows, 0);
  });
}

// A K row of +inf (f32/f16/bf16 caches keep inf): per query +inf, -inf
// or NaN as q's sign gives: NaN rows, rows that ignore the key (-inf adds
// nothing), finite rows elsewhere.
TEST(NumericEdges, InfiniteKeysFollowTheFormula) {
  for_each_config([](const Config& cfg, size_t ci, vkattn_context* ctx) {
    for (vkattn_dtype kdt : {kDtypes[(ci + 1) % 2]}) {  // f16 and f32 (bf16's inf is f32's)
      for (const auto& shape : shapes()) {
        SCOPED_TRACE(cfg.name + ", K/V " + std::to_string(int(kdt)) + ", t " +
                     std::to_string(shape[0].first));
        Problem p;
        p.seqs = shape, p.causal = true, p.kdt = test_kv_dtype(kdt);
        fill_random(&p, 9);
        // q component 0 of some rows exactly 0: 0 * inf is NaN.
        for (size_t r = 0; r < p.q.size() / p.d; r += 5) p.q[r * p.d] = 0.0f;
        poison_key(&p, shape[0].second - 3, INFINITY);
        poison_key(&p, shape[0].second + 7, -INFINITY);
        const Seen s = run_and_check(ctx, p);
        EXPECT_GT(s.nan_rows, 0);
        EXPECT_GT(s.finite_rows, 0);
      }
    }
  });
}

// Only -inf scores visible to a row: an empty row (out 0, lse -inf).
TEST(NumericEdges, OnlyNegativeInfiniteScoresGiveAnEmptyRow) {
  for_each_config([](const Config&, size_t, vkattn_context* ctx) {
    Problem p;
    p.H = 2, p.Hkv = 1;
    p.seqs = {{1, 300}, {2, 40}};
    p.kdt = test_kv_dtype(VKATTN_F32);
    fill_random(&p, 3);
    for (size_t r = 0; r < p.q.size() / p.d; ++r)
      for (int c = 0; c < p.d; ++c) p.q[r * p.d + c] = c == 0 ? 1.0f : 0.0f;
    for (int key = 0; key < 300; ++key) poison_key(&p, key, -INFINITY);
    const Seen s = run_and_check(ctx, p);
    EXPECT_EQ(s.neg_inf_rows, 2) << "sequence 0's two heads";
    EXPECT_EQ(s.nan_rows, 0);
  });
}

// S = scale * dot(q, k) without overflow of scale * q (f32 end to end):
// q of up to 1e19 against keys of +-2e-38 (normal f32) under scale 1e20,
// and q of about 2 against keys of +-2e-38 under scale 3e38: logits of
// tens, where scale * q alone is past f32's range. f16 arithmetic
// (coopmat, forced f16 math) scales q by design (the header's range).
TEST(NumericEdges, ExtremeScalesAreExact) {
  if (f16_math_slack() > 0) GTEST_SKIP() << "f16 arithmetic scales q (documented range)";
  for_each_config([](const Config& cfg, size_t, vkattn_context* ctx) {
    for (const auto& shape : shapes()) {
      for (int which = 0; which < 2; ++which) {
        SCOPED_TRACE(cfg.name + ", t " + std::to_string(shape[0].first) + ", case " +
                     std::to_string(which));
        Problem p;
        p.seqs = shape, p.causal = true;
        p.scale = which == 0 ? 1e20f : 3e38f;
        const float qmag = which == 0 ? 1e19f : 2.0f;
        fill_random(&p, 11);
        std::mt19937 rng(4);
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        // Magnitudes in [m, 1.5 m), random signs: normal numbers only (a
        // GPU may flush denormals), every product q_c k_c normal too.
        auto at = [&](float m) {
          const float x = uni(rng);
          return (x < 0 ? -m : m) * (1.0f + 0.5f * std::fabs(uni(rng)));
        };
        for (size_t r = 0; r < p.q.size() / p.d; ++r)
          for (int c = 0; c < p.d; ++c) p.q[r * p.d + c] = c < 2 ? at(qmag) : 0.0f;
        for (size_t r = 0; r < p.k.size() / p.d; ++r)
          for (int c = 0; c < p.d; ++c) p.k[r * p.d + c] = c < 2 ? at(2e-38f) : 0.0f;
        const Seen s = run_and_check(ctx, p);
        EXPECT_EQ(s.nan_rows, 0);
        EXPECT_GT(s.finite_rows, 0);
      }
    }
  });
}

// vkattn_attention_merge: a NaN lse on either side gives NaN out and
// lse; -inf sides are returned from the other as before.
TEST(NumericEdges, MergeKeepsNan) {
  vkattn_context* ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  const int64_t n = 6, H = 1, dv = 3;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  const std::vector<float> b = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 5, 5, 5, 6, 6, 6};
  const std::vector<float> la = {NAN, 0.5f, NAN, -INFINITY, 1.0f, INFINITY};
  const std::vector<float> lb = {0.25f, NAN, NAN, NAN, -INFINITY, 0.0f};
  vkattn_tensor* ta = upload(ctx, VKATTN_F32, {n, H, dv}, a);
  vkattn_tensor* tb = upload(ctx, VKATTN_F32, {n, H, dv}, b);
  vkattn_tensor* tla = upload(ctx, VKATTN_F32, {n, H}, la);
  vkattn_tensor* tlb = upload(ctx, VKATTN_F32, {n, H}, lb);
  vkattn_tensor* out = upload(ctx, VKATTN_F32, {n, H, dv}, std::vector<float>(n * dv, 0));
  vkattn_tensor* lse = upload(ctx, VKATTN_F32, {n, H}, std::vector<float>(n, 0));
  ASSERT_EQ(vkattn_attention_merge(ctx, ta, tla, tb, tlb, out, lse), VKATTN_SUCCESS)
      << vkattn_last_error();
  const std::vector<float> got = download(out, VKATTN_F32), got_lse = download(lse, VKATTN_F32);
  std::vector<float> want(n * dv), want_lse(n);
  vkattn::ref::attention_merge(int(n), int(dv), a.data(), la.data(), b.data(), lb.data(),
                               want.data(), want_lse.data());
  for (int64_t r = 0; r < n; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    if (r < 4) EXPECT_TRUE(std::isnan(want_lse[r]));  // the reference's rule too
    EXPECT_EQ(std::isnan(got_lse[r]), std::isnan(want_lse[r])) << got_lse[r];
    if (!std::isnan(want_lse[r])) EXPECT_NEAR(got_lse[r], want_lse[r], 1e-5);
    for (int c = 0; c < dv; ++c) {
      const float g = got[r * dv + c], w = want[r * dv + c];
      if (r < 4) EXPECT_TRUE(std::isnan(g)) << c;  // NaN on a side: NaN, never the other side
      EXPECT_EQ(std::isnan(g), std::isnan(w)) << c;
      if (!std::isnan(w)) EXPECT_NEAR(g, w, 1e-5) << c;
    }
  }
  for (vkattn_tensor* t : {ta, tb, tla, tlb, out, lse}) vkattn_tensor_destroy(t);
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_context_destroy(ctx);
}

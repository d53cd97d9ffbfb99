// VKATTN_CONTEXT_BATCH_INVARIANT: a sequence's outputs and lse are
// bit-identical alone or in any batch, in any position, in decode-only and
// mixed calls and steps of different sizes: varlen calls (dense K/V) and
// steps over a paged cache (GQA, pools over several buffers, 8-bit
// caches), for the family the device table picks and each family forced
// (ctest runs this file once per family: tests/CMakeLists.txt). Without
// the flag the same batches cut the sequence's keys differently (the
// kernel log's split counts), which is what the flag removes.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

constexpr int kH = 8, kHkv = 2, kD = 64;

vkattn_context* invariant_context(bool invariant) {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  d.flags = validation_flag() | (invariant ? VKATTN_CONTEXT_BATCH_INVARIANT : 0u);
  vkattn_context* ctx = nullptr;
  EXPECT_EQ(vkattn_context_create(&d, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  return ctx;
}

// Deterministic values of sequence `seed`'s stream `kind` (0 q, 1 k, 2 v).
float value(uint32_t seed, uint32_t kind, uint64_t i) {
  uint64_t x = (uint64_t(seed) << 32 | kind) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return float(int(x % 2001) - 1000) / 1000.0f;
}

struct Seq {
  int t, u;
  uint32_t seed;                 // its data: the same wherever it sits in a batch
  int span_lo = 0, span_hi = 0;  // one bidirectional span (none when empty)
};

struct Result {
  std::vector<float> out, lse;  // the sequence's rows
};

vkattn_tensor* make(vkattn_context* ctx, vkattn_dtype dt, std::vector<int64_t> shape) {
  vkattn_tensor* t = nullptr;
  EXPECT_EQ(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &t), VKATTN_SUCCESS)
      << vkattn_last_error();
  return t;
}

void write_rows(vkattn_tensor* t, vkattn_dtype dt, const std::vector<float>& x) {
  if (dt == VKATTN_F32) {
    ASSERT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return;
  }
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = vkattn_ref::f32_to_f16(x[i]);
  ASSERT_EQ(vkattn_tensor_write(t, h.data(), h.size() * 2), VKATTN_SUCCESS);
}

// A varlen call over `batch` (dense K/V in f16, causal, lse): the rows of
// every sequence.
std::vector<Result> run_varlen(vkattn_context* ctx, const std::vector<Seq>& batch,
                               vkattn_variant* variant = nullptr) {
  std::vector<int32_t> cu_q = {0}, cu_k = {0};
  std::vector<float> q, k, v;
  for (const Seq& s : batch) {
    cu_q.push_back(cu_q.back() + s.t), cu_k.push_back(cu_k.back() + s.u);
    for (int i = 0; i < s.t * kH * kD; ++i) q.push_back(value(s.seed, 0, i));
    for (int i = 0; i < s.u * kHkv * kD; ++i)
      k.push_back(value(s.seed, 1, i)), v.push_back(value(s.seed, 2, i));
  }
  const int T = cu_q.back(), U = cu_k.back();
  vkattn_tensor* qt = make(ctx, VKATTN_F32, {T, kH, kD});
  vkattn_tensor* kt = make(ctx, VKATTN_F16, {U, kHkv, kD});
  vkattn_tensor* vt = make(ctx, VKATTN_F16, {U, kHkv, kD});
  vkattn_tensor* ot = make(ctx, VKATTN_F32, {T, kH, kD});
  vkattn_tensor* lt = make(ctx, VKATTN_F32, {T, kH});
  write_rows(qt, VKATTN_F32, q);
  write_rows(kt, VKATTN_F16, k);
  write_rows(vt, VKATTN_F16, v);
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.num_heads = kH, d.num_kv_heads = kHkv, d.head_dim = kD, d.causal = 1, d.lse = lt;
  d.variant = variant;
  std::vector<int32_t> span_indptr = {0}, spans;
  for (const Seq& s : batch) {
    if (s.span_hi > s.span_lo) spans.push_back(s.span_lo), spans.push_back(s.span_hi);
    span_indptr.push_back(int32_t(spans.size() / 2));
  }
  if (!spans.empty()) d.span_indptr = span_indptr.data(), d.spans = spans.data();
  EXPECT_EQ(vkattn_attention_varlen(ctx, &d, uint32_t(batch.size()), cu_q.data(), cu_k.data(), qt,
                                    kt, vt, ot),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> out(size_t(T) * kH * kD), lse(size_t(T) * kH);
  EXPECT_EQ(vkattn_tensor_read(ot, out.data(), out.size() * 4), VKATTN_SUCCESS);
  EXPECT_EQ(vkattn_tensor_read(lt, lse.data(), lse.size() * 4), VKATTN_SUCCESS);
  for (vkattn_tensor* x : {qt, kt, vt, ot, lt}) vkattn_tensor_destroy(x);
  std::vector<Result> r;
  for (size_t b = 0; b < batch.size(); ++b) {
    Result s;
    s.out.assign(out.begin() + cu_q[b] * kH * kD, out.begin() + cu_q[b + 1] * kH * kD);
    s.lse.assign(lse.begin() + cu_q[b] * kH, lse.begin() + cu_q[b + 1] * kH);
    r.push_back(s);
  }
  return r;
}

// The same bits (NaN included).
::testing::AssertionResult same_bits(const Result& a, const Result& b) {
  if (a.out.size() != b.out.size() || a.lse.size() != b.lse.size())
    return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.out.size(); ++i)
    if (std::memcmp(&a.out[i], &b.out[i], 4) != 0)
      return ::testing::AssertionFailure() << "out[" << i << "] " << a.out[i] << " vs " << b.out[i]
                                           << " (of " << a.out.size() << ")";
  for (size_t i = 0; i < a.lse.size(); ++i)
    if (std::memcmp(&a.lse[i], &b.lse[i], 4) != 0)
      return ::testing::AssertionFailure() << "lse[" << i << "] " << a.lse[i] << " vs " << b.lse[i];
  return ::testing::AssertionSuccess();
}

// Batches that hold sequence `x` among others, at the start, middle and
// end: decodes only, decodes of other lengths, and mixed with prefills.
std::vector<std::pair<std::vector<Seq>, size_t>> batches_around(const Seq& x) {
  std::vector<Seq> decodes, mixed;
  for (int i = 0; i < 15; ++i) decodes.push_back({1, 200 + 397 * i, 100u + i});
  mixed = {{120, 300, 200}, {1, 5000, 201}, {3, 40, 202}, {64, 64, 203}};
  std::vector<std::pair<std::vector<Seq>, size_t>> r;
  for (const auto* others : {&decodes, &mixed}) {
    for (size_t at : {size_t(0), others->size() / 2, others->size()}) {
      std::vector<Seq> b = *others;
      b.insert(b.begin() + at, x);
      r.push_back({b, at});
    }
  }
  r.push_back({{x, {1, 9000, 300}}, 0});
  return r;
}

class BatchInvariance : public ::testing::Test {};

// Varlen calls: a decode over 3000 keys, a 5-token verification chunk and
// a 100-token prefill chunk, each alone and in every batch around it.
TEST_F(BatchInvariance, VarlenSequencesKeepTheirBits) {
  vkattn_context* ctx = invariant_context(true);
  ASSERT_NE(ctx, nullptr);
  // (The last holds a bidirectional span: its rows get records and tiles
  // of their own, still planned from the sequence alone.)
  for (const Seq& x :
       {Seq{1, 3000, 1}, Seq{5, 700, 2}, Seq{100, 1500, 3}, Seq{100, 1500, 4, 1380, 1460}}) {
    SCOPED_TRACE("sequence t " + std::to_string(x.t) + " u " + std::to_string(x.u));
    const Result alone = run_varlen(ctx, {x})[0];
    for (const auto& [batch, at] : batches_around(x)) {
      SCOPED_TRACE("in a batch of " + std::to_string(batch.size()) + " at " + std::to_string(at));
      EXPECT_TRUE(same_bits(alone, run_varlen(ctx, batch)[at]));
    }
  }
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_context_destroy(ctx);
}

// Attention variants: a mask function that hides whole blocks of keys
// (those from 64 to 1199: the families skip them without loading) and a
// stride pattern in the rest, with a score function; a sequence keeps its
// bits alone and in every batch around it, skipping included. (The
// functions read positions only: `seq`, the sequence's index in the
// call, moves with the batch.)
TEST_F(BatchInvariance, VariantSequencesKeepTheirBits) {
  vkattn_context* ctx = invariant_context(true);
  ASSERT_NE(ctx, nullptr);
  vkattn_variant_desc vd;
  vkattn_variant_desc_init(&vd);
  vd.source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return (k_pos < 64 || k_pos >= 1200) && (q_pos - k_pos) % 7 != 3;
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + 0.001 * float(q_pos - k_pos);
})";
  vkattn_variant* variant = nullptr;
  const vkattn_status st = vkattn_variant_create(ctx, &vd, &variant);
  if (st == VKATTN_ERROR_UNSUPPORTED) {
    vkattn_context_destroy(ctx);
    GTEST_SKIP() << "no GLSL compiler: " << vkattn_last_error();
  }
  ASSERT_EQ(st, VKATTN_SUCCESS) << vkattn_last_error();
  for (const Seq& x : {Seq{1, 3000, 1}, Seq{100, 1500, 3}}) {
    SCOPED_TRACE("sequence t " + std::to_string(x.t) + " u " + std::to_string(x.u));
    const Result alone = run_varlen(ctx, {x}, variant)[0];
    for (const auto& [batch, at] : batches_around(x)) {
      SCOPED_TRACE("in a batch of " + std::to_string(batch.size()) + " at " + std::to_string(at));
      EXPECT_TRUE(same_bits(alone, run_varlen(ctx, batch, variant)[at]));
    }
  }
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_variant_destroy(variant);
  vkattn_context_destroy(ctx);
}

// Without the flag a decode's keys are cut to fill the device: alone it
// takes more splits than in a batch of 16 (the kernel log's items), the
// dependence on the batch the flag removes; with it, the same.
TEST_F(BatchInvariance, SplitsFollowTheBatchOnlyWithoutTheFlag) {
  // Splits of at least 64 keys, so that a 1000-key decode has room to be
  // cut for the device alone (lanes, tiled and decode alike).
  auto items = [](bool invariant, const std::vector<Seq>& batch) {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_LOG", "kernels"}, {"VKATTN_ATTN_MIN_SPLIT_KEYS", "64"}});
    vkattn_context* ctx = invariant_context(invariant);
    testing::internal::CaptureStderr();
    run_varlen(ctx, batch);
    const std::string log = testing::internal::GetCapturedStderr();
    vkattn_context_destroy(ctx);
    uint64_t n = 0;
    for (uint64_t x : kernel_log_items(log)) n += x;
    return n;
  };
  const Seq x{1, 1000, 1};
  std::vector<Seq> sixteen(16, x);
  // Per sequence: alone vs the average in a batch of 16.
  const uint64_t alone = items(false, {x}), in16 = items(false, sixteen) / 16;
  EXPECT_GT(alone, in16) << "the device-filling split no longer depends on the batch";
  EXPECT_EQ(items(true, {x}), items(true, sixteen) / 16);
}

// A paged cache of one layer (GQA 4, 16-token pages) on ctx, and steps
// over it. Token j of a sequence holding data `seed` has the same K, V and
// q wherever the sequence sits and whatever pages it got.
struct PagedCache {
  vkattn_context* ctx;
  vkattn_kv_cache* cache = nullptr;
  std::map<int64_t, uint32_t> seed;   // cache id -> its data
  std::map<int64_t, int32_t> length;  // committed tokens

  PagedCache(vkattn_context* c, vkattn_dtype dt, uint32_t pages) : ctx(c) {
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 1, cd.num_kv_heads = kHkv, cd.head_dim = kD, cd.page_size = 16;
    cd.num_pages = pages, cd.dtype = dt;
    EXPECT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  }
  ~PagedCache() { vkattn_kv_cache_destroy(cache); }

  // One step: t[i] new tokens of sids[i]; committed (prefill) or aborted
  // after its attention, whose output rows go to *out.
  void step(const std::vector<int64_t>& sids, const std::vector<int32_t>& t, bool commit,
            std::vector<float>* out) {
    int64_t n = 0;
    for (int32_t x : t) n += x;
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, uint32_t(sids.size()), sids.data(), t.data(), &st),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    std::vector<float> k, v, q;
    for (size_t i = 0; i < sids.size(); ++i) {
      const uint32_t sd = seed.at(sids[i]);
      const int32_t before = length[sids[i]];
      for (int32_t j = before; j < before + t[i]; ++j) {
        for (int e = 0; e < kHkv * kD; ++e)
          k.push_back(value(sd, 1, uint64_t(j) * kHkv * kD + e)),
              v.push_back(value(sd, 2, uint64_t(j) * kHkv * kD + e));
        for (int e = 0; e < kH * kD; ++e) q.push_back(value(sd, 0, uint64_t(j) * kH * kD + e));
      }
    }
    vkattn_tensor* kt = make(ctx, VKATTN_F32, {n, kHkv, kD});
    vkattn_tensor* vt = make(ctx, VKATTN_F32, {n, kHkv, kD});
    write_rows(kt, VKATTN_F32, k);
    write_rows(vt, VKATTN_F32, v);
    ASSERT_EQ(vkattn_step_append(st, 0, kt, vt), VKATTN_SUCCESS) << vkattn_last_error();
    if (out) {
      vkattn_tensor* qt = make(ctx, VKATTN_F32, {n, kH, kD});
      vkattn_tensor* ot = make(ctx, VKATTN_F32, {n, kH, kD});
      write_rows(qt, VKATTN_F32, q);
      vkattn_attention_desc d;
      vkattn_attention_desc_init(&d);
      d.num_heads = kH, d.num_kv_heads = kHkv, d.head_dim = kD, d.causal = 1;
      ASSERT_EQ(vkattn_step_attention(st, 0, &d, qt, ot), VKATTN_SUCCESS) << vkattn_last_error();
      out->resize(size_t(n) * kH * kD);
      ASSERT_EQ(vkattn_tensor_read(ot, out->data(), out->size() * 4), VKATTN_SUCCESS);
      vkattn_tensor_destroy(qt);
      vkattn_tensor_destroy(ot);
    }
    vkattn_tensor_destroy(kt);
    vkattn_tensor_destroy(vt);
    if (commit) {
      ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS) << vkattn_last_error();
      for (size_t i = 0; i < sids.size(); ++i) length[sids[i]] += t[i];
    } else {
      vkattn_step_abort(st);
    }
  }
  void prefill(int64_t id, uint32_t data, int32_t len) {
    seed[id] = data;
    step({id}, {len}, true, nullptr);
  }
};

// The rows of sequence x in a step's output.
std::vector<float> rows_of(const std::vector<float>& out, const std::vector<int64_t>& sids,
                           const std::vector<int32_t>& t, int64_t x) {
  size_t row = 0, i = 0;
  for (; sids[i] != x; ++i) row += size_t(t[i]);
  return std::vector<float>(out.begin() + row * kH * kD, out.begin() + (row + t[i]) * kH * kD);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

// Steps over a paged cache whose pools span 16-19 buffers
// (VKATTN_KV_BUFFER_BYTES), f16 and int8: a sequence's decode step (and a
// 4-token chunk) alone, with other decodes, and with prefill chunks, in
// several positions (each step aborted after its attention, so every run
// sees the same cache); the rows also match a context without the flag.
TEST_F(BatchInvariance, StepsKeepABatchMembersBits) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "262144"}});
  vkattn_context* ctx = invariant_context(true);
  vkattn_context* plain = invariant_context(false);
  ASSERT_TRUE(ctx && plain);
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_I8 ? "int8 cache" : "f16 cache");
    PagedCache pc(ctx, dt, 600), pp(plain, dt, 600);
    // Lengths not multiples of 16: a decode's new token lands in its own
    // last page, so every run reads the same pages.
    const std::vector<int32_t> lens = {1500, 37, 900, 2501, 3, 700};
    for (size_t i = 0; i < lens.size(); ++i)
      pc.prefill(int64_t(i), uint32_t(i), lens[i]), pp.prefill(int64_t(i), uint32_t(i), lens[i]);
    for (auto [x, tx] : {std::pair<int64_t, int32_t>{3, 1}, {1, 4}}) {
      std::vector<float> alone, reference;
      pc.step({x}, {tx}, false, &alone);
      pp.step({x}, {tx}, false, &reference);
      EXPECT_LT(max_diff(alone, reference), 1e-5) << "sequence " << x;
      const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> batches = {
          {{0, x, 2}, {1, tx, 1}},
          {{x, 0, 2, 5, 4}, {tx, 1, 1, 1, 1}},
          {{2, 5, x}, {1, 1, tx}},
          {{0, x, 5}, {100, tx, 30}},  // mixed: prefill chunks around it
          {{5, x}, {200, tx}}};
      for (const auto& [sid, t] : batches) {
        std::vector<float> got;
        pc.step(sid, t, false, &got);
        Result a{alone, {}}, b{rows_of(got, sid, t, x), {}};
        EXPECT_TRUE(same_bits(a, b)) << "sequence " << x << " in a step of " << sid.size();
      }
    }
  }
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_context_destroy(ctx);
  vkattn_context_destroy(plain);
}

// Where a sequence's pages lie does not move its splits: the same tokens
// cached first (pages from the first buffers) and again after other
// sequences (its pages cross buffers elsewhere) give the same bits with
// the flag (their pages gathered, VKATTN_LOG=kernels says so), different
// ones without it. (Caller pools gather the same way: test_interop's paged
// cases under VKATTN_BATCH_INVARIANT=1 VKATTN_BINDING_LIMIT=8192, ctest
// test_interop.invariant_windows, check the gathered reads.)
TEST_F(BatchInvariance, PagePlacementDoesNotMoveSplits) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "262144"}});
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "with the flag" : "without it");
    vkattn_context* ctx = invariant_context(invariant);
    ASSERT_NE(ctx, nullptr);
    {
      PagedCache pc(ctx, VKATTN_F16, 400);
      pc.prefill(0, 7, 1000);  // data 7: pages 0-62 (32-page buffers)
      // Fillers of 7 pages: each new sequence starts in the buffer with the
      // most free pages, so they leave 25 free in each later buffer, and
      // the copy's pages cross buffers after 25 pages, not 32.
      for (int64_t f = 1; f <= 10; ++f) pc.prefill(f, uint32_t(100 + f), 100);
      pc.prefill(20, 7, 1000);  // data 7 again
      std::vector<float> a, b;
      pc.step({0}, {1}, false, &a);
      pc.step({20}, {1}, false, &b);
      Result ra{a, {}}, rb{b, {}};
      if (invariant)
        EXPECT_TRUE(same_bits(ra, rb));
      else
        EXPECT_FALSE(same_bits(ra, rb)) << "the copies' pages cross buffers at the same keys";
    }
    EXPECT_EQ(validation_messages(ctx), 0u);
    vkattn_context_destroy(ctx);
  }
}

// vkattn_context_create takes the flag (create_from_vulkan too:
// ExternalDevice in tests/test_external_device.cpp); unknown bits are refused.
TEST_F(BatchInvariance, FlagIsAccepted) {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  d.flags = VKATTN_CONTEXT_BATCH_INVARIANT;
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(&d, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_context_destroy(ctx);
  d.flags = 0x80u;
  EXPECT_EQ(vkattn_context_create(&d, &ctx), VKATTN_ERROR_INVALID_ARGUMENT);
}

// VKATTN_CONTEXT_BATCH_INVARIANT: a sequence's outputs and lse are
// bit-identical alone or in any batch, in any position, in decode-only and
// mixed calls and steps of different sizes: varlen calls (dense K/V) and
// steps over a paged cache (GQA, pools over several buffers, 8-bit
// caches), for the family the device table picks and each family forced
// (ctest runs this file once per family: tests/CMakeLists.txt). Without
// the flag the same batches cut the sequence's keys differently (the
// kernel log's split counts), which is what the flag removes.
#include <cstring>
#include <random>
#include <sstream>
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
  d.flags = VKATTN_CONTEXT_VALIDATION | (invariant ? VKATTN_CONTEXT_BATCH_INVARIANT : 0u);
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
  uint32_t seed;  // its data: the same wherever it sits in a batch
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
std::vector<Result> run_varlen(vkattn_context* ctx, const std::vector<Seq>& batch) {
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

}  // namespace

class BatchInvariance : public ::testing::Test {};

// Varlen calls: a decode over 3000 keys, a 5-token verification chunk and
// a 100-token prefill chunk, each alone and in every batch around it.
TEST_F(BatchInvariance, VarlenSequencesKeepTheirBits) {
  vkattn_context* ctx = invariant_context(true);
  ASSERT_NE(ctx, nullptr);
  for (const Seq& x : {Seq{1, 3000, 1}, Seq{5, 700, 2}, Seq{100, 1500, 3}}) {
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
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(" items=");
      if (line.rfind("vkattn: attention family=", 0) == 0 && at != std::string::npos)
        n += std::stoull(line.substr(at + 7));
    }
    return n;
  };
  const Seq x{1, 1000, 1};
  std::vector<Seq> sixteen(16, x);
  // Per sequence: alone vs the average in a batch of 16.
  const uint64_t alone = items(false, {x}), in16 = items(false, sixteen) / 16;
  EXPECT_GT(alone, in16) << "the device-filling split no longer depends on the batch";
  EXPECT_EQ(items(true, {x}), items(true, sixteen) / 16);
}

// Steps over a paged cache: GQA 4, 16-token pages over several pool
// buffers (VKATTN_KV_BUFFER_BYTES), f16 and int8; a sequence's decode step
// alone, with other decodes, and with a prefill chunk, in several
// positions (each step aborted after its attention, so every run sees the
// same cache).
TEST_F(BatchInvariance, StepsKeepABatchMembersBits) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "262144"}});
  vkattn_context* ctx = invariant_context(true);
  ASSERT_NE(ctx, nullptr);
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_I8 ? "int8 cache" : "f16 cache");
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 1, cd.num_kv_heads = kHkv, cd.head_dim = kD, cd.page_size = 16;
    cd.num_pages = 600, cd.dtype = dt;
    vkattn_kv_cache* cache = nullptr;
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    // Sequences 0..5 of these lengths (not multiples of 16: a decode's new
    // token lands in its own last page, so every run reads the same pages).
    const std::vector<int32_t> lens = {1500, 37, 900, 2501, 3, 700};
    std::vector<int64_t> ids;
    for (size_t i = 0; i < lens.size(); ++i) ids.push_back(int64_t(i));
    auto step = [&](const std::vector<int64_t>& sid, const std::vector<int32_t>& t, bool commit,
                    std::vector<float>* out) {
      int64_t n = 0;
      for (int32_t x : t) n += x;
      vkattn_step* st = nullptr;
      ASSERT_EQ(vkattn_step_begin(cache, uint32_t(sid.size()), sid.data(), t.data(), &st),
                VKATTN_SUCCESS)
          << vkattn_last_error();
      std::vector<float> k, v, q;
      for (size_t i = 0; i < sid.size(); ++i) {
        // Token j of sequence s: the same K/V/q in every run.
        const int32_t before = commit ? 0 : lens[size_t(sid[i])];
        for (int32_t j = before; j < before + t[i]; ++j)
          for (int e = 0; e < kHkv * kD; ++e)
            k.push_back(value(uint32_t(sid[i]), 1, uint64_t(j) * kHkv * kD + e)),
                v.push_back(value(uint32_t(sid[i]), 2, uint64_t(j) * kHkv * kD + e));
        for (int32_t j = before; j < before + t[i]; ++j)
          for (int e = 0; e < kH * kD; ++e)
            q.push_back(value(uint32_t(sid[i]), 0, uint64_t(j) * kH * kD + e));
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
      if (commit)
        ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS) << vkattn_last_error();
      else
        vkattn_step_abort(st);
    };
    for (size_t i = 0; i < lens.size(); ++i) step({ids[i]}, {lens[i]}, true, nullptr);
    // Sequence 3's decode row (2501 keys over several buffers) alone, then
    // in batches; sequence 1's 4-token chunk likewise.
    for (auto [x, tx] : {std::pair<int64_t, int32_t>{3, 1}, {1, 4}}) {
      std::vector<float> alone;
      step({x}, {tx}, false, &alone);
      const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> batches = {
          {{0, x, 2}, {1, tx, 1}},
          {{x, 0, 2, 5, 4}, {tx, 1, 1, 1, 1}},
          {{2, 5, x}, {1, 1, tx}},
          {{0, x, 5}, {100, tx, 30}},  // mixed: prefill chunks around it
          {{5, x}, {200, tx}}};
      for (const auto& [sid, t] : batches) {
        std::vector<float> got;
        step(sid, t, false, &got);
        size_t row = 0;
        for (size_t i = 0; sid[i] != x; ++i) row += size_t(t[i]);
        const std::vector<float> mine(got.begin() + row * kH * kD,
                                      got.begin() + (row + tx) * kH * kD);
        Result a{alone, {}}, b{mine, {}};
        EXPECT_TRUE(same_bits(a, b)) << "sequence " << x << " in a step of " << sid.size();
      }
    }
    vkattn_kv_cache_destroy(cache);
  }
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_context_destroy(ctx);
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

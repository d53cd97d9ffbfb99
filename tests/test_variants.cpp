// Attention variants (user functions, vkattn_variant): GLSL mask and score
// functions compiled at run time, against the f64 reference given the
// same functions in C++ (tests/attention_case.h host_mask / host_score),
// with each family forced (lanes, tiled, decode; the default), and the
// errors of vkattn_variant_create and of calls with wrong parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "api/handles.h"
#include "attention_case.h"
#include "cache_contents.h"
#include "core/context.h"
#include "ops/attention/family.h"
#include "ops/attention/user_functions.h"
#include "ops/attention/variant.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

// T5's relative position buckets, integer-only so GLSL and C++ agree
// exactly: the magnitude's bit length (0 for 0, capped at 15), plus 16
// for keys after the query.
const char* kT5Source = R"(
int t5_bucket(int rel) {
  int mag = min(findMSB(uint(abs(rel))) + 1, 15);
  return mag + (rel > 0 ? 16 : 0);
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + vkattn_param_f32(0, head * 32u + uint(t5_bucket(k_pos - q_pos)));
}
)";
int t5_bucket(long rel) {
  long a = rel < 0 ? -rel : rel;
  int bits = 0;
  while (a) ++bits, a >>= 1;
  return std::min(bits, 15) + (rel > 0 ? 16 : 0);
}

// Document masking inside one packed sequence: an i32 document id per
// position (slot 0), causal within each document.
const char* kDocumentSource = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return q_pos >= 0 && vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));
}
)";

// ALiBi written by the user: slopes in slot 0.
const char* kAlibiSource = R"(
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score - vkattn_param_f32(0, head) * float(abs(q_pos - k_pos));
}
)";

// kAlibiSource on c (causal): the standard slopes for c.H heads in slot 0,
// and the same bias on the host.
void use_alibi_source(AttnCase& c) {
  c.causal = true;
  c.variant_source = kAlibiSource;
  c.variant_dtypes[0] = VKATTN_F32;
  std::vector<double> slopes;
  for (int h = 0; h < c.H; ++h) slopes.push_back(std::exp2(-8.0 * (h + 1) / c.H));
  c.variant_params[0] = slopes;
  c.host_score = [slopes](double s, int, int h, long q, long k) {
    return s - static_cast<float>(slopes[size_t(h)]) * std::fabs(double(q - k));
  };
}

// A forced family whose variant pipeline fails its self-check hands the
// call to another family (logged), and the case would pass on the other's
// results: while one lives, such a fallback fails the test. (The library's
// messages still reach stderr.)
class NoCheckFallback {
 public:
  NoCheckFallback() { vkattn_set_log_callback(on_message, this); }
  ~NoCheckFallback() {
    vkattn_set_log_callback(nullptr, nullptr);
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& m : failed_) ADD_FAILURE() << "a forced family fell back: " << m;
  }
  NoCheckFallback(const NoCheckFallback&) = delete;
  NoCheckFallback& operator=(const NoCheckFallback&) = delete;

 private:
  static void on_message(vkattn_log_level, const char* message, void* user) {
    std::fprintf(stderr, "vkattn: %s\n", message);
    auto* self = static_cast<NoCheckFallback*>(user);
    std::lock_guard<std::mutex> lock(self->mu_);
    if (std::strstr(message, "self-check failed")) self->failed_.push_back(message);
  }
  std::mutex mu_;
  std::vector<std::string> failed_;
};

// Every family the tests force, "" = the device's default.
const char* const kFamilies[] = {"", "lanes", "tiled", "decode"};

// VKATTN_ATTN_KERNEL=family for a scope; "" leaves the environment's (so
// the "default" cases run on whatever a suite forces from outside: the
// coopmat suite under lavapipe 26.1, tests/CMakeLists.txt).
ScopedEnv::Vars forced_family(const char* family) {
  if (!*family) return {};
  return {{"VKATTN_ATTN_KERNEL", family}};
}

class Variants : public testing::TestWithParam<const char*> {
 protected:
  void run(AttnCase c) {
    NoCheckFallback no_fallback;
    ScopedEnv env(forced_family(GetParam()));
    ForcedContext fc;
    ASSERT_NE(fc.ctx, nullptr);
    c.seed += 7;
    const CaseStats st = run_attention_case(fc.ctx, c);
    EXPECT_GT(st.checked, 0);
    last = st;
  }
  CaseStats last;
};

TEST_P(Variants, DocumentMaskInOnePackedSequence) {
  AttnCase c;
  c.H = 4, c.Hkv = 2, c.d = 40;
  c.seqs = {{83, 83}, {5, 40}};  // (the second: t < u, its q_pos from 35)
  c.causal = true;
  c.variant_source = kDocumentSource;
  c.variant_dtypes[0] = VKATTN_I32;
  std::vector<int> doc;
  for (int j = 0; j < 83; ++j) doc.push_back(j < 20 ? 0 : j < 50 ? 1 : j < 51 ? 2 : 3);
  for (int x : doc) c.variant_params[0].push_back(x);
  c.host_mask = [doc](int, int, long q, long k) {
    auto at = [&](long i) { return i >= 0 && i < long(doc.size()) ? doc[i] : 0; };
    return q >= 0 && at(q) == at(k);
  };
  run(c);
}

TEST_P(Variants, T5BucketsPerHeadTable) {
  AttnCase c;
  c.H = 4, c.Hkv = 4, c.d = 64;
  c.seqs = {{17, 50}, {64, 64}, {0, 9}, {3, 0}};
  c.variant_source = kT5Source;
  c.variant_dtypes[0] = VKATTN_F32;
  std::vector<double> table;
  for (int n = 0; n < 4 * 32; ++n) table.push_back(std::sin(0.37 * n) * 2.0);
  c.variant_params[0] = table;
  c.host_score = [table](double s, int, int h, long q, long k) {
    return s + static_cast<float>(table[h * 32 + t5_bucket(k - q)]);
  };
  run(c);
}

TEST_P(Variants, AlibiAsScoreModEqualsTheBuiltIn) {
  AttnCase c;
  c.H = 8, c.Hkv = 2, c.d = 32;
  c.seqs = {{40, 72}, {1, 33}};
  use_alibi_source(c);
  run(c);
}

TEST_P(Variants, SoftcapAsScoreMod) {
  AttnCase c;
  c.H = 2, c.Hkv = 1, c.d = 48;
  c.seqs = {{30, 30}};
  c.scale = 0.9f;  // (scores of a few units: the cap bends them)
  c.variant_source = R"(
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return 5.0 * tanh(score / 5.0);
})";
  c.host_score = [](double s, int, int, long, long) { return 5.0 * std::tanh(s / 5.0); };
  run(c);
}

TEST_P(Variants, PrefixLmWithAPrefixPerSequence) {
  AttnCase c;
  c.H = 4, c.Hkv = 2, c.d = 16;
  c.seqs = {{24, 24}, {31, 31}, {8, 20}};
  c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos < vkattn_param_i32(1u, seq) || k_pos <= q_pos;
})";
  c.variant_dtypes[1] = VKATTN_I32;
  c.variant_params[1] = {10, 0, 15};
  c.host_mask = [](int b, int, long q, long k) {
    const int prefix[] = {10, 0, 15};
    return k < prefix[b] || k <= q;
  };
  run(c);
}

TEST_P(Variants, DilatedMaskAndRowsThatSeeNothing) {
  AttnCase c;
  c.H = 4, c.Hkv = 2, c.d = 24;
  c.seqs = {{45, 45}, {12, 5}};  // (t > u: negative q_pos)
  c.causal = true;
  c.window = 30;
  // Stride 4 back from the query; every key of rows at q_pos % 5 == 3 hidden.
  c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  int r = q_pos - 5 * ((q_pos >= 0 ? q_pos : q_pos - 4) / 5);  // floor mod
  return ((q_pos - k_pos) & 3) == 0 && r != 3;
})";
  c.host_mask = [](int, int, long q, long k) {
    long r = ((q % 5) + 5) % 5;
    return ((q - k) & 3) == 0 && r != 3;
  };
  run(c);
  EXPECT_GT(last.hidden_rows, 0);
}

TEST_P(Variants, BothFunctionsWithTreesAndAdditiveMask) {
  AttnCase c;
  c.H = 4, c.Hkv = 2, c.d = 32;
  c.seqs = {{9, 40}, {6, 6}};
  c.trees = {true, true};
  c.mask_type = VKATTN_MASK_ADDITIVE;
  c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return head != 1u || k_pos % 2 == 0;
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score * vkattn_param_f32(2, seq) + float(head) * 0.25;
})";
  c.variant_dtypes[2] = VKATTN_F32;
  c.variant_params[2] = {0.5, 1.5};
  c.host_mask = [](int, int h, long, long k) { return h != 1 || k % 2 == 0; };
  c.host_score = [](double s, int b, int h, long, long) {
    return s * (b == 0 ? 0.5 : 1.5) + h * 0.25;
  };
  run(c);
}

// With top-k lists, a left window and chunks: the function joins them.
// Its hidden band (keys 8-39 of every row) covers whole tiles and blocks,
// which the families skip.
TEST_P(Variants, WithTopkListsWindowsAndChunks) {
  for (int topk : {-1, 12}) {
    SCOPED_TRACE("topk " + std::to_string(topk));
    AttnCase c;
    c.H = 4, c.Hkv = 2, c.d = 40;
    c.seqs = {{20, 90}, {3, 64}, {70, 70}};
    c.causal = true;
    c.window = 50, c.chunk = 48, c.topk = topk;
    c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return (k_pos < 8 || k_pos >= 40) && (head != 2u || (k_pos & 1) == 0);
})";
    c.host_mask = [](int, int h, long, long k) {
      return (k < 8 || k >= 40) && (h != 2 || (k & 1) == 0);
    };
    run(c);
  }
}

TEST_P(Variants, PaddedBatchRowsAreTheirSeq) {
  AttnCase c;
  c.H = 2, c.Hkv = 2, c.d = 32;
  c.seqs = {{7, 19}, {7, 19}, {7, 19}};
  c.padded = true, c.pad_keys = 3;
  c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos >= int(seq) * 4;
})";
  c.host_mask = [](int b, int, long, long k) { return k >= b * 4; };
  run(c);
}

TEST_P(Variants, F16Inputs) {
  AttnCase c;
  c.H = 4, c.Hkv = 2, c.d = 64;
  c.seqs = {{33, 70}};
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  c.variant_source = kAlibiSource;
  c.variant_dtypes[0] = VKATTN_F32;
  std::vector<double> slopes = {0.5, 0.25, 0.125, 0.0625};
  c.variant_params[0] = slopes;
  c.host_score = [slopes](double s, int, int h, long q, long k) {
    return s - slopes[h] * std::fabs(double(q - k));
  };
  run(c);
}

INSTANTIATE_TEST_SUITE_P(Families, Variants, testing::ValuesIn(kFamilies),
                         [](const testing::TestParamInfo<const char*>& i) {
                           return std::string(*i.param ? i.param : "default");
                         });

// --- Steps over every cache dtype, and caller pools ---------------------

// Both functions, reading the call's sequence: keys k_pos % 3 == seq
// hidden, and a per-head slope on the distance added.
const char* kStepSource = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos % 3 != int(seq);
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + vkattn_param_f32(0, head) * float(q_pos - k_pos);
})";
const float kStepSlopes[4] = {0.01f, -0.02f, 0.03f, 0.0f};
bool step_mask(int b, int, long, long k) {
  return k % 3 != b;
}
double step_score(double s, int, int h, long q, long k) {
  return s + kStepSlopes[h] * double(float(q - k));
}

using VariantPtr = std::unique_ptr<vkattn_variant, void (*)(vkattn_variant*)>;

// kStepSource's variant (slot 0: F32 slopes per head).
VariantPtr step_variant(vkattn_context* ctx) {
  vkattn_variant_desc vd;
  vkattn_variant_desc_init(&vd);
  vd.source = kStepSource;
  vd.param_dtypes[0] = VKATTN_F32;
  vkattn_variant* var = nullptr;
  EXPECT_EQ(vkattn_variant_create(ctx, &vd, &var), VKATTN_SUCCESS) << vkattn_last_error();
  return VariantPtr(var, &vkattn_variant_destroy);
}

struct StepCase {
  vkattn_dtype cache;
  const char* family;
};

class StepVariants : public testing::TestWithParam<StepCase> {};

// A step of a 37-token prompt and a decode over 20 cached tokens, the
// reference over what the cache holds (dequantized).
TEST_P(StepVariants, StepMatchesTheReference) {
  NoCheckFallback no_fallback;
  const StepCase c = GetParam();
  ScopedEnv env(forced_family(c.family));
  ForcedContext fc;
  vkattn_context* ctx = fc.ctx;
  ASSERT_NE(ctx, nullptr);
  const uint32_t H = 4, Hkv = 2, d = 32;
  std::vector<std::unique_ptr<vkattn_tensor, void (*)(vkattn_tensor*)>> owned;
  auto tensor = [&](vkattn_dtype dt, std::vector<int64_t> shape) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    owned.emplace_back(t, &vkattn_tensor_destroy);
    return t;
  };
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = 1, cd.num_kv_heads = Hkv, cd.head_dim = d, cd.page_size = 16, cd.num_pages = 8;
  cd.dtype = c.cache;
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  if (c.cache == VKATTN_FP8_E4M3) {
    const float ks = 1.0f / 256, vs = 1.0f / 256;
    ASSERT_EQ(vkattn_kv_cache_set_scales(cache, 0, 1, &ks, &vs), VKATTN_SUCCESS);
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto rows = [&](int64_t n, uint32_t heads) {
    std::vector<float> x(size_t(n) * heads * d);
    for (float& v : x) v = uni(rng);
    vkattn_tensor* t = tensor(VKATTN_F32, {n, int64_t(heads), int64_t(d)});
    EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return std::make_pair(t, x);
  };
  const int64_t ids[2] = {1, 2};
  {
    const int64_t id = 2;
    const int32_t n = 20;
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &n, &st), VKATTN_SUCCESS);
    auto k = rows(n, Hkv), v = rows(n, Hkv);
    ASSERT_EQ(vkattn_step_append(st, 0, k.first, v.first), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  }
  const int32_t t[2] = {37, 1};
  vkattn_step* st = nullptr;
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &st), VKATTN_SUCCESS) << vkattn_last_error();
  auto k = rows(38, Hkv), v = rows(38, Hkv), q = rows(38, H);
  ASSERT_EQ(vkattn_step_append(st, 0, k.first, v.first), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_tensor* out = tensor(VKATTN_F32, {38, int64_t(H), int64_t(d)});
  vkattn_tensor* lse = tensor(VKATTN_F32, {38, int64_t(H)});
  VariantPtr var = step_variant(ctx);
  ASSERT_NE(var, nullptr);
  vkattn_tensor* slopes = tensor(VKATTN_F32, {4});
  ASSERT_EQ(vkattn_tensor_write(slopes, kStepSlopes, sizeof(kStepSlopes)), VKATTN_SUCCESS);
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d, ad.causal = 1, ad.lse = lse;
  ad.variant = var.get(), ad.variant_params[0] = slopes;
  ASSERT_EQ(vkattn_step_attention(st, 0, &ad, q.first, out), VKATTN_SUCCESS) << vkattn_last_error();
  var.reset();  // (before the results are read: the call keeps what it needs)
  std::vector<float> got(38 * H * d), got_lse(38 * H);
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(lse, got_lse.data(), got_lse.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  std::vector<float> rk, rv;
  const int32_t lens[2] = {37, 21};
  for (int b = 0; b < 2; ++b)
    ASSERT_NO_FATAL_FAILURE(
        append_cache_contents(cache, c.cache, ids[b], lens[b], Hkv, d, &rk, &rv));
  vkattn::ref::AttentionParams p;
  p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d, p.causal = true;
  p.user_mask = step_mask, p.user_score = step_score;
  const int32_t cu_q[3] = {0, 37, 38}, cu_k[3] = {0, 37, 58};
  std::vector<float> want(got.size()), want_lse(got_lse.size());
  vkattn::ref::attention_varlen(p, 2, cu_q, cu_k, q.second.data(), rk.data(), rv.data(),
                                want.data(), want_lse.data());
  // (coopmat multiplies in f16: f16_math_slack, |v| <= 1 here.)
  const double slack = f16_math_slack();
  double err = 0, lerr = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  for (size_t i = 0; i < got_lse.size(); ++i)
    lerr = std::max(lerr, std::fabs(got_lse[i] - want_lse[i]) / (1.0 + std::fabs(want_lse[i])));
  EXPECT_LT(err, 2e-5 + slack) << "out";
  EXPECT_LT(lerr, 1e-4 + slack) << "lse (relative to 1 + |lse|)";
  vkattn_kv_cache_destroy(cache);
}

std::string step_name(const testing::TestParamInfo<StepCase>& i) {
  return std::string(vkattn::dtype_name(i.param.cache)) + "_" +
         (*i.param.family ? i.param.family : "default");
}

INSTANTIATE_TEST_SUITE_P(CacheDtypes, StepVariants,
                         testing::Values(StepCase{VKATTN_F32, ""}, StepCase{VKATTN_F16, "tiled"},
                                         StepCase{VKATTN_BF16, "decode"},
                                         StepCase{VKATTN_I8, "lanes"},
                                         StepCase{VKATTN_FP8_E4M3, "decode"},
                                         StepCase{VKATTN_Q4, ""}, StepCase{VKATTN_Q4, "tiled"}),
                         step_name);

// --- The full product (label slow: names with "Slow") --------------------

// Every family x every cache dtype for steps.
std::vector<StepCase> every_step_case() {
  std::vector<StepCase> out;
  for (vkattn_dtype dt :
       {VKATTN_F32, VKATTN_F16, VKATTN_BF16, VKATTN_I8, VKATTN_FP8_E4M3, VKATTN_Q4})
    for (const char* f : kFamilies) out.push_back(StepCase{dt, f});
  return out;
}
INSTANTIATE_TEST_SUITE_P(SlowProduct, StepVariants, testing::ValuesIn(every_step_case()),
                         step_name);

// Every family x entry point (varlen, padded) x input dtype (f32, f16) x
// source: documents (i32 ids), T5 buckets (f32 table), ALiBi as a score,
// a dilated mask hiding whole rows, both functions reading seq; head dims
// 33 to 72, t > u, empty sequences (varlen).
struct ProductCase {
  const char* family;
  int source;  // 0..4 as above
  bool padded, f16;
};

class VariantsSlow : public testing::TestWithParam<ProductCase> {};

TEST_P(VariantsSlow, MatchesTheReference) {
  NoCheckFallback no_fallback;
  const ProductCase p = GetParam();
  AttnCase c;
  c.H = 4, c.Hkv = 2;
  c.d = std::vector<int>{40, 33, 64, 72, 24}[size_t(p.source)];
  if (p.padded)
    c.seqs = {{13, 29}, {13, 29}, {13, 29}}, c.padded = true, c.pad_keys = 3;
  else
    c.seqs = {{37, 61}, {8, 3}, {0, 5}, {20, 20}};
  if (p.f16) c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  c.seed = 100 + p.source;
  switch (p.source) {
    case 0: {
      c.causal = true;
      c.variant_source = kDocumentSource;
      c.variant_dtypes[0] = VKATTN_I32;
      std::vector<int> doc;
      for (int j = 0; j < 61; ++j) doc.push_back(j / 17);
      for (int x : doc) c.variant_params[0].push_back(x);
      c.host_mask = [doc](int, int, long q, long k) {
        auto at = [&](long i) { return i >= 0 && i < long(doc.size()) ? doc[size_t(i)] : 0; };
        return q >= 0 && at(q) == at(k);
      };
      break;
    }
    case 1: {
      c.variant_source = kT5Source;
      c.variant_dtypes[0] = VKATTN_F32;
      std::vector<double> table;
      for (int n = 0; n < c.H * 32; ++n) table.push_back(std::cos(0.29 * n) * 1.5);
      c.variant_params[0] = table;
      c.host_score = [table](double s, int, int h, long q, long k) {
        return s + static_cast<float>(table[size_t(h * 32 + t5_bucket(k - q))]);
      };
      break;
    }
    case 2:
      use_alibi_source(c);
      break;
    case 3:
      c.causal = true;
      c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  int r = q_pos - 5 * ((q_pos >= 0 ? q_pos : q_pos - 4) / 5);  // floor mod
  return ((q_pos - k_pos) & 3) == 0 && r != 3;
})";
      c.host_mask = [](int, int, long q, long k) {
        return ((q - k) & 3) == 0 && ((q % 5) + 5) % 5 != 3;
      };
      break;
    default:
      c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos % 3 != int(seq) || head == 0u;
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score * vkattn_param_f32(1, seq) - 0.125 * float(head);
})";
      c.variant_dtypes[1] = VKATTN_F32;
      c.variant_params[1] = {0.5, 1.25, 2.0, 0.75};
      c.host_mask = [](int b, int h, long, long k) { return k % 3 != b || h == 0; };
      c.host_score = [](double s, int b, int h, long, long) {
        const double m[4] = {0.5, 1.25, 2.0, 0.75};
        return s * m[b] - 0.125 * h;
      };
      break;
  }
  ScopedEnv env(forced_family(p.family));
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  const CaseStats st = run_attention_case(fc.ctx, c);
  EXPECT_GT(st.checked, 0);
  if (p.source == 3) EXPECT_GT(st.hidden_rows, 0);
}

std::vector<ProductCase> every_product_case() {
  std::vector<ProductCase> out;
  for (const char* f : kFamilies)
    for (int s = 0; s < 5; ++s)
      for (bool padded : {false, true})
        for (bool f16 : {false, true}) out.push_back(ProductCase{f, s, padded, f16});
  return out;
}

const char* const kProductSources[] = {"document", "t5", "alibi", "dilated", "both"};
std::string product_name(const testing::TestParamInfo<ProductCase>& i) {
  return std::string(*i.param.family ? i.param.family : "default") + "_" +
         kProductSources[i.param.source] + (i.param.padded ? "_padded" : "_varlen") +
         (i.param.f16 ? "_f16" : "_f32");
}
INSTANTIATE_TEST_SUITE_P(Product, VariantsSlow, testing::ValuesIn(every_product_case()),
                         product_name);

// vkattn_attention_paged over pools in a random page order, with t > u in
// one sequence (negative q_pos), both functions.
TEST_P(Variants, CallerPools) {
  ScopedEnv env(forced_family(GetParam()));
  ForcedContext fc;
  vkattn_context* ctx = fc.ctx;
  ASSERT_NE(ctx, nullptr);
  const int H = 4, Hkv = 2, d = 16, ps = 8, num_pages = 12;
  const std::vector<int32_t> tq = {5, 20, 9}, uk = {40, 11, 0};
  std::vector<int32_t> cu_q = {0}, indptr = {0}, pages;
  std::vector<int32_t> order(num_pages);
  for (int i = 0; i < num_pages; ++i) order[i] = (i * 7) % num_pages;
  int next = 0;
  for (size_t b = 0; b < tq.size(); ++b) {
    cu_q.push_back(cu_q.back() + tq[b]);
    const int np = (uk[b] + ps - 1) / ps;
    for (int i = 0; i < np; ++i) pages.push_back(order[next++]);
    indptr.push_back(int32_t(pages.size()));
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> kp(size_t(num_pages) * ps * Hkv * d), vp(kp.size()),
      q(size_t(cu_q.back()) * H * d);
  for (float& x : kp) x = uni(rng);
  for (float& x : vp) x = uni(rng);
  for (float& x : q) x = uni(rng);
  auto make = [&](std::vector<int64_t> shape, const std::vector<float>& x) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    if (!x.empty()) EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return std::unique_ptr<vkattn_tensor, void (*)(vkattn_tensor*)>(t, &vkattn_tensor_destroy);
  };
  auto kt = make({num_pages, ps, Hkv, d}, kp), vt = make({num_pages, ps, Hkv, d}, vp);
  auto qt = make({cu_q.back(), H, d}, q), ot = make({cu_q.back(), H, d}, {});
  auto lt = make({cu_q.back(), H}, {});
  auto sl = make({4}, std::vector<float>(kStepSlopes, kStepSlopes + 4));
  VariantPtr var = step_variant(ctx);
  ASSERT_NE(var, nullptr);
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d, ad.causal = 1, ad.lse = lt.get();
  ad.variant = var.get(), ad.variant_params[0] = sl.get();
  ASSERT_EQ(
      vkattn_attention_paged(ctx, &ad, uint32_t(tq.size()), cu_q.data(), uk.data(), indptr.data(),
                             pages.data(), ps, qt.get(), kt.get(), vt.get(), ot.get()),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> got(q.size()), got_lse(size_t(cu_q.back()) * H);
  ASSERT_EQ(vkattn_tensor_read(ot.get(), got.data(), got.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(lt.get(), got_lse.data(), got_lse.size() * 4), VKATTN_SUCCESS);
  // The reference over each sequence's keys gathered from its pages.
  std::vector<float> rk, rv;
  std::vector<int32_t> cu_k = {0};
  for (size_t b = 0; b < tq.size(); ++b) {
    for (int j = 0; j < uk[b]; ++j) {
      const size_t row = (size_t(pages[indptr[b] + j / ps]) * ps + j % ps) * Hkv * d;
      rk.insert(rk.end(), kp.begin() + row, kp.begin() + row + Hkv * d);
      rv.insert(rv.end(), vp.begin() + row, vp.begin() + row + Hkv * d);
    }
    cu_k.push_back(cu_k.back() + uk[b]);
  }
  vkattn::ref::AttentionParams p;
  p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d, p.causal = true;
  p.user_mask = step_mask, p.user_score = step_score;
  std::vector<float> want(got.size()), want_lse(got_lse.size());
  vkattn::ref::attention_varlen(p, int(tq.size()), cu_q.data(), cu_k.data(), q.data(), rk.data(),
                                rv.data(), want.data(), want_lse.data());
  // (f16 arithmetic, VKATTN_FORCE_F16_MATH or coopmat: f16_math_slack.)
  const double slack = f16_math_slack();
  double err = 0;
  int64_t empty_rows = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  for (size_t i = 0; i < got_lse.size(); ++i) {
    if (want_lse[i] == -INFINITY) {
      ++empty_rows;
      EXPECT_EQ(got_lse[i], -INFINITY) << "lse " << i;
    } else {
      EXPECT_NEAR(got_lse[i], want_lse[i], 1e-4 + slack * (1.0 + std::fabs(want_lse[i])))
          << "lse " << i;
    }
  }
  EXPECT_LT(err, 2e-5 + slack);
  EXPECT_GT(empty_rows, 0);  // (t > u and u = 0: rows that see nothing)
}

// --- Errors ---------------------------------------------------------------

class VariantErrors : public ContextTest {
 protected:
  vkattn_status create(const char* source, std::vector<uint32_t> dtypes = {},
                       vkattn_variant** out = nullptr) {
    vkattn_variant_desc d;
    vkattn_variant_desc_init(&d);
    d.source = source;
    for (size_t s = 0; s < dtypes.size(); ++s) d.param_dtypes[s] = dtypes[s];
    vkattn_variant* v = nullptr;
    const vkattn_status st = vkattn_variant_create(ctx, &d, &v);
    if (out)
      *out = v;
    else
      vkattn_variant_destroy(v);
    return st;
  }
};

TEST_F(VariantErrors, CreateRefusesBadSources) {
  EXPECT_INVALID(create(nullptr), "desc->source is NULL");
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return q >= k\n"
                        "}\n"),
                 "line 3");
  EXPECT_INVALID(create("float helper(float x) { return x; }"), "defines neither");
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return no_such_function(q) > 0;\n}"),
                 "no_such_function");
  // A slot not declared, and one read through the other dtype's accessor.
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return vkattn_param_i32(2, uint(k)) != 0;\n}"),
                 "slot 2");
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return vkattn_param_i32(0, uint(k)) != 0;\n}",
                        {VKATTN_F32}),
                 "param_dtypes[0] is f32");
  EXPECT_INVALID(
      create("bool vkattn_mask_mod(uint s, uint h, int q, int k) { return true; }", {VKATTN_F16}),
      "param_dtypes[0]");
  // A mask function of another signature.
  EXPECT_INVALID(create("bool vkattn_mask_mod(int q, int k) { return q >= k; }"),
                 "vkattn_mask_mod must be");
  // Memory, bindings and built-in variables are not a variant's to touch
  // (a comment may mention them).
  EXPECT_INVALID(create("layout(std430, binding = 3) buffer Out { float o[]; };\n"
                        "bool vkattn_mask_mod(uint s, uint h, int q, int k) { o[0] = 1.0; return "
                        "true; }"),
                 "uses 'layout'");
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return gl_LocalInvocationIndex > 3u;\n}"),
                 "gl_LocalInvocationIndex");
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  return vkattn_user_w[0] > 3u;\n}"),
                 "vkattn_user_w");
  // (The parameters' offsets and counts: a write would aim the accessors
  // past the buffer.)
  EXPECT_INVALID(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                        "  vkattn_user_count[0] = 1u << 30;\n  return true;\n}"),
                 "vkattn_user_count");
  vkattn_variant* ok = nullptr;
  EXPECT_EQ(create("// reads no shared memory, no buffer\n"
                   "bool vkattn_mask_mod(uint s, uint h, int q, int k) { return k <= q; }",
                   {}, &ok),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  vkattn_variant_destroy(ok);
  vkattn_variant* v = nullptr;
  EXPECT_EQ(vkattn_variant_create(ctx, nullptr, &v), VKATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkattn_variant_create(nullptr, nullptr, &v), VKATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(v, nullptr);
  vkattn_variant_destroy(nullptr);
}

// The shared-memory estimates that decide whether a pipeline fits the
// device count a mask function's arrays (coopmat: sh_urange, 16 bytes;
// tiled: sh_uany, sh_urange, sh_ubits), so a tile at the device's limit is
// not created past it; a score function alone declares none.
TEST_F(VariantErrors, SharedMemoryEstimatesCountTheMaskFunctionsArrays) {
  vkattn_variant *mask = nullptr, *score = nullptr;
  ASSERT_EQ(
      create("bool vkattn_mask_mod(uint s, uint h, int q, int k) { return k <= q; }", {}, &mask),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  ASSERT_EQ(create("float vkattn_score_mod(float x, uint s, uint h, int q, int k) { return x; }",
                   {}, &score),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  vkattn::FwdConfig cfg;
  cfg.head_dim = cfg.head_dim_v = 64, cfg.kv_dtype = VKATTN_F16;
  vkattn::AttentionVariant& v = cfg.var;
  v.family = vkattn::AttentionFamily::kCoopmat;
  v.subgroups = 4, v.wg = 4 * 32, v.tile_keys = 32;
  v.coopmat_m = v.coopmat_n = v.coopmat_k = 16;
  const uint64_t plain = vkattn::kCoopmatFamily.shared_bytes(cfg);
  cfg.user = mask->impl.get(), cfg.user_mask = true;
  EXPECT_EQ(vkattn::kCoopmatFamily.shared_bytes(cfg), plain + 16);
  cfg.user = score->impl.get(), cfg.user_mask = false;
  EXPECT_EQ(vkattn::kCoopmatFamily.shared_bytes(cfg), plain);
  cfg.user = nullptr;
  v = vkattn::AttentionVariant{};
  v.family = vkattn::AttentionFamily::kTiled;
  v.wg = 32, v.rows = 2, v.lanes_per_row = 4, v.tile_keys = 32, v.subgroup_ops = true;
  const uint64_t tiled_plain = vkattn::kTiledFamily.shared_bytes(cfg);
  cfg.user = mask->impl.get(), cfg.user_mask = true;
  // sh_uany + sh_urange (5 words), sh_ubits (3 words a row and 32 keys).
  EXPECT_EQ(vkattn::kTiledFamily.shared_bytes(cfg), tiled_plain + (5 + 3 * 8 * 2) * 4);
  cfg.user = score->impl.get(), cfg.user_mask = false;
  EXPECT_EQ(vkattn::kTiledFamily.shared_bytes(cfg), tiled_plain);
  cfg.user = nullptr;
  vkattn_variant_destroy(mask);
  vkattn_variant_destroy(score);
}

// A variant call's tile fits shared memory with its mask function's
// arrays (the choice is told: choose_attention_variant's user_mask), on
// tiled and coopmat forced, every head dim to 256 and MLA's, each dtype.
// (lavapipe's d 256 tiled tile filled its 32 KiB exactly: the arrays took
// it 116 bytes past the limit.) A call at d 256 on tiled: test below.
TEST_F(VariantErrors, MaskFunctionsArraysFitBesideEveryChosenTile) {
  vkattn::Device& dev = ctx->impl->device();
  const uint64_t limit = dev.caps().max_shared_memory;
  std::vector<std::pair<uint32_t, uint32_t>> dims = {{576, 512}, {192, 128}};
  for (uint32_t d = 1; d <= 256; d += (d < 32 ? 1 : 8)) dims.emplace_back(d, d);
  int served = 0;
  for (uint32_t family : {1u, 2u}) {
    vkattn::KernelOptions o;
    o.attn_kernel = family;
    for (const auto& [d, dv] : dims)
      for (vkattn_dtype kv : {VKATTN_F32, VKATTN_F16, VKATTN_BF16, VKATTN_I8, VKATTN_Q4}) {
        SCOPED_TRACE("family " + std::to_string(family) + ", d " + std::to_string(d) + "/" +
                     std::to_string(dv) + ", kv dtype " + std::to_string(kv));
        vkattn::AttentionVariant v;
        try {
          v = vkattn::choose_attention_variant(dev, o, d, dv, 1024, kv, 1, true);
        } catch (const vkattn::Error&) {
          continue;  // (coopmat in a build without it)
        }
        if (v.family != vkattn::AttentionFamily::kTiled &&
            v.family != vkattn::AttentionFamily::kCoopmat)
          continue;
        const vkattn::FwdConfig cfg = vkattn::probe_config(v, d, dv, kv, true);
        const vkattn::AttentionFamilyDesc& fam = v.family == vkattn::AttentionFamily::kTiled
                                                     ? vkattn::kTiledFamily
                                                     : vkattn::kCoopmatFamily;
        EXPECT_LE(fam.shared_bytes(cfg), limit);
        ++served;
      }
  }
  EXPECT_GT(served, 0);
}

// A mask function at d 256 on tiled forced (its tile at lavapipe's 32 KiB
// without the variant's arrays): the validation layer stays silent and the
// call matches the reference.
TEST(VariantsRuns, MaskFunctionAtHeadDim256OnTiled) {
  NoCheckFallback no_fallback;
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL", "tiled"}});
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  AttnCase c;
  c.Hkv = 1, c.H = 2, c.d = 256;
  c.seqs = {{19, 40}, {3, 3}};
  c.variant_source = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos <= q_pos && (k_pos & 3) != 1;
}
)";
  c.host_mask = [](int, int, long q, long k) { return k <= q && (k & 3) != 1; };
  const CaseStats st = run_attention_case(fc.ctx, c);
  EXPECT_GT(st.checked, 0);
}

TEST_F(VariantErrors, NoCompilerIsUnsupportedNamingTheLibrary) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_SHADERC_LIBRARY", "/nonexistent/libshaderc-none.so"}});
  EXPECT_EQ(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) { return true; }"),
            VKATTN_ERROR_UNSUPPORTED);
  EXPECT_NE(std::strstr(vkattn_last_error(), "libshaderc-none"), nullptr) << vkattn_last_error();
}

TEST_F(VariantErrors, CallsCheckTheParameters) {
  vkattn_variant* v = nullptr;
  ASSERT_EQ(create("bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                   "  return vkattn_param_i32(1, uint(k)) >= 0;\n}",
                   {0, VKATTN_I32}, &v),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  VariantPtr keep(v, &vkattn_variant_destroy);
  const int64_t t = 4;
  vkattn_tensor* q = tensor(VKATTN_F32, {t, 2, 16});
  vkattn_tensor* k = tensor(VKATTN_F32, {t, 2, 16});
  vkattn_tensor* out = tensor(VKATTN_F32, {t, 2, 16});
  std::vector<float> nan(t * 2 * 16, NAN), zeros(t * 2 * 16, 0.0f);
  ASSERT_EQ(vkattn_tensor_write(q, zeros.data(), zeros.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(k, zeros.data(), zeros.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(out, nan.data(), nan.size() * 4), VKATTN_SUCCESS);
  vkattn_tensor* ids = tensor(VKATTN_I32, {t});
  vkattn_tensor* f = tensor(VKATTN_F32, {t});
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.num_heads = 2, d.num_kv_heads = 2, d.head_dim = 16;
  const int32_t cu[] = {0, int32_t(t)};
  auto call = [&] { return vkattn_attention_varlen(ctx, &d, 1, cu, cu, q, k, k, out); };
  d.variant = v;
  EXPECT_INVALID(call(), "desc->variant_params[1] is NULL");
  d.variant_params[1] = f;
  EXPECT_INVALID(call(), "the variant declared i32");
  d.variant_params[1] = ids;
  d.variant_params[0] = ids;
  EXPECT_INVALID(call(), "declares no slot 0");
  d.variant_params[0] = nullptr;
  d.variant = nullptr;
  EXPECT_INVALID(call(), "desc->variant is NULL");
  // out untouched by every refused call.
  std::vector<float> got(nan.size());
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
  for (float x : got) ASSERT_TRUE(std::isnan(x));
  // Another context's variant.
  vkattn_context* other = make_context();
  ASSERT_NE(other, nullptr);
  vkattn_variant_desc vd;
  vkattn_variant_desc_init(&vd);
  vd.source = "bool vkattn_mask_mod(uint s, uint h, int q, int k) { return true; }";
  vkattn_variant* foreign = nullptr;
  ASSERT_EQ(vkattn_variant_create(other, &vd, &foreign), VKATTN_SUCCESS) << vkattn_last_error();
  d.variant = foreign;
  d.variant_params[1] = nullptr;
  EXPECT_INVALID(call(), "another context");
  // Any destroy order: the context first, then its variant.
  vkattn_context_destroy(other);
  vkattn_variant_destroy(foreign);
  // The right call runs.
  d.variant = v;
  d.variant_params[1] = ids;
  const int32_t id_values[] = {0, 1, 2, 3};
  ASSERT_EQ(vkattn_tensor_write(ids, id_values, sizeof(id_values)), VKATTN_SUCCESS);
  EXPECT_EQ(call(), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
  for (float x : got) ASSERT_EQ(x, 0.0f);  // (v = 0 everywhere, every row sees keys)
}

TEST_F(VariantErrors, OlderDescriptorSizesReadAsNoVariant) {
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.struct_size = 136;  // 0.6
  d.num_heads = 1, d.num_kv_heads = 1, d.head_dim = 8;
  d.variant = reinterpret_cast<vkattn_variant*>(uintptr_t(0x1234));  // garbage past the size
  vkattn_tensor* q = tensor(VKATTN_F32, {2, 1, 8});
  std::vector<float> zeros(16, 0.0f);
  ASSERT_EQ(vkattn_tensor_write(q, zeros.data(), 64), VKATTN_SUCCESS);
  vkattn_tensor* out = tensor(VKATTN_F32, {2, 1, 8});
  const int32_t cu[] = {0, 2};
  EXPECT_EQ(vkattn_attention_varlen(ctx, &d, 1, cu, cu, q, q, q, out), VKATTN_SUCCESS)
      << vkattn_last_error();
}

}  // namespace

// Which sources prove that vkattn_mask_mod reads no head (the lanes family
// then evaluates it once per token of a lane's rows).
TEST(VariantSource, MaskReadsHeadOnlyWhereTheTextCannotRuleItOut) {
  using vkattn::mask_source_reads_head;
  EXPECT_FALSE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint seq, uint head, int q, int k) { return k <= q; }"));
  // Unnamed, named otherwise, named only in a comment, qualified.
  EXPECT_FALSE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint s, uint, int q, int k) { return k <= q; }"));
  EXPECT_FALSE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint s, in uint hh, int q, int k) {\n  // hh is not read\n"
      "  return k <= q && hhh(q);\n}\nbool hhh(int x) { return x > 0; }"));
  EXPECT_FALSE(mask_source_reads_head(
      "float vkattn_score_mod(float s, uint seq, uint head, int q, int k) { return s * "
      "float(head); }\nbool vkattn_mask_mod(uint seq, uint head, int q, int k) { return k < q; }"));
  EXPECT_TRUE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint seq, uint head, int q, int k) { return head > 1u || k <= q; }"));
  // Passed on to a helper; a nested block; a second overload reading it.
  EXPECT_TRUE(mask_source_reads_head(
      "bool f(uint h) { return h == 0u; }\n"
      "bool vkattn_mask_mod(uint seq, uint h, int q, int k) { { if (q > 0) { return f(h); } } "
      "return true; }"));
  EXPECT_TRUE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint s, uint a, int q, int k) { return true; }\n"
      "bool vkattn_mask_mod(int s, uint b, int q, int k) { return b > 0u; }"));
  // Macros, no definition, an odd parameter list: taken to read it.
  EXPECT_TRUE(
      mask_source_reads_head("#define H head\nbool vkattn_mask_mod(uint seq, uint head, int q, int "
                             "k) { return H > 0u; }"));
  EXPECT_TRUE(mask_source_reads_head("bool vkattn_mask_mod(uint s, uint h, int q, int k);"));
  EXPECT_TRUE(mask_source_reads_head(
      "bool vkattn_mask_mod(uint s, uint h[2], int q, int k) { return true; }"));
}

// A mask function that reads no head runs once per run of a lane's rows
// that are one token's heads (lanes, tiled, decode: gcd(G, a lane's rows)),
// one that reads it once per row; both over GQA groups 1, 2, 3, 4 and 8
// and 2, 4 or 8 rows (lanes: per lane; tiled: per row group; decode: per tile), so runs of every
// length meet tiles and sequences that end inside them. (The self-check's
// group follows the pipeline's runs.)
TEST(VariantsRuns, MaskFunctionsOverGqaGroupsAndRowsPerLane) {
  NoCheckFallback no_fallback;
  const char* headless = R"(
bool vkattn_mask_mod(uint seq, uint h, int q_pos, int k_pos) {
  return k_pos <= q_pos && (q_pos - k_pos) % 5 != 3 && (seq == 0u || k_pos > 2);
}
)";
  const char* by_head = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return k_pos <= q_pos && (head % 3u == 0u ? k_pos % 2 == 0 : q_pos - k_pos < 9);
}
)";
  for (const char* family : {"lanes", "tiled", "decode"})
    for (const char* rows : {"2", "4", "8"}) {
      ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL", family}, {"VKATTN_ATTN_ROWS", rows}});
      ForcedContext fc;
      ASSERT_NE(fc.ctx, nullptr);
      for (int g : {1, 2, 3, 4, 8}) {
        for (bool reads_head : {false, true}) {
          SCOPED_TRACE(std::string(family) + ", rows " + rows + ", group " + std::to_string(g) +
                       (reads_head ? ", reads head" : ", no head"));
          AttnCase c;
          c.Hkv = 2, c.H = 2 * g, c.d = 24;
          c.seqs = {{37, 37}, {6, 29}, {1, 13}};
          c.seed = 100 + g;
          c.variant_source = reads_head ? by_head : headless;
          if (reads_head)
            c.host_mask = [](int, int h, long q, long k) {
              return k <= q && (h % 3 == 0 ? k % 2 == 0 : q - k < 9);
            };
          else
            c.host_mask = [](int b, int, long q, long k) {
              return k <= q && (q - k) % 5 != 3 && (b == 0 || k > 2);
            };
          const CaseStats st = run_attention_case(fc.ctx, c);
          EXPECT_GT(st.checked, 0);
        }
      }
    }
}

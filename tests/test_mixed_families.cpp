// A call that mixes decode-shaped sequences (at most 8 query tokens) with
// longer ones runs each class on its own family when the two classes get
// different families (VKATTN_ATTN_KERNEL_DECODE / _PREFILL here; the device
// table's decode and prefill families on a GPU), in one call: varlen calls
// against the reference, steps over f16 and int8 caches against the same
// step on one family, the kernel log naming both families.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "kv_model.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

// The families the kernel log names for the dispatches it printed.
std::vector<std::string> families_in(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const std::string tag = "vkattn: attention family=";
    if (line.rfind(tag, 0) != 0) continue;
    const std::string f = line.substr(tag.size(), line.find(' ', tag.size()) - tag.size());
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  }
  return out;
}

bool has(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Decodes (1-8 tokens, some over long contexts), prefill chunks (9 and 40
// tokens, t > u in one), an empty sequence.
AttnCase mixed_case(uint32_t seed) {
  AttnCase c;
  c.H = 8, c.Hkv = 2, c.d = 40;
  c.seqs = {{1, 700}, {40, 40}, {8, 203}, {0, 5}, {3, 40}, {9, 300}, {12, 7}, {1, 1}};
  c.causal = true;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  c.seed = seed;
  return c;
}

}  // namespace

// Varlen: decode on the decode family, the rest on tiled or lanes, in one
// call; with key splits (and their combine) in both parts; masks, windows
// and the odd head dims of the reference grid.
TEST(MixedFamilies, VarlenRunsEachClassOnItsFamily) {
  uint32_t seed = 10;
  for (const char* prefill : {"tiled", "lanes"})
    for (const char* split : {"", "32"}) {
      SCOPED_TRACE(std::string("prefill family ") + prefill + " min split keys " + split);
      ScopedEnv env({{"VKATTN_ATTN_KERNEL_DECODE", "decode"},
                     {"VKATTN_ATTN_KERNEL_PREFILL", prefill},
                     {"VKATTN_ATTN_MIN_SPLIT_KEYS", split},
                     {"VKATTN_LOG", "kernels"}});
      if (!*split) unset_env("VKATTN_ATTN_MIN_SPLIT_KEYS");
      ForcedContext fc;
      ASSERT_NE(fc.ctx, nullptr);
      AttnCase a = mixed_case(seed++);
      AttnCase b = mixed_case(seed++);
      b.d = 59, b.dv = 23, b.kdt = VKATTN_BF16, b.window = 30;
      b.mask_type = VKATTN_MASK_ADDITIVE, b.softcap = 20.0f;
      for (const AttnCase& c : {a, b}) {
        testing::internal::CaptureStderr();
        run_attention_case(fc.ctx, c);
        const std::string log = testing::internal::GetCapturedStderr();
        const auto fams = families_in(log);
        EXPECT_TRUE(has(fams, "decode") && has(fams, prefill)) << log;
        EXPECT_EQ(fams.size(), 2u) << log;
        EXPECT_EQ(log.find("fallback"), std::string::npos) << log;
      }
    }
}

// One family for both classes keeps one plan (no split); a family forced
// for every class (VKATTN_ATTN_KERNEL=decode) serves the class it can and
// the other falls back, logged, as before.
TEST(MixedFamilies, OneFamilyOrAForcedOne) {
  {
    ScopedEnv env({{"VKATTN_ATTN_KERNEL_DECODE", "tiled"},
                   {"VKATTN_ATTN_KERNEL_PREFILL", "tiled"},
                   {"VKATTN_LOG", "kernels"}});
    ForcedContext fc;
    testing::internal::CaptureStderr();
    run_attention_case(fc.ctx, mixed_case(30));
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(families_in(log), std::vector<std::string>{"tiled"}) << log;
  }
  {
    ScopedEnv env({{"VKATTN_ATTN_KERNEL", "decode"}, {"VKATTN_LOG", "kernels"}});
    ForcedContext fc;
    testing::internal::CaptureStderr();
    run_attention_case(fc.ctx, mixed_case(31));
    const std::string log = testing::internal::GetCapturedStderr();
    const auto fams = families_in(log);
    EXPECT_TRUE(has(fams, "decode")) << log;
    EXPECT_EQ(fams.size(), 2u) << log;
    EXPECT_NE(log.find("vkattn: attention fallback from decode to "), std::string::npos) << log;
  }
}

// A bad per-class family name is refused like VKATTN_ATTN_KERNEL's.
TEST(MixedFamilies, BadClassFamilyNameIsRefused) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL_PREFILL", "fast"}});
  vkattn_context* ctx = nullptr;  // (since E6 at the context's creation)
  EXPECT_INVALID(vkattn_context_create(nullptr, &ctx), "VKATTN_ATTN_KERNEL_PREFILL=\"fast\"");
  EXPECT_EQ(ctx, nullptr);
}

// Checking a prefill shape up front (before external mode) checks the
// decode class too: a step holding such a prefill may hold decodes, and
// they run on their own family.
TEST(MixedFamilies, SelfCheckOfAPrefillShapeChecksTheDecodeClass) {
  ScopedEnv env({{"VKATTN_ATTN_KERNEL_DECODE", "decode"},
                 {"VKATTN_ATTN_KERNEL_PREFILL", "tiled"},
                 {"VKATTN_PIPELINE_CACHE_DIR", ""}});
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.num_heads = 4, d.num_kv_heads = 2, d.head_dim = 24, d.causal = 1;
  ASSERT_EQ(vkattn_context_self_check(fc.ctx, &d, VKATTN_F16, VKATTN_F16, 1, 20), VKATTN_SUCCESS)
      << vkattn_last_error();
  for (uint32_t family : {1u, 3u}) {  // tiled, decode
    uint32_t passed = 0, failed = 0;
    ASSERT_EQ(vkattn_context_self_check_counts(fc.ctx, family, &passed, &failed), VKATTN_SUCCESS);
    EXPECT_GE(passed, 1u) << "family " << family;
    EXPECT_EQ(failed, 0u) << "family " << family;
  }
}

namespace {

// One layer's steps on a fresh cache of `dt` in a context made under the
// current environment: a prefill of three prompts, then a mixed step
// (decodes and a 20-token chunk) and a step with a new 9-token prompt.
// Returns the mixed steps' outputs and the kernel log.
std::vector<float> run_steps(vkattn_dtype dt, std::string* log) {
  ForcedContext fc;
  vkattn_context* ctx = fc.ctx;
  EXPECT_NE(ctx, nullptr);
  KvShape s;
  s.layers = 1, s.hkv = 2, s.d = 24, s.dv = 24, s.page_size = 16, s.pages = 96, s.dtype = dt;
  vkattn_kv_cache_desc cd = kv_cache_desc(s);
  vkattn_kv_cache* cache = nullptr;
  EXPECT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  const uint32_t H = 8;
  std::vector<float> outs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u01(-1.0f, 1.0f);
  auto make = [&](std::vector<int64_t> shape, bool fill) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    if (fill) {
      int64_t n = 1;
      for (int64_t x : shape) n *= x;
      std::vector<float> vals(static_cast<size_t>(n));
      for (float& x : vals) x = u01(rng);
      EXPECT_EQ(vkattn_tensor_write(t, vals.data(), vals.size() * 4), VKATTN_SUCCESS);
    }
    return t;
  };
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = s.hkv, ad.head_dim = s.d, ad.head_dim_v = s.dv;
  ad.causal = 1;
  auto step = [&](std::vector<int64_t> ids, std::vector<int32_t> tokens, bool keep) {
    int32_t total = 0;
    for (int32_t t : tokens) total += t;
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), tokens.data(), &st),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    vkattn_tensor* k = make({total, s.hkv, s.d}, true);
    vkattn_tensor* v = make({total, s.hkv, s.dv}, true);
    vkattn_tensor* q = make({total, H, s.d}, true);
    vkattn_tensor* o = make({total, H, s.dv}, false);
    ASSERT_EQ(vkattn_step_append(st, 0, k, v), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_attention(st, 0, &ad, q, o), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS) << vkattn_last_error();
    if (keep) {
      std::vector<float> got(size_t(total) * H * s.dv);
      ASSERT_EQ(vkattn_tensor_read(o, got.data(), got.size() * 4), VKATTN_SUCCESS);
      outs.insert(outs.end(), got.begin(), got.end());
    }
    for (vkattn_tensor* t : {k, v, q, o}) vkattn_tensor_destroy(t);
  };
  testing::internal::CaptureStderr();
  step({1, 2, 3}, {300, 50, 7}, false);
  step({1, 2, 3}, {1, 20, 1}, true);
  step({3, 4, 1, 2}, {2, 9, 1, 1}, true);
  *log = testing::internal::GetCapturedStderr();
  vkattn_kv_cache_destroy(cache);
  return outs;
}

}  // namespace

// Steps (paged cache, f16 and int8) with decodes and prefill chunks in one
// step: decode for the decodes, tiled for the chunks, the outputs those of
// the same steps on one family (lanes) within the usual tolerance.
TEST(MixedFamilies, StepsOverF16AndInt8Caches) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16" : "i8");
    std::string log_one, log_split;
    std::vector<float> one, split;
    {
      ScopedEnv env({{"VKATTN_ATTN_KERNEL", "lanes"}, {"VKATTN_LOG", "kernels"}});
      one = run_steps(dt, &log_one);
    }
    {
      ScopedEnv env({{"VKATTN_ATTN_KERNEL_DECODE", "decode"},
                     {"VKATTN_ATTN_KERNEL_PREFILL", "tiled"},
                     {"VKATTN_ATTN_MIN_SPLIT_KEYS", "32"},
                     {"VKATTN_LOG", "kernels"}});
      split = run_steps(dt, &log_split);
    }
    EXPECT_EQ(families_in(log_one), std::vector<std::string>{"lanes"}) << log_one;
    const auto fams = families_in(log_split);
    EXPECT_TRUE(has(fams, "decode") && has(fams, "tiled")) << log_split;
    ASSERT_EQ(one.size(), split.size());
    ASSERT_FALSE(one.empty());
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_TRUE(std::isfinite(split[i])) << i;
      worst = std::max(worst, double(std::fabs(one[i] - split[i])));
    }
    EXPECT_LT(worst, 3e-5);
  }
}

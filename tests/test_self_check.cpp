// The first-use self-check (src/ops/attention/self_check.h): a family
// whose kernel is wrong (VKATTN_FAULT_KERNEL) never reaches a caller's
// output; results are kept per device, driver and build beside the
// pipeline cache, and every file that is not this device's is ignored with
// a logged line; two processes checking at once leave a valid file;
// external mode runs unchecked pipelines unchecked. Every test keeps its
// results in a folder of its own (VKATTN_PIPELINE_CACHE_DIR), so nothing a
// developer or another test ran decides what is checked here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "cache_folder.h"
#include "engine_fixture.h"
#include "reference/attention_ref.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

std::string results_file(const std::string& dir) {
  return file_named(dir, "self-check-");
}

// A file this build of vkattn would write: its header, lines of
// "pass|fail <err> <shader>:<spec>", and "end".
bool valid_results(const std::string& text, size_t* entries, size_t* sections = nullptr) {
  auto entry_ok = [](const std::string& line) {
    std::istringstream l(line);
    std::string st, key;
    double err;
    return (l >> st >> err >> key) && (st == "pass" || st == "fail") && key.find(':') != 0;
  };
  return valid_device_file(text, "self-check", entry_ok, entries, sections);
}

struct Result {
  vkattn_status status = VKATTN_SUCCESS;
  std::string message;
  double max_err = 0;      // against the reference
  bool untouched = false;  // out still holds what it held before the call
};

// The attention variant (user functions) the variant tests call: a mask
// hiding the keys whose id (slot 0, I32, kKeyIds) is 1 and a per-head
// bias on the score (slot 1, F32, kHeadBias).
const char* kVariantSource = R"(
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return vkattn_param_i32(0, uint(k_pos)) != 1;
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + vkattn_param_f32(1, head);
}
)";
const float kHeadBias[4] = {0.5f, -0.25f, 1.0f, 0.0f};
int32_t key_id(long k) {
  return k % 5 == 2 ? 1 : 0;
}

vkattn_variant* make_variant(vkattn_context* ctx) {
  vkattn_variant_desc vd;
  vkattn_variant_desc_init(&vd);
  vd.source = kVariantSource;
  vd.param_dtypes[0] = VKATTN_I32, vd.param_dtypes[1] = VKATTN_F32;
  vkattn_variant* var = nullptr;
  EXPECT_EQ(vkattn_variant_create(ctx, &vd, &var), VKATTN_SUCCESS) << vkattn_last_error();
  return var;
}

// One small causal f32 call (2 sequences, GQA 2) compared with the
// reference; `ctx` takes the environment it was created under. With
// `variant` (make_variant's), the call and the reference use its functions.
Result run_call(vkattn_context* ctx, int d = 40, bool softcap = false,
                vkattn_variant* variant = nullptr) {
  const int H = 4, Hkv = 2;
  const std::vector<int32_t> cu_q = {0, 5, 6}, cu_k = {0, 37, 50};
  const int tq = cu_q.back(), tk = cu_k.back();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = uni(rng);
    return v;
  };
  const std::vector<float> q = fill(size_t(tq) * H * d), k = fill(size_t(tk) * Hkv * d),
                           v = fill(size_t(tk) * Hkv * d);
  std::vector<float> out(size_t(tq) * H * d, 42.0f);
  auto make = [&](std::vector<int64_t> shape, const std::vector<float>& data) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape.data(), &t), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(t, data.data(), data.size() * 4), VKATTN_SUCCESS);
    return t;
  };
  vkattn_tensor* tq_ = make({tq, H, d}, q);
  vkattn_tensor* tk_ = make({tk, Hkv, d}, k);
  vkattn_tensor* tv_ = make({tk, Hkv, d}, v);
  vkattn_tensor* to_ = make({tq, H, d}, out);
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d, ad.causal = 1;
  if (softcap) ad.softcap = 20.0f;
  vkattn_tensor* ids = nullptr;
  vkattn_tensor* bias = nullptr;
  if (variant) {
    std::vector<int32_t> id(64);
    for (size_t j = 0; j < id.size(); ++j) id[j] = key_id(long(j));
    const int64_t n_ids = int64_t(id.size()), n_bias = H;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_I32, 1, &n_ids, &ids), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(ids, id.data(), id.size() * 4), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 1, &n_bias, &bias), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(bias, kHeadBias, sizeof(kHeadBias)), VKATTN_SUCCESS);
    ad.variant = variant, ad.variant_params[0] = ids, ad.variant_params[1] = bias;
  }
  Result r;
  r.status = vkattn_attention_varlen(ctx, &ad, 2, cu_q.data(), cu_k.data(), tq_, tk_, tv_, to_);
  if (r.status != VKATTN_SUCCESS) r.message = vkattn_last_error();
  std::vector<float> got(out.size());
  EXPECT_EQ(vkattn_tensor_read(to_, got.data(), got.size() * 4), VKATTN_SUCCESS);
  r.untouched = got == out;
  vkattn::ref::AttentionParams p;
  p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d, p.causal = true;
  if (softcap) p.softcap = 20.0;
  if (variant) {
    p.user_mask = [](int, int, long, long k) { return key_id(k) != 1; };
    p.user_score = [](double s, int, int h, long, long) { return s + kHeadBias[h]; };
  }
  std::vector<float> want(out.size()), lse(size_t(tq) * H);
  vkattn::ref::attention_varlen(p, 2, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(),
                                want.data(), lse.data());
  for (size_t i = 0; i < want.size(); ++i)
    r.max_err = std::max(r.max_err, double(std::fabs(got[i] - want[i])));
  for (vkattn_tensor* t : {tq_, tk_, tv_, to_, ids, bias}) vkattn_tensor_destroy(t);
  return r;
}

}  // namespace

// Each family forced and faulted: the call is right (served by the next
// family), the failed check is named once without VKATTN_LOG and on every
// call's fallback line with it, and the result file records the failure.
class FaultedFamily : public testing::TestWithParam<const char*> {};

TEST_P(FaultedFamily, NeverReachesTheCaller) {
  const std::string fam = GetParam();
  TempDir dir;
  const std::string log = with_context(
      dir.path, {{"VKATTN_ATTN_KERNEL", GetParam()}, {"VKATTN_FAULT_KERNEL", GetParam()}},
      [&](vkattn_context* ctx) {
        // decode serves calls of at most 8 query tokens per sequence: run_call's.
        for (int i = 0; i < 2; ++i) {
          const Result r = run_call(ctx);
          ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
          EXPECT_LT(r.max_err, 1e-4);
        }
      });
  EXPECT_TRUE(contains(log, "vkattn: self-check failed: family=" + fam)) << log;
  size_t n = 0;
  const std::string text = slurp(results_file(dir.path));
  EXPECT_TRUE(valid_results(text, &n)) << text;
  EXPECT_TRUE(contains(text, "\nfail ")) << text;
  EXPECT_TRUE(contains(text, "\npass ")) << text;  // the family that served it
  // With the kernel log: the fallback line of every call names the check.
  const std::string klog = with_context(dir.path,
                                        {{"VKATTN_ATTN_KERNEL", GetParam()},
                                         {"VKATTN_FAULT_KERNEL", GetParam()},
                                         {"VKATTN_LOG", "kernels"}},
                                        [&](vkattn_context* ctx) {
                                          const Result r = run_call(ctx);
                                          ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
                                          EXPECT_LT(r.max_err, 1e-4);
                                        });
  EXPECT_TRUE(contains(klog, "vkattn: attention fallback from " + fam + " to ")) << klog;
  EXPECT_TRUE(contains(klog, ": self-check failed (max err ")) << klog;
  EXPECT_FALSE(contains(klog, "family=" + fam + " rows=")) << klog;
}

INSTANTIATE_TEST_SUITE_P(SelfCheck, FaultedFamily, testing::Values("lanes", "tiled", "decode"));

// The check is what protects the caller: without it the faulted kernel's
// output (off by one) is what the call returns.
TEST(SelfCheck, WithoutChecksAFaultyKernelIsWrong) {
  TempDir dir;
  with_context(dir.path,
               {{"VKATTN_ATTN_KERNEL", "lanes"},
                {"VKATTN_FAULT_KERNEL", "lanes"},
                {"VKATTN_SELF_CHECK", "0"}},
               [&](vkattn_context* ctx) {
                 const Result r = run_call(ctx);
                 ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
                 EXPECT_GT(r.max_err, 0.5);
               });
  EXPECT_EQ(results_file(dir.path), "");  // nothing was checked
}

// Every family that could serve the call fails: UNSUPPORTED naming the
// failed checks, and out keeps what it held. (Every family is faulted: on a
// GPU the table gives run_call's decode-shaped call to decode first, and
// coopmat where built; an H200 passed decode's check here, 2026-11-27.)
TEST(SelfCheck, NoPassingFamilyIsUnsupported) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_FAULT_KERNEL", "lanes,tiled,decode,coopmat"}},
               [&](vkattn_context* ctx) {
                 const Result r = run_call(ctx);
                 EXPECT_EQ(r.status, VKATTN_ERROR_UNSUPPORTED);
                 EXPECT_TRUE(contains(r.message, "self-check")) << r.message;
                 EXPECT_TRUE(contains(r.message, "lanes (max err")) << r.message;
                 EXPECT_TRUE(contains(r.message, "tiled (max err")) << r.message;
                 EXPECT_TRUE(r.untouched);
                 // The context still works for what passes (another specialization).
                 EXPECT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
               });
  EXPECT_FALSE(contains(slurp(results_file(dir.path)), "\npass "));
}

// Attention variants (user functions): a variant call's pipeline is its
// family's with the functions spliced in, and that pipeline is what gets
// checked (shaders/attention_variant_table.comp evaluates the functions on
// the device for the reference): it passes and is recorded under its own
// module (`<shader>#u<hash>`), beside the family's entry without a variant.
class CheckedVariant : public testing::TestWithParam<const char*> {};

TEST_P(CheckedVariant, PassesAndIsRecordedAsItself) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_ATTN_KERNEL", GetParam()}}, [&](vkattn_context* ctx) {
    vkattn_variant* var = make_variant(ctx);
    ASSERT_NE(var, nullptr);
    const Result plain = run_call(ctx);
    ASSERT_EQ(plain.status, VKATTN_SUCCESS) << plain.message;
    for (int i = 0; i < 2; ++i) {
      const Result r = run_call(ctx, 40, false, var);
      ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
      EXPECT_LT(r.max_err, 1e-4);
    }
    vkattn_variant_destroy(var);
  });
  const std::string text = slurp(results_file(dir.path));
  size_t n = 0;
  EXPECT_TRUE(valid_results(text, &n)) << text;
  EXPECT_FALSE(contains(text, "\nfail ")) << text;
  EXPECT_TRUE(contains(text, "#u")) << text;
  EXPECT_GE(n, 2u) << text;
}

// VKATTN_FAULT_USER=1 splices the functions wrongly into every family (odd
// keys) but not into the table kernel: each family's variant pipeline
// fails its check, the variant call is UNSUPPORTED naming the failed
// checks with out untouched, and calls without the variant still pass.
TEST_P(CheckedVariant, AWrongSpliceNeverReachesTheCaller) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_ATTN_KERNEL", GetParam()}, {"VKATTN_FAULT_USER", "1"}},
               [&](vkattn_context* ctx) {
                 vkattn_variant* var = make_variant(ctx);
                 ASSERT_NE(var, nullptr);
                 const Result r = run_call(ctx, 40, false, var);
                 EXPECT_EQ(r.status, VKATTN_ERROR_UNSUPPORTED);
                 EXPECT_TRUE(contains(r.message, "self-check")) << r.message;
                 EXPECT_TRUE(contains(r.message, "(max err")) << r.message;
                 EXPECT_TRUE(r.untouched);
                 const Result plain = run_call(ctx);
                 ASSERT_EQ(plain.status, VKATTN_SUCCESS) << plain.message;
                 EXPECT_LT(plain.max_err, 1e-4);
                 vkattn_variant_destroy(var);
               });
  const std::string text = slurp(results_file(dir.path));
  size_t n = 0;
  EXPECT_TRUE(valid_results(text, &n)) << text;
  // Every variant pipeline's line a failure, the family's own a pass.
  std::istringstream lines(text);
  int variant_fails = 0, plain_passes = 0;
  for (std::string line; std::getline(lines, line);) {
    const bool variant = contains(line, "#u"), pass = line.rfind("pass ", 0) == 0;
    EXPECT_FALSE(variant && pass) << line;
    variant_fails += variant && !pass;
    plain_passes += !variant && pass;
  }
  EXPECT_GE(variant_fails, 1) << text;
  EXPECT_EQ(plain_passes, 1) << text;  // the call without the variant
}

INSTANTIATE_TEST_SUITE_P(SelfCheck, CheckedVariant, testing::Values("", "lanes", "tiled", "decode"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           return std::string(*i.param ? i.param : "default");
                         });

// vkattn_context_self_check with desc->variant checks the variant
// pipelines up front (its parameter tensors as a call checks them, not
// read): they pass, or under VKATTN_FAULT_USER every family fails and it
// says UNSUPPORTED; a declared slot left NULL is INVALID_ARGUMENT.
TEST(SelfCheck, UpFrontChecksCoverVariants) {
  for (const bool fault : {false, true}) {
    TempDir dir;
    ScopedEnv::Vars env;
    if (fault) env.emplace_back("VKATTN_FAULT_USER", "1");
    with_context(dir.path, env, [&](vkattn_context* ctx) {
      vkattn_variant* var = make_variant(ctx);
      ASSERT_NE(var, nullptr);
      const int64_t n = 4;
      vkattn_tensor *ids = nullptr, *bias = nullptr;
      ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_I32, 1, &n, &ids), VKATTN_SUCCESS);
      ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &bias), VKATTN_SUCCESS);
      vkattn_attention_desc ad;
      vkattn_attention_desc_init(&ad);
      ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 40, ad.causal = 1;
      ad.variant = var, ad.variant_params[0] = ids;
      EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5),
                     "variant_params[1] is NULL");
      ad.variant_params[1] = bias;
      const vkattn_status st = vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5);
      EXPECT_EQ(st, fault ? VKATTN_ERROR_UNSUPPORTED : VKATTN_SUCCESS) << vkattn_last_error();
      for (vkattn_tensor* t : {ids, bias}) vkattn_tensor_destroy(t);
      vkattn_variant_destroy(var);
    });
    const std::string text = slurp(results_file(dir.path));
    EXPECT_TRUE(contains(text, fault ? "\nfail " : "\npass ")) << text;
    EXPECT_TRUE(contains(text, "#u")) << text;
  }
}

// A score function may give -inf (the key hidden) and NaN (its rows NaN):
// a family that gives NaN exactly where the reference does passes its
// check (the fuzzer found every family refused, max err inf, for a NaN
// score; its input is in tests/fuzz/corpus). Each family forced, with
// the up-front check and a call.
TEST(SelfCheck, NonFiniteScoresOfAVariantPassTheirCheck) {
  for (const char* family : {"lanes", "tiled", "decode"}) {
    SCOPED_TRACE(family);
    TempDir dir;
    with_context(dir.path, {{"VKATTN_ATTN_KERNEL", family}}, [&](vkattn_context* ctx) {
      vkattn_variant_desc vd;
      vkattn_variant_desc_init(&vd);
      vd.source = R"(
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  if (k_pos == 0) return uintBitsToFloat(0xff800000u);
  return head == 1u && k_pos == 2 ? uintBitsToFloat(0x7fc00000u) : score;
})";
      vkattn_variant* var = nullptr;
      ASSERT_EQ(vkattn_variant_create(ctx, &vd, &var), VKATTN_SUCCESS) << vkattn_last_error();
      vkattn_attention_desc ad;
      vkattn_attention_desc_init(&ad);
      ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 3, ad.causal = 1;
      ad.variant = var;
      for (vkattn_dtype kv : {VKATTN_F32, VKATTN_BF16})
        EXPECT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, kv, 0, 12), VKATTN_SUCCESS)
            << vkattn_last_error();
      vkattn_variant_destroy(var);
    });
    const std::string text = slurp(results_file(dir.path));
    EXPECT_TRUE(contains(text, "#u")) << text;
    EXPECT_FALSE(contains(text, "\nfail ")) << text;
  }
}

// The fault is real: without the check the wrong splice is what the
// variant call returns.
TEST(SelfCheck, WithoutChecksAWrongSpliceIsWrong) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_FAULT_USER", "1"}, {"VKATTN_SELF_CHECK", "0"}},
               [&](vkattn_context* ctx) {
                 vkattn_variant* var = make_variant(ctx);
                 ASSERT_NE(var, nullptr);
                 const Result r = run_call(ctx, 40, false, var);
                 ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
                 EXPECT_GT(r.max_err, 0.05);
                 vkattn_variant_destroy(var);
               });
}

// Variant pipelines' entries are capped per section: the newest 64
// sources (core/check_records.h). A file holding 70 other sources' entries
// (oldest first) and none of this variant's: after the variant's call is
// checked the section holds 64 sources, the 7 oldest gone, the others in
// their order, this one last; the entries of plain pipelines all stay.
TEST(SelfCheck, VariantEntriesKeepTheNewest64Sources) {
  TempDir dir;
  auto call = [&](vkattn_context* ctx) {
    ASSERT_EQ(run_call(ctx).status, VKATTN_SUCCESS);
    vkattn_variant* var = make_variant(ctx);
    ASSERT_NE(var, nullptr);
    const Result r = run_call(ctx, 40, false, var);
    ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
    EXPECT_LT(r.max_err, 1e-4);
    vkattn_variant_destroy(var);
  };
  with_context(dir.path, {}, call);
  const std::string path = results_file(dir.path);
  const std::string first = device_file_sections(slurp(path)).at(0);
  std::istringstream in(first);
  std::string header, ours;
  std::getline(in, header);
  std::vector<std::string> plain;
  for (std::string line; std::getline(in, line) && line != "end";) {
    if (!contains(line, "#u")) {
      plain.push_back(line);
    } else {
      const size_t at = line.find("#u");
      ours = line.substr(at, line.find(':') - at);
    }
  }
  ASSERT_FALSE(ours.empty()) << first;
  ASSERT_FALSE(plain.empty()) << first;
  auto fake = [](int i) {
    char h[24];
    std::snprintf(h, sizeof(h), "#u%016x", 0xf00d0000u + unsigned(i));
    return std::string(h);
  };
  std::string text = header + "\n";
  for (const std::string& l : plain) text += l + "\n";
  for (int i = 0; i < 70; ++i)
    for (const char* spec : {":8,2", ":8,3"})
      text += "pass 0 attention_fwd" + fake(i) + spec + "\n";
  text += "end\n";
  spit(path, text);
  with_context(dir.path, {}, call);
  const std::string now = slurp(path);
  size_t n = 0;
  ASSERT_TRUE(valid_results(now, &n)) << now;
  std::vector<std::string> sources;
  std::istringstream lines(device_file_sections(now).at(0));
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("#u");
    if (at == std::string::npos) continue;
    const std::string src = line.substr(at, line.find(':') - at);
    if (sources.empty() || sources.back() != src) sources.push_back(src);
  }
  ASSERT_EQ(sources.size(), 64u) << now;
  for (int i = 0; i < 63; ++i) EXPECT_EQ(sources[size_t(i)], fake(i + 7));
  EXPECT_EQ(sources.back(), ours);
  for (const std::string& l : plain) EXPECT_TRUE(contains(now, l + "\n")) << l;
}

// (Since E6 at the context's creation, as every malformed variable.)
TEST(SelfCheck, UnknownFaultNameIsRefused) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_FAULT_KERNEL", "lanes,bogus"}});
  vkattn_context* ctx = nullptr;
  EXPECT_INVALID(vkattn_context_create(nullptr, &ctx), "VKATTN_FAULT_KERNEL=\"lanes,bogus\"");
  EXPECT_EQ(ctx, nullptr);
}

// A later context takes the recorded results instead of checking again: a
// result file saying the (correct) lanes pipeline failed sends the call to
// tiled, which is then checked and recorded.
TEST(SelfCheck, RecordedResultsAreUsedByLaterContexts) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_ATTN_KERNEL", "lanes"}},
               [&](vkattn_context* ctx) { ASSERT_EQ(run_call(ctx).status, VKATTN_SUCCESS); });
  const std::string path = results_file(dir.path);
  std::string text = slurp(path);
  size_t n = 0;
  ASSERT_TRUE(valid_results(text, &n)) << text;
  ASSERT_TRUE(contains(text, "pass ") && contains(text, " attention_fwd:")) << text;
  for (size_t at; (at = text.find("\npass ")) != std::string::npos;) text.replace(at, 6, "\nfail ");
  spit(path, text);
  const std::string log =
      with_context(dir.path, {{"VKATTN_ATTN_KERNEL", "lanes"}}, [&](vkattn_context* ctx) {
        const Result r = run_call(ctx);
        ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
        EXPECT_LT(r.max_err, 1e-4);
      });
  EXPECT_TRUE(contains(log, "self-check failed: family=lanes")) << log;
  EXPECT_TRUE(contains(slurp(path), " attention_tiled:")) << slurp(path);
}

// A file holds a section per device, driver and build (core/device_file.h).
// Sections of another device, driver or build are kept, after this
// build's, byte for byte; damage (a corrupt or unfinished section, lines
// outside any) is dropped. Each case is said in one line under
// VKATTN_LOG=files, and the call is checked again and right.
TEST(SelfCheck, OtherBuildsSectionsAreKeptAndDamageIsDropped) {
  TempDir dir;
  with_context(dir.path, {},
               [&](vkattn_context* ctx) { ASSERT_EQ(run_call(ctx).status, VKATTN_SUCCESS); });
  const std::string path = results_file(dir.path);
  const std::string good = slurp(path);
  const std::string header = good.substr(0, good.find('\n'));
  struct Damage {
    const char* name;
    std::string text;
    const char* why;
    bool kept;  // the section stays in the file, after this build's
  };
  auto replace_field = [&](const char* field, const char* value) {
    std::string t = good;
    const size_t at = t.find(field) + std::strlen(field);
    t.replace(at, t.find_first_of(" \n", at) - at, value);
    return t;
  };
  const char* other = "no section for this device, driver and vkattn build";
  const std::vector<Damage> cases = {
      {"foreign device", replace_field("device=", "00112233445566778899aabbccddeeff"), other, true},
      {"stale build", replace_field("build=", "0123456789abcdef"), other, true},
      {"other driver", replace_field("driver=", "deadbeef"), other, true},
      {"corrupt", header + "\npass banana\nend\n", "corrupt line", false},
      {"truncated", good.substr(0, good.rfind("end")), "truncated", false},
      {"not ours", "hello\n", "a line outside any section", false},
  };
  for (const Damage& c : cases) {
    SCOPED_TRACE(c.name);
    spit(path, c.text);
    const std::string log =
        with_context(dir.path, {{"VKATTN_LOG", "files"}}, [&](vkattn_context* ctx) {
          const Result r = run_call(ctx, 40, /*softcap=*/true);  // a new pipeline: a write
          ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
          EXPECT_LT(r.max_err, 1e-4);
        });
    EXPECT_TRUE(contains(log, "vkattn: ignoring self-check results")) << log;
    EXPECT_TRUE(contains(log, c.why)) << log;
    const std::string now = slurp(path);
    size_t n = 0, sections = 0;
    EXPECT_TRUE(valid_results(now, &n, &sections)) << now;
    EXPECT_EQ(now.substr(0, now.find('\n')), header);
    EXPECT_GE(n, 1u);
    EXPECT_EQ(sections, c.kept ? 2u : 1u) << now;
    if (c.kept) EXPECT_EQ(device_file_sections(now).back(), c.text) << now;
  }
}

// E6 defect 3: two vkattn builds on one machine (a distro package beside a
// wheel, two checkouts) erased each other's results: build B found A's
// file, said so on stderr unasked and rewrote it with its own results
// only, so each switch re-ran every check. Now B's section goes first and
// A's stays as it was, nothing is printed without VKATTN_LOG, and A's
// results still serve A: a later process of this build finds its own
// section whatever other builds wrote since. Past the newest 4 sections the
// oldest are dropped.
TEST(SelfCheck, TwoBuildsKeepEachOthersResults) {
  TempDir dir;
  with_context(dir.path, {},
               [&](vkattn_context* ctx) { ASSERT_EQ(run_call(ctx).status, VKATTN_SUCCESS); });
  const std::string path = results_file(dir.path);
  const std::string ours = slurp(path);
  // Another build's section ("fail" for every pipeline: were it read as
  // ours, the call would go to another family) written after ours.
  auto of_build = [&](const char* build) {
    std::string t = ours;
    const size_t at = t.find("build=") + 6;
    t.replace(at, 16, build);
    for (size_t p; (p = t.find("\npass ")) != std::string::npos;) t.replace(p, 6, "\nfail ");
    return t;
  };
  const std::string theirs = of_build("00000000000000b2");
  spit(path, theirs + ours);
  const std::string log =
      with_context(dir.path, {{"VKATTN_LOG", "kernels"}}, [&](vkattn_context* ctx) {
        const Result r = run_call(ctx, 40, /*softcap=*/true);  // a new pipeline: a write
        ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
      });
  EXPECT_FALSE(contains(log, "self-check failed")) << log;  // our own results served
  EXPECT_FALSE(contains(log, "ignoring self-check results")) << log;
  std::vector<std::string> now = device_file_sections(slurp(path));
  ASSERT_EQ(now.size(), 2u) << slurp(path);
  EXPECT_EQ(now[1], theirs);  // unchanged, after ours
  EXPECT_TRUE(contains(now[0], " attention_fwd:")) << now[0];
  // Unasked, nothing is said about the other section.
  spit(path, theirs);
  const std::string quiet = with_context(
      dir.path, {}, [&](vkattn_context* ctx) { ASSERT_EQ(run_call(ctx).status, VKATTN_SUCCESS); });
  EXPECT_FALSE(contains(quiet, "vkattn: ")) << quiet;
  EXPECT_EQ(device_file_sections(slurp(path)).back(), theirs);
  // Five other builds' sections: ours and the first three of them stay.
  std::string five;
  for (const char* b : {"00000000000000c1", "00000000000000c2", "00000000000000c3",
                        "00000000000000c4", "00000000000000c5"})
    five += of_build(b);
  spit(path, five);
  with_context(dir.path, {},
               [&](vkattn_context* ctx) { ASSERT_EQ(run_call(ctx, 24).status, VKATTN_SUCCESS); });
  const std::string kept = slurp(path);
  size_t n = 0, sections = 0;
  EXPECT_TRUE(valid_results(kept, &n, &sections)) << kept;
  EXPECT_EQ(sections, 4u) << kept;
  EXPECT_TRUE(contains(kept, "build=00000000000000c3") && !contains(kept, "build=00000000000000c4"))
      << kept;
}

// A child of TwoProcessesLeaveAValidFile (run with
// --gtest_also_run_disabled_tests): checks several specializations.
TEST(SelfCheck, DISABLED_ChildChecksSeveralPipelines) {
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  for (int d : {24, 32, 40, 48})
    for (bool softcap : {false, true}) {
      const Result r = run_call(fc.ctx, d, softcap);
      ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
      EXPECT_LT(r.max_err, 1e-4);
    }
}

TEST(SelfCheck, TwoProcessesLeaveAValidFile) {
  VKATTN_NEEDS_SHELL();
  TempDir dir;
  const std::string exe = self_path();
  ASSERT_FALSE(exe.empty());
  const std::string child = std::string("VKATTN_PIPELINE_CACHE_DIR='") + dir.path + "' '" + exe +
                            "' --gtest_also_run_disabled_tests "
                            "--gtest_filter=SelfCheck.DISABLED_ChildChecksSeveralPipelines "
                            ">/dev/null 2>&1";
  const std::string both = "(" + child + ") & a=$!; (" + child + "); b=$?; wait $a && exit $b";
  ASSERT_EQ(std::system(("sh -c \"" + both + "\"").c_str()), 0);
  size_t n = 0;
  const std::string text = slurp(results_file(dir.path));
  EXPECT_TRUE(valid_results(text, &n)) << text;
  // Each child wrote all 8 of its pipelines, merged with what it found.
  EXPECT_GE(n, 8u) << text;
  EXPECT_FALSE(contains(text, "\nfail ")) << text;
}

// External mode: nothing may be submitted, so an unchecked pipeline runs
// unchecked (logged once); a context that ran the same call outside
// external mode first has it checked, and a failed family is replaced.
class SelfCheckExternal : public Engine {};

TEST_F(SelfCheckExternal, UncheckedPipelinesRunUncheckedAndCheckedOnesAreKept) {
  TempDir dir;
  ScopedEnv env({{"VKATTN_PIPELINE_CACHE_DIR", dir.path.c_str()},
                 {"VKATTN_ATTN_KERNEL", "lanes"},
                 {"VKATTN_FAULT_KERNEL", "lanes"}});
  for (bool checked_first : {false, true}) {
    SCOPED_TRACE(checked_first ? "checked first" : "unchecked");
    vkattn_vulkan_desc vd = desc_for(device, queue);
    vkattn_context* ctx = nullptr;
    ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
    const int T = 4, H = 2, d = 40;
    const int64_t shape[3] = {T, H, d};
    std::vector<float> x(T * H * d, 0.5f), y(T * H * d, 0.0f);
    vkattn_tensor *q = nullptr, *out = nullptr;
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &q), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &out), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(q, x.data(), x.size() * 4), VKATTN_SUCCESS);
    vkattn_attention_desc ad;
    vkattn_attention_desc_init(&ad);
    ad.num_heads = H, ad.num_kv_heads = H, ad.head_dim = d, ad.causal = 1;
    const int32_t cu[2] = {0, T};
    if (checked_first) {  // the same call outside external mode: checked, lanes replaced
      ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, q, q, out), VKATTN_SUCCESS)
          << vkattn_last_error();
      ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
    }
    testing::internal::CaptureStderr();
    VkCommandBuffer cmd = begin_commands();
    ASSERT_EQ(vkattn_context_begin_external(ctx, cmd), VKATTN_SUCCESS) << vkattn_last_error();
    EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, T),
                   "vkattn_context_begin_external");
    ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, q, q, out), VKATTN_SUCCESS)
        << vkattn_last_error();
    VkSemaphore sem = timeline_semaphore();
    ASSERT_EQ(vkattn_context_end_external(ctx, (uint64_t)sem, 1), VKATTN_SUCCESS);
    const std::string log = testing::internal::GetCapturedStderr();
    table.vkEndCommandBuffer(cmd);
    submit(cmd, sem, 1);
    wait(sem, 1);
    ASSERT_EQ(vkattn_tensor_read(out, y.data(), y.size() * 4), VKATTN_SUCCESS);
    // Every value is v = 0.5 where right; the faulted kernel adds 1.
    const float want = checked_first ? 0.5f : 1.5f;
    for (float v : y) ASSERT_NEAR(v, want, 1e-5);
    EXPECT_EQ(contains(log, "runs unchecked in external mode"), !checked_first) << log;
    vkattn_tensor_destroy(q);
    vkattn_tensor_destroy(out);
    uint32_t msgs = 0;
    EXPECT_EQ(vkattn_context_validation_messages(ctx, &msgs), VKATTN_SUCCESS);
    vkattn_context_destroy(ctx);
  }
}

// vkattn_context_self_check checks what a call would run, up front: a
// faulted family is found and recorded before any call, and the call that
// follows is right; bad arguments are refused with a message.
TEST(SelfCheck, UpFrontCheckFindsAFaultedFamilyBeforeAnyCall) {
  TempDir dir;
  with_context(
      dir.path, {{"VKATTN_ATTN_KERNEL", "lanes"}, {"VKATTN_FAULT_KERNEL", "lanes"}},
      [&](vkattn_context* ctx) {
        vkattn_attention_desc ad;
        vkattn_attention_desc_init(&ad);
        ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 40, ad.causal = 1;
        ASSERT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5), VKATTN_SUCCESS)
            << vkattn_last_error();
        uint32_t passed = 0, failed = 0;
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 0, &passed, &failed), VKATTN_SUCCESS);
        EXPECT_EQ(passed, 0u);
        EXPECT_GE(failed, 1u);
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 1, &passed, &failed), VKATTN_SUCCESS);
        EXPECT_GE(passed, 1u);
        EXPECT_EQ(failed, 0u);
        // 8-bit caches (paged), decode-shaped: checked through a cache.
        ASSERT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F16, VKATTN_I8, 1, 1), VKATTN_SUCCESS)
            << vkattn_last_error();
        const Result r = run_call(ctx);
        ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
        EXPECT_LT(r.max_err, 1e-4);
        // Bad arguments.
        EXPECT_INVALID(vkattn_context_self_check(ctx, nullptr, VKATTN_F32, VKATTN_F32, 0, 1),
                       "desc");
        EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_I8, VKATTN_F32, 0, 1), "q_dtype");
        EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_I8, 0, 1),
                       "kv_dtype");
        EXPECT_INVALID(
            vkattn_context_self_check(ctx, &ad, VKATTN_F32, static_cast<vkattn_dtype>(99), 1, 1),
            "kv_dtype");
        EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 2, 1), "paged");
        EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 0),
                       "query_tokens");
        ad.num_kv_heads = 3;
        EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 1),
                       "num_kv_heads");
        EXPECT_INVALID(vkattn_context_self_check_counts(ctx, 4, &passed, &failed), "family");
        EXPECT_INVALID(vkattn_context_self_check_counts(ctx, 0, nullptr, &failed), "passed");
      });
}

// A pipeline that reads VKATTN_Q4 is checked over a cache with rotated keys
// too (issue K4): with the queries' rotation faulted, every family's Q4
// check fails and the up-front check of a Q4 call is refused, while the
// same pipelines' int8 checks (no rotation) pass; unfaulted, Q4 passes.
TEST(SelfCheck, Q4ChecksCoverRotatedCaches) {
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 64, ad.causal = 1;
  {
    TempDir dir;
    with_context(dir.path, {{"VKATTN_FAULT_ROTATION", "1"}}, [&](vkattn_context* ctx) {
      EXPECT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_Q4, 1, 1),
                VKATTN_ERROR_UNSUPPORTED);
      EXPECT_NE(std::string(vkattn_last_error()).find("no attention kernel family passed"),
                std::string::npos)
          << vkattn_last_error();
      EXPECT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_I8, 1, 1), VKATTN_SUCCESS)
          << vkattn_last_error();
    });
  }
  // Unfaulted: passes, and checks the pipeline a decode over a Q4 cache
  // then runs (the call checks nothing more).
  TempDir dir;
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    EXPECT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_Q4, 1, 1), VKATTN_SUCCESS)
        << vkattn_last_error();
    auto checked = [&] {
      uint32_t n = 0, passed = 0, failed = 0;
      for (uint32_t f = 0; f < 4; ++f) {
        EXPECT_EQ(vkattn_context_self_check_counts(ctx, f, &passed, &failed), VKATTN_SUCCESS);
        n += passed + failed;
      }
      return n;
    };
    const uint32_t before = checked();
    EXPECT_GE(before, 1u);
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 1, cd.num_kv_heads = 2, cd.head_dim = 64, cd.num_pages = 4;
    cd.dtype = VKATTN_Q4, cd.flags = VKATTN_KV_ROTATE_KEYS;
    vkattn_kv_cache* cache = nullptr;
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    const int64_t id = 1;
    const int32_t n = 1;
    vkattn_step* step = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &n, &step), VKATTN_SUCCESS);
    auto zeros = [&](int64_t a, int64_t b, int64_t c) {
      vkattn_tensor* t = nullptr;
      const int64_t shape[3] = {a, b, c};
      EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &t), VKATTN_SUCCESS);
      std::vector<float> z(size_t(a * b * c), 0.5f);
      EXPECT_EQ(vkattn_tensor_write(t, z.data(), z.size() * 4), VKATTN_SUCCESS);
      return t;
    };
    vkattn_tensor *k = zeros(1, 2, 64), *v = zeros(1, 2, 64), *q = zeros(1, 4, 64),
                  *o = zeros(1, 4, 64);
    ASSERT_EQ(vkattn_step_append(step, 0, k, v), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_attention(step, 0, &ad, q, o), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
    EXPECT_EQ(checked(), before);
    for (vkattn_tensor* t : {k, v, q, o}) vkattn_tensor_destroy(t);
    vkattn_kv_cache_destroy(cache);
  });
}

// The right window and the chunks are compiled in by their presence, as
// ALiBi is: the up-front check of a descriptor with them checks their own
// pipeline (a faulted family fails it, and the plain pipeline is a check of
// its own), and a chunked call after it is right.
TEST(SelfCheck, UpFrontCheckCoversWindowsChunksAndSpans) {
  TempDir dir;
  with_context(
      dir.path, {{"VKATTN_ATTN_KERNEL", "lanes"}, {"VKATTN_FAULT_KERNEL", "lanes"}},
      [&](vkattn_context* ctx) {
        vkattn_attention_desc ad;
        vkattn_attention_desc_init(&ad);
        ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 16;
        ad.window_right = 2, ad.chunk_size = 5;
        ASSERT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5), VKATTN_SUCCESS)
            << vkattn_last_error();
        uint32_t passed = 0, failed = 0, failed_plain = 0;
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 0, &passed, &failed), VKATTN_SUCCESS);
        EXPECT_GE(failed, 1u);
        ad.window_right = -1, ad.chunk_size = 0;
        ASSERT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5), VKATTN_SUCCESS)
            << vkattn_last_error();
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 0, &passed, &failed_plain), VKATTN_SUCCESS);
        EXPECT_GT(failed_plain, failed) << "the plain pipeline is another check";
        // Spans by their presence (the arrays are not read).
        const int32_t indptr[1] = {0};
        ad.span_indptr = indptr;
        uint32_t failed_spans = 0;
        ASSERT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 5), VKATTN_SUCCESS)
            << vkattn_last_error();
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 0, &passed, &failed_spans), VKATTN_SUCCESS);
        EXPECT_GT(failed_spans, failed_plain) << "the spans' pipeline is another check";
      });
}

// E4 defect 6 (siblings): the up-front check takes a mask_type without a
// mask tensor (the header: the optional tensors are not read; a mask's
// shape depends on lengths the check has not), checking the masked
// pipeline; a mask tensor that is given is still checked as a call checks
// it.
TEST(SelfCheck, UpFrontCheckTakesAMaskTypeWithoutAMask) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_LOG", "kernels"}}, [&](vkattn_context* ctx) {
    vkattn_attention_desc ad;
    vkattn_attention_desc_init(&ad);
    ad.num_heads = 4, ad.num_kv_heads = 2, ad.head_dim = 8;
    for (vkattn_mask_type m : {VKATTN_MASK_BOOL, VKATTN_MASK_ADDITIVE}) {
      ad.mask_type = m;
      EXPECT_EQ(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 3), VKATTN_SUCCESS)
          << vkattn_last_error();
    }
    // A BOOL mask_type with an f32 mask tensor: refused as a call refuses it.
    vkattn_tensor* mask = nullptr;
    const int64_t n = 4;
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &mask), VKATTN_SUCCESS);
    ad.mask_type = VKATTN_MASK_BOOL, ad.mask = mask;
    EXPECT_INVALID(vkattn_context_self_check(ctx, &ad, VKATTN_F32, VKATTN_F32, 0, 3), "u8");
    vkattn_tensor_destroy(mask);
  });
}

// E4 defect 6 (siblings): a 16-bit pipeline's check also writes an output
// whose rows start in the middle of a 32-bit word (the odd-row store path,
// a runtime flag of the same pipeline). With that path faulted
// (VKATTN_FAULT_ODD_STORES=1) every family fails its check: the call is
// refused and its output untouched, where it used to pass a check of the
// even path and write wrong values.
TEST(SelfCheck, OddRowStoresAreChecked) {
  TempDir dir;
  with_context(dir.path, {{"VKATTN_FAULT_ODD_STORES", "1"}}, [&](vkattn_context* ctx) {
    const int64_t T = 3, H = 2, d = 8, U = 20;
    vkattn_tensor *q = nullptr, *k = nullptr, *base = nullptr, *out = nullptr;
    const int64_t qs[3] = {T, H, d}, ks[3] = {U, 1, d}, bs[1] = {T * H * d + 2};
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F16, 3, qs, &q), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F16, 3, ks, &k), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F16, 1, bs, &base), VKATTN_SUCCESS);
    const std::vector<uint16_t> ones(size_t(U) * d, 0x3c00), mark(size_t(T) * H * d + 2, 0x4248);
    ASSERT_EQ(vkattn_tensor_write(q, ones.data(), size_t(T) * H * d * 2), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(k, ones.data(), ones.size() * 2), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(base, mark.data(), mark.size() * 2), VKATTN_SUCCESS);
    // out: a view one element into `base`.
    ASSERT_EQ(vkattn_tensor_view(base, 1, 3, qs, nullptr, &out), VKATTN_SUCCESS)
        << vkattn_last_error();
    vkattn_attention_desc ad;
    vkattn_attention_desc_init(&ad);
    ad.num_heads = H, ad.num_kv_heads = 1, ad.head_dim = d;
    const int32_t cu_q[2] = {0, int32_t(T)}, cu_k[2] = {0, int32_t(U)};
    EXPECT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu_q, cu_k, q, k, k, out),
              VKATTN_ERROR_UNSUPPORTED)
        << "a wrong odd-row store reached the caller";
    std::vector<uint16_t> got(mark.size());
    ASSERT_EQ(vkattn_tensor_read(base, got.data(), got.size() * 2), VKATTN_SUCCESS);
    EXPECT_EQ(got, mark) << "the refused call wrote its output";
    for (vkattn_tensor* t : {q, k, out, base}) vkattn_tensor_destroy(t);
  });
}

// E4 defect 5 (sibling): a results file that cannot be written (its
// folder's parent is a file) is said once per process and never fails the
// call that triggered the check.
TEST(SelfCheck, AnUnwritableResultsFileNeverFailsACall) {
  TempDir dir;
  spit(dir.path + "/a-file", "x");
  const std::string bad = dir.path + "/a-file/cache";
  auto run = [&] {
    return with_context(bad, {}, [&](vkattn_context* ctx) {
      const Result r = run_call(ctx, 12);
      ASSERT_EQ(r.status, VKATTN_SUCCESS) << r.message;
      EXPECT_LT(r.max_err, 1e-4);
    });
  };
  const std::string first = run();
  EXPECT_TRUE(contains(first, "vkattn: cannot save self-check results")) << first;
  EXPECT_TRUE(contains(first, "Not a directory")) << first;
  const std::string second = run();
  EXPECT_FALSE(contains(second, "cannot save self-check results")) << second;
}

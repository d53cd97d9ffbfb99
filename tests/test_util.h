// Shared helpers of the GoogleTest suites: a context with the validation
// layer on, and a fixture that fails a test on any validation message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_platform.h"
#include "vkattn/vkattn.h"

namespace vkattn_test {

// VKATTN_FORCE_F16_MATH=1 (ctest *.tiled_f16): the tiled kernel computes
// q.k and p * v in f16 (unit roundoff 2^-11 on every product and on q, K
// and V themselves), so results are compared at f16 precision: this
// relative slack on outputs (times the largest |v|) and on lse (times
// 1 + |lse|), else 0.
inline double f16_math_slack() {
  const char* e = std::getenv("VKATTN_FORCE_F16_MATH");
  const char* k = std::getenv("VKATTN_ATTN_KERNEL");
  // The coopmat family multiplies f16 q (scale folded in) and f16 P.
  const bool coopmat = k && std::strcmp(k, "coopmat") == 0;
  return (e && *e && std::strcmp(e, "0") != 0) || coopmat ? 2e-3 : 0.0;
}

// VKATTN_TEST_KV_DTYPE=f16|bf16|f32: every attention case stores K and V
// in that dtype instead of its own (the coopmat suites on lavapipe 26.1
// use f16, the one K/V dtype the family takes there, so that every case
// runs on it); unset: the case's own.
inline vkattn_dtype test_kv_dtype(vkattn_dtype own) {
  const char* e = std::getenv("VKATTN_TEST_KV_DTYPE");
  if (!e || !*e) return own;
  if (std::strcmp(e, "f16") == 0) return VKATTN_F16;
  if (std::strcmp(e, "bf16") == 0) return VKATTN_BF16;
  if (std::strcmp(e, "f32") == 0) return VKATTN_F32;
  ADD_FAILURE() << "VKATTN_TEST_KV_DTYPE=" << e << " names no dtype (f16, bf16, f32)";
  return own;
}

// Field `name` (items, kv_reads, ...) of every forward pass a kernel log
// (VKATTN_LOG=kernels) recorded, in order.
inline std::vector<uint64_t> kernel_log_field(const std::string& log, const std::string& name) {
  std::vector<uint64_t> n;
  std::istringstream in(log);
  const std::string key = " " + name + "=";
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(key);
    if (line.rfind("vkattn: attention family=", 0) == 0 && at != std::string::npos)
      n.push_back(std::stoull(line.substr(at + key.size())));
  }
  return n;
}
// The items= of every forward pass (work items: tiles x key splits).
inline std::vector<uint64_t> kernel_log_items(const std::string& log) {
  return kernel_log_field(log, "items");
}

// The flag the tests create their contexts with: VKATTN_CONTEXT_VALIDATION.
// On Windows, where the suites run under wine and wine loads no Vulkan
// layer, 0 when the layer is absent (said once); elsewhere a missing
// layer fails the tests as before.
inline uint32_t validation_flag() {
  static const uint32_t flag = [] {
#ifdef _WIN32
    vkattn_context_desc d;
    vkattn_context_desc_init(&d);
    d.flags = VKATTN_CONTEXT_VALIDATION;
    vkattn_context* ctx = nullptr;
    const vkattn_status s = vkattn_context_create(&d, &ctx);
    vkattn_context_destroy(ctx);
    if (s == VKATTN_ERROR_UNSUPPORTED) {
      std::fprintf(stderr, "note: no Vulkan validation layer here: contexts run without it\n");
      return 0u;
    }
#endif
    return uint32_t(VKATTN_CONTEXT_VALIDATION);
  }();
  return flag;
}

inline vkattn_context* make_context() {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  d.flags = validation_flag();
  vkattn_context* ctx = nullptr;
  vkattn_status s = vkattn_context_create(&d, &ctx);
  EXPECT_EQ(s, VKATTN_SUCCESS) << vkattn_last_error();
  return ctx;
}

inline uint32_t validation_messages(vkattn_context* ctx) {
  uint32_t n = 0;
  EXPECT_EQ(vkattn_context_validation_messages(ctx, &n), VKATTN_SUCCESS);
  return n;
}

// A test with one validated context; TearDown asserts the layer stayed quiet.
class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx = make_context();
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override {
    if (!ctx) return;
    ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS) << vkattn_last_error();
    EXPECT_EQ(validation_messages(ctx), 0u);
    vkattn_context_destroy(ctx);
  }

  vkattn_tensor* tensor(vkattn_dtype dt, std::vector<int64_t> shape) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    owned.emplace_back(t, &vkattn_tensor_destroy);
    return t;
  }

  vkattn_context* ctx = nullptr;
  std::vector<std::unique_ptr<vkattn_tensor, void (*)(vkattn_tensor*)>> owned;
};

// A validated context of its own, made after a ScopedEnv so that it takes
// the forced kernel options (a context reads them once, when created);
// checks that the validation layer stayed quiet.
struct ForcedContext {
  vkattn_context* ctx = make_context();
  ~ForcedContext() {
    if (!ctx) return;
    EXPECT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS) << vkattn_last_error();
    EXPECT_EQ(validation_messages(ctx), 0u);
    vkattn_context_destroy(ctx);
  }
};

// Sets environment options for one scope (variant forcing, test limits);
// restores what was there before.
class ScopedEnv {
 public:
  using Vars = std::vector<std::pair<const char*, const char*>>;
  explicit ScopedEnv(Vars vars) : vars_(std::move(vars)) {
    for (auto& [k, v] : vars_) {
      const char* old = std::getenv(k);
      saved_.emplace_back(old != nullptr, old ? old : "");
      set_env(k, v);
    }
  }
  ~ScopedEnv() {
    for (size_t i = 0; i < vars_.size(); ++i) {
      if (saved_[i].first)
        set_env(vars_[i].first, saved_[i].second.c_str());
      else
        unset_env(vars_[i].first);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, const char*>> vars_;
  std::vector<std::pair<bool, std::string>> saved_;
};

// Expects `call` to fail with INVALID_ARGUMENT and a message naming `needle`.
#define EXPECT_INVALID(call, needle)                                               \
  do {                                                                             \
    vkattn_status s_ = (call);                                                     \
    EXPECT_EQ(s_, VKATTN_ERROR_INVALID_ARGUMENT) << #call;                         \
    EXPECT_NE(std::strstr(vkattn_last_error(), needle), nullptr)                   \
        << "message \"" << vkattn_last_error() << "\" lacks \"" << needle << "\""; \
  } while (0)

}  // namespace vkattn_test

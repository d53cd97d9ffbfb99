// Where attention plans live (VKATTN_PLAN_MEMORY=host|device): the
// items, combine items, sequence records and page tables the kernels read
// are copied into device-local memory (a step's plan once, reused by every
// layer; a plain call's into the batch's device ring) or written to
// host-visible memory. Moving the plan changes no bit of any result, in
// steps over several layers and steps, with split keys and a combine, in
// plain packed calls and over caller pools; the kernel log names the
// memory; a value that is neither is refused.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

using namespace vkattn_test;

namespace {

vkattn_tensor* upload(vkattn_context* ctx, std::vector<int64_t> shape, std::mt19937& rng) {
  vkattn_tensor* t = nullptr;
  EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, uint32_t(shape.size()), shape.data(), &t),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> x(vkattn_tensor_nbytes(t) / 4);
  std::normal_distribution<float> g;
  for (float& v : x) v = g(rng);
  EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
  return t;
}

std::vector<float> read(vkattn_tensor* t) {
  std::vector<float> x(vkattn_tensor_nbytes(t) / 4);
  EXPECT_EQ(vkattn_tensor_read(t, x.data(), x.size() * 4), VKATTN_SUCCESS) << vkattn_last_error();
  return x;
}

// Everything one context computes: two steps over a 2-layer f16 cache
// (a prefill chunk and a long sequence, then decodes), each layer's
// outputs and lse, then a plain packed call; the kernel log beside.
struct Results {
  std::vector<std::vector<float>> outputs;
  std::string log;
};

Results run(const char* plan_memory) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_PLAN_MEMORY", plan_memory},
                                {"VKATTN_LOG", "kernels"},
                                {"VKATTN_ATTN_SPLIT_KEYS", "24"}});
  Results r;
  testing::internal::CaptureStderr();
  {
    ForcedContext fc;
    vkattn_context* ctx = fc.ctx;
    std::mt19937 rng(7);
    const uint32_t hkv = 2, h = 4, d = 64;
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 2, cd.num_kv_heads = hkv, cd.head_dim = d, cd.num_pages = 64;
    vkattn_kv_cache* cache = nullptr;
    EXPECT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    vkattn_attention_desc a;
    vkattn_attention_desc_init(&a);
    a.num_heads = h, a.num_kv_heads = hkv, a.head_dim = d, a.causal = 1;
    const int64_t ids[2] = {3, 9};
    for (const std::vector<int32_t>& t : {std::vector<int32_t>{40, 300}, {1, 1}}) {
      vkattn_step* step = nullptr;
      EXPECT_EQ(vkattn_step_begin(cache, 2, ids, t.data(), &step), VKATTN_SUCCESS)
          << vkattn_last_error();
      const int64_t n = t[0] + t[1];
      for (uint32_t layer = 0; layer < 2; ++layer) {
        vkattn_tensor *k = upload(ctx, {n, hkv, d}, rng), *v = upload(ctx, {n, hkv, d}, rng);
        vkattn_tensor *q = upload(ctx, {n, h, d}, rng), *out = upload(ctx, {n, h, d}, rng);
        vkattn_tensor* lse = upload(ctx, {n, h}, rng);
        EXPECT_EQ(vkattn_step_append(step, layer, k, v), VKATTN_SUCCESS) << vkattn_last_error();
        a.lse = lse;
        EXPECT_EQ(vkattn_step_attention(step, layer, &a, q, out), VKATTN_SUCCESS)
            << vkattn_last_error();
        r.outputs.push_back(read(out));
        r.outputs.push_back(read(lse));
        for (vkattn_tensor* x : {k, v, q, out, lse}) vkattn_tensor_destroy(x);
      }
      EXPECT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS) << vkattn_last_error();
    }
    vkattn_kv_cache_destroy(cache);
    // A plain packed call: its plan goes through the batch's device ring.
    const int32_t cu_q[3] = {0, 3, 4}, cu_k[3] = {0, 90, 290};
    vkattn_tensor *q = upload(ctx, {4, h, d}, rng), *k = upload(ctx, {290, hkv, d}, rng);
    vkattn_tensor *v = upload(ctx, {290, hkv, d}, rng), *out = upload(ctx, {4, h, d}, rng);
    a.lse = nullptr;
    EXPECT_EQ(vkattn_attention_varlen(ctx, &a, 2, cu_q, cu_k, q, k, v, out), VKATTN_SUCCESS)
        << vkattn_last_error();
    r.outputs.push_back(read(out));
    for (vkattn_tensor* x : {q, k, v, out}) vkattn_tensor_destroy(x);
  }
  r.log = testing::internal::GetCapturedStderr();
  return r;
}

}  // namespace

TEST(PlanMemory, DevicePlansGiveTheHostPlansBits) {
  const Results host = run("host"), device = run("device");
  ASSERT_EQ(host.outputs.size(), device.outputs.size());
  for (size_t i = 0; i < host.outputs.size(); ++i) {
    ASSERT_EQ(host.outputs[i].size(), device.outputs[i].size());
    EXPECT_EQ(
        std::memcmp(host.outputs[i].data(), device.outputs[i].data(), host.outputs[i].size() * 4),
        0)
        << "output " << i << " differs";
  }
  // Every forward pass says where its plan was; split keys made combines.
  EXPECT_NE(host.log.find("plan=host"), std::string::npos) << host.log;
  EXPECT_EQ(host.log.find("plan=device"), std::string::npos) << host.log;
  EXPECT_NE(device.log.find("plan=device"), std::string::npos) << device.log;
  EXPECT_EQ(device.log.find("plan=host"), std::string::npos) << device.log;
  size_t combined = 0;
  for (size_t at = device.log.find(" split="); at != std::string::npos;
       at = device.log.find(" split=", at + 1))
    combined += device.log.compare(at, 9, " split=0 ") != 0;
  EXPECT_GE(combined, 1u) << device.log;
}

TEST(PlanMemory, AnUnknownValueIsRefused) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_PLAN_MEMORY", "gpu"}});
  vkattn_context* ctx = nullptr;
  EXPECT_INVALID(vkattn_context_create(nullptr, &ctx), "VKATTN_PLAN_MEMORY=\"gpu\"");
  EXPECT_EQ(ctx, nullptr);
}

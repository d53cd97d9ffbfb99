// An engine's own buffers and external mode at their edges (issue E3):
// 16-bit outputs in the caller's buffer ranges that end mid-word (every
// element written, no byte outside the range touched), the feature chain
// of vkattn_context_create_from_vulkan (copied, never kept), and flushes
// after vkattn_context_end_external before the caller has submitted its
// command buffer (they return; only what needs the caller's work waits).
#include <chrono>
#include <future>
#include <random>

#include "engine_fixture.h"
#include "reference/dtype_util.h"

using namespace vkattn_test;

namespace {

constexpr uint32_t kTexel = VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;

std::vector<uint16_t> random_f16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = vkattn_ref::f32_to_f16(u(rng));
  return v;
}

class EngineEdges : public Engine {
 protected:
  void SetUp() override {
    Engine::SetUp();
    vkattn_vulkan_desc vd = desc_for(device, queue);
    ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  }
  void TearDown() override {
    for (vkattn_tensor* t : tensors) vkattn_tensor_destroy(t);
    vkattn_context_destroy(ctx);
    Engine::TearDown();
  }
  vkattn_tensor* own(vkattn_dtype dt, std::vector<int64_t> shape, const void* data) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    tensors.push_back(t);
    if (data) EXPECT_EQ(vkattn_tensor_write(t, data, vkattn_tensor_nbytes(t)), VKATTN_SUCCESS);
    return t;
  }
  // The engine's buffer of `bytes` (host-visible, filled with 0xAB), and a
  // tensor over bytes [offset, offset + size) of it.
  vkattn_tensor* wrapped(uint64_t bytes, uint64_t offset, uint64_t size, vkattn_dtype dt,
                         std::vector<int64_t> shape, uint8_t** mapped) {
    void* p = nullptr;
    VkBuffer b = buffer(bytes, kUsage | kTexel, true, &p);
    std::memset(p, 0xab, bytes);
    *mapped = static_cast<uint8_t*>(p);
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_wrap_vk_buffer(ctx, (uint64_t)b, offset, size, kUsage | kTexel, dt,
                                           uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    tensors.push_back(t);
    return t;
  }
  std::vector<uint16_t> read16(vkattn_tensor* t) {
    std::vector<uint16_t> v(vkattn_tensor_nbytes(t) / 2);
    EXPECT_EQ(vkattn_tensor_read(t, v.data(), v.size() * 2), VKATTN_SUCCESS) << vkattn_last_error();
    return v;
  }
  // The caller's bytes outside [offset, offset + size) still hold 0xab, and
  // the range holds `want`.
  void expect_range(const uint8_t* mapped, uint64_t bytes, uint64_t offset,
                    const std::vector<uint16_t>& want, const char* what) {
    ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
    for (uint64_t i = 0; i < bytes; ++i) {
      if (i >= offset && i < offset + want.size() * 2) continue;
      ASSERT_EQ(mapped[i], 0xab) << what << ": the caller's byte " << i << " was written";
    }
    for (size_t e = 0; e < want.size(); ++e) {
      uint16_t got;
      std::memcpy(&got, mapped + offset + 2 * e, 2);
      ASSERT_EQ(got, want[e]) << what << ": element " << e << " of " << want.size();
    }
  }

  vkattn_context* ctx = nullptr;
  std::vector<vkattn_tensor*> tensors;
};

// Attention, merge and RoPE write 15 f16 elements into the engine's buffer
// ranges [0, 30) of a 30-byte buffer (the range ends mid-word at the
// buffer's end) and [6, 36) of a 64-byte one (mid-word both sides, caller
// bytes around): each range gets what a vkattn tensor gets, byte for byte,
// and nothing outside it changes.
TEST_F(EngineEdges, Odd16BitOutputsInCallerRangesWriteExactlyTheirBytes) {
  const int T = 3, H = 1, d = 5;
  const uint64_t n = T * H * d, nb = n * 2;
  const std::vector<int64_t> shape = {T, H, d};
  vkattn_tensor* q = own(VKATTN_F16, shape, random_f16(n, 1).data());
  vkattn_tensor* k = own(VKATTN_F16, shape, random_f16(n, 2).data());
  vkattn_tensor* v = own(VKATTN_F16, shape, random_f16(n, 3).data());
  std::vector<float> lse_a(T * H, 0.25f), lse_b(T * H, -0.5f);
  vkattn_tensor* la = own(VKATTN_F32, {T, H}, lse_a.data());
  vkattn_tensor* lb = own(VKATTN_F32, {T, H}, lse_b.data());
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = H, ad.head_dim = d, ad.causal = 1;
  const int32_t cu[2] = {0, T}, start[1] = {3};
  vkattn_rope_desc rd;
  vkattn_rope_desc_init(&rd);
  rd.rotary_dim = 4;
  // Each op once into a vkattn tensor (the expected bits) and once into
  // each caller range.
  auto run = [&](int op, vkattn_tensor* out) {
    if (op == 0) return vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, k, v, out);
    if (op == 1) return vkattn_attention_merge(ctx, q, la, k, lb, out, nullptr);
    return vkattn_rope(ctx, &rd, 1, cu, start, q, out);
  };
  const char* names[3] = {"attention", "merge", "rope"};
  for (int op = 0; op < 3; ++op) {
    vkattn_tensor* dense = own(VKATTN_F16, shape, nullptr);
    ASSERT_EQ(run(op, dense), VKATTN_SUCCESS) << vkattn_last_error();
    const std::vector<uint16_t> want = read16(dense);
    struct Range {
      uint64_t bytes, offset;
    };
    for (Range r : {Range{nb, 0}, Range{64, 6}}) {
      SCOPED_TRACE(std::string(names[op]) + " into [" + std::to_string(r.offset) + ", " +
                   std::to_string(r.offset + nb) + ") of " + std::to_string(r.bytes) + " bytes");
      uint8_t* mapped = nullptr;
      vkattn_tensor* out = wrapped(r.bytes, r.offset, nb, VKATTN_F16, shape, &mapped);
      ASSERT_EQ(run(op, out), VKATTN_SUCCESS) << vkattn_last_error();
      expect_range(mapped, r.bytes, r.offset, want, names[op]);
      EXPECT_EQ(read16(out), want);
    }
  }
}

// Caller pools of f16 with an odd head dim whose range ends mid-word:
// vkattn_paged_append writes every slot it should and nothing after the
// range.
TEST_F(EngineEdges, PagedAppendIntoAnOddCallerPoolRange) {
  const int np = 2, ps = 3, hkv = 1, d = 5;
  const uint64_t n = uint64_t(np) * ps * hkv * d, nb = n * 2;
  const std::vector<int64_t> pool = {np, ps, hkv, d};
  uint8_t *mk = nullptr, *mv = nullptr;
  vkattn_tensor* kp = wrapped(nb, 0, nb, VKATTN_F16, pool, &mk);
  vkattn_tensor* vp = wrapped(64, 2, nb, VKATTN_F16, pool, &mv);
  const std::vector<uint16_t> kh = random_f16(6 * d, 4), vh = random_f16(6 * d, 5);
  vkattn_tensor* k_new = own(VKATTN_F16, {6, hkv, d}, kh.data());
  vkattn_tensor* v_new = own(VKATTN_F16, {6, hkv, d}, vh.data());
  // One sequence of 6 tokens over pages 1 then 0: the last token lands in
  // page 0's last slot, the pool's last elements.
  const int32_t cu[2] = {0, 6}, before[1] = {0}, indptr[2] = {0, 2}, indices[2] = {1, 0};
  ASSERT_EQ(vkattn_paged_append(ctx, 1, cu, before, indptr, indices, ps, k_new, v_new, kp, vp),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<uint16_t> want_k(n), want_v(n);
  for (int t = 0; t < 6; ++t) {
    const int page = indices[t / ps], slot = t % ps;
    for (int e = 0; e < d; ++e) {
      want_k[(page * ps + slot) * d + e] = kh[t * d + e];
      want_v[(page * ps + slot) * d + e] = vh[t * d + e];
    }
  }
  expect_range(mk, nb, 0, want_k, "k pool");
  expect_range(mv, 64, 2, want_v, "v pool");
}

// vkattn_context_create_from_vulkan reads the feature chain during the call
// only: the engine frees it afterwards, and vkattn_context_get_vulkan
// hands back the context's own chain with the flags vkattn read.
TEST_F(EngineEdges, FeatureChainIsCopiedNotKept) {
  auto* f2 = new VkPhysicalDeviceFeatures2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  auto* f12 =
      new VkPhysicalDeviceVulkan12Features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12->timelineSemaphore = VK_TRUE;
  f2->pNext = f12;
  vkattn_vulkan_desc vd = desc_for(device, queue);
  vd.enabled_features = f2;
  vkattn_context* c2 = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &c2), VKATTN_SUCCESS) << vkattn_last_error();
  const void* callers = f2;
  std::memset(f12, 0xee, sizeof(*f12));  // the engine reuses its memory
  delete f12;
  delete f2;
  vkattn_vulkan_desc got;
  vkattn_vulkan_desc_init(&got);
  ASSERT_EQ(vkattn_context_get_vulkan(c2, &got), VKATTN_SUCCESS);
  ASSERT_NE(got.enabled_features, nullptr);
  EXPECT_NE(got.enabled_features, callers);
  const auto* g2 = static_cast<const VkPhysicalDeviceFeatures2*>(got.enabled_features);
  EXPECT_EQ(g2->sType, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  bool timeline = false;
  int links = 0;
  for (auto* p = static_cast<const VkBaseInStructure*>(g2->pNext); p && links < 8;
       p = p->pNext, ++links)
    if (p->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
      timeline = reinterpret_cast<const VkPhysicalDeviceVulkan12Features*>(p)->timelineSemaphore;
  EXPECT_TRUE(timeline);
  EXPECT_LT(links, 8);
  // The context works after the caller's chain is gone.
  const int64_t shape[1] = {4};
  vkattn_tensor* t = nullptr;
  ASSERT_EQ(vkattn_tensor_create(c2, VKATTN_F32, 1, shape, &t), VKATTN_SUCCESS);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ASSERT_EQ(vkattn_tensor_write(t, x, 16), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(t, y, 16), VKATTN_SUCCESS);
  EXPECT_EQ(std::memcmp(x, y, 16), 0);
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(c2);
}

// After vkattn_context_end_external, before the engine submits its command
// buffer: 24 flushes (each with work recorded, past the cap of batches in
// flight) and a read of a tensor the external work did not touch all
// return; vkattn's work that reads the external work's output waits for it
// on the GPU. Then the engine submits, and every result is right.
TEST_F(EngineEdges, FlushesAfterExternalModeNeverWaitForTheCaller) {
  const int T = 4, H = 2, d = 8;
  const std::vector<int64_t> shape = {T, H, d};
  std::vector<uint16_t> qh = random_f16(T * H * d, 6);
  vkattn_tensor* q = own(VKATTN_F16, shape, qh.data());
  vkattn_tensor* out = own(VKATTN_F16, shape, nullptr);
  vkattn_tensor* out2 = own(VKATTN_F16, shape, nullptr);
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = H, ad.head_dim = d, ad.causal = 1;
  const int32_t cu[2] = {0, T};
  VkCommandBuffer cmd = begin_commands();
  ASSERT_EQ(vkattn_context_begin_external(ctx, cmd), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, q, q, out), VKATTN_SUCCESS);
  VkSemaphore sem = timeline_semaphore();
  ASSERT_EQ(vkattn_context_end_external(ctx, (uint64_t)sem, 1), VKATTN_SUCCESS);

  std::vector<uint16_t> other = random_f16(64, 7), back(64);
  vkattn_tensor* unrelated = own(VKATTN_F16, {64}, nullptr);
  vkattn_tensor* q2 = own(VKATTN_F16, shape, random_f16(T * H * d, 8).data());
  vkattn_tensor* out3 = own(VKATTN_F16, shape, nullptr);
  auto work = std::async(std::launch::async, [&] {
    for (int i = 0; i < 24; ++i) {
      other[0] = uint16_t(i);
      if (vkattn_tensor_write(unrelated, other.data(), 128) != VKATTN_SUCCESS) return 1;
      if (vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q2, q2, q2, out3) != VKATTN_SUCCESS)
        return 1;
      if (vkattn_context_flush(ctx) != VKATTN_SUCCESS) return 2;
    }
    // Reads what external work never touched: no wait for the caller.
    if (vkattn_tensor_read(unrelated, back.data(), 128) != VKATTN_SUCCESS) return 3;
    // vkattn's own use of the external work's output: recorded, submitted
    // behind the caller's semaphore on the GPU, never waited for here.
    if (vkattn_attention_varlen(ctx, &ad, 1, cu, cu, out, q, q, out2) != VKATTN_SUCCESS) return 4;
    if (vkattn_context_flush(ctx) != VKATTN_SUCCESS) return 5;
    // Unrelated work after the held-back batch runs, and reading it does
    // not wait for the held-back one.
    if (vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q2, q2, q2, out3) != VKATTN_SUCCESS) return 6;
    if (vkattn_context_flush(ctx) != VKATTN_SUCCESS) return 7;
    std::vector<uint16_t> o3(T * H * d);
    if (vkattn_tensor_read(out3, o3.data(), o3.size() * 2) != VKATTN_SUCCESS) return 8;
    return 0;
  });
  if (work.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "a flush or read waited for the caller's unsubmitted command buffer";
    // Unblock it from the host (the command buffer is dropped unsubmitted).
    VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
    si.semaphore = sem;
    si.value = 1;
    VK_OK(table.vkSignalSemaphore(device, &si));
    work.get();
    return;
  }
  VK_OK(table.vkEndCommandBuffer(cmd));
  submit(cmd, sem, 1);
  EXPECT_EQ(work.get(), 0) << vkattn_last_error();
  EXPECT_EQ(back, other);
  // The results, against the same calls on vkattn's own stream.
  vkattn_tensor* want = own(VKATTN_F16, shape, nullptr);
  vkattn_tensor* want2 = own(VKATTN_F16, shape, nullptr);
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, q, q, want), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, want, q, q, want2), VKATTN_SUCCESS);
  EXPECT_EQ(read16(out), read16(want));
  EXPECT_EQ(read16(out2), read16(want2));
  ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
}

}  // namespace

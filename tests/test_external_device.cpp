// Interop with a caller's own Vulkan objects (issue F): the test is the
// engine. It creates its instance (validation layer on, its own messenger)
// and device with volk, its own buffers, fills a fused QKV buffer with its
// own copies, records vkattn attention on views of it into its own command
// buffer between its own commands, submits and waits on its own timeline
// semaphore, and compares with the same call on vkattn's own tensors.
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "engine_fixture.h"

using namespace vkattn_test;

namespace {

TEST_F(Engine, AttentionOnFusedQkvViewsInTheCallersCommandBuffer) {
  vkattn_vulkan_desc vd = desc_for(device, queue);
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  const int H = 4, Hkv = 2, d = 16, T = 9;
  const int64_t W = (H + 2 * Hkv) * d;
  const VkDeviceSize fused_bytes = VkDeviceSize(T) * W * 4, out_bytes = VkDeviceSize(T) * H * d * 4;
  std::vector<float> host(size_t(T) * W);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& x : host) x = u(rng);
  void *staging_p = nullptr, *readback_p = nullptr;
  VkBuffer staging = buffer(fused_bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, &staging_p);
  VkBuffer readback = buffer(out_bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, &readback_p);
  VkBuffer fused = buffer(fused_bytes, kUsage, false, nullptr);  // no texel usage
  VkBuffer outb = buffer(out_bytes, kUsage, false, nullptr);
  std::memcpy(staging_p, host.data(), fused_bytes);
  std::memset(readback_p, 0xff, out_bytes);

  vkattn_tensor *tf = nullptr, *to = nullptr, *q = nullptr, *k = nullptr, *v = nullptr;
  const int64_t fshape[2] = {T, W}, oshape[3] = {T, H, d};
  ASSERT_EQ(vkattn_tensor_wrap_vk_buffer(ctx, (uint64_t)fused, 0, fused_bytes, kUsage, VKATTN_F32,
                                         2, fshape, &tf),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  ASSERT_EQ(vkattn_tensor_wrap_vk_buffer(ctx, (uint64_t)outb, 0, out_bytes, kUsage, VKATTN_F32, 3,
                                         oshape, &to),
            VKATTN_SUCCESS);
  const int64_t qs[3] = {T, H, d}, ks[3] = {T, Hkv, d}, st[3] = {W, d, 1};
  ASSERT_EQ(vkattn_tensor_view(tf, 0, 3, qs, st, &q), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_view(tf, H * d, 3, ks, st, &k), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_view(tf, (H + Hkv) * d, 3, ks, st, &v), VKATTN_SUCCESS);

  // The engine's command buffer: its copy in and its own dispatch (the
  // projection output x 2), vkattn's attention, its own dispatch on the
  // output (x 0.5), its copy out. vkattn's barriers order it against both
  // dispatches; the engine rebinds its pipeline after vkattn's.
  VkCommandBuffer cmd = begin_commands();
  VkBufferCopy in{0, 0, fused_bytes}, outc{0, 0, out_bytes};
  table.vkCmdCopyBuffer(cmd, staging, fused, 1, &in);
  engine_barrier(cmd);
  record_scale(cmd, fused, uint32_t(T * W), 2.0f);
  ASSERT_EQ(vkattn_context_begin_external(ctx, cmd), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d, ad.causal = 1;
  const int32_t cu[3] = {0, 4, T};
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 2, cu, cu, q, k, v, to), VKATTN_SUCCESS)
      << vkattn_last_error();
  // What would submit or wait is refused in external mode; nothing recorded.
  std::vector<float> dummy(size_t(T) * H * d);
  EXPECT_INVALID(vkattn_tensor_read(to, dummy.data(), out_bytes), "external");
  EXPECT_INVALID(vkattn_tensor_write(to, dummy.data(), out_bytes), "external");
  EXPECT_INVALID(vkattn_context_synchronize(ctx), "external");
  EXPECT_INVALID(vkattn_context_flush(ctx), "external");
  EXPECT_INVALID(vkattn_context_flush_with(ctx, 0, 0, 0, 0), "external");
  EXPECT_INVALID(vkattn_context_begin_external(ctx, cmd), "external");
  VkSemaphore sem = timeline_semaphore();
  ASSERT_EQ(vkattn_context_end_external(ctx, (uint64_t)sem, 1), VKATTN_SUCCESS);
  EXPECT_INVALID(vkattn_context_end_external(ctx, (uint64_t)sem, 1), "not in external mode");
  record_scale(cmd, outb, uint32_t(T * H * d), 0.5f);
  engine_barrier(cmd);
  table.vkCmdCopyBuffer(cmd, outb, readback, 1, &outc);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  table.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &mb, 0, nullptr, 0, nullptr);
  VK_OK(table.vkEndCommandBuffer(cmd));
  submit(cmd, sem, 1);
  wait(sem, 1);
  std::vector<float> got(size_t(T) * H * d);
  std::memcpy(got.data(), readback_p, out_bytes);

  // The same call on vkattn's own dense tensors of the same context, on
  // the doubled inputs, its output halved (both exact in f32).
  for (float& x : got) x *= 2.0f;
  auto dense = [&](int heads, int64_t off) {
    std::vector<float> x(size_t(T) * heads * d);
    for (int t = 0; t < T; ++t)
      for (int e = 0; e < heads * d; ++e)
        x[size_t(t) * heads * d + e] = 2.0f * host[t * W + off + e];
    vkattn_tensor* y = nullptr;
    const int64_t sh[3] = {T, heads, d};
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, sh, &y), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(y, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return y;
  };
  vkattn_tensor *dq = dense(H, 0), *dk = dense(Hkv, H * d), *dv = dense(Hkv, (H + Hkv) * d);
  vkattn_tensor* dout = nullptr;
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, oshape, &dout), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 2, cu, cu, dq, dk, dv, dout), VKATTN_SUCCESS);
  std::vector<float> want(got.size());
  ASSERT_EQ(vkattn_tensor_read(dout, want.data(), out_bytes), VKATTN_SUCCESS);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(want[i]));
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << i << ": " << got[i] << " vs " << want[i];
  }
  // Reading the wrapped output through vkattn gives the same (halved).
  std::vector<float> again(got.size());
  ASSERT_EQ(vkattn_tensor_read(to, again.data(), out_bytes), VKATTN_SUCCESS);
  for (float& x : again) x *= 2.0f;
  EXPECT_EQ(std::memcmp(again.data(), got.data(), out_bytes), 0);
  for (vkattn_tensor* t : {q, k, v, tf, to, dq, dk, dv, dout}) vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
}

TEST_F(Engine, FlushWithWaitsOnTheCallersSemaphore) {
  vkattn_vulkan_desc vd = desc_for(device, queue);
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  VkSemaphore before = timeline_semaphore(), after = timeline_semaphore();
  const int64_t shape[1] = {64};
  vkattn_tensor* t = nullptr;
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 1, shape, &t), VKATTN_SUCCESS);
  std::vector<float> ones(64, 1.0f);
  ASSERT_EQ(vkattn_tensor_write(t, ones.data(), 256), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_context_flush_with(ctx, (uint64_t)before, 1, (uint64_t)after, 7), VKATTN_SUCCESS)
      << vkattn_last_error();
  // vkattn's submission waits for the engine's semaphore (signalled here
  // from the host, as another queue would).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  uint64_t value = 0;
  VK_OK(table.vkGetSemaphoreCounterValue(device, after, &value));
  EXPECT_EQ(value, 0u);
  VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
  si.semaphore = before;
  si.value = 1;
  VK_OK(table.vkSignalSemaphore(device, &si));
  wait(after, 7);
  VK_OK(table.vkGetSemaphoreCounterValue(device, after, &value));
  EXPECT_EQ(value, 7u);
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
}

TEST_F(Engine, ContextHandsBackTheCallersHandles) {
  vkattn_vulkan_desc vd = desc_for(device, queue);
  const char* ext[1] = {"VK_KHR_fake_for_the_record"};
  vd.enabled_extensions = ext;
  vd.enabled_extension_count = 1;
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_vulkan_desc got;
  vkattn_vulkan_desc_init(&got);
  ASSERT_EQ(vkattn_context_get_vulkan(ctx, &got), VKATTN_SUCCESS);
  EXPECT_EQ(got.instance, (void*)instance);
  EXPECT_EQ(got.device, (void*)device);
  EXPECT_EQ(got.queue, (void*)queue);
  EXPECT_EQ(got.physical_device, (void*)physical);
  EXPECT_EQ(got.queue_family_index, family);
  ASSERT_EQ(got.enabled_extension_count, 1u);
  EXPECT_STREQ(got.enabled_extensions[0], ext[0]);
  vkattn_context_destroy(ctx);
  // The caller's device still works after the context is gone.
  VK_OK(table.vkDeviceWaitIdle(device));
}

TEST_F(Engine, DeviceWithoutTimelineSemaphoresIsRefused) {
  VolkDeviceTable t2{};
  VkDevice d2 = make_device(false, &t2);
  ASSERT_NE(d2, VK_NULL_HANDLE);
  VkQueue q2 = VK_NULL_HANDLE;
  t2.vkGetDeviceQueue(d2, family, 0, &q2);
  vkattn_vulkan_desc vd = desc_for(d2, q2);
  vkattn_context* ctx = nullptr;
  EXPECT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_ERROR_UNSUPPORTED);
  EXPECT_NE(std::strstr(vkattn_last_error(), "timelineSemaphore"), nullptr) << vkattn_last_error();
  EXPECT_EQ(ctx, nullptr);
  vd.enabled_features = nullptr;
  EXPECT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_ERROR_UNSUPPORTED);
  vd = desc_for(device, queue);
  vd.flags = VKATTN_CONTEXT_VALIDATION;
  EXPECT_INVALID(vkattn_context_create_from_vulkan(&vd, &ctx), "VALIDATION");
  vd.flags = 0x80u;
  EXPECT_INVALID(vkattn_context_create_from_vulkan(&vd, &ctx), "unknown flags");
  vd = desc_for(device, queue);
  vd.api_version = VK_API_VERSION_1_1;
  EXPECT_INVALID(vkattn_context_create_from_vulkan(&vd, &ctx), "1.2");
  vd = desc_for(device, queue);
  vd.queue_family_index = 99;
  EXPECT_INVALID(vkattn_context_create_from_vulkan(&vd, &ctx), "queue_family_index");
  t2.vkDestroyDevice(d2, nullptr);
}

// Batch invariance and profiling are the context's own business: an
// adopted device takes both flags.
TEST_F(Engine, BatchInvariantFlagIsTaken) {
  vkattn_vulkan_desc vd = desc_for(device, queue);
  vd.flags = VKATTN_CONTEXT_BATCH_INVARIANT | VKATTN_CONTEXT_PROFILING;
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_context_destroy(ctx);
}

TEST_F(Engine, DestroyInExternalModeNeverWaitsOnTheSemaphore) {
  vkattn_vulkan_desc vd = desc_for(device, queue);
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  const int64_t shape[3] = {2, 2, 8};
  vkattn_tensor *q = nullptr, *o = nullptr;
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &q), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape, &o), VKATTN_SUCCESS);
  std::vector<float> x(32, 0.5f);
  ASSERT_EQ(vkattn_tensor_write(q, x.data(), 128), VKATTN_SUCCESS);
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = 2, ad.num_kv_heads = 2, ad.head_dim = 8;
  const int32_t cu[2] = {0, 2};
  // Ended with a semaphore nobody signals (never submitted), and left open.
  VkCommandBuffer cmd = begin_commands();
  ASSERT_EQ(vkattn_context_begin_external(ctx, cmd), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_attention_varlen(ctx, &ad, 1, cu, cu, q, q, q, o), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_context_end_external(ctx, (uint64_t)timeline_semaphore(), 5), VKATTN_SUCCESS);
  vkattn_tensor_destroy(q);
  vkattn_tensor_destroy(o);
  vkattn_context_destroy(ctx);  // returns: never waits on the semaphore
  ASSERT_EQ(vkattn_context_create_from_vulkan(&vd, &ctx), VKATTN_SUCCESS);
  VkCommandBuffer cmd2 = begin_commands();
  ASSERT_EQ(vkattn_context_begin_external(ctx, cmd2), VKATTN_SUCCESS);
  vkattn_context_destroy(ctx);
  // The engine drops both command buffers unsubmitted (TearDown frees the
  // pool): what vkattn recorded there refers to objects it has freed.
}

}  // namespace

/* interop: vkattn inside an engine's own Vulkan command buffer. The engine
 * here borrows vkattn's device (vkattn_context_get_vulkan; an engine with
 * its own device uses vkattn_context_create_from_vulkan instead), records
 * attention over q/k/v views of one fused QKV projection output into its
 * command buffer (no copy), submits it itself and waits on its own timeline
 * semaphore. Checked against a few lines of plain C.
 *
 *   ./build/examples/interop
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "vkattn/vkattn.h"

enum { T = 6, H = 4, HKV = 2, D = 32, W = (H + 2 * HKV) * D };

static void die(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, vkattn_last_error());
  exit(1);
}
#define CHECK(call) \
  if ((call) != VKATTN_SUCCESS) die(#call)
#define VK_CHECK(call) \
  if ((call) != VK_SUCCESS) (fprintf(stderr, "%s failed\n", #call), exit(1))

int main(int argc, char** argv) {
  if (argc > 1) { /* it takes no argument */
    fprintf(stderr, "usage: interop (no arguments; got \"%s\")\n", argv[1]);
    return 2;
  }
  vkattn_context* ctx;
  CHECK(vkattn_context_create(NULL, &ctx));
  vkattn_vulkan_desc vk;
  vkattn_vulkan_desc_init(&vk);
  CHECK(vkattn_context_get_vulkan(ctx, &vk));
  /* The engine's Vulkan functions, loaded from vkattn's device. */
  PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)vk.get_instance_proc_addr;
  VkDevice dev = (VkDevice)vk.device;
  PFN_vkGetDeviceProcAddr gdpa =
      (PFN_vkGetDeviceProcAddr)gipa((VkInstance)vk.instance, "vkGetDeviceProcAddr");
#define LOAD(name) PFN_##name name = (PFN_##name)gdpa(dev, #name)
  LOAD(vkCreateCommandPool);
  LOAD(vkDestroyCommandPool);
  LOAD(vkAllocateCommandBuffers);
  LOAD(vkBeginCommandBuffer);
  LOAD(vkEndCommandBuffer);
  LOAD(vkQueueSubmit);
  LOAD(vkCreateSemaphore);
  LOAD(vkDestroySemaphore);
  LOAD(vkWaitSemaphores);

  /* The fused projection output [T, (H + 2 Hkv) D] and views of its parts. */
  static float fused[T * W], out[T * H * D];
  for (int i = 0; i < T * W; ++i) fused[i] = (float)sin(0.37 * i);
  vkattn_tensor *qkv, *q, *k, *v, *o;
  const int64_t fshape[2] = {T, W}, qs[3] = {T, H, D}, ks[3] = {T, HKV, D}, st[3] = {W, D, 1};
  CHECK(vkattn_tensor_create(ctx, VKATTN_F32, 2, fshape, &qkv));
  CHECK(vkattn_tensor_write(qkv, fused, sizeof(fused)));
  CHECK(vkattn_tensor_view(qkv, 0, 3, qs, st, &q));
  CHECK(vkattn_tensor_view(qkv, H * D, 3, ks, st, &k));
  CHECK(vkattn_tensor_view(qkv, (H + HKV) * D, 3, ks, st, &v));
  CHECK(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &o));
  CHECK(vkattn_context_synchronize(ctx)); /* the write above is vkattn's own work */

  /* The engine's command buffer and timeline semaphore. */
  VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.queueFamilyIndex = vk.queue_family_index;
  VkCommandPool pool;
  VK_CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
  VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK_CHECK(vkAllocateCommandBuffers(dev, &ai, &cmd));
  VkSemaphoreTypeCreateInfo sti = {VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  sti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci = {VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &sti;
  VkSemaphore done;
  VK_CHECK(vkCreateSemaphore(dev, &sci, NULL, &done));

  /* Record: the engine's own commands could sit before and after. */
  VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VK_CHECK(vkBeginCommandBuffer(cmd, &bi));
  CHECK(vkattn_context_begin_external(ctx, cmd));
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = HKV, desc.head_dim = D, desc.causal = 1;
  const int32_t cu[2] = {0, T};
  CHECK(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, q, k, v, o));
  CHECK(vkattn_context_end_external(ctx, (uint64_t)(uintptr_t)done, 1));
  VK_CHECK(vkEndCommandBuffer(cmd));

  /* Submit and wait, the engine's way. */
  const uint64_t one = 1;
  VkTimelineSemaphoreSubmitInfo tsi = {VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  tsi.signalSemaphoreValueCount = 1;
  tsi.pSignalSemaphoreValues = &one;
  VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &tsi;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &done;
  VK_CHECK(vkQueueSubmit((VkQueue)vk.queue, 1, &si, VK_NULL_HANDLE));
  VkSemaphoreWaitInfo wi = {VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &done;
  wi.pValues = &one;
  VK_CHECK(vkWaitSemaphores(dev, &wi, UINT64_MAX));
  CHECK(vkattn_tensor_read(o, out, sizeof(out)));

  /* Plain C check: causal attention of every (token, head). */
  double worst = 0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const float* qr = &fused[t * W + h * D];
      const int kh = h / (H / HKV);
      double s[T], m = -INFINITY, l = 0;
      for (int j = 0; j <= t; ++j) {
        s[j] = 0;
        for (int e = 0; e < D; ++e) s[j] += (double)qr[e] * fused[j * W + (H + kh) * D + e];
        s[j] /= sqrt((double)D);
        if (s[j] > m) m = s[j];
      }
      for (int j = 0; j <= t; ++j) l += exp(s[j] - m);
      for (int e = 0; e < D; ++e) {
        double acc = 0;
        for (int j = 0; j <= t; ++j)
          acc += exp(s[j] - m) / l * fused[j * W + (H + HKV + kh) * D + e];
        const double err = fabs(acc - out[(t * H + h) * D + e]);
        if (err > worst) worst = err;
      }
    }
  printf("interop: attention on fused-QKV views in the engine's command buffer, max |err| = %.2e\n",
         worst);

  /* vkattn is done with the semaphore once it has seen the value (the
   * read above waited for it); the device is vkattn's, so the engine's
   * objects go before the context. */
  CHECK(vkattn_context_synchronize(ctx));
  vkDestroySemaphore(dev, done, NULL);
  vkDestroyCommandPool(dev, pool, NULL);
  vkattn_tensor_destroy(q);
  vkattn_tensor_destroy(k);
  vkattn_tensor_destroy(v);
  vkattn_tensor_destroy(o);
  vkattn_tensor_destroy(qkv);
  vkattn_context_destroy(ctx);
  if (worst > 1e-4) {
    fprintf(stderr, "interop: result differs from the reference\n");
    return 1;
  }
  return 0;
}

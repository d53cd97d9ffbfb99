// The fuzzer's issue-E3 operations (fuzz_edges.h).
#define VK_NO_PROTOTYPES
#include "fuzz/fuzz_edges.h"

#include <vulkan/vulkan_core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "reference/dtype_util.h"

namespace vkattn_fuzz {

namespace {

// Tensors of one operation, destroyed with it.
struct Owned {
  std::vector<vkattn_tensor*> t;
  ~Owned() {
    for (vkattn_tensor* x : t) vkattn_tensor_destroy(x);
  }
  vkattn_tensor* make(vkattn_context* ctx, vkattn_dtype dt, std::vector<int64_t> shape) {
    vkattn_tensor* x = nullptr;
    ok(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &x), "tensor_create");
    t.push_back(x);
    return x;
  }
  vkattn_tensor* view(vkattn_tensor* base, int64_t off, std::vector<int64_t> shape) {
    vkattn_tensor* x = nullptr;
    ok(vkattn_tensor_view(base, off, uint32_t(shape.size()), shape.data(), nullptr, &x),
       "tensor_view");
    t.push_back(x);
    return x;
  }
};

// Bytes of n elements of dtype dt with values k / 16 (exact in f16 / bf16).
std::vector<uint8_t> bytes(FuzzedDataProvider& in, vkattn_dtype dt, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = float(in.ConsumeIntegral<int8_t>()) / 16.0f;
  return vkattn_ref::encode_bytes(int(dt), x);
}

std::vector<uint8_t> read(vkattn_tensor* t) {
  std::vector<uint8_t> b(vkattn_tensor_nbytes(t));
  ok(vkattn_tensor_read(t, b.data(), b.size()), "tensor_read");
  return b;
}

void write(vkattn_tensor* t, const std::vector<uint8_t>& b) {
  ok(vkattn_tensor_write(t, b.data(), b.size()), "tensor_write");
}

vkattn_attention_desc desc(uint32_t H, uint32_t Hkv, uint32_t d, bool causal) {
  vkattn_attention_desc a;
  vkattn_attention_desc_init(&a);
  a.num_heads = H, a.num_kv_heads = Hkv, a.head_dim = d, a.causal = causal ? 1 : 0;
  return a;
}

}  // namespace

void step_view_layers(FuzzedDataProvider& in, vkattn_context* ctx) {
  const uint32_t L = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  const uint32_t Hkv = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  const uint32_t H = Hkv * in.ConsumeIntegralInRange<uint32_t>(1, 2);
  const uint32_t d = in.ConsumeBool() ? 8 : 5;
  const vkattn_dtype dt = in.ConsumeBool() ? VKATTN_F32 : VKATTN_F16;
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = L, cd.num_kv_heads = Hkv, cd.head_dim = d, cd.page_size = 4, cd.num_pages = 8;
  vkattn_kv_cache* cache = nullptr;
  ok(vkattn_kv_cache_create(ctx, &cd, &cache), "kv_cache_create");
  const uint32_t n = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  std::vector<int64_t> ids;
  std::vector<int32_t> t;
  int64_t T = 0;
  for (uint32_t i = 0; i < n; ++i) {
    ids.push_back(i);
    t.push_back(in.ConsumeIntegralInRange<int32_t>(1, 6));
    T += t.back();
  }
  vkattn_step* step = nullptr;
  ok(vkattn_step_begin(cache, n, ids.data(), t.data(), &step), "step_begin");
  Owned o;
  // Layer l's q and out at l x slice + pad of one buffer each (pads keep
  // the caller's sentinel bits).
  const int64_t slice = T * H * d + 3;
  std::vector<int64_t> pad(L);
  for (uint32_t l = 0; l < L; ++l) pad[l] = in.ConsumeIntegralInRange<int64_t>(0, 3);
  vkattn_tensor* qs = o.make(ctx, dt, {L * slice});
  vkattn_tensor* outs = o.make(ctx, dt, {L * slice});
  const std::vector<uint8_t> q_all = bytes(in, dt, size_t(L * slice));
  const std::vector<uint8_t> sentinel(size_t(L * slice) * vkattn_dtype_size(dt), 0x7b);
  write(qs, q_all);
  write(outs, sentinel);
  const vkattn_attention_desc a = desc(H, Hkv, d, in.ConsumeBool());
  std::vector<std::vector<uint8_t>> want(L);
  const size_t es = vkattn_dtype_size(dt);
  for (uint32_t l = 0; l < L; ++l) {
    vkattn_tensor* k = o.make(ctx, dt, {T, Hkv, d});
    vkattn_tensor* v = o.make(ctx, dt, {T, Hkv, d});
    write(k, bytes(in, dt, size_t(T) * Hkv * d));
    write(v, bytes(in, dt, size_t(T) * Hkv * d));
    ok(vkattn_step_append(step, l, k, v), "step_append");
    const int64_t off = l * slice + pad[l];
    vkattn_tensor* q = o.view(qs, off, {T, H, d});
    vkattn_tensor* out = o.view(outs, off, {T, H, d});
    ok(vkattn_step_attention(step, l, &a, q, out), "step_attention(views)");
    vkattn_tensor* dq = o.make(ctx, dt, {T, H, d});
    vkattn_tensor* dout = o.make(ctx, dt, {T, H, d});
    write(dq,
          std::vector<uint8_t>(q_all.begin() + off * es, q_all.begin() + (off + T * H * d) * es));
    ok(vkattn_step_attention(step, l, &a, dq, dout), "step_attention(dense)");
    want[l] = read(dout);
  }
  ok(vkattn_step_commit(step), "step_commit");
  const std::vector<uint8_t> got = read(outs);
  std::vector<uint8_t> expected = sentinel;
  for (uint32_t l = 0; l < L; ++l)
    std::memcpy(&expected[(l * slice + pad[l]) * es], want[l].data(), want[l].size());
  check(got == expected,
        "step layers on views at offsets differ from dense layers (or wrote "
        "outside their slice)");
  vkattn_kv_cache_destroy(cache);
}

void odd_16bit_tails(FuzzedDataProvider& in, vkattn_context* ctx) {
  const vkattn_dtype dt = in.ConsumeBool() ? VKATTN_F16 : VKATTN_BF16;
  const int64_t n = in.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t H = in.ConsumeIntegralInRange<int64_t>(1, 2);
  const int64_t dv = 2 * in.ConsumeIntegralInRange<int64_t>(0, 2) + 1;  // odd
  const int64_t count = n * H * dv, off = in.ConsumeIntegralInRange<int64_t>(0, 3);
  Owned o;
  vkattn_tensor* a = o.make(ctx, dt, {n, H, dv});
  vkattn_tensor* b = o.make(ctx, dt, {n, H, dv});
  write(a, bytes(in, dt, size_t(count)));
  write(b, bytes(in, dt, size_t(count)));
  std::vector<float> l(size_t(n * H));
  for (float& x : l) x = in.ConsumeBool() ? -INFINITY : float(in.ConsumeIntegral<int8_t>()) / 32;
  vkattn_tensor* la = o.make(ctx, VKATTN_F32, {n, H});
  vkattn_tensor* lb = o.make(ctx, VKATTN_F32, {n, H});
  ok(vkattn_tensor_write(la, l.data(), l.size() * 4), "tensor_write");
  std::reverse(l.begin(), l.end());
  ok(vkattn_tensor_write(lb, l.data(), l.size() * 4), "tensor_write");
  const bool merge = in.ConsumeBool();
  const int32_t cu[2] = {0, int32_t(n)};
  const vkattn_attention_desc att = desc(uint32_t(H), uint32_t(H), uint32_t(dv), true);
  auto run = [&](vkattn_tensor* out) {
    return merge ? vkattn_attention_merge(ctx, a, la, b, lb, out, nullptr)
                 : vkattn_attention_varlen(ctx, &att, 1, cu, cu, a, b, b, out);
  };
  vkattn_tensor* dense = o.make(ctx, dt, {n, H, dv});
  ok(run(dense), merge ? "attention_merge" : "attention_varlen");
  const std::vector<uint8_t> want = read(dense);
  // The caller's buffer: sentinels around the output's elements.
  vkattn_tensor* base = o.make(ctx, dt, {off + count + 3});
  const std::vector<uint8_t> sentinel(size_t(off + count + 3) * 2, 0x5a);
  write(base, sentinel);
  vkattn_tensor* out = nullptr;
  if (in.ConsumeBool()) {
    out = o.view(base, off, {n, H, dv});
  } else {  // a wrapped range of the buffer behind base
    uint64_t buf = 0, boff = 0, size = 0;
    ok(vkattn_tensor_get_vk_buffer(base, &buf, &boff, &size), "tensor_get_vk_buffer");
    const int64_t shape[3] = {n, H, dv};
    ok(vkattn_tensor_wrap_vk_buffer(ctx, buf, boff + uint64_t(off) * 2, uint64_t(count) * 2,
                                    0x20 | 0x1 | 0x2 | 0x4, dt, 3, shape, &out),
       "tensor_wrap_vk_buffer");
    o.t.push_back(out);
  }
  ok(run(out), merge ? "attention_merge(odd view)" : "attention_varlen(odd view)");
  std::vector<uint8_t> expected = sentinel;
  std::memcpy(&expected[size_t(off) * 2], want.data(), want.size());
  check(read(base) == expected, "an odd 16-bit output changed its neighbours or lost elements");
}

void external_sequence(FuzzedDataProvider& in, vkattn_context* ctx) {
  vkattn_vulkan_desc vd;
  vkattn_vulkan_desc_init(&vd);
  ok(vkattn_context_get_vulkan(ctx, &vd), "context_get_vulkan");
  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(vd.get_instance_proc_addr);
  auto gdpa = reinterpret_cast<PFN_vkGetDeviceProcAddr>(
      gipa(static_cast<VkInstance>(vd.instance), "vkGetDeviceProcAddr"));
  VkDevice dev = static_cast<VkDevice>(vd.device);
#define FN(name) auto name = reinterpret_cast<PFN_##name>(gdpa(dev, #name))
  FN(vkCreateCommandPool);
  FN(vkDestroyCommandPool);
  FN(vkAllocateCommandBuffers);
  FN(vkBeginCommandBuffer);
  FN(vkEndCommandBuffer);
  FN(vkQueueSubmit);
  FN(vkCreateSemaphore);
  FN(vkDestroySemaphore);
  FN(vkSignalSemaphore);
  FN(vkWaitSemaphores);
#undef FN
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.queueFamilyIndex = vd.queue_family_index;
  VkCommandPool pool = VK_NULL_HANDLE;
  check(vkCreateCommandPool(dev, &pci, nullptr, &pool) == VK_SUCCESS, "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool, ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, ai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(dev, &ai, &cmd) == VK_SUCCESS, "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS, "vkBeginCommandBuffer");
  VkSemaphoreTypeCreateInfo ti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &ti;
  VkSemaphore sem = VK_NULL_HANDLE;
  check(vkCreateSemaphore(dev, &sci, nullptr, &sem) == VK_SUCCESS, "vkCreateSemaphore");
  {
    Owned o;
    const int64_t T = in.ConsumeIntegralInRange<int64_t>(1, 4), H = 2, d = 8;
    const int32_t cu[2] = {0, int32_t(T)};
    const vkattn_attention_desc a = desc(H, H, d, true);
    vkattn_tensor* q = o.make(ctx, VKATTN_F32, {T, H, d});
    vkattn_tensor* q2 = o.make(ctx, VKATTN_F32, {T, H, d});
    vkattn_tensor* ext = o.make(ctx, VKATTN_F32, {T, H, d});    // written in external mode
    vkattn_tensor* dep = o.make(ctx, VKATTN_F32, {T, H, d});    // vkattn's, from ext
    vkattn_tensor* free_ = o.make(ctx, VKATTN_F32, {T, H, d});  // unrelated
    write(q, bytes(in, VKATTN_F32, size_t(T * H * d)));
    write(q2, bytes(in, VKATTN_F32, size_t(T * H * d)));
    ok(vkattn_context_begin_external(ctx, cmd), "context_begin_external");
    ok(vkattn_attention_varlen(ctx, &a, 1, cu, cu, q, q, q, ext), "attention(external)");
    ok(vkattn_context_end_external(ctx, uint64_t(sem), 1), "context_end_external");
    bool used_ext = false;
    const int ops = in.ConsumeIntegralInRange<int>(0, 12);
    for (int i = 0; i < ops; ++i) {
      switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
          ok(vkattn_context_flush(ctx), "flush after external mode");
          break;
        case 1:
          ok(vkattn_attention_varlen(ctx, &a, 1, cu, cu, q2, q2, q2, free_), "attention(free)");
          break;
        case 2:
          // Held back with the batch it is recorded in: flushed on both
          // sides, so the other work stays in batches of its own.
          ok(vkattn_context_flush(ctx), "flush");
          ok(vkattn_attention_varlen(ctx, &a, 1, cu, cu, ext, q, q, dep), "attention(dep)");
          ok(vkattn_context_flush(ctx), "flush");
          used_ext = true;
          break;
        default:
          read(free_);  // never waits for the caller
          break;
      }
    }
    // The caller submits its command buffer, or gives up on it and signals
    // the semaphore from the host.
    const bool submit = in.ConsumeBool();
    if (submit) {
      check(vkEndCommandBuffer(cmd) == VK_SUCCESS, "vkEndCommandBuffer");
      const uint64_t one = 1;
      VkTimelineSemaphoreSubmitInfo tsi{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
      tsi.signalSemaphoreValueCount = 1, tsi.pSignalSemaphoreValues = &one;
      VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
      si.pNext = &tsi, si.commandBufferCount = 1, si.pCommandBuffers = &cmd;
      si.signalSemaphoreCount = 1, si.pSignalSemaphores = &sem;
      check(vkQueueSubmit(static_cast<VkQueue>(vd.queue), 1, &si, VK_NULL_HANDLE) == VK_SUCCESS,
            "vkQueueSubmit");
    } else {
      VkSemaphoreSignalInfo ssi{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
      ssi.semaphore = sem, ssi.value = 1;
      check(vkSignalSemaphore(dev, &ssi) == VK_SUCCESS, "vkSignalSemaphore");
    }
    ok(vkattn_context_synchronize(ctx), "synchronize");
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    const uint64_t one = 1;
    wi.semaphoreCount = 1, wi.pSemaphores = &sem, wi.pValues = &one;
    check(vkWaitSemaphores(dev, &wi, UINT64_MAX) == VK_SUCCESS, "vkWaitSemaphores");
    if (submit) {
      // What external mode and the held-back work computed equals the same
      // calls on vkattn's own stream.
      vkattn_tensor* want = o.make(ctx, VKATTN_F32, {T, H, d});
      ok(vkattn_attention_varlen(ctx, &a, 1, cu, cu, q, q, q, want), "attention(want)");
      check(read(ext) == read(want), "external mode's output differs");
      if (used_ext) {
        vkattn_tensor* want2 = o.make(ctx, VKATTN_F32, {T, H, d});
        ok(vkattn_attention_varlen(ctx, &a, 1, cu, cu, want, q, q, want2), "attention(want2)");
        check(read(dep) == read(want2), "work after external mode read the wrong data");
      }
    }
  }
  ok(vkattn_context_synchronize(ctx), "synchronize");
  vkDestroySemaphore(dev, sem, nullptr);
  vkDestroyCommandPool(dev, pool, nullptr);
}

}  // namespace vkattn_fuzz

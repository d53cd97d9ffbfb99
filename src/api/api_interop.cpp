// extern "C" shims of the interop entry points (issue F): strided views,
// caller buffers, and the buffer behind a tensor.
#include <cstring>
#include <limits>

#include "api/firewall.h"
#include "api/handles.h"
#include "core/abi.h"
#include "core/faults.h"

using namespace vkattn;

namespace {

// a * b + c without overflow past 2^63 - 1 (all >= 0); false if it would.
bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (b != 0 && a > kMax / b) return false;
  if (a * b > kMax - c) return false;
  *out = a * b + c;
  return true;
}

void check_dtype(vkattn_dtype dtype) {
  const int64_t raw = raw_enum(dtype);
  require(known_dtype(raw), "unknown dtype ", raw);
}

}  // namespace

extern "C" {

VKATTN_API void vkattn_vulkan_desc_init(vkattn_vulkan_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
}

VKATTN_API vkattn_status vkattn_context_create_from_vulkan(const vkattn_vulkan_desc* desc,
                                                           vkattn_context** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(out);
    const vkattn_vulkan_desc d = read_desc(desc, kVulkanDescSizes, &vkattn_vulkan_desc_init, "desc",
                                           "vkattn_vulkan_desc_init");
    require(d.reserved == 0, "reserved must be 0");
    require((d.flags & VKATTN_CONTEXT_VALIDATION) == 0,
            "VKATTN_CONTEXT_VALIDATION is the caller's business on its own instance");
    require((d.flags & ~(VKATTN_CONTEXT_PROFILING | VKATTN_CONTEXT_BATCH_INVARIANT)) == 0,
            "unknown flags 0x", std::hex, d.flags);
    host_alloc_point();
    AdoptedVulkan v;
    v.instance = static_cast<VkInstance>(d.instance);
    v.physical = static_cast<VkPhysicalDevice>(d.physical_device);
    v.device = static_cast<VkDevice>(d.device);
    v.queue = static_cast<VkQueue>(d.queue);
    v.queue_family = d.queue_family_index;
    v.api_version = d.api_version;
    v.gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(d.get_instance_proc_addr);
    v.features = static_cast<const VkPhysicalDeviceFeatures2*>(d.enabled_features);
    v.extensions = d.enabled_extensions;
    v.extension_count = d.enabled_extension_count;
    auto handle = std::make_unique<vkattn_context>();
    handle->impl =
        std::make_shared<Context>(Device::adopt(v), (d.flags & VKATTN_CONTEXT_PROFILING) != 0);
    if (d.flags & VKATTN_CONTEXT_BATCH_INVARIANT) handle->impl->set_batch_invariant();
    *out = handle.release();
  });
}

VKATTN_API vkattn_status vkattn_context_get_vulkan(vkattn_context* ctx, vkattn_vulkan_desc* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    ctx->impl->recorder().check_alive();
    Device& dev = ctx->impl->device();
    vkattn_vulkan_desc d;
    vkattn_vulkan_desc_init(&d);
    d.queue_family_index = dev.queue_family();
    d.instance = dev.instance();
    d.physical_device = dev.physical();
    d.device = dev.handle();
    d.queue = dev.queue();
    d.api_version = dev.instance_api_version();
    d.get_instance_proc_addr = reinterpret_cast<void*>(dev.get_instance_proc_addr());
    d.enabled_features = dev.enabled_features();
    d.enabled_extensions =
        dev.enabled_extensions().empty() ? nullptr : dev.enabled_extensions().data();
    d.enabled_extension_count = static_cast<uint32_t>(dev.enabled_extensions().size());
    write_out(out, d, kVulkanDescSizes, "out", "vkattn_vulkan_desc_init");
  });
}

VKATTN_API vkattn_status vkattn_context_flush_with(vkattn_context* ctx, uint64_t wait_semaphore,
                                                   uint64_t wait_value, uint64_t signal_semaphore,
                                                   uint64_t signal_value) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    Context& c = *ctx->impl;
    c.recorder().flush_with(handle_from_u64<VkSemaphore>(wait_semaphore), wait_value,
                            handle_from_u64<VkSemaphore>(signal_semaphore), signal_value);
  });
}

VKATTN_API vkattn_status vkattn_context_begin_external(vkattn_context* ctx, void* command_buffer) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(command_buffer);
    Context& c = *ctx->impl;
    c.recorder().check_alive();
    require_not_external(c, "a second vkattn_context_begin_external");
    c.recorder().begin_external(static_cast<VkCommandBuffer>(command_buffer));
  });
}

VKATTN_API vkattn_status vkattn_context_end_external(vkattn_context* ctx,
                                                     uint64_t timeline_semaphore, uint64_t value) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    Context& c = *ctx->impl;
    c.recorder().check_alive();
    require(c.recorder().external(), "the context is not in external mode");
    require(timeline_semaphore != 0, "timeline_semaphore is VK_NULL_HANDLE");
    c.recorder().end_external(handle_from_u64<VkSemaphore>(timeline_semaphore), value);
  });
}

VKATTN_API vkattn_status vkattn_tensor_view(vkattn_tensor* base, int64_t offset, uint32_t ndim,
                                            const int64_t* shape, const int64_t* strides,
                                            vkattn_tensor** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(base);
    VKATTN_REQUIRE_ARG(out);
    VKATTN_REQUIRE_ARG(shape);
    const Tensor& b = *base->impl;
    b.context().recorder().check_alive();
    require(ndim >= 1 && ndim <= 4, "ndim must be 1..4, got ", ndim);
    require(offset >= 0, "offset ", offset, " is negative");
    int64_t dense[4];
    if (!strides) {
      dense_strides(ndim, shape, dense);
      strides = dense;
    }
    bool empty = false;
    for (uint32_t i = 0; i < ndim; ++i) {
      require(shape[i] >= 0, "shape[", i, "] = ", shape[i], " is negative");
      require(strides[i] >= 0, "strides[", i, "] = ", strides[i], " is negative");
      empty = empty || shape[i] == 0;
    }
    require(strides[ndim - 1] == 1, "the innermost stride must be 1, got ", strides[ndim - 1]);
    // Every element within base's span, in elements of its storage.
    const uint64_t es = dtype_size(b.dtype());
    const uint64_t span = b.extent_bytes() / es;
    uint64_t last = static_cast<uint64_t>(offset);
    if (!empty) {
      for (uint32_t i = 0; i < ndim; ++i)
        require(mul_add(uint64_t(shape[i] - 1), uint64_t(strides[i]), last, &last),
                "the view's extent overflows");
      require(last < span, "the view reaches element ", last, " of base, whose span has ", span,
              " element(s)");
    } else {
      require(last <= span, "offset ", offset, " is past base's span of ", span, " element(s)");
    }
    host_alloc_point();
    auto handle = std::make_unique<vkattn_tensor>();
    handle->impl = std::make_shared<Tensor>(b.context_ptr(), b.buffer(),
                                            b.byte_offset() + (empty ? 0 : offset * es), b.dtype(),
                                            ndim, shape, strides);
    *out = handle.release();
  });
}

VKATTN_API vkattn_status vkattn_tensor_wrap_vk_buffer(vkattn_context* ctx, uint64_t buffer,
                                                      uint64_t offset, uint64_t size,
                                                      uint32_t usage_flags, vkattn_dtype dtype,
                                                      uint32_t ndim, const int64_t* shape,
                                                      vkattn_tensor** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    Context& c = *ctx->impl;
    c.recorder().check_alive();
    check_dtype(dtype);
    require(buffer != 0, "buffer is VK_NULL_HANDLE");
    require(offset <= UINT64_MAX - size, "offset + size overflows");
    struct Need {
      uint32_t bit;
      const char* name;
    };
    std::string missing;
    for (Need n : {Need{VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, "VK_BUFFER_USAGE_STORAGE_BUFFER_BIT"},
                   Need{VK_BUFFER_USAGE_TRANSFER_SRC_BIT, "VK_BUFFER_USAGE_TRANSFER_SRC_BIT"},
                   Need{VK_BUFFER_USAGE_TRANSFER_DST_BIT, "VK_BUFFER_USAGE_TRANSFER_DST_BIT"}})
      if (!(usage_flags & n.bit)) missing += (missing.empty() ? "" : ", ") + std::string(n.name);
    require(missing.empty(), "usage_flags lack ", missing,
            " (kernels write through storage bindings; reads, writes and packing copy)");
    host_alloc_point();
    // Shape checks (and the packed size) come from a dense layout.
    require(ndim >= 1 && ndim <= 4, "ndim must be 1..4, got ", ndim);
    VKATTN_REQUIRE_ARG(shape);
    int64_t strides[4];
    dense_strides(ndim, shape, strides);
    // A buffer of this context's own tensors is shared, not borrowed twice.
    const VkBuffer vk_buffer = handle_from_u64<VkBuffer>(buffer);
    std::shared_ptr<Buffer> borrowed = c.device().find_buffer(vk_buffer);
    if (borrowed)
      require(offset + size <= borrowed->size(), "offset + size ", offset + size,
              " is past the end of vkattn's buffer (", borrowed->size(), " bytes)");
    else
      borrowed = std::make_shared<Buffer>(c.device(), vk_buffer, offset + size, usage_flags);
    auto t = std::make_shared<Tensor>(ctx->impl, borrowed, offset, dtype, ndim, shape, strides);
    require(t->nbytes() <= size, "shape ", t->nbytes(), " bytes does not fit size ", size);
    auto handle = std::make_unique<vkattn_tensor>();
    handle->impl = std::move(t);
    *out = handle.release();
  });
}

VKATTN_API vkattn_status vkattn_tensor_get_vk_buffer(vkattn_tensor* tensor, uint64_t* buffer,
                                                     uint64_t* offset, uint64_t* size) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(tensor);
    VKATTN_REQUIRE_ARG(buffer);
    VKATTN_REQUIRE_ARG(offset);
    VKATTN_REQUIRE_ARG(size);
    const Tensor& t = *tensor->impl;
    t.context().recorder().check_alive();
    const bool any = t.buffer() && t.numel() > 0;
    *buffer = any ? handle_to_u64(t.buffer()->handle()) : 0;
    *offset = any ? t.byte_offset() : 0;
    *size = any ? t.extent_bytes() : 0;
  });
}

VKATTN_API int vkattn_tensor_is_contiguous(const vkattn_tensor* tensor) {
  return tensor && tensor->impl->contiguous() ? 1 : 0;
}

}  // extern "C"

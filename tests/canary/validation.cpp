// Canary for the validation-layer check every test makes (tools/
// canaries.sh): a Vulkan call vkattn never makes (a buffer of size 0,
// VUID-VkBufferCreateInfo-size-00912), made through the context's own
// device table. vkattn_context_validation_messages must count it; the
// program exits with that count (0 would mean the checker is blind).
#include <cstdio>

#include "core/device.h"
#include "api/handles.h"
#include "vkattn/vkattn.h"

int main() {
  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = VKATTN_CONTEXT_VALIDATION;
  vkattn_context* ctx = nullptr;
  if (vkattn_context_create(&cd, &ctx)) {
    std::fprintf(stderr, "canary setup failed: %s\n", vkattn_last_error());
    return 0;
  }
  vkattn::Device& dev = ctx->impl->device();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 0;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buf = VK_NULL_HANDLE;
  if (dev.vk().vkCreateBuffer(dev.handle(), &bci, nullptr, &buf) == VK_SUCCESS && buf)
    dev.vk().vkDestroyBuffer(dev.handle(), buf, nullptr);
  uint32_t n = 0;
  vkattn_context_validation_messages(ctx, &n);
  std::printf("validation messages counted: %u\n", n);
  vkattn_context_destroy(ctx);
  return static_cast<int>(n);
}

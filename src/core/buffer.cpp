#include "core/buffer.h"

#include "core/device.h"
#include "core/error.h"

namespace vkattn {

Buffer::Buffer(Device& device, uint64_t size, bool host_visible) : device_(device), size_(size) {
  const DeviceCaps& caps = device.caps();
  if (caps.max_allocation_size && size > caps.max_allocation_size)
    fail(VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, "buffer of ", size,
         " bytes exceeds the device's maxMemoryAllocationSize ", caps.max_allocation_size);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
              VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkDevice dev = device.handle();
  check_vk(vkCreateBuffer(dev, &bci, nullptr, &buffer_), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buffer_, &req);
  const VkMemoryPropertyFlags hv =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type;
  if (host_visible) {
    type = device.find_memory_type(req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  } else if (caps.prefer_host_visible) {
    type = device.find_memory_type(req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type == UINT32_MAX)
      type = device.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  } else {
    type = device.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  }
  if (type == UINT32_MAX) {
    vkDestroyBuffer(dev, buffer_, nullptr);
    fail(VKATTN_ERROR_UNSUPPORTED, "no suitable memory type for a buffer");
  }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(dev, &mai, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, buffer_, nullptr);
    fail(status_from_vk(r) == VKATTN_ERROR_OUT_OF_HOST_MEMORY ? VKATTN_ERROR_OUT_OF_HOST_MEMORY
                                                              : VKATTN_ERROR_OUT_OF_DEVICE_MEMORY,
         "allocating ", size, " bytes of device memory failed (VkResult ", static_cast<int>(r),
         ")");
  }
  r = vkBindBufferMemory(dev, buffer_, memory_, 0);
  const VkMemoryPropertyFlags flags = device.memory_type_flags(type);
  if (r == VK_SUCCESS && (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
      (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    r = vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_);
  if (r != VK_SUCCESS) {
    vkFreeMemory(dev, memory_, nullptr);
    vkDestroyBuffer(dev, buffer_, nullptr);
    check_vk(r, "binding or mapping buffer memory");
  }
}

Buffer::~Buffer() {
  VkDevice dev = device_.handle();
  for (auto& kv : views_) vkDestroyBufferView(dev, kv.second, nullptr);
  if (mapped_) vkUnmapMemory(dev, memory_);
  vkDestroyBuffer(dev, buffer_, nullptr);
  vkFreeMemory(dev, memory_, nullptr);
}

VkBufferView Buffer::view(VkFormat format, uint64_t offset, uint64_t range) {
  ViewKey key{format, offset, range};
  auto it = views_.find(key);
  if (it != views_.end()) return it->second;
  VkBufferViewCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  ci.buffer = buffer_;
  ci.format = format;
  ci.offset = offset;
  ci.range = range;
  VkBufferView v;
  check_vk(vkCreateBufferView(device_.handle(), &ci, nullptr, &v), "vkCreateBufferView");
  views_.emplace(key, v);
  return v;
}

}  // namespace vkattn

#include "core/buffer.h"

#include "core/device.h"
#include "core/error.h"
#include "core/faults.h"

namespace vkattn {

Buffer::Buffer(Device& device, uint64_t size, bool host_visible, bool charged, bool near_device)
    : device_(device.shared_from_this()), size_(size) {
  const DeviceCaps& caps = device.caps();
  if (caps.max_allocation_size && size > caps.max_allocation_size)
    fail(VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, "buffer of ", size,
         " bytes exceeds the device's maxMemoryAllocationSize ", caps.max_allocation_size);
  const VolkDeviceTable& vk = device.vk();
  VkDevice dev = device.handle();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
              VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  usage_ = bci.usage;
  VkMemoryRequirements req;
  const VkMemoryPropertyFlags hv =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  // Everything acquired so far is released if a later step throws.
  try {
    check_vk(vk.vkCreateBuffer(dev, &bci, vk_allocator(), &buffer_), "vkCreateBuffer");
    vk.vkGetBufferMemoryRequirements(dev, buffer_, &req);
    if (host_visible) {
      // near_device: device-local and mapped (a discrete GPU's BAR, UMA).
      if (near_device)
        type = device.find_memory_type(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                       0);
      if (type == UINT32_MAX)
        type = device.find_memory_type(req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    } else if (caps.prefer_host_visible) {
      type = device.find_memory_type(req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      if (type == UINT32_MAX)
        type = device.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    } else {
      type = device.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    }
    if (type == UINT32_MAX) fail(VKATTN_ERROR_UNSUPPORTED, "no suitable memory type for a buffer");
    memory_type_ = type;
    // VKATTN_DEVICE_MEMORY_LIMIT counts data buffers (tensors, caches,
    // scratch), not host-visible staging and rings: those are host memory
    // on a discrete GPU, and reads and writes must work at the limit.
    if (!host_visible && charged) {
      device.charge_memory(req.size);
      charged_ = req.size;
    }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    VkResult r = vk.vkAllocateMemory(dev, &mai, vk_allocator(), &memory_);
    if (r != VK_SUCCESS)
      fail(status_from_vk(r) == VKATTN_ERROR_OUT_OF_HOST_MEMORY ? VKATTN_ERROR_OUT_OF_HOST_MEMORY
                                                                : VKATTN_ERROR_OUT_OF_DEVICE_MEMORY,
           "allocating ", size, " bytes of device memory failed (VkResult ", static_cast<int>(r),
           ")");
    check_vk(vk.vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory");
    const VkMemoryPropertyFlags flags = device.memory_type_flags(type);
    if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) && (host_visible || !caps.unmapped_data))
      check_vk(vk.vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
  } catch (...) {
    release();
    throw;
  }
}

Buffer::Buffer(Device& device, VkBuffer handle, uint64_t size, VkBufferUsageFlags usage)
    : device_(device.shared_from_this()),
      buffer_(handle),
      size_(size),
      usage_(usage),
      borrowed_(true) {}

void Buffer::release() {
  const VolkDeviceTable& vk = device_->vk();
  VkDevice dev = device_->handle();
  if (registered && buffer_) device_->unregister_buffer(buffer_);
  registered = false;
  for (auto& kv : views_) vk.vkDestroyBufferView(dev, kv.second, vk_allocator());
  views_.clear();
  if (mapped_) vk.vkUnmapMemory(dev, memory_);
  mapped_ = nullptr;
  if (buffer_ && !borrowed_) vk.vkDestroyBuffer(dev, buffer_, vk_allocator());
  buffer_ = VK_NULL_HANDLE;
  if (memory_) vk.vkFreeMemory(dev, memory_, vk_allocator());
  memory_ = VK_NULL_HANDLE;
  if (charged_) device_->refund_memory(charged_);
  charged_ = 0;
}

Buffer::~Buffer() {
  release();
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
  check_vk(device_->vk().vkCreateBufferView(device_->handle(), &ci, vk_allocator(), &v),
           "vkCreateBufferView");
  try {
    views_.emplace(key, v);
  } catch (...) {
    device_->vk().vkDestroyBufferView(device_->handle(), v, vk_allocator());
    throw;
  }
  return v;
}

}  // namespace vkattn

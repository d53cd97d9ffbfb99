// A VkBuffer with its own memory, mapped when host visible, or a caller's
// VkBuffer borrowed as is (vkattn_tensor_wrap_vk_buffer: never freed here),
// plus lazily created texel views. Shared between a Tensor and the recorded
// batches that use it, so it outlives a destroyed tensor until the GPU is
// done; it keeps its Device alive, so it may outlive every handle of its
// context.
#pragma once

#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>

namespace vkattn {

class Device;

// Bytes to allocate for `bytes` of data that kernels bind as texel views.
// llvmpipe (lavapipe) compiles a shader once per combination of two facts
// about each texel view bound (its sampler key): whether the VkBuffer's
// size is a power of two (pot_width), and whether bits 8..15 of the view's
// byte size are zero (the union member it reads as the view's last mip
// level: level_zero_only). A q of 16 tokens after one of 15 compiled the
// same d-128 pipeline twice, a minute each (issue E3). So vkattn's buffers
// are never a power of two, and have 256 bytes of room after the data for
// texel_window (core/binding_window.h) to give every view a size whose
// bits 8..15 are not zero: one variant per pipeline.
constexpr uint64_t kTexelViewRoom = 256;
inline uint64_t texel_buffer_bytes(uint64_t bytes) {
  const uint64_t r = (bytes + 15) / 16 * 16 + kTexelViewRoom;
  return (r & (r - 1)) == 0 ? r + 16 : r;
}

class Buffer {
 public:
  // host_visible: require mapped, coherent memory (staging, metadata rings);
  // otherwise device-local memory, mapped too where the device prefers it.
  // charged = false: internal metadata (the device ring of plans), not
  // counted against VKATTN_DEVICE_MEMORY_LIMIT, like the host rings.
  // near_device (host-visible buffers the GPU reads often and the host
  // writes rarely, such as fp8 scale tables): device-local host-visible
  // memory where the device has it (a discrete GPU's BAR), else as above.
  Buffer(Device& device, uint64_t size, bool host_visible, bool charged = true,
         bool near_device = false);
  // Borrows the caller's `handle`: bytes [0, size) are usable, `usage` is
  // what it was created with. No memory is allocated or freed.
  Buffer(Device& device, VkBuffer handle, uint64_t size, VkBufferUsageFlags usage);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  uint8_t* mapped() const { return static_cast<uint8_t*>(mapped_); }
  // The Vulkan memory type allocated (UINT32_MAX for a borrowed buffer).
  uint32_t memory_type() const { return memory_type_; }
  bool borrowed() const { return borrowed_; }
  // Texel views may be made of it (owned buffers always; borrowed ones
  // when created with VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT).
  bool texel_usage() const { return (usage_ & VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT) != 0; }

  // A texel view of [offset, offset + elements * texel size).
  VkBufferView view(VkFormat format, uint64_t offset, uint64_t range);

  // Listed in the device's registry (Device::register_buffer) until freed.
  bool registered = false;
  // A context's stand-in for absent bindings: never written, so two batches
  // that both bind it need no order between them.
  bool stub = false;
  // Serial of the last batch that recorded a use (see Recorder).
  uint64_t last_use = 0;

 private:
  void release();
  std::shared_ptr<Device> device_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  uint64_t size_ = 0;
  uint64_t charged_ = 0;               // bytes accounted with Device::charge_memory
  uint32_t memory_type_ = UINT32_MAX;  // the memory type allocated (none: borrowed)
  VkBufferUsageFlags usage_ = 0;
  bool borrowed_ = false;
  struct ViewKey {
    VkFormat format;
    uint64_t offset, range;
    bool operator<(const ViewKey& o) const {
      if (format != o.format) return format < o.format;
      if (offset != o.offset) return offset < o.offset;
      return range < o.range;
    }
  };
  std::map<ViewKey, VkBufferView> views_;
};

}  // namespace vkattn

// A VkBuffer with its own memory, mapped when host visible, plus lazily
// created texel views. Shared between a Tensor and the recorded batches that
// use it, so it outlives a destroyed tensor until the GPU is done; it keeps
// its Device alive, so it may outlive every handle of its context.
#pragma once

#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>

namespace vkattn {

class Device;

class Buffer {
 public:
  // host_visible: require mapped, coherent memory (staging, metadata rings);
  // otherwise device-local memory, mapped too where the device prefers it.
  Buffer(Device& device, uint64_t size, bool host_visible);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  uint8_t* mapped() const { return static_cast<uint8_t*>(mapped_); }

  // A texel view of [offset, offset + elements * texel size).
  VkBufferView view(VkFormat format, uint64_t offset, uint64_t range);

  // Serial of the last batch that recorded a use (see Recorder).
  uint64_t last_use = 0;

 private:
  void release();
  std::shared_ptr<Device> device_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  uint64_t size_ = 0;
  uint64_t charged_ = 0;  // bytes accounted with Device::charge_memory
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

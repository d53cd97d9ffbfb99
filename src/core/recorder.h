// Records everything the context is asked to do into one command buffer and
// submits it on flush/synchronize/read: a 32-layer step is one submission.
//
// Each batch has a serial; buffers remember the serial of the last batch
// that used them, so a read waits only when it must and a write that races
// with recorded work is itself recorded (stream order). Per-call metadata
// goes to a ring of host-visible chunks that is recycled when the batch
// that used it has finished.
//
// Failure rules (vkattn.h "Errors"): an op acquires everything that can
// fail (the open batch, descriptor sets, ring memory, buffers) before it
// records its first command, so a failed call records nothing. A batch
// whose submission fails for lack of memory stays pending and is submitted
// first at the next flush: recorded work is never dropped. A lost device
// (VK_ERROR_DEVICE_LOST, or VKATTN_FAULT_DEVICE_LOST=n: the n-th
// submission of this context reports it) makes every later call of the
// context fail with VKATTN_ERROR_DEVICE_LOST.
#pragma once

#include <volk.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"

namespace vkattn {

class Device;

// A slice of host-visible memory, valid until its batch has completed.
struct HostSlice {
  Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint8_t* host = nullptr;
  uint64_t size = 0;
};

class Recorder {
 public:
  // profile: write GPU timestamps around every submission.
  Recorder(Device& device, bool profile);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Throws DEVICE_LOST once the device was lost.
  void check_alive() const;
  bool lost() const { return lost_; }

  // The open batch's command buffer, begun on first use (call it before an
  // op records anything: it is where a batch is acquired).
  VkCommandBuffer cmd();
  // Serial of the batch being recorded now.
  uint64_t open_serial() const { return next_serial_; }
  // Keeps `b` alive until the open batch has completed and stamps its use.
  void use(const std::shared_ptr<Buffer>& b);
  // Orders the next command after everything recorded or submitted before.
  void barrier();
  // Records a copy between buffers after a barrier; cannot fail once the
  // op has acquired the batch (cmd) and kept the buffers alive (use, or ring
  // memory of the open batch).
  // Contiguous regions are merged; at most kCopyRegions go into one command.
  static constexpr uint32_t kCopyRegions = 256;
  void copy_buffer(const Buffer& src, const Buffer& dst, const VkBufferCopy* regions, size_t count);
  void copy_buffer(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions) {
    copy_buffer(src, dst, regions.data(), regions.size());
  }
  // Host-visible scratch of `size` bytes aligned for storage/texel use.
  HostSlice alloc_host(uint64_t size);
  // A descriptor set from the open batch's pools.
  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout);

  // Work with a serial <= s has not yet completed on the device.
  bool busy(uint64_t serial) const { return serial > completed_serial_; }
  void flush();
  void synchronize();
  // Waits until batch `serial` has completed (submitting it if still open).
  void wait_for(uint64_t serial);
  // GPU time of the last completed submission (0 without profiling).
  uint64_t last_gpu_ns() const { return last_gpu_ns_; }

 private:
  struct Batch {
    uint64_t serial = 0;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkQueryPool timestamps = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> pools;
    uint32_t pool_used = 0;  // pools[0..pool_used) handed out sets
    std::vector<std::unique_ptr<Buffer>> chunks;
    uint64_t chunk_offset = 0;  // fill of chunks.back()
    std::vector<std::shared_ptr<void>> keep;
    bool begun = false;
    bool ended = false;  // vkEndCommandBuffer done, submission pending
  };

  std::unique_ptr<Batch> take_batch();
  void destroy_batch(Batch& b);
  void submit_open();
  void retire(Batch& b);
  void poll();
  void wait_oldest();
  void set_lost(const std::string& why);
  VkDescriptorPool new_pool();

  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> open_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> spare_;
  std::vector<std::unique_ptr<Buffer>> spare_chunks_;
  std::vector<VkDescriptorPool> spare_pools_;
  uint64_t next_serial_ = 1;
  uint64_t completed_serial_ = 0;
  uint64_t submissions_ = 0;
  uint64_t lose_at_submission_ = 0;  // VKATTN_FAULT_DEVICE_LOST (0: never)
  bool needs_barrier_ = false;
  bool submitted_any_ = false;
  bool profile_ = false;
  bool lost_ = false;
  std::string lost_why_;
  uint64_t last_gpu_ns_ = 0;
};

}  // namespace vkattn

// The command stream of a context: records everything the context is asked
// to do into one command buffer (vkattn's own, or a caller's in external
// mode) with its barriers, descriptor sets, host ring memory and keep-alive
// list, and hands it to the submitter (core/submitter.h) on
// flush/synchronize/read: a 32-layer step is one submission.
//
// Each batch has a serial; buffers remember the serial of the last batch
// that used them, so a read waits only when it must and a write that races
// with recorded work is itself recorded (stream order). Per-call metadata
// goes to a ring of host-visible chunks that is recycled when the batch
// that used it has finished; data kernels read in their dependent chains
// (attention plans on discrete GPUs) may be copied into a ring of
// device-local chunks, recycled alike.
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
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/buffer.h"
#include "core/submitter.h"

namespace vkattn {

class Device;

// A slice of host-visible memory, valid until its batch has completed.
struct HostSlice {
  Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint8_t* host = nullptr;
  uint64_t size = 0;
};

// A slice of device-local memory of the open batch's device ring, valid
// until its batch has completed: filled by a copy the op records (from a
// HostSlice), read by its kernels without a trip to host memory.
struct DeviceSlice {
  Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class Recorder {
 public:
  // profile: write GPU timestamps around every submission.
  // inject_faults = false: VKATTN_FAULT_DEVICE_LOST does not count this
  // recorder's submissions (a self-check's private recorder).
  Recorder(Device& device, bool profile, bool inject_faults = true);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Throws DEVICE_LOST once the device was lost.
  void check_alive() const { submitter_.check_alive(); }
  bool lost() const { return submitter_.lost(); }

  // The open batch's command buffer, begun on first use (call it before an
  // op records anything: it is where a batch is acquired).
  VkCommandBuffer cmd();
  // Serial of the batch being recorded now.
  uint64_t open_serial() const { return submitter_.next_serial(); }
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
  // Device-local scratch of `size` bytes, aligned alike (not counted
  // against VKATTN_DEVICE_MEMORY_LIMIT: metadata, as the host ring).
  DeviceSlice alloc_device(uint64_t size);
  // A descriptor set from the open batch's pools.
  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout);

  // Work with a serial <= s has not yet completed on the device.
  bool busy(uint64_t serial) const { return submitter_.busy(serial); }
  void flush();
  void synchronize();
  // For destruction: submits and waits for vkattn's own work; never waits
  // on a caller's semaphore (external work still pending, or external mode
  // left open: the whole device is waited for instead). Never throws.
  void drain();
  // Waits until batch `serial` has completed (submitting it if still open).
  void wait_for(uint64_t serial);
  // GPU time of the last completed submission (0 without profiling).
  uint64_t last_gpu_ns() const { return submitter_.last_gpu_ns(); }

  // Submits the open batch (an empty one if nothing was recorded) waiting
  // on `wait` >= wait_value and signalling `signal` = signal_value (timeline
  // semaphores; VK_NULL_HANDLE = none): vkattn_context_flush_with.
  void flush_with(VkSemaphore wait, uint64_t wait_value, VkSemaphore signal, uint64_t signal_value);

  // External mode (vkattn_context_begin_external / _end_external): pending
  // work is submitted, then every command goes into the caller's command
  // buffer `cmd` with a full barrier before and after it; nothing is
  // submitted. end_external: the batch's memory is kept until `semaphore`
  // reaches `value`, and vkattn's next own submission waits for that too.
  void begin_external(VkCommandBuffer cmd);
  void end_external(VkSemaphore semaphore, uint64_t value);
  bool external() const { return open_ && open_->external; }
  // Called after each recorded command: in external mode, the barrier
  // that orders it before the caller's later commands.
  void after_command();

 private:
  std::unique_ptr<Batch> take_batch();
  void destroy_batch(Batch& b);
  // A completed batch back from the submitter: its resources reused.
  void recycle(std::unique_ptr<Batch> b);
  void submit_open(VkSemaphore wait = VK_NULL_HANDLE, uint64_t wait_value = 0,
                   VkSemaphore signal = VK_NULL_HANDLE, uint64_t signal_value = 0);
  void flush_end();              // ends the open batch's command buffer
  void reject_external() const;  // throws in external mode: nothing may be submitted
  void full_barrier(VkCommandBuffer c);
  VkDescriptorPool new_pool();
  // (The open batch's, cmd() called.) `size` bytes (at least 4), aligned
  // for any binding, from a ring of chunks filled to `fill`: the last
  // chunk, else a spare of chunk_size bytes, else a new host-visible or
  // device-local chunk.
  struct Carved {
    Buffer* chunk;
    uint64_t offset, size;
  };
  Carved carve(std::vector<std::unique_ptr<Buffer>>& chunks, uint64_t& fill,
               std::vector<std::unique_ptr<Buffer>>& spares, uint64_t chunk_size, bool host_visible,
               uint64_t size);

  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> open_;
  std::vector<std::unique_ptr<Batch>> spare_;
  std::vector<std::unique_ptr<Buffer>> spare_chunks_;
  std::vector<std::unique_ptr<Buffer>> spare_device_chunks_;
  std::vector<VkDescriptorPool> spare_pools_;
  bool needs_barrier_ = false;
  bool profile_ = false;
  Submitter submitter_;  // declared last: destroyed first, after drain
};

}  // namespace vkattn

// One batch of recorded work: a command buffer (vkattn's own, or a
// caller's in external mode), what it keeps alive, and how its completion
// is known. Recorded by the command stream (core/recorder.h), submitted and
// tracked by the submitter (core/submitter.h).
#pragma once

#include <volk.h>

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/buffer.h"

namespace vkattn {

struct Batch {
  uint64_t serial = 0;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool timestamps = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools;
  uint32_t pool_used = 0;  // pools[0..pool_used) handed out sets
  std::vector<std::unique_ptr<Buffer>> chunks;
  uint64_t chunk_offset = 0;                           // fill of chunks.back()
  std::vector<std::unique_ptr<Buffer>> device_chunks;  // the device ring's
  uint64_t device_chunk_offset = 0;
  std::vector<std::shared_ptr<Buffer>> keep;  // every buffer its commands use
  bool begun = false;
  bool ended = false;  // vkEndCommandBuffer done, submission pending
  // Recorded into a caller's command buffer (cmd is the caller's; no
  // fence): complete when `semaphore` reaches `value`.
  bool external = false;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;
  // External batches: the buffers its commands use (set when it ends), so
  // that a later batch of vkattn's waits for it only where they share one.
  std::unordered_set<const Buffer*> touched;
  // vkattn's own batches: serials of the external batches it waits for on
  // the GPU (it cannot complete before they do).
  std::vector<uint64_t> external_deps;
};

}  // namespace vkattn

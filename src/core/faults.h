// Fault injection, for tests and for users who want to see how their engine
// copes (docs/guide/environment.md, "Fault injection"). Off unless asked for; never an exported
// symbol.
//
// Allocation faults: every allocation point of the library counts (the
// library's own host allocation points, each device-memory allocation, and
// every host allocation Vulkan makes through vkattn's VkAllocationCallbacks);
// when armed with n, the n-th one from then on fails once: a host point
// throws std::bad_alloc, a device allocation fails with
// VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, a Vulkan callback returns NULL (the
// driver then returns VK_ERROR_OUT_OF_HOST_MEMORY). VKATTN_FAIL_ALLOC=n
// arms it at the first allocation of the process; tests re-arm it with
// arm_alloc_fault() (white-box).
//
// Command-pool allocations (vkCmd* recording) are not injected: Vulkan
// reports them only at vkEndCommandBuffer, after the calls that recorded
// the commands have returned.
#pragma once

#include <volk.h>

#include <cstdint>

namespace vkattn {

// The n-th counted allocation from now fails (n = 0: disarm). Allocations
// the driver makes inside vkQueueSubmit are counted but not failed unless
// `in_submit`: Khronos' validation layer (1.3.239) records a submission
// before the driver returns, so a submission retried after an injected
// failure (legal: vkattn keeps the batch and retries it) is reported as a
// double submission. Tests inject there without the validation layer.
void arm_alloc_fault(uint64_t n, bool in_submit = false);
// Counted allocations since the last arm_alloc_fault (or process start).
uint64_t alloc_fault_count();
// True once the armed allocation has failed (reset by arm_alloc_fault).
bool alloc_fault_fired();

// A host allocation point of the library: throws std::bad_alloc when it is
// the armed one.
void host_alloc_point();
// A device-memory allocation: true when it must fail.
bool device_alloc_fails();
// While alive, allocations on the calling thread are counted but not
// failed (unless armed with in_submit for kSubmit). Each use names why:
//   kSubmit: inside vkQueueSubmit (see arm_alloc_fault);
//   kDriverBug: a driver call known to crash on a failed allocation
//     (lavapipe 22.3's vkCreatePipelineLayout dereferences it).
class NoFaultScope {
 public:
  enum Why { kSubmit = 1, kDriverBug = 2 };
  explicit NoFaultScope(Why why);
  ~NoFaultScope();
  NoFaultScope(const NoFaultScope&) = delete;
  NoFaultScope& operator=(const NoFaultScope&) = delete;

 private:
  int saved_;
};

// Callbacks for every Vulkan object vkattn creates (counting, injectable).
const VkAllocationCallbacks* vk_allocator();
// The same allocator without counting or faults (the command pool).
const VkAllocationCallbacks* vk_allocator_uncounted();

}  // namespace vkattn

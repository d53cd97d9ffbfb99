// Fault injection, for tests and for users who want to see how their engine
// copes (README "Fault injection"). Off unless asked for; never an exported
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

// The n-th counted allocation from now fails (n = 0: disarm).
void arm_alloc_fault(uint64_t n);
// Counted allocations since the last arm_alloc_fault (or process start).
uint64_t alloc_fault_count();
// True once the armed allocation has failed (reset by arm_alloc_fault).
bool alloc_fault_fired();

// A host allocation point of the library: throws std::bad_alloc when it is
// the armed one.
void host_alloc_point();
// A device-memory allocation: true when it must fail.
bool device_alloc_fails();
// Callbacks for every Vulkan object vkattn creates (counting, injectable).
const VkAllocationCallbacks* vk_allocator();
// The same allocator without counting or faults (the command pool).
const VkAllocationCallbacks* vk_allocator_uncounted();

}  // namespace vkattn

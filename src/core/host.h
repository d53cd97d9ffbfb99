// What the host offers, read once per process.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>

namespace vkattn {

// Hardware threads of the host (at least 1). Cached: the standard library
// reads /sys on every call, which cost ~10 us per call in a VM, inside the
// per-layer recording path.
inline uint32_t host_threads() {
  static const uint32_t n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

// Workgroups a dispatch should offer at least to keep the device busy: a
// few per host thread on a CPU device (lavapipe spreads workgroups over its
// threads and pays ~5 us per workgroup), 256 on a GPU.
inline uint32_t busy_workgroups(bool cpu_device) {
  return cpu_device ? 4 * host_threads() : 256;
}

// Threads a CPU Vulkan device runs one dispatch on. lavapipe starts one
// per host CPU (LP_NUM_THREADS overrides; none below 2 CPUs) and hands
// each thread one contiguous chunk of floor(n / threads) workgroups of a
// dispatch, then the remainder one at a time (Mesa's lp_cs_tpool.c): the
// order of a dispatch's workgroups decides its balance.
inline uint32_t cpu_device_threads() {
  static const uint32_t n = [] {
    const char* e = std::getenv("LP_NUM_THREADS");
    if (e && *e) return static_cast<uint32_t>(std::strtoul(e, nullptr, 10));
    return host_threads() > 1 ? host_threads() : 0u;
  }();
  return n;
}

}  // namespace vkattn

// What the host offers, read once per process.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>

namespace vkattn {

// Hardware threads of the host (at least 1). Cached: the standard library
// reads /sys on every call, which cost ~10 us per call in a VM, inside the
// per-layer recording path.
inline uint32_t host_threads() {
  static const uint32_t n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

}  // namespace vkattn

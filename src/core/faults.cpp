#include "core/faults.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/env.h"

namespace vkattn {

namespace {

thread_local int t_no_fault = 0;  // NoFaultScope::Why bits

struct AllocFaults {
  std::atomic<uint64_t> armed{0};  // 0: off
  std::atomic<uint64_t> count{0};
  std::atomic<bool> fired{false};
  std::atomic<bool> in_submit{false};
  // Armed at the process's first allocation; a malformed value arms
  // nothing here and fails context creation (core/env.h check_env).
  AllocFaults() {
    try {
      armed = env_number("VKATTN_FAIL_ALLOC", 0);
    } catch (...) {
      armed = 0;
    }
  }
  // Counts one allocation; true if it is the armed one.
  bool hit() {
    uint64_t a = armed.load(std::memory_order_relaxed);
    if (a == 0) return false;
    uint64_t n = count.fetch_add(1) + 1;
    const int allowed = in_submit.load() ? NoFaultScope::kSubmit : 0;
    if (n != a || (t_no_fault & ~allowed)) return false;
    fired = true;
    return true;
  }
};

AllocFaults& faults() {
  static AllocFaults f;
  return f;
}

// Vulkan's host allocations: each block carries a header with its size and
// the distance back to the start of the malloc'ed block, so reallocation
// and freeing need no table.
struct Header {
  size_t size;
  size_t shift;
};

// pUserData non-null: the uncounted allocator.
void* VKAPI_CALL vk_alloc(void* user, size_t size, size_t align, VkSystemAllocationScope) {
  if (!user && faults().hit()) return nullptr;
  if (align < alignof(Header)) align = alignof(Header);
  size_t head = (sizeof(Header) + align - 1) / align * align;
  auto* raw = static_cast<uint8_t*>(std::malloc(size + head + align));
  if (!raw) return nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(raw) + head;
  p = (p + align - 1) / align * align;
  auto* mem = reinterpret_cast<uint8_t*>(p);
  Header h{size, static_cast<size_t>(mem - raw)};
  std::memcpy(mem - sizeof(Header), &h, sizeof(h));
  return mem;
}

void VKAPI_CALL vk_free(void*, void* mem) {
  if (!mem) return;
  Header h;
  std::memcpy(&h, static_cast<uint8_t*>(mem) - sizeof(Header), sizeof(h));
  std::free(static_cast<uint8_t*>(mem) - h.shift);
}

void* VKAPI_CALL vk_realloc(void* user, void* old, size_t size, size_t align,
                            VkSystemAllocationScope scope) {
  if (!old) return vk_alloc(user, size, align, scope);
  if (size == 0) {
    vk_free(user, old);
    return nullptr;
  }
  void* mem = vk_alloc(user, size, align, scope);
  if (!mem) return nullptr;  // the old block stays valid (Vulkan's rule)
  Header h;
  std::memcpy(&h, static_cast<uint8_t*>(old) - sizeof(Header), sizeof(h));
  std::memcpy(mem, old, h.size < size ? h.size : size);
  vk_free(user, old);
  return mem;
}

const VkAllocationCallbacks kCallbacks{nullptr, vk_alloc, vk_realloc, vk_free, nullptr, nullptr};
int g_uncounted_tag;
const VkAllocationCallbacks kUncounted{&g_uncounted_tag, vk_alloc, vk_realloc,
                                       vk_free,          nullptr,  nullptr};

}  // namespace

void arm_alloc_fault(uint64_t n, bool in_submit) {
  AllocFaults& f = faults();
  f.armed = 0;
  f.count = 0;
  f.fired = false;
  f.in_submit = in_submit;
  f.armed = n;
}

NoFaultScope::NoFaultScope(Why why) : saved_(t_no_fault) {
  t_no_fault |= why;
}

NoFaultScope::~NoFaultScope() {
  t_no_fault = saved_;
}

uint64_t alloc_fault_count() {
  return faults().count.load();
}

bool alloc_fault_fired() {
  return faults().fired.load();
}

void host_alloc_point() {
  if (faults().hit()) throw std::bad_alloc();
}

bool device_alloc_fails() {
  return faults().hit();
}

const VkAllocationCallbacks* vk_allocator() {
  return &kCallbacks;
}

const VkAllocationCallbacks* vk_allocator_uncounted() {
  return &kUncounted;
}

}  // namespace vkattn

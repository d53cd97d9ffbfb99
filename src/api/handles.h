// The opaque handles of the C ABI, in one place: each holds a shared
// reference to its C++ object, so handles can be destroyed in any order
// (an object lives while anything made from it does).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention/user_functions.h"
#include "ops/kv_cache.h"

struct vkattn_context {
  std::shared_ptr<vkattn::Context> impl;
};
// struct vkattn_tensor: core/tensor.h.
struct vkattn_kv_cache {
  std::shared_ptr<vkattn::KvCache> impl;
};
struct vkattn_step {
  std::shared_ptr<vkattn::Step> impl;
};
// struct vkattn_variant: ops/attention/user_functions.h.

namespace vkattn {

// Vulkan handles cross the ABI as uint64_t (non-dispatchable) or void*
// (dispatchable); these convert either way on 32- and 64-bit builds.
template <class H>
H handle_from_u64(uint64_t v) {
  if constexpr (std::is_pointer_v<H>)
    return reinterpret_cast<H>(static_cast<uintptr_t>(v));
  else
    return static_cast<H>(v);
}
template <class H>
uint64_t handle_to_u64(H h) {
  if constexpr (std::is_pointer_v<H>)
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
  else
    return static_cast<uint64_t>(h);
}

// External mode forbids what would submit or wait (vkattn.h "Interop").
inline void require_not_external(Context& c, const char* what) {
  if (c.recorder().external())
    fail(VKATTN_ERROR_INVALID_ARGUMENT, what,
         " is not allowed between vkattn_context_begin_external and vkattn_context_end_external");
}

}  // namespace vkattn

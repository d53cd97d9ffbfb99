// The ABI growth rule (vkattn.h "ABI stability"), in code.
//
// Descriptor structs grow only by appending fields. Every struct_size any
// release ever shipped stays accepted: the caller's bytes are copied over
// the defaults, so fields its version did not have take their defaults. An
// unknown size (0, a garbage value, or a newer library's struct passed to
// this older one) is rejected. Output structs are written only up to the
// caller's struct_size (an older caller's smaller struct is never
// overflowed); a size larger than this library's gets this library's struct
// and struct_size says how much was written.
//
// When a struct grows: append the field, add the new size to its list
// below, give the field a default in its _init function, update the
// static_asserts of src/api/abi_layout.cpp, and move the minor version
// (CMakeLists.txt and the header: tools/check_abi_version.py); at the
// release, tools/abi-check.sh --update writes abi/libvkattn-X.Y.Z.abi.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "vkattn/vkattn.h"

namespace vkattn {

// struct_size values of every release, oldest first (x86_64 / aarch64).
constexpr uint32_t kContextDescSizes[] = {16};  // 0.1
constexpr uint32_t kAttentionDescSizes[] = {
    80, 88, 112, 136,
    176};  // 0.1, 0.3 (sinks), 0.4 (mask shapes), 0.6 (trees, top-k), 0.7 (variants)
constexpr uint32_t kKvCacheDescSizes[] = {48, 52};  // 0.1, 0.5 (flags)
constexpr uint32_t kDeviceInfoSizes[] = {824};      // 0.1
constexpr uint32_t kRopeDescSizes[] = {72};         // 0.3 (RoPE)
constexpr uint32_t kVulkanDescSizes[] = {80};       // 0.2 (interop)
constexpr uint32_t kTuneDescSizes[] = {64};         // 0.3 (tuning)
constexpr uint32_t kVariantDescSizes[] = {32};      // 0.7 (attention variants)

template <size_t N>
bool shipped_size(const uint32_t (&sizes)[N], uint32_t size) {
  return std::find(sizes, sizes + N, size) != sizes + N;
}

// A descriptor read under the growth rule: `init` fills the defaults, the
// caller's struct_size bytes go over them.
template <typename T, size_t N>
T read_desc(const T* in, const uint32_t (&sizes)[N], void (*init)(T*), const char* name,
            const char* init_name) {
  static_assert(sizeof(T) <= 4096, "descriptor");
  require(in != nullptr, name, " is NULL");
  const uint32_t size = in->struct_size;
  require(shipped_size(sizes, size), name, "->struct_size is ", size,
          ", not the size of any vkattn release's struct (this one: ", sizeof(T), "); call ",
          init_name);
  T d;
  init(&d);
  std::memcpy(&d, in, std::min<size_t>(size, sizeof(T)));
  d.struct_size = sizeof(T);
  return d;
}

// Checks an output struct's struct_size (read alone: the caller's struct
// may be an older, smaller one).
template <typename T, size_t N>
void check_out_size(const T* out, const uint32_t (&sizes)[N], const char* name,
                    const char* init_name) {
  require(out != nullptr, name, " is NULL");
  const uint32_t size = out->struct_size;
  require(shipped_size(sizes, size) || size > sizes[N - 1], name, "->struct_size is ", size,
          ", not the size of any vkattn release's struct (this one: ", sizeof(T), "); call ",
          init_name);
}

// Writes `value` to `out` up to the caller's struct_size.
template <typename T, size_t N>
void write_out(T* out, const T& value, const uint32_t (&sizes)[N], const char* name,
               const char* init_name) {
  check_out_size(out, sizes, name, init_name);
  const uint32_t size = out->struct_size;
  const size_t n = std::min<size_t>(size, sizeof(T));
  T v = value;
  v.struct_size = static_cast<uint32_t>(n);
  std::memcpy(static_cast<void*>(out), &v, n);
}

}  // namespace vkattn

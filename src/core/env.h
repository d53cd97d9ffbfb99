// Debug/tuning options read from the environment (documented in docs/guide/environment.md).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace vkattn {

// The value of `name` as an unsigned integer, or `fallback` when unset,
// empty or not a number (a sign is not a number). A value past
// UINT32_MAX - 1 reads as UINT32_MAX - 1, never wrapped into range: the
// options' range checks then refuse it (core/kernel_options.h).
inline uint32_t env_uint(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v || *v < '0' || *v > '9') return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (*end != '\0') return fallback;
  return x >= UINT32_MAX - 1ull ? UINT32_MAX - 1u : static_cast<uint32_t>(x);
}

// The same for 64-bit values (byte counts).
inline uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return (*end == '\0') ? static_cast<uint64_t>(x) : fallback;
}

}  // namespace vkattn

// Internal error type: thrown inside the core, turned into a vkattn_status
// by the one exception firewall in src/api/firewall.h.
#pragma once

#include <volk.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "vkattn/vkattn.h"

namespace vkattn {

class Error : public std::runtime_error {
 public:
  Error(vkattn_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  vkattn_status status() const { return status_; }

 private:
  vkattn_status status_;
};

// Builds a message from streamable parts: fail(INVALID, "dim ", i, " < 0").
template <typename... Parts>
[[noreturn]] void fail(vkattn_status status, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(status, os.str());
}

template <typename... Parts>
void require(bool ok, const Parts&... parts) {
  if (!ok) fail(VKATTN_ERROR_INVALID_ARGUMENT, parts...);
}

// The integer behind a C enum value from the caller. C lets a caller pass
// any int where an enum is declared; in C++, loading an enum object whose
// value is outside the enumeration's range is undefined, so values from
// the ABI are read as bytes and checked before they are used as enums.
template <typename Enum>
int64_t raw_enum(const Enum& e) {
  static_assert(sizeof(Enum) == 4, "C enums of the ABI are 32-bit");
  int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Maps a VkResult to the status a caller can act on.
vkattn_status status_from_vk(VkResult r);

// Throws on a failing VkResult, naming the call.
void check_vk(VkResult r, const char* what);

}  // namespace vkattn

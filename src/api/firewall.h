// The one exception firewall: every extern "C" entry point runs its body
// through guard(), which turns exceptions into a status plus a thread-local
// message prefixed with the entry point's name.
#pragma once

#include <new>
#include <string>

#include "core/error.h"
#include "vkattn/vkattn.h"

namespace vkattn {

void set_last_error(const char* function, const char* message);

template <typename Body>
vkattn_status guard(const char* function, Body&& body) {
  try {
    body();
    return VKATTN_SUCCESS;
  } catch (const Error& e) {
    set_last_error(function, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(function, "out of host memory");
    return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(function, e.what());
    return VKATTN_ERROR_INTERNAL;
  } catch (...) {
    set_last_error(function, "unknown internal error");
    return VKATTN_ERROR_INTERNAL;
  }
}

// For void entry points (destroy): errors are swallowed after being noted.
template <typename Body>
void guard_void(const char* function, Body&& body) {
  (void)guard(function, body);
}

// Argument checks shared by the shims.
#define VKATTN_REQUIRE_ARG(ptr) ::vkattn::require((ptr) != nullptr, #ptr " is NULL")

}  // namespace vkattn

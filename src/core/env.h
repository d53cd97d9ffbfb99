// The VKATTN_* environment variables the library reads: one table
// (env_vars(), documented row by row in docs/guide/environment.md) and
// readers that parse a value whole. A value the variable does not take (a
// switch other than 0 or 1, a number that is not one or lies outside its
// range, a name outside its set) throws INVALID_ARGUMENT naming the
// variable and the value; an unset or empty variable reads as its
// fallback. Paths and VKATTN_DEVICE's names are free text; an unknown
// VKATTN_LOG category is a warning (core/log.h).
//
// When: check_env(kContext) runs first in every context's creation (the
// variables a context, its device and its files read, and the process-wide
// fault counter), check_env(kCache) in every KV cache's; the readers called
// later then cannot fail.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vkattn {

struct EnvVar {
  enum Kind { kSwitch, kNumber, kName, kNames, kPath, kDevice, kCategories };
  enum Read { kContext, kCache };
  const char* name;
  Kind kind;
  Read read;
  uint64_t lo = 0, hi = 0;           // kSwitch, kNumber: the range
  std::vector<const char*> names{};  // kName, kNames: the set
};

// Every variable, in docs/guide/environment.md's order of kinds.
const std::vector<EnvVar>& env_vars();
const EnvVar& env_var(const char* name);  // throws INTERNAL for a name not in the table

// Checks every variable read at `when`.
void check_env(EnvVar::Read when);

// The readers (the variable's table row gives its kind and range).
bool env_switch(const char* name, bool fallback);
uint64_t env_number(const char* name, uint64_t fallback);
// The index of the value in the variable's names, or fallback.
uint32_t env_name(const char* name, uint32_t fallback);
// kNames: a bit per name the comma-separated list holds.
uint32_t env_names(const char* name);

}  // namespace vkattn

// What the fuzzer's self-contained operations (fuzz_edges.cpp,
// fuzz_numeric.cpp) do when a check fails: print it with the library's
// last error and abort, so libFuzzer saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "vkattn/vkattn.h"

namespace vkattn_fuzz {

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s (last error: %s)\n", what.c_str(), vkattn_last_error());
  std::abort();
}
inline void ok(vkattn_status s, const char* call) {
  if (s != VKATTN_SUCCESS) die(std::string(call) + " failed: " + vkattn_status_string(s));
}
inline void check(bool cond, const std::string& what) {
  if (!cond) die(what);
}

}  // namespace vkattn_fuzz

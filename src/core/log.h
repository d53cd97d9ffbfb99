// The library's messages (issue E6): every line vkattn prints goes through
// log_line(), which hands it to the caller's vkattn_set_log_callback or,
// without one, writes "vkattn: <message>\n" to stderr.
//
// Levels: errors and warnings are messages that mean a result or a choice
// changed (a self-check failed and a fallback serves, a file could not be
// written); they always reach the sink. Info and debug lines are those of
// the VKATTN_LOG categories (log_categories()): the caller asks for them,
// and the code that prints them tests its category first.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "vkattn/vkattn.h"

namespace vkattn {

// Categories of VKATTN_LOG (comma-separated names).
enum LogCategory : uint32_t {
  kLogKernels = 1u << 0,  // "kernels": a line per attention dispatch, fallbacks, checks
  kLogCompile = 1u << 1,  // "compile": a line per pipeline created
  kLogStats = 1u << 2,    // "stats": the driver's compiler statistics
  kLogFiles = 1u << 3,    // "files": on-disk caches read, ignored or rewritten
};

// VKATTN_LOG's categories, read now (contexts, pipelines and the device
// files read them when they are created); an unknown name is said once per
// process, as a warning, and ignored.
uint32_t log_categories();
inline bool log_enabled(LogCategory c) {
  return (log_categories() & c) != 0;
}

// vkattn_set_log_callback: once it returns, no message reaches the
// previous callback (a message being delivered holds the sink shared).
void set_log_sink(vkattn_log_fn fn, void* user);

// One message (one line, no newline; a newline inside becomes a space).
void log_line(vkattn_log_level level, const std::string& message);

// log_line of streamable parts: log(VKATTN_LOG_INFO, "compile ", name).
template <typename... Parts>
void log(vkattn_log_level level, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  log_line(level, os.str());
}

// log_line of a printf format (C99's: mingw builds use its own printf,
// __USE_MINGW_ANSI_STDIO, not msvcrt's, which lacks %zu and %llu).
#if defined(__MINGW32__)
#define VKATTN_PRINTF_FORMAT gnu_printf
#else
#define VKATTN_PRINTF_FORMAT printf
#endif
void logf(vkattn_log_level level, const char* format, ...)
    __attribute__((format(VKATTN_PRINTF_FORMAT, 2, 3)));

}  // namespace vkattn

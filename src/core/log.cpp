#include "core/log.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>

#include "core/log_once.h"
#include "core/platform.h"

namespace vkattn {

namespace {

struct Sink {
  std::shared_mutex mu;  // shared while a message is delivered, unique to replace
  vkattn_log_fn fn = nullptr;
  void* user = nullptr;
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: messages may come from exit handlers
  return *s;
}

}  // namespace

uint32_t log_categories() {
  const std::optional<std::string> env = get_env("VKATTN_LOG");
  if (!env) return 0;
  const char* v = env->c_str();
  static const struct {
    const char* name;
    uint32_t bit;
  } names[] = {{"kernels", kLogKernels},
               {"compile", kLogCompile},
               {"stats", kLogStats},
               {"files", kLogFiles}};
  uint32_t bits = 0;
  for (const char* p = v; *p;) {
    const char* e = std::strchr(p, ',');
    const std::string name(p, e ? e : p + std::strlen(p));
    p = e ? e + 1 : p + name.size();
    if (name.empty()) continue;
    bool known = false;
    for (const auto& n : names)
      if (name == n.name) bits |= n.bit, known = true;
    if (!known && first_time("VKATTN_LOG " + name))
      log(VKATTN_LOG_WARNING, "VKATTN_LOG names an unknown category \"", name,
          "\" (ignored; categories: kernels, compile, stats, files)");
  }
  return bits;
}

void log_line(vkattn_log_level level, const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  Sink& s = sink();
  std::shared_lock<std::shared_mutex> lock(s.mu);
  if (s.fn) {
    s.fn(level, line.c_str(), s.user);
    return;
  }
  line = "vkattn: " + line + "\n";
  std::fputs(line.c_str(), stderr);
}

void logf(vkattn_log_level level, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(&text[0], text.size() + 1, format, again);
  va_end(again);
  log_line(level, text);
}

void set_log_sink(vkattn_log_fn fn, void* user) {
  Sink& s = sink();
  std::unique_lock<std::shared_mutex> lock(s.mu);  // waits for messages being delivered
  s.fn = fn;
  s.user = user;
}

}  // namespace vkattn

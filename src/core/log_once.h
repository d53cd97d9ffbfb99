// One stderr line per process for each distinct message key (a damaged
// file, an ignored tuning entry, a failed self-check), however many
// contexts meet it.
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace vkattn {

// True the first time this process asks about `key`.
inline bool first_time(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  return said.insert(key).second;
}

}  // namespace vkattn

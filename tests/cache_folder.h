// Helpers of the suites that test vkattn's per-device files (the
// self-check results, the tuning file): a folder of the test's own for
// VKATTN_PIPELINE_CACHE_DIR, its files read and written whole, and a
// context created under it with stderr captured.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_platform.h"
#include "test_util.h"

namespace vkattn_test {

// The file of `dir` named <prefix>*.txt ("" if none).
inline std::string file_named(const std::string& dir, const std::string& prefix) {
  std::string found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".txt")
      found = dir + "/" + n;
  }
  return found;
}

// The entries of the first section of a per-device file vkattn would
// write (core/device_file.h: this process's): its first line
// "vkattn-<what> 1 device=...", entry lines each accepted by `entry_ok`,
// then "end"; after it only whole sections of the same kind (other builds'
// or drivers'), at most DeviceFile::kMaxSections in all (false if it is
// not such a file). *sections: how many it holds.
template <typename EntryOk>
bool valid_device_file(const std::string& text, const std::string& what, EntryOk entry_ok,
                       size_t* entries, size_t* sections = nullptr) {
  std::istringstream in(text);
  std::string line;
  const std::string head = "vkattn-" + what + " 1 device=";
  size_t n = 0;
  *entries = 0;
  while (std::getline(in, line)) {
    if (line.rfind(head, 0) != 0) return false;
    bool ended = false;
    while (!ended && std::getline(in, line)) {
      if (line == "end") {
        ended = true;
      } else if (!entry_ok(line)) {
        return false;
      } else if (n == 0) {
        ++*entries;
      }
    }
    if (!ended) return false;
    ++n;
  }
  if (sections) *sections = n;
  return n >= 1 && n <= 4;
}

// The sections of a per-device file: each its header, lines and "end".
inline std::vector<std::string> device_file_sections(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string cur;
  for (std::string line; std::getline(in, line);) {
    cur += line + "\n";
    if (line == "end") out.push_back(cur), cur.clear();
  }
  return out;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void spit(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

inline bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Runs `body` on a validated context created under `env` and `dir` as its
// cache folder, with stderr captured; returns what was printed.
template <class F>
std::string with_context(const std::string& dir, ScopedEnv::Vars env, F body) {
  env.emplace_back("VKATTN_PIPELINE_CACHE_DIR", dir.c_str());
  ScopedEnv scoped(env);
  testing::internal::CaptureStderr();
  {
    ForcedContext fc;
    if (fc.ctx) body(fc.ctx);
  }
  return testing::internal::GetCapturedStderr();
}

}  // namespace vkattn_test

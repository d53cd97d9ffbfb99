// The tests' one home for what differs between Linux and Windows (the
// library's is src/core/platform.h): the environment, temporary folders, the
// test program's own path. Tests call these and never test _WIN32
// themselves.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>

#ifdef _WIN32
// (Not <windows.h>: its macros, near and far among them, would reach every
// test.)
extern "C" __declspec(dllimport) unsigned long __stdcall GetModuleFileNameA(void* module,
                                                                            char* name,
                                                                            unsigned long size);
#endif

namespace vkattn_test {

// setenv(name, value, 1) / unsetenv(name): what the library's getenv sees.
inline void set_env(const char* name, const char* value) {
#ifdef _WIN32
  _putenv_s(name, value);
#else
  setenv(name, value, 1);
#endif
}
inline void unset_env(const char* name) {
#ifdef _WIN32
  _putenv_s(name, "");  // (Windows' CRT has no empty variable: removed)
#else
  unsetenv(name);
#endif
}

// The test program's own path (a child process runs it again).
inline std::string self_path() {
#ifdef _WIN32
  char buf[4096] = {};
  GetModuleFileNameA(nullptr, buf, sizeof buf);
  return buf;
#else
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
#endif
}

// Whether the tests may start a POSIX shell (child processes, pipes):
// not on Windows, where the suites run under wine without one.
inline bool have_shell() {
#ifdef _WIN32
  return false;
#else
  return true;
#endif
}
#define VKATTN_NEEDS_SHELL()                                                 \
  do {                                                                       \
    if (!::vkattn_test::have_shell()) GTEST_SKIP() << "needs a POSIX shell"; \
  } while (0)

// A fresh folder under the system's temporary folder, removed at the end
// of the test; `with_pipelines` copies the build's pipeline cache into it
// (when the suite runs with one), so kernels compile as fast as the
// suites' do.
struct TempDir {
  std::string path;
  explicit TempDir(bool with_pipelines = false) {
    namespace fs = std::filesystem;
    std::random_device rd;
    for (int attempt = 0; attempt < 100 && path.empty(); ++attempt) {
      const fs::path p = fs::temp_directory_path() / ("vkattn-test-" + std::to_string(rd()));
      std::error_code ec;
      if (fs::create_directory(p, ec)) path = p.string();
    }
    EXPECT_FALSE(path.empty()) << "no temporary folder";
    const char* cache = std::getenv("VKATTN_PIPELINE_CACHE_DIR");
    if (with_pipelines && cache && *cache) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(cache, ec))
        if (e.path().filename().string().rfind("pipelines-", 0) == 0)
          fs::copy_file(e.path(), fs::path(path) / e.path().filename(),
                        fs::copy_options::overwrite_existing, ec);
    }
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace vkattn_test

#include "core/platform.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace vkattn {

namespace {

bool is_separator(char c) {
#ifdef _WIN32
  return c == '/' || c == '\\';
#else
  return c == '/';
#endif
}

// Replaces `to` with `from` in one step; false with errno's or the
// system's reason.
bool replace(const std::string& from, const std::string& to, std::string* reason) {
#ifdef _WIN32
  if (MoveFileExA(from.c_str(), to.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
    return true;
  *reason = "MoveFileEx error " + std::to_string(GetLastError());
  return false;
#else
  if (std::rename(from.c_str(), to.c_str()) == 0) return true;
  *reason = std::strerror(errno);
  return false;
#endif
}

void make_dir(const std::string& path) {
#ifdef _WIN32
  CreateDirectoryA(path.c_str(), nullptr);
#else
  mkdir(path.c_str(), 0755);
#endif
}

}  // namespace

std::optional<std::string> get_env(const char* name) {
#ifdef _WIN32
  char small[256];
  DWORD n = GetEnvironmentVariableA(name, small, sizeof small);
  if (n == 0) {
    if (GetLastError() == ERROR_ENVVAR_NOT_FOUND) return std::nullopt;
    return std::string();
  }
  if (n < sizeof small) return std::string(small, n);
  std::string big(n, '\0');  // n counts the terminating zero here
  n = GetEnvironmentVariableA(name, &big[0], n);
  big.resize(n);
  return big;
#else
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
#endif
}

std::string cache_dir() {
  if (auto e = get_env("VKATTN_PIPELINE_CACHE_DIR")) return *e;
#ifdef _WIN32
  if (auto a = get_env("LOCALAPPDATA"); a && !a->empty()) return *a + "\\vkattn";
#else
  if (auto x = get_env("XDG_CACHE_HOME"); x && !x->empty()) return *x + "/vkattn";
  if (auto h = get_env("HOME"); h && !h->empty()) return *h + "/.cache/vkattn";
#endif
  return "";
}

std::string parent_dir(const std::string& path) {
  for (size_t i = path.size(); i-- > 0;)
    if (is_separator(path[i])) return path.substr(0, i);
  return "";
}

void make_dirs(const std::string& path) {
  if (path.empty()) return;
  for (size_t i = 1; i < path.size(); ++i)
    if (is_separator(path[i]) && !is_separator(path[i - 1])) make_dir(path.substr(0, i));
  make_dir(path);
}

uint64_t process_id() {
#ifdef _WIN32
  return GetCurrentProcessId();
#else
  return static_cast<uint64_t>(::getpid());
#endif
}

bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* why) {
  why->clear();
  make_dirs(parent_dir(path));  // a bare file name: the current folder
  static std::atomic<uint64_t> serial{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(process_id()) + "." + std::to_string(serial.fetch_add(1));
  errno = 0;
  std::ofstream f(tmp, std::ios::binary);
  if (!f) {
    *why = "cannot create " + tmp + ": " + std::strerror(errno ? errno : EIO);
    return false;
  }
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) {
    *why = "cannot write " + tmp + ": " + std::strerror(errno ? errno : EIO);
    std::remove(tmp.c_str());
    return false;
  }
  std::string reason;
  if (replace(tmp, path, &reason)) return true;
  *why = "cannot replace " + path + " with " + tmp + ": " + reason;
  std::remove(tmp.c_str());
  return false;
}

void* open_library(const std::string& name, std::string* why) {
#ifdef _WIN32
  HMODULE h = LoadLibraryA(name.c_str());
  if (!h) *why = name + ": LoadLibrary error " + std::to_string(GetLastError());
  return reinterpret_cast<void*>(h);
#else
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = e ? e : name + ": cannot be loaded";
  }
  return h;
#endif
}

void* library_symbol(void* library, const char* symbol) {
#ifdef _WIN32
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), symbol));
#else
  return dlsym(library, symbol);
#endif
}

std::string module_dir_of(const void* address) {
#ifdef _WIN32
  HMODULE h = nullptr;
  if (!GetModuleHandleExA(
          GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
          static_cast<LPCSTR>(address), &h))
    return "";
  char path[MAX_PATH];
  const DWORD n = GetModuleFileNameA(h, path, MAX_PATH);
  return n && n < MAX_PATH ? parent_dir(std::string(path, n)) : "";
#else
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname) return "";
  return parent_dir(info.dli_fname);
#endif
}

}  // namespace vkattn

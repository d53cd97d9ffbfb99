// The library's one home for what the operating system does differently
// (as SQLite keeps every OS call behind its VFS and zstd its differences in
// platform.h): the environment, the cache folder, folders, atomic
// replacement of a file, the process id. Only core/platform.cpp tests _WIN32; the rest of the core
// calls these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vkattn {

// The value of environment variable `name` (unset: nullopt). On Windows
// from the process environment (GetEnvironmentVariable), which runtimes
// that set variables through the OS change (Go's os.Setenv, .NET's
// Environment.SetEnvironmentVariable); the C runtime's getenv there reads
// its own copy, made when the program started.
std::optional<std::string> get_env(const char* name);

// The folder of vkattn's per-device caches (pipelines, self-check results,
// tuning): VKATTN_PIPELINE_CACHE_DIR; else on Windows %LOCALAPPDATA%\vkattn;
// elsewhere $XDG_CACHE_HOME/vkattn, else $HOME/.cache/vkattn. ""
// (VKATTN_PIPELINE_CACHE_DIR set empty, or none of them) keeps the caches
// in memory only.
std::string cache_dir();

// The folder part of a file path ("" for a bare file name); '/' and, on
// Windows, '\' separate folders.
std::string parent_dir(const std::string& path);

// Creates `path` and its parents (errors are not reported: the write that
// needs the folder fails and says why).
void make_dirs(const std::string& path);

// Writes `bytes` to `path` whole, through a temporary file of a unique
// name beside it that then replaces `path` in one step (rename() on POSIX,
// MoveFileEx(MOVEFILE_REPLACE_EXISTING) on Windows, which rename() does not
// do there): readers see the old file or the new one, never a torn one.
// Creates the folder. false, with the file and the OS's reason in *why,
// when it could not (the temporary file is removed).
bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* why);

// This process's id (unique names of temporary files).
uint64_t process_id();

// A shared library loaded at run time (dlopen / LoadLibrary), or nullptr
// with the OS's reason in *why; `name` is a file name the OS searches for,
// or a path. Never unloaded (its functions may be cached process-wide).
void* open_library(const std::string& name, std::string* why);
// The address of `symbol` in a library open_library returned (nullptr: none).
void* library_symbol(void* library, const char* symbol);
// The folder of the shared library or executable holding `address` (""
// when the OS does not say): where vkattn finds the modules beside it.
std::string module_dir_of(const void* address);

}  // namespace vkattn

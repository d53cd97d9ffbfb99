// Tuned kernel choices kept per device (issue P3; ops/attention/tune.h
// measures them): for each shape class of attention calls, the kernel
// options its winner forces (the VKATTN_ATTN_* knobs of
// core/kernel_options.h, as "kernel=tiled,lanes_per_row=8"; "-" when the
// device table's own choice won), its median time and the table's.
//
// The file: VKATTN_TUNING_FILE, else tuning-<device uuid>.txt beside the
// pipeline cache (core/device_file.h: device UUID, driver version and
// build id in its first line; a shipped, read-only file works). A context
// loads it when it is created; a missing file is silent, a file of another
// device, driver or build or a damaged one is ignored with one logged line
// per process and file, never an error; an entry whose values are out of
// range or that the device or build cannot run is ignored, one line per
// process and entry (TuningFile::ignore); VKATTN_TUNING=0 ignores the file. Writes merge what is on
// disk (this process's entries win) and replace the file atomically.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "core/device_file.h"
#include "core/kernel_options.h"

namespace vkattn {

class Device;

class TuningFile {
 public:
  struct Entry {
    std::string options;  // "-" or "name=value,..."
    double ms = 0, table_ms = 0;
  };
  explicit TuningFile(const Device& device);

  // The entry of a class key (false: none).
  bool find(const std::string& key, Entry* out) const;
  // Records an entry and writes the file; false (why: the path and the
  // OS's reason) when the file could not be written (the entry stays in
  // memory). No file configured (path ""): true, in memory only.
  bool put(const std::string& key, const Entry& e, std::string* why);
  std::map<std::string, Entry> all() const;
  // No entries (calls then skip computing their class).
  bool empty() const;
  const std::string& path() const { return file_.path(); }
  bool enabled() const { return enabled_; }

  // Applies an entry's options to `o` (false, o unchanged, if the text is
  // not a list of known name=value pairs). Values are not range-checked
  // here: KernelOptions::range_error(true) and the variant's choice do.
  static bool apply(const std::string& options, KernelOptions* o);

  // A call found entry `e` of class `key` unusable (`why`): one stderr
  // line per process, file and entry; the call takes the device table's
  // choice.
  void ignore(const std::string& key, const Entry& e, const std::string& why) const;

 private:
  bool load(std::map<std::string, Entry>* out, std::string* why) const;
  DeviceFile file_;
  bool enabled_ = true;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace vkattn

// What the kernels' self-checks found on this device and driver (issue P2;
// the checks themselves: ops/attention/self_check.h). One entry per
// pipeline (shader and specialization constants): passed or failed, and
// the largest error the check measured.
//
// Kept beside the pipeline cache in self-check-<device uuid>.txt
// (core/device_file.h: the first line names the device UUID, the driver
// version and vkattn's build id; an empty VKATTN_PIPELINE_CACHE_DIR keeps
// them in memory only): a file of another device, driver or build, a
// truncated or corrupt one, is ignored with one logged line (its pipelines
// are checked again), never an error. Writes merge the entries on disk
// with this process's and replace the file with rename(): two processes
// checking at once never leave a torn file (at worst one's newest entries
// are checked again by a later process).
//
// Entries of attention variant pipelines ("SHADER#uHASH:SPEC", one source
// per HASH) are written after the others, their sources oldest first, and
// a section keeps those of the newest kMaxVariantSources sources (the
// order of their last check): a program that makes variants without end
// grows the file no further; an evicted source is checked again at its
// next first use in a process.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/device_file.h"

namespace vkattn {

class Device;

class CheckRecords {
 public:
  enum Status : uint32_t { kUnchecked = 0, kPassed = 1, kFailed = 2 };
  struct Entry {
    Status status = kUnchecked;
    double max_err = 0;
  };

  // Loads the device's file (if any).
  explicit CheckRecords(const Device& device);

  // A pipeline's key: its shader and specialization constants, and how it
  // was created (full subgroups, a required subgroup size).
  static std::string key(const char* shader, const std::vector<uint32_t>& spec,
                         bool full_subgroups = false, uint32_t subgroup_size = 0);

  Entry find(const std::string& key) const;
  // Records a result and writes the file (failures to write are ignored:
  // the result still holds for this process).
  void put(const std::string& key, Entry e);
  std::map<std::string, Entry> all() const;
  const std::string& path() const { return file_.path(); }

  static constexpr size_t kMaxVariantSources = 64;
  // The source part ("#uHASH") of a variant pipeline's key; "" for others.
  static std::string variant_source(const std::string& key);

 private:
  // Parses the file's entries; false (and why) when it is not this
  // device's or is damaged.
  // *sources (if given): the variant sources in file order, each once.
  bool load(std::map<std::string, Entry>* out, std::string* why,
            std::vector<std::string>* sources = nullptr) const;
  DeviceFile file_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::vector<std::string> checked_sources_;  // this process's, oldest check first
};

}  // namespace vkattn

// A small text file of per-device results kept beside the pipeline cache
// (core/platform.h cache_dir()): the self-check results
// (core/check_records.h) and the tuning winners (ops/attention/tuning.h).
//
// The file holds one section per (device, driver, vkattn build): a header
// line naming what it is (a magic word and version), the device UUID, the
// driver version and vkattn's build id (build_id()); then one entry per
// line; then "end". A 0.6 file is one such section. load() takes this
// process's section (anything else in the file is left alone); write()
// replaces that section only, first in the file, copies every other
// well-formed section unchanged after it and keeps the newest
// kMaxSections, through a unique temporary file and rename(), so readers
// never see a torn file and one build never erases another's results.
// Lines outside any section (damage) and unfinished sections are dropped.
#pragma once

#include <string>
#include <vector>

namespace vkattn {

class Device;

class DeviceFile {
 public:
  // `what` names the file ("self-check": its first line starts
  // "vkattn-self-check 1"); path "" keeps nothing on disk (load finds
  // nothing, write does nothing).
  DeviceFile(const Device& device, const char* what, std::string path);

  // The device's UUID in hex (file names).
  static std::string uuid_hex(const Device& device);

  const std::string& path() const { return path_; }
  const std::string& header() const { return header_; }
  // Sections a file keeps: this process's and the newest others.
  static constexpr size_t kMaxSections = 4;

  // This section's entry lines. false with *why empty: no file; false
  // with *why set: a file without this section (why says what it holds)
  // or damaged (for one line under VKATTN_LOG=files).
  bool load(std::vector<std::string>* lines, std::string* why) const;
  // Replaces this section with these entries (a path without a folder:
  // in the current folder); false if it could not, with why in words (the
  // file and the OS's reason). Always false, *why empty, for path "".
  bool write(const std::vector<std::string>& lines, std::string* why) const;

 private:
  struct Section {
    std::string header;
    std::vector<std::string> lines;
  };
  // The file's well-formed sections of this kind, in file order; *damage
  // says what was skipped ("" if nothing). false: no file.
  bool read_sections(std::vector<Section>* out, std::string* damage) const;
  std::string what_, magic_, path_, header_;
};

}  // namespace vkattn

// A small text file of per-device results kept beside the pipeline cache
// (core/pipeline.h cache_dir()): the self-check results
// (core/check_records.h) and the tuning winners (ops/attention/tuning.h).
// Its first line names what it is (a magic word and version), the device
// UUID, the driver version and vkattn's build id (build_id()); then one
// entry per line; then "end". load() takes only a file of this device,
// driver and build that ends with "end" (anything else: false, and why in
// words, for one logged line); write() replaces the file whole through a
// unique temporary file and rename(), so readers never see a torn file.
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
  // The entry lines. false with *why empty: no file; false with *why set:
  // a file that is not this device's, driver's and build's, or damaged.
  bool load(std::vector<std::string>* lines, std::string* why) const;
  // Replaces the file with these entries (a path without a folder: in
  // the current folder); false if it could not, with why in words (the
  // file and the OS's reason). Always false, *why empty, for path "".
  bool write(const std::vector<std::string>& lines, std::string* why) const;

 private:
  std::string what_, magic_, path_, header_;
};

}  // namespace vkattn

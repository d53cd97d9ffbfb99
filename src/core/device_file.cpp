#include "core/device_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/device.h"
#include "core/pipeline.h"

namespace vkattn {

std::string DeviceFile::uuid_hex(const Device& device) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : device.caps().device_uuid) s += d[b >> 4], s += d[b & 15];
  return s;
}

DeviceFile::DeviceFile(const Device& device, const char* what, std::string path)
    : what_(what), magic_(std::string("vkattn-") + what + " 1"), path_(std::move(path)) {
  char head[200];
  std::snprintf(head, sizeof(head), "%s device=%s driver=%08x build=%016llx", magic_.c_str(),
                uuid_hex(device).c_str(), device.info().driver_version,
                static_cast<unsigned long long>(build_id()));
  header_ = head;
}

bool DeviceFile::load(std::vector<std::string>* lines, std::string* why) const {
  why->clear();
  if (path_.empty()) return false;
  std::ifstream f(path_);
  if (!f) return false;  // none yet: nothing to say
  std::string line;
  if (!std::getline(f, line) || line.rfind(magic_, 0) != 0) {
    *why = "not a " + what_ + " file";
    return false;
  }
  if (line != header_) {
    *why = "written for another device, driver or vkattn build (" + line + ")";
    return false;
  }
  std::vector<std::string> got;
  while (std::getline(f, line)) {
    if (line == "end") {
      *lines = std::move(got);
      return true;
    }
    got.push_back(line);
  }
  *why = "truncated (no end line)";
  return false;
}

bool DeviceFile::write(const std::vector<std::string>& lines, std::string* why) const {
  why->clear();
  if (path_.empty()) return false;
  make_dirs(parent_dir(path_));  // a bare file name: the current folder
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid()) + "." +
                          std::to_string(serial.fetch_add(1)) + "." +
                          std::to_string(reinterpret_cast<uintptr_t>(this));
  {
    errno = 0;
    std::ofstream f(tmp);
    if (!f) {
      *why = "cannot create " + tmp + ": " + std::strerror(errno ? errno : EIO);
      return false;
    }
    f << header_ << "\n";
    for (const std::string& l : lines) f << l << "\n";
    f << "end\n";
    f.close();
    if (!f) {
      *why = "cannot write " + tmp + ": " + std::strerror(errno ? errno : EIO);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) == 0) return true;
  *why = "cannot rename " + tmp + " to " + path_ + ": " + std::strerror(errno);
  std::remove(tmp.c_str());
  return false;
}

}  // namespace vkattn

#include "core/device_file.h"

#include <cstdio>
#include <fstream>

#include "core/device.h"
#include "core/platform.h"
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

bool DeviceFile::read_sections(std::vector<Section>* out, std::string* damage) const {
  out->clear();
  damage->clear();
  if (path_.empty()) return false;
  std::ifstream f(path_);
  if (!f) return false;  // none yet
  auto note = [&](const std::string& what) {
    if (damage->empty()) *damage = what;
  };
  const std::string head = magic_ + " ";
  Section cur;
  bool open = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(head, 0) == 0) {
      if (open) note("a section without its end line (" + cur.header + ")");
      cur = Section{line, {}};
      open = true;
    } else if (!open) {
      note("a line outside any section (\"" + line.substr(0, 80) + "\")");
    } else if (line == "end") {
      out->push_back(std::move(cur));
      cur = Section{};
      open = false;
    } else {
      cur.lines.push_back(line);
    }
  }
  if (open) note("truncated (no end line after " + cur.header + ")");
  return true;
}

bool DeviceFile::load(std::vector<std::string>* lines, std::string* why) const {
  why->clear();
  std::vector<Section> sections;
  std::string damage;
  if (!read_sections(&sections, &damage)) return false;
  for (Section& s : sections)
    if (s.header == header_) {
      *lines = std::move(s.lines);
      return true;
    }
  if (!damage.empty())
    *why = damage;
  else if (sections.empty())
    *why = "not a " + what_ + " file";
  else
    *why = "no section for this device, driver and vkattn build (" +
           std::to_string(sections.size()) +
           " of other builds or drivers, kept; the newest: " + sections[0].header + ")";
  return false;
}

bool DeviceFile::write(const std::vector<std::string>& lines, std::string* why) const {
  why->clear();
  if (path_.empty()) return false;
  // This section first (the newest), then the others as they were.
  std::vector<Section> others;
  std::string damage;
  read_sections(&others, &damage);
  std::string text = header_ + "\n";
  for (const std::string& l : lines) text += l + "\n";
  text += "end\n";
  size_t kept = 1;
  for (const Section& s : others) {
    if (s.header == header_ || kept == kMaxSections) continue;
    ++kept;
    text += s.header + "\n";
    for (const std::string& l : s.lines) text += l + "\n";
    text += "end\n";
  }
  return write_file_atomically(path_, text, why);
}

}  // namespace vkattn

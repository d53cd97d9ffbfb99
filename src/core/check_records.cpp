#include "core/check_records.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/device.h"
#include "core/pipeline.h"

namespace vkattn {

namespace {
constexpr const char* kMagic = "vkattn-self-check 1";

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += d[p[i] >> 4], s += d[p[i] & 15];
  return s;
}
}  // namespace

CheckRecords::CheckRecords(const Device& device) {
  const auto& caps = device.caps();
  const std::string uuid = hex(caps.device_uuid, sizeof(caps.device_uuid));
  char head[160];
  std::snprintf(head, sizeof(head), "%s device=%s driver=%08x build=%016llx", kMagic, uuid.c_str(),
                device.info().driver_version, static_cast<unsigned long long>(build_id()));
  header_ = head;
  const std::string dir = cache_dir();
  if (dir.empty()) return;
  path_ = dir + "/self-check-" + uuid + ".txt";
  std::string why;
  if (!load(&entries_, &why) && !why.empty()) {
    ignored_ = why;
    std::fprintf(stderr, "vkattn: ignoring self-check results %s: %s (checking again)\n",
                 path_.c_str(), why.c_str());
  }
}

std::string CheckRecords::key(const char* shader, const std::vector<uint32_t>& spec,
                              bool full_subgroups, uint32_t subgroup_size) {
  std::string k = shader;
  char w[16];
  for (size_t i = 0; i < spec.size(); ++i) {
    std::snprintf(w, sizeof(w), "%c%x", i ? ',' : ':', spec[i]);
    k += w;
  }
  if (full_subgroups) k += "+full";
  if (subgroup_size) k += "+sg" + std::to_string(subgroup_size);
  return k;
}

bool CheckRecords::load(std::map<std::string, Entry>* out, std::string* why) const {
  std::ifstream f(path_);
  if (!f) return false;  // none yet: nothing to say
  std::string line;
  if (!std::getline(f, line) || line.rfind(kMagic, 0) != 0) {
    *why = "not a self-check file";
    return false;
  }
  if (line != header_) {
    *why = "written for another device, driver or vkattn build (" + line + ")";
    return false;
  }
  std::map<std::string, Entry> got;
  bool ended = false;
  while (std::getline(f, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    std::istringstream in(line);
    std::string status, key;
    double err = 0;
    if (!(in >> status >> err >> key) || (status != "pass" && status != "fail") ||
        key.find(':') == std::string::npos) {
      *why = "corrupt line \"" + line.substr(0, 80) + "\"";
      return false;
    }
    got[key] = Entry{status == "pass" ? kPassed : kFailed, err};
  }
  if (!ended) {
    *why = "truncated (no end line)";
    return false;
  }
  *out = std::move(got);
  return true;
}

CheckRecords::Entry CheckRecords::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? Entry{} : it->second;
}

std::map<std::string, CheckRecords::Entry> CheckRecords::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

void CheckRecords::put(const std::string& key, Entry e) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = e;
  if (path_.empty()) return;
  // Merge what other processes wrote meanwhile (ours win), then replace
  // the file whole.
  std::map<std::string, Entry> disk;
  std::string why;
  if (load(&disk, &why))
    for (const auto& kv : disk) entries_.emplace(kv.first, kv.second);
  make_dirs(path_.substr(0, path_.rfind('/')));
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid()) + "." +
                          std::to_string(serial.fetch_add(1)) + "." +
                          std::to_string(reinterpret_cast<uintptr_t>(this));
  {
    std::ofstream f(tmp);
    f << header_ << "\n";
    char err[32];
    for (const auto& kv : entries_) {
      if (kv.second.status == kUnchecked) continue;
      std::snprintf(err, sizeof(err), "%.6g",
                    std::isfinite(kv.second.max_err) ? kv.second.max_err : 1e30);
      f << (kv.second.status == kPassed ? "pass " : "fail ") << err << " " << kv.first << "\n";
    }
    f << "end\n";
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace vkattn

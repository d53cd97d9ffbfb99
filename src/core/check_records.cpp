#include "core/check_records.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/device.h"
#include "core/platform.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/pipeline.h"

namespace vkattn {

namespace {
std::string records_path(const Device& device) {
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/self-check-" + DeviceFile::uuid_hex(device) + ".txt";
}
}  // namespace

CheckRecords::CheckRecords(const Device& device)
    : file_(device, "self-check", records_path(device)) {
  std::string why;
  // Once per process and file (every context of the device loads it).
  if (!load(&entries_, &why) && !why.empty() && log_enabled(kLogFiles) &&
      first_time("self-check " + file_.path() + " " + why))
    logf(VKATTN_LOG_INFO, "ignoring self-check results %s: %s (checking again)",
         file_.path().c_str(), why.c_str());
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
  std::vector<std::string> lines;
  if (!file_.load(&lines, why)) return false;
  std::map<std::string, Entry> got;
  for (const std::string& line : lines) {
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
  if (file_.path().empty()) return;
  // Merge what other processes wrote meanwhile (ours win), then replace
  // the file whole.
  std::map<std::string, Entry> disk;
  std::string why;
  if (load(&disk, &why))
    for (const auto& kv : disk) entries_.emplace(kv.first, kv.second);
  std::vector<std::string> lines;
  char err[32];
  for (const auto& kv : entries_) {
    if (kv.second.status == kUnchecked) continue;
    std::snprintf(err, sizeof(err), "%.6g",
                  std::isfinite(kv.second.max_err) ? kv.second.max_err : 1e30);
    lines.push_back(std::string(kv.second.status == kPassed ? "pass " : "fail ") + err + " " +
                    kv.first);
  }
  // A results file that cannot be written (a read-only cache folder) is
  // said once per process and file; the check's result stays in memory
  // and the call that triggered it goes on.
  if (!file_.write(lines, &why) && first_time("self-check write " + file_.path()))
    logf(VKATTN_LOG_WARNING, "cannot save self-check results: %s", why.c_str());
}

}  // namespace vkattn

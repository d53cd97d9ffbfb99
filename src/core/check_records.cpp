#include "core/check_records.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/device.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/pipeline.h"
#include "core/platform.h"

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

std::string CheckRecords::variant_source(const std::string& key) {
  const size_t at = key.find("#u"), end = key.find(':');
  return at < end && end != std::string::npos ? key.substr(at, end - at) : "";
}

bool CheckRecords::load(std::map<std::string, Entry>* out, std::string* why,
                        std::vector<std::string>* sources) const {
  std::vector<std::string> lines;
  if (!file_.load(&lines, why)) return false;
  std::map<std::string, Entry> got;
  std::vector<std::string> order;
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
    const std::string src = variant_source(key);
    if (!src.empty() && std::find(order.begin(), order.end(), src) == order.end())
      order.push_back(src);
  }
  *out = std::move(got);
  if (sources) *sources = std::move(order);
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
  const std::string source = variant_source(key);
  if (!source.empty()) {
    checked_sources_.erase(std::remove(checked_sources_.begin(), checked_sources_.end(), source),
                           checked_sources_.end());
    checked_sources_.push_back(source);
  }
  if (file_.path().empty()) return;
  // Merge what other processes wrote meanwhile (ours win), then replace
  // the file whole.
  std::map<std::string, Entry> disk;
  std::vector<std::string> disk_sources;
  std::string why;
  if (load(&disk, &why, &disk_sources))
    for (const auto& kv : disk) entries_.emplace(kv.first, kv.second);
  // Variant sources, oldest first: the file's (its order) before this
  // process's checks; past the newest kMaxVariantSources they go, from
  // the file and from memory. (Sources loaded at start that the file no
  // longer has, another process dropped: they go too.)
  std::vector<std::string> order;
  for (const std::string& s : disk_sources)
    if (std::find(checked_sources_.begin(), checked_sources_.end(), s) == checked_sources_.end())
      order.push_back(s);
  order.insert(order.end(), checked_sources_.begin(), checked_sources_.end());
  if (order.size() > kMaxVariantSources)
    order.erase(order.begin(), order.end() - long(kMaxVariantSources));
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
  std::vector<std::vector<std::string>> variant_lines(order.size());
  std::vector<std::string> lines;
  char err[32];
  for (auto it = entries_.begin(); it != entries_.end();) {
    const std::string src = variant_source(it->first);
    const auto r = src.empty() ? rank.end() : rank.find(src);
    if (!src.empty() && r == rank.end()) {
      it = entries_.erase(it);
      continue;
    }
    if (it->second.status != kUnchecked) {
      std::snprintf(err, sizeof(err), "%.6g",
                    std::isfinite(it->second.max_err) ? it->second.max_err : 1e30);
      (src.empty() ? lines : variant_lines[r->second])
          .push_back(std::string(it->second.status == kPassed ? "pass " : "fail ") + err + " " +
                     it->first);
    }
    ++it;
  }
  checked_sources_.erase(
      std::remove_if(checked_sources_.begin(), checked_sources_.end(),
                     [&](const std::string& s) { return rank.find(s) == rank.end(); }),
      checked_sources_.end());
  for (const auto& v : variant_lines) lines.insert(lines.end(), v.begin(), v.end());
  // A results file that cannot be written (a read-only cache folder) is
  // said once per process and file; the check's result stays in memory
  // and the call that triggered it goes on.
  if (!file_.write(lines, &why) && first_time("self-check write " + file_.path()))
    logf(VKATTN_LOG_WARNING, "cannot save self-check results: %s", why.c_str());
}

}  // namespace vkattn

#include "core/tuning_file.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/device.h"
#include "core/env.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/pipeline.h"
#include "core/platform.h"

namespace vkattn {

namespace {

std::string tuning_path(const Device& device) {
  if (auto f = get_env("VKATTN_TUNING_FILE"); f && !f->empty()) return *f;
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/tuning-" + DeviceFile::uuid_hex(device) + ".txt";
}

const char* const kFamilies[] = {"lanes", "tiled", "coopmat", "decode"};

}  // namespace

TuningFile::TuningFile(const Device& device) : file_(device, "tuning", tuning_path(device)) {
  enabled_ = env_switch("VKATTN_TUNING", true);
  if (!enabled_) return;
  std::string why;
  if (!load(&entries_, &why) && !why.empty() && log_enabled(kLogFiles) &&
      first_time("tuning " + file_.path() + " " + why))
    logf(VKATTN_LOG_INFO, "ignoring tuning file %s: %s (using the device table)",
         file_.path().c_str(), why.c_str());
}

void TuningFile::ignore(const std::string& key, const Entry& e, const std::string& why) const {
  if (log_enabled(kLogFiles) && first_time("tuning " + file_.path() + " " + key + " " + e.options))
    logf(VKATTN_LOG_INFO, "tuning file %s: ignoring entry \"%s %s\": %s (using the device table)",
         file_.path().c_str(), key.c_str(), e.options.c_str(), why.c_str());
}

bool TuningFile::apply(const std::string& options, KernelOptions* o) {
  if (options == "-") return true;
  KernelOptions t = *o;
  std::istringstream in(options);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return false;
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    if (name == "f16_math") {
      if (value != "0" && value != "1") return false;
      t.force_f16_math = value == "1";
      t.disable_f16_math = value == "0";
      continue;
    }
    if (name == "subgroup_ops") {
      if (value != "0" && value != "1") return false;
      t.disable_subgroup_ops = value == "0";
      continue;
    }
    // The knobs an entry may set: those with a file name.
    const KernelOptions::Knob* k = nullptr;
    for (const KernelOptions::Knob& c : KernelOptions::knobs())
      if (c.file && name == c.file) k = &c;
    if (!k) return false;
    uint32_t v = KernelOptions::kUnset;
    if (k->field == &KernelOptions::attn_kernel) {
      for (uint32_t i = 0; i < 4; ++i)
        if (value == kFamilies[i]) v = i;
    } else if (!value.empty() && value.size() < 10 &&
               value.find_first_not_of("0123456789") == std::string::npos) {
      v = static_cast<uint32_t>(std::stoul(value));
    }
    if (v == KernelOptions::kUnset) return false;
    t.*(k->field) = v;
  }
  *o = t;
  return true;
}

bool TuningFile::load(std::map<std::string, Entry>* out, std::string* why) const {
  std::vector<std::string> lines;
  if (!file_.load(&lines, why)) return false;
  std::map<std::string, Entry> got;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string key, options;
    Entry e;
    KernelOptions probe;
    if (!(in >> key >> options >> e.ms >> e.table_ms) || !apply(options, &probe)) {
      *why = "corrupt line \"" + line.substr(0, 80) + "\"";
      return false;
    }
    e.options = options;
    got[key] = e;
  }
  *out = std::move(got);
  return true;
}

bool TuningFile::find(const std::string& key, Entry* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  *out = it->second;
  return true;
}

bool TuningFile::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.empty();
}

std::map<std::string, TuningFile::Entry> TuningFile::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

bool TuningFile::put(const std::string& key, const Entry& e, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = e;
  std::map<std::string, Entry> disk;
  if (load(&disk, why))
    for (const auto& kv : disk) entries_.emplace(kv.first, kv.second);
  std::vector<std::string> lines;
  char t[64];
  for (const auto& kv : entries_) {
    std::snprintf(t, sizeof(t), " %.6g %.6g", kv.second.ms, kv.second.table_ms);
    lines.push_back(kv.first + " " + kv.second.options + t);
  }
  // No file (an empty VKATTN_PIPELINE_CACHE_DIR, no VKATTN_TUNING_FILE):
  // the entries live in memory, for this process's contexts.
  if (file_.path().empty()) return true;
  return file_.write(lines, why);
}

}  // namespace vkattn

#include "core/env.h"

#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/kernel_options.h"
#include "core/platform.h"

namespace vkattn {

namespace {

constexpr uint64_t kAny = ~uint64_t(0);
const std::vector<const char*> kFamilies = {"lanes", "tiled", "coopmat", "decode"};

std::vector<EnvVar> make_table() {
  using E = EnvVar;
  std::vector<EnvVar> t = {
      {"VKATTN_DEVICE", E::kDevice, E::kContext},
      {"VKATTN_PIPELINE_CACHE_DIR", E::kPath, E::kContext},
      {"VKATTN_TUNING_FILE", E::kPath, E::kContext},
      {"VKATTN_SHADERC_LIBRARY", E::kPath, E::kContext},
      {"VKATTN_LOG", E::kCategories, E::kContext},
      {"VKATTN_ATTN_KERNEL", E::kName, E::kContext, 0, 0, kFamilies},
      {"VKATTN_ATTN_KERNEL_DECODE", E::kName, E::kContext, 0, 0, kFamilies},
      {"VKATTN_ATTN_KERNEL_PREFILL", E::kName, E::kContext, 0, 0, kFamilies},
      {"VKATTN_ATTN_COMBINE", E::kName, E::kContext, 0, 0, {"rows", "words"}},
      {"VKATTN_PLAN_MEMORY", E::kName, E::kContext, 0, 0, {"host", "device"}},
      {"VKATTN_FAULT_KERNEL", E::kNames, E::kContext, 0, 0, kFamilies},
      {"VKATTN_CASCADE", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_BATCH_INVARIANT", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_SELF_CHECK", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_TUNING", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_UNMAPPED_DATA", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_SOFT_F16", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_DISABLE_COOPMAT", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_FULL_SUBGROUPS", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_DISABLE_SUBGROUP_OPS", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_DISABLE_F16_MATH", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_FORCE_F16_MATH", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_FAULT_ODD_STORES", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_FAULT_ROTATION", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_FAULT_USER", E::kSwitch, E::kContext, 0, 1},
      {"VKATTN_SCRATCH_BYTES", E::kNumber, E::kContext, 0, kAny},
      {"VKATTN_BINDING_LIMIT", E::kNumber, E::kContext, 0, kAny},
      {"VKATTN_DEVICE_COMPUTE_UNITS", E::kNumber, E::kContext, 0, 1u << 20},
      {"VKATTN_DEVICE_MEMORY_LIMIT", E::kNumber, E::kContext, 0, kAny},
      {"VKATTN_FAIL_ALLOC", E::kNumber, E::kContext, 0, kAny},
      {"VKATTN_FAULT_DEVICE_LOST", E::kNumber, E::kContext, 0, kAny},
      {"VKATTN_KV_BUFFER_BYTES", E::kNumber, E::kCache, 1, kAny},
      {"VKATTN_KV_WINDOW_BYTES", E::kNumber, E::kCache, 0, kAny},
  };
  // The kernel knobs (KernelOptions::knobs: their ranges are the tuning
  // file's too); 0..1 knobs are switches.
  for (const KernelOptions::Knob& k : KernelOptions::knobs()) {
    if (std::strcmp(k.env, "VKATTN_ATTN_KERNEL") == 0) continue;  // a name, above
    t.push_back({k.env, k.lo == 0 && k.hi == 1 ? E::kSwitch : E::kNumber, E::kContext, k.lo, k.hi});
  }
  return t;
}

// The value, or nullopt when unset or empty (both force nothing).
std::optional<std::string> value_of(const char* name) {
  std::optional<std::string> v = get_env(name);
  if (v && v->empty()) v.reset();
  return v;
}

[[noreturn]] void refuse(const EnvVar& var, const char* value, const std::string& what) {
  fail(VKATTN_ERROR_INVALID_ARGUMENT, var.name, "=\"", value, "\" ", what,
       " (docs/guide/environment.md)");
}

std::string set_of(const EnvVar& var) {
  std::string s;
  for (const char* n : var.names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

uint32_t name_index(const EnvVar& var, const std::string& v, const char* value) {
  for (size_t i = 0; i < var.names.size(); ++i)
    if (v == var.names[i]) return static_cast<uint32_t>(i);
  refuse(var, value,
         var.kind == EnvVar::kNames
             ? "names something outside " + set_of(var) + " (comma-separated)"
             : "is none of " + set_of(var));
}

// kNames: a bit per name of the comma-separated list.
uint32_t names_bits(const EnvVar& var, const char* v) {
  uint32_t bits = 0;
  for (const char* p = v;;) {
    const char* e = std::strchr(p, ',');
    bits |= 1u << name_index(var, std::string(p, e ? e : p + std::strlen(p)), v);
    if (!e) return bits;
    p = e + 1;
  }
}

uint64_t parse_number(const EnvVar& var, const char* v) {
  uint64_t x = 0;
  bool digits = *v != '\0', overflow = false;
  for (const char* p = v; *p; ++p) {
    if (*p < '0' || *p > '9') {
      digits = false;
      break;
    }
    const uint64_t d = uint64_t(*p - '0');
    if (x > (kAny - d) / 10) overflow = true;
    x = x * 10 + d;
  }
  const std::string range = std::to_string(var.lo) + ".." + std::to_string(var.hi);
  if (var.kind == EnvVar::kSwitch && (!digits || overflow || x > 1))
    refuse(var, v, "is not 0 or 1");
  if (!digits) refuse(var, v, "is not a whole number (" + range + ")");
  if (overflow || x < var.lo || x > var.hi) refuse(var, v, "is outside " + range);
  return x;
}

// Parses `var`'s value, throwing if it is not one the variable takes.
void check_value(const EnvVar& var, const char* v) {
  switch (var.kind) {
    case EnvVar::kSwitch:
    case EnvVar::kNumber:
      parse_number(var, v);
      break;
    case EnvVar::kName:
      name_index(var, v, v);
      break;
    case EnvVar::kNames:
      names_bits(var, v);
      break;
    case EnvVar::kPath:
    case EnvVar::kDevice:
    case EnvVar::kCategories:
      break;  // free text; VKATTN_DEVICE's are checked against the devices
  }
}

}  // namespace

const std::vector<EnvVar>& env_vars() {
  static const std::vector<EnvVar> t = make_table();
  return t;
}

const EnvVar& env_var(const char* name) {
  for (const EnvVar& v : env_vars())
    if (std::strcmp(v.name, name) == 0) return v;
  fail(VKATTN_ERROR_INTERNAL, "environment variable ", name, " is not in vkattn's table");
}

void check_env(EnvVar::Read when) {
  for (const EnvVar& var : env_vars())
    if (var.read == when)
      if (const auto v = value_of(var.name)) check_value(var, v->c_str());
}

bool env_switch(const char* name, bool fallback) {
  const auto v = value_of(name);
  return v ? parse_number(env_var(name), v->c_str()) != 0 : fallback;
}

uint64_t env_number(const char* name, uint64_t fallback) {
  const auto v = value_of(name);
  return v ? parse_number(env_var(name), v->c_str()) : fallback;
}

uint32_t env_name(const char* name, uint32_t fallback) {
  const auto v = value_of(name);
  return v ? name_index(env_var(name), *v, v->c_str()) : fallback;
}

uint32_t env_names(const char* name) {
  const auto v = value_of(name);
  return v ? names_bits(env_var(name), v->c_str()) : 0;
}

}  // namespace vkattn

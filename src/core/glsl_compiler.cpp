#include "core/glsl_compiler.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/platform.h"

namespace vkattn {

namespace {

// shaderc/shaderc.h's values that vkattn passes (stable since shaderc 2016).
constexpr int kComputeShader = 2;                        // shaderc_compute_shader
constexpr int kTargetVulkan = 0;                         // shaderc_target_env_vulkan
constexpr uint32_t kVulkan12 = (1u << 22) | (2u << 12);  // shaderc_env_version_vulkan_1_2
constexpr int kStatusSuccess = 0;                        // shaderc_compilation_status_success

struct IncludeResult {  // shaderc_include_result
  const char* source_name;
  size_t source_name_length;
  const char* content;
  size_t content_length;
  void* user_data;
};
using ResolveFn = IncludeResult* (*)(void*, const char*, int, const char*, size_t);
using ReleaseFn = void (*)(void*, IncludeResult*);

// One include answered: its name and text live as long as the result.
struct Included {
  IncludeResult r{};
  std::string name, text;
};

struct IncludeTable {
  const std::map<std::string, std::string>* files;
};

IncludeResult* resolve(void* user, const char* requested, int, const char*, size_t) {
  const auto* table = static_cast<IncludeTable*>(user);
  auto* inc = new Included;
  auto it = table->files->find(requested);
  if (it != table->files->end()) {
    inc->name = it->first, inc->text = it->second;
  } else {
    inc->text = std::string("no such include: ") + requested;  // (empty name: an error)
  }
  inc->r = {inc->name.c_str(), inc->name.size(), inc->text.c_str(), inc->text.size(), inc};
  return &inc->r;
}

void release(void*, IncludeResult* r) {
  if (r) delete static_cast<Included*>(r->user_data);
}

}  // namespace

struct GlslCompiler::Api {
  void* (*compiler_initialize)();
  void (*compiler_release)(void*);
  void* (*options_initialize)();
  void (*options_release)(void*);
  void (*add_macro)(void*, const char*, size_t, const char*, size_t);
  void (*set_target_env)(void*, int, uint32_t);
  void (*set_include_callbacks)(void*, ResolveFn, ReleaseFn, void*);
  void* (*compile_into_spv)(void*, const char*, size_t, int, const char*, const char*, void*);
  void (*result_release)(void*);
  size_t (*result_get_length)(void*);
  const char* (*result_get_bytes)(void*);
  int (*result_get_status)(void*);
  const char* (*result_get_error)(void*);
  void (*get_spv_version)(unsigned*, unsigned*);
};

const GlslCompiler* GlslCompiler::get(std::string* why) {
  static std::mutex m;
  // By library name; kept for the process, never destroyed: at exit the
  // module's own statics (glslang's) may be gone before these would be,
  // so a compiler is not released then (and stays reachable for leak
  // checkers).
  static auto& loaded = *new std::map<std::string, std::unique_ptr<GlslCompiler>>;
  static auto& failed = *new std::map<std::string, std::string>;  // name -> reason
  const std::optional<std::string> forced = get_env("VKATTN_SHADERC_LIBRARY");
  // vkattn's own module beside the library (then by name: an rpath or the
  // loader's path), else a shaderc of the system's.
  const std::string dir = module_dir_of(reinterpret_cast<const void*>(&GlslCompiler::get));
  const std::string beside = dir.empty() ? "" : dir + "/";
#ifdef _WIN32
  const std::vector<std::string> defaults = {beside + "vkattn_shaderc.dll", "shaderc_shared.dll"};
#else
  std::vector<std::string> defaults = {beside + "libvkattn_shaderc.so", "libvkattn_shaderc.so"};
#ifdef VKATTN_SHADERC_MODULE_PATHS
  // (The installed module and this build's: programs that link vkattn
  // statically are not beside it.)
  const std::string paths = VKATTN_SHADERC_MODULE_PATHS;
  for (size_t a = 0; a <= paths.size();) {
    const size_t b = std::min(paths.find(':', a), paths.size());
    if (b > a && paths.substr(a, b - a) != defaults[0]) defaults.push_back(paths.substr(a, b - a));
    a = b + 1;
  }
#endif
  defaults.push_back("libshaderc.so.1");
  defaults.push_back("libshaderc_shared.so.1");
#endif
  const std::vector<std::string> names =
      forced && !forced->empty() ? std::vector<std::string>{*forced} : defaults;
  std::lock_guard<std::mutex> lock(m);
  std::string reasons;
  for (const std::string& name : names) {
    auto it = loaded.find(name);
    if (it != loaded.end()) return it->second.get();
    auto f = failed.find(name);
    if (f != failed.end()) {
      reasons += (reasons.empty() ? "" : "; ") + f->second;
      continue;
    }
    std::string reason;
    void* lib = open_library(name, &reason);
    std::unique_ptr<GlslCompiler> c(new GlslCompiler);
    c->api_ = std::make_unique<Api>();
    Api& a = *c->api_;
    bool ok = lib != nullptr;
    // vkattn's module maps the names (its shaderc functions are hidden).
    using Lookup = void* (*)(const char*);
    const auto lookup =
        lib ? reinterpret_cast<Lookup>(library_symbol(lib, "vkattn_shaderc_symbol")) : nullptr;
    auto sym = [&](auto& fn, const char* s) {
      if (!ok) return;
      void* p = lookup ? lookup(s) : library_symbol(lib, s);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      if (!fn) ok = false, reason = name + " has no " + s;
    };
    sym(a.compiler_initialize, "shaderc_compiler_initialize");
    sym(a.compiler_release, "shaderc_compiler_release");
    sym(a.options_initialize, "shaderc_compile_options_initialize");
    sym(a.options_release, "shaderc_compile_options_release");
    sym(a.add_macro, "shaderc_compile_options_add_macro_definition");
    sym(a.set_target_env, "shaderc_compile_options_set_target_env");
    sym(a.set_include_callbacks, "shaderc_compile_options_set_include_callbacks");
    sym(a.compile_into_spv, "shaderc_compile_into_spv");
    sym(a.result_release, "shaderc_result_release");
    sym(a.result_get_length, "shaderc_result_get_length");
    sym(a.result_get_bytes, "shaderc_result_get_bytes");
    sym(a.result_get_status, "shaderc_result_get_compilation_status");
    sym(a.result_get_error, "shaderc_result_get_error_message");
    sym(a.get_spv_version, "shaderc_get_spv_version");
    if (ok && !(c->compiler_ = a.compiler_initialize()))
      ok = false, reason = name + ": shaderc_compiler_initialize failed";
    if (!ok) {
      failed[name] = reason;
      reasons += (reasons.empty() ? "" : "; ") + reason;
      continue;
    }
    unsigned spv = 0, rev = 0;
    a.get_spv_version(&spv, &rev);
    c->version_ = name + " spv " + std::to_string(spv >> 16) + "." +
                  std::to_string((spv >> 8) & 0xffu) + " rev " + std::to_string(rev);
    std::vector<uint32_t> words;
    std::string log;
    c->coopmat_ = c->compile("coopmat-probe",
                             "#version 450\n#extension GL_KHR_cooperative_matrix : require\n"
                             "layout(local_size_x = 32) in;\nvoid main() {}\n",
                             {}, {}, &words, &log);
    if (c->coopmat_) c->version_ += " coopmat";
    return (loaded[name] = std::move(c)).get();
  }
  *why = reasons;
  return nullptr;
}

bool GlslCompiler::compile(const std::string& name, const std::string& text,
                           const std::vector<std::pair<std::string, std::string>>& defines,
                           const std::map<std::string, std::string>& includes,
                           std::vector<uint32_t>* words, std::string* log) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Api& a = *api_;
  void* opts = a.options_initialize();
  if (!opts) {
    *log = "shaderc_compile_options_initialize failed";
    return false;
  }
  a.set_target_env(opts, kTargetVulkan, kVulkan12);
  for (const auto& [k, v] : defines) a.add_macro(opts, k.data(), k.size(), v.data(), v.size());
  IncludeTable table{&includes};
  a.set_include_callbacks(opts, &resolve, &release, &table);
  void* r = a.compile_into_spv(compiler_, text.data(), text.size(), kComputeShader, name.c_str(),
                               "main", opts);
  bool ok = false;
  if (!r) {
    *log = "shaderc_compile_into_spv returned no result";
  } else if (a.result_get_status(r) != kStatusSuccess) {
    const char* e = a.result_get_error(r);
    *log = e ? e : "compilation failed";
  } else {
    const size_t n = a.result_get_length(r);
    words->resize(n / 4);
    std::memcpy(words->data(), a.result_get_bytes(r), words->size() * 4);
    ok = n % 4 == 0 && !words->empty();
    if (!ok) *log = "the compiler returned no SPIR-V";
  }
  if (r) a.result_release(r);
  a.options_release(opts);
  return ok;
}

}  // namespace vkattn

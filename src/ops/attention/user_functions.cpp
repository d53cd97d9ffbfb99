#include "ops/attention/user_functions.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/glsl_compiler.h"
#include "core/log.h"
#include "core/platform.h"
#include "core/tensor.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// The compiler's messages with the user's lines named "line N" (the
// source sits under `#line 1` in "vkattn_user.glsl") and a sentence for
// the parameter accessors' undeclared slots.
std::string user_message(const std::string& log, const uint32_t (&dtypes)[4]) {
  std::string m = std::regex_replace(log, std::regex("vkattn_user\\.glsl:([0-9]+):"), "line $1:");
  std::smatch sm;
  if (std::regex_search(log, sm, std::regex("vkattn_param_(f32|i32)_([0-9]+)"))) {
    const std::string kind = sm[1].str();
    const int slot = std::stoi(sm[2].str());
    std::string have = "0 (unused)";
    if (slot < 4 && dtypes[slot] != 0) have = dtype_name(static_cast<vkattn_dtype>(dtypes[slot]));
    m = "the source reads slot " + sm[2].str() + " through vkattn_param_" + kind +
        (slot < 4 ? ", but param_dtypes[" + sm[2].str() + "] is " + have : ", but slots are 0..3") +
        "; " + m;
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// A probe's messages about the user's lines only (those about the probe's
// own call of the function say no more than "not callable so").
std::string probe_message(const std::string& log, const uint32_t (&dtypes)[4]) {
  std::string kept, line;
  for (size_t i = 0; i <= log.size(); ++i) {
    if (i < log.size() && log[i] != '\n') {
      line += log[i];
      continue;
    }
    if (!line.empty() && line.rfind("probe:", 0) != 0) kept += line + "\n";
    line.clear();
  }
  return kept.empty() ? "the source declares it with other parameters or another result"
                      : user_message(kept, dtypes);
}

// A compute shader that calls the functions the define PROBE names (1:
// mask, 2: score, 0: none), to check the source on its own.
const char* kProbe = R"(#version 450
layout(local_size_x = 1) in;
#include "vkattn_user.glsl"
layout(std430, binding = 0) buffer ProbeOut {
  float probe_out[];
};
void main() {
#if PROBE == 1
  probe_out[0] = vkattn_mask_mod(0u, 0u, 0, 0) ? 1.0 : 0.0;
#elif PROBE == 2
  probe_out[0] = vkattn_score_mod(0.0, 0u, 0u, 0, 0);
#endif
}
)";

// Every embedded shader and include by file name (cmake/embed_glsl.cmake).
const std::map<std::string, std::string>& embedded_glsl() {
  static const std::map<std::string, std::string> files = [] {
    std::map<std::string, std::string> m;
    size_t n = 0;
    const GlslText* all = all_glsl(&n);
    for (size_t i = 0; i < n; ++i) m[all[i].name] = all[i].text;
    return m;
  }();
  return files;
}

// The source without its comments (a block comment becomes one space).
std::string without_comments(const std::string& source) {
  std::string code;
  for (size_t i = 0; i < source.size();) {
    if (source.compare(i, 2, "//") == 0) {
      while (i < source.size() && source[i] != '\n') ++i;
    } else if (source.compare(i, 2, "/*") == 0) {
      const size_t end = source.find("*/", i + 2);
      i = end == std::string::npos ? source.size() : end + 2;
      code += ' ';
    } else {
      code += source[i++];
    }
  }
  return code;
}

// What a variant's functions may not name: declarations of memory or
// interfaces (layout, buffer, uniform, shared), writes and barriers
// (atomics, images, barriers), subgroup operations and built-in variables.
// They read only their arguments and parameters (vkattn.h), so a source
// cannot bind, read or write the kernels' own memory. Comments are
// skipped; "" when the source names none.
std::string forbidden_word(const std::string& source) {
  const std::string code = without_comments(source);
  static const std::regex word(
      "\\b(layout|buffer|uniform|shared|coherent|volatile|writeonly|barrier|memoryBarrier\\w*|"
      "groupMemoryBarrier|atomic\\w*|image\\w*|subgroup\\w*|gl_\\w+|vkattn_user_\\w+|"
      "debugPrintfEXT)\\b");
  std::smatch m;
  return std::regex_search(code, m, word) ? m[1].str() : "";
}

}  // namespace

// GLSL reaches a parameter only by its name: a definition whose body
// never names its second parameter (or leaves it unnamed) cannot read it.
bool mask_source_reads_head(const std::string& source) {
  const std::string code = without_comments(source);
  if (code.find('#') != std::string::npos) return true;
  static const std::regex def("\\bvkattn_mask_mod\\s*\\(([^)]*)\\)\\s*\\{");
  static const std::regex ident("[A-Za-z_][A-Za-z0-9_]*");
  bool found = false;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), def); it != std::sregex_iterator();
       ++it) {
    found = true;
    const std::string params = (*it)[1].str();
    std::vector<std::string> parts(1);
    for (char ch : params) {
      if (ch == ',')
        parts.emplace_back();
      else
        parts.back() += ch;
    }
    if (parts.size() != 4 || parts[1].find('[') != std::string::npos) return true;
    std::vector<std::string> words;
    for (auto w = std::sregex_iterator(parts[1].begin(), parts[1].end(), ident);
         w != std::sregex_iterator(); ++w)
      words.push_back(w->str());
    // "uint head", "in uint head", "const uint head"; "uint": unnamed.
    static const std::regex type_word("in|const|highp|mediump|lowp|uint|int");
    std::string name;
    if (!words.empty() && !std::regex_match(words.back(), type_word)) name = words.back();
    // The body: from its brace to the matching one.
    const size_t open = static_cast<size_t>(it->position(0) + it->length(0)) - 1;
    size_t close = open;
    for (int depth = 0; close < code.size(); ++close) {
      if (code[close] == '{') ++depth;
      if (code[close] == '}' && --depth == 0) break;
    }
    if (close >= code.size()) return true;
    if (!name.empty() && std::regex_search(code.begin() + open, code.begin() + close,
                                           std::regex("\\b" + name + "\\b")))
      return true;
  }
  return !found;
}

UserFunctions::UserFunctions(std::shared_ptr<Context> ctx, const vkattn_variant_desc& desc)
    : ctx_(std::move(ctx)) {
  require(desc.source != nullptr, "desc->source is NULL");
  for (uint32_t s = 0; s < 4; ++s) {
    const uint32_t d = desc.param_dtypes[s];
    if (d != 0 && d != VKATTN_F32 && d != VKATTN_I32)
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "desc->param_dtypes[", s, "] is ", d,
           ": 0 (unused), VKATTN_F32 or VKATTN_I32");
    dtypes_[s] = d;
  }
  source_ = desc.source;
  const std::string bad = forbidden_word(source_);
  if (!bad.empty())
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "desc->source uses '", bad,
         "': a variant's functions read only their arguments and their parameters "
         "(vkattn_param_f32/_i32); no memory, bindings, barriers or built-in variables");
  std::string why;
  compiler_ = GlslCompiler::get(&why);
  if (!compiler_)
    fail(VKATTN_ERROR_UNSUPPORTED,
         "attention variants (user functions) need a GLSL compiler at run time: vkattn's "
         "libvkattn_shaderc (built where libshaderc-dev, glslang-dev and spirv-tools are "
         "installed) or a shaderc shared library (VKATTN_SHADERC_LIBRARY names one), which this "
         "process could not load: ",
         why);
  uint64_t h = fnv1a(1469598103934665603ull, source_);
  for (uint32_t d : dtypes_) h = fnv1a(h, std::to_string(d) + ",");
  // (VKATTN_FAULT_USER: other modules, so other pipelines and check records.)
  fault_ = ctx_->options().fault_user;
  key_ = "u" + hex64(h) + (fault_ ? "_fault" : "");
  includes_ = embedded_glsl();
  includes_["vkattn_user.glsl"] = user_include();
  // The source alone, then each function called.
  std::vector<uint32_t> words;
  std::string log;
  if (!compile("probe", kProbe, {{"PROBE", "0"}}, &words, &log))
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "desc->source does not compile: ", user_message(log, dtypes_));
  std::string mask_log, score_log;
  mask_ = compile("probe", kProbe, {{"PROBE", "1"}}, &words, &mask_log);
  score_ = compile("probe", kProbe, {{"PROBE", "2"}}, &words, &score_log);
  // A function named but not callable as the header declares it.
  if (!mask_ && source_.find("vkattn_mask_mod") != std::string::npos)
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "desc->source: vkattn_mask_mod must be bool vkattn_mask_mod(uint seq, uint head, int "
         "q_pos, int k_pos): ",
         probe_message(mask_log, dtypes_));
  if (!score_ && source_.find("vkattn_score_mod") != std::string::npos)
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "desc->source: vkattn_score_mod must be float vkattn_score_mod(float score, uint seq, "
         "uint head, int q_pos, int k_pos): ",
         probe_message(score_log, dtypes_));
  mask_reads_head_ = mask_ && mask_source_reads_head(source_);
  if (!mask_ && !score_)
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "desc->source defines neither vkattn_mask_mod nor vkattn_score_mod");
  // Spliced into the lanes family (served on every device): a helper whose
  // name clashes with the shaders' own is found now, not at a call.
  (void)spirv("attention_fwd", false);
}

bool UserFunctions::compiler_knows_coopmat() const {
  return compiler_->knows_coopmat();
}

std::string UserFunctions::user_include() const {
  std::string t;
  // (The binding after the families' own: Pipelines::get adds it to a
  // runtime module's layout.)
  // A shader with other bindings than the families' (the self-check's
  // table, shaders/attention_variant_table.comp) defines its own number.
  t += "#ifndef VKATTN_USER_BINDING\n#define VKATTN_USER_BINDING " +
       std::to_string(fwd_bindings().size()) +
       "\n#endif\nlayout(std430, binding = VKATTN_USER_BINDING) readonly buffer VkattnUserParams "
       "{\n  uint vkattn_user_w[];\n};\n";
  // Words 0..3: each slot's first word; 4..7: its element count, read
  // once per invocation (vkattn_user_init, called first by every family's
  // main: each access then costs one load, not three).
  t += "uint vkattn_user_first[4], vkattn_user_count[4];\n"
       "void vkattn_user_init() {\n";
  for (int s = 0; s < 4; ++s) {
    const std::string n = std::to_string(s);
    t += "  vkattn_user_first[" + n + "] = vkattn_user_w[" + n + "];\n";
    t += "  vkattn_user_count[" + n + "] = vkattn_user_w[" + std::to_string(4 + s) + "];\n";
  }
  t += "}\n";
  t +=
      "uint vkattn_param_word(uint slot, uint index) {\n"
      "  return index < vkattn_user_count[slot] ? vkattn_user_w[vkattn_user_first[slot] + index] : "
      "0u;\n}\n";
  t += "#define vkattn_param_f32(slot, index) vkattn_param_f32_##slot(index)\n";
  t += "#define vkattn_param_i32(slot, index) vkattn_param_i32_##slot(index)\n";
  for (uint32_t s = 0; s < 4; ++s) {
    const std::string n = std::to_string(s);
    for (const char* suffix : {"", "u"}) {
      if (dtypes_[s] == VKATTN_F32)
        t += "float vkattn_param_f32_" + n + suffix +
             "(uint index) {\n  return uintBitsToFloat(vkattn_param_word(" + n + "u, index));\n}\n";
      if (dtypes_[s] == VKATTN_I32)
        t += "int vkattn_param_i32_" + n + suffix +
             "(uint index) {\n  return int(vkattn_param_word(" + n + "u, index));\n}\n";
    }
  }
  t += "#line 1\n";
  t += source_;
  t += "\n";
  return t;
}

bool UserFunctions::compile(const std::string& name, const std::string& main_text,
                            const std::vector<std::pair<std::string, std::string>>& defines,
                            std::vector<uint32_t>* words, std::string* log) const {
  return compiler_->compile(name, main_text, defines, includes_, words, log);
}

std::vector<uint32_t> UserFunctions::spirv(const std::string& shader, bool soft_f16) const {
  const std::string id = shader + (soft_f16 ? "_soft_f16" : "");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = compiled_.find(id);
  if (it != compiled_.end()) return it->second;
  const auto& files = embedded_glsl();
  auto text = files.find(shader + ".comp");
  if (text == files.end())
    fail(VKATTN_ERROR_INTERNAL, "shader ", shader, ".comp has no embedded GLSL");
  // On disk: one file per (shader, form, source and param_dtypes (key_),
  // compiler, vkattn build), beside the pipeline cache.
  const uint64_t h = fnv1a(1469598103934665603ull, id + "|" + key_ + "|" + compiler_->version() +
                                                       "|" + std::to_string(build_id()));
  const std::string dir = cache_dir();
  const std::string path = dir.empty() ? "" : dir + "/variant-" + hex64(h) + ".spv";
  std::vector<uint32_t> words;
  if (!path.empty()) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (bytes.size() >= 20 && bytes.size() % 4 == 0) {
        words.resize(bytes.size() / 4);
        std::memcpy(words.data(), bytes.data(), bytes.size());
        if (words[0] != 0x07230203u) words.clear();  // (not SPIR-V: compile again)
      }
    }
  }
  if (words.empty()) {
    std::vector<std::pair<std::string, std::string>> defines = {{"USER_FUNCTIONS", "1"},
                                                                {"USER_MASK", mask_ ? "1" : "0"},
                                                                {"USER_SCORE", score_ ? "1" : "0"}};
    if (soft_f16) defines.push_back({"VKATTN_SOFT_F16", "1"});
    if (fault_ && shader != kTableShader) defines.push_back({"USER_FAULT", "1"});
    const auto t0 = std::chrono::steady_clock::now();
    std::string messages;
    if (!compile(shader + ".comp", text->second, defines, &words, &messages))
      fail(VKATTN_ERROR_INVALID_ARGUMENT,
           "the attention variant's source (user functions) does not "
           "compile inside ",
           shader, ".comp: ", user_message(messages, dtypes_));
    if (log_enabled(kLogCompile))
      logf(
          VKATTN_LOG_INFO, "compile attention variant (user functions) %s into %s: %.0f ms",
          key_.c_str(), id.c_str(),
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::string why;
    if (!path.empty() &&
        !write_file_atomically(
            path, std::string(reinterpret_cast<const char*>(words.data()), words.size() * 4),
            &why) &&
        log_enabled(kLogFiles))
      log(VKATTN_LOG_INFO, "files: cannot keep a variant's SPIR-V: ", why);
  }
  return compiled_[id] = words;
}

}  // namespace vkattn

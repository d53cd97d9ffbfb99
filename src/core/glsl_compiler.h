// GLSL compiled at run time, for attention variants (user functions:
// ops/attention/user_functions.h): a real GLSL compiler used as a library,
// shaderc (glslang inside): vkattn's libvkattn_shaderc module
// (src/glsl/vkattn_shaderc.cpp) or a shaderc shared library, loaded with
// open_library when first needed so that vkattn links nothing new and a
// process without it loses only variants (UNSUPPORTED naming the library).
// Its C API is declared here by hand: a few opaque handles and calls whose
// ABI shaderc keeps stable (shaderc/shaderc.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vkattn {

class GlslCompiler {
 public:
  // The compiler of VKATTN_SHADERC_LIBRARY, else of the first of
  // libvkattn_shaderc (beside libvkattn, then the installed and build-tree
  // copies), libshaderc.so.1 and libshaderc_shared.so.1 that loads
  // (Windows: vkattn_shaderc.dll, shaderc_shared.dll); loaded once per
  // process and name. nullptr with the reasons (each name tried, the OS's
  // words) in *why.
  static const GlslCompiler* get(std::string* why);

  // Which compiler this is (the library's name and its SPIR-V version):
  // part of every cache key of what it compiled.
  const std::string& version() const { return version_; }
  // glslang 14 or later (GL_KHR_cooperative_matrix), judged by compiling
  // a probe that declares the extension.
  bool knows_coopmat() const { return coopmat_; }

  // Compiles compute shader `text` (named `name` in messages) for Vulkan
  // 1.2 with `defines` (name, value) and `includes` resolving #include
  // "file" by name. true: *words holds the SPIR-V; false: *log holds the
  // compiler's messages.
  bool compile(const std::string& name, const std::string& text,
               const std::vector<std::pair<std::string, std::string>>& defines,
               const std::map<std::string, std::string>& includes, std::vector<uint32_t>* words,
               std::string* log) const;

  struct Api;  // the resolved entry points (glsl_compiler.cpp)

 private:
  GlslCompiler() = default;
  std::unique_ptr<Api> api_;
  void* compiler_ = nullptr;
  std::string version_;
  bool coopmat_ = false;
  mutable std::mutex mutex_;  // one compile at a time per compiler
};

}  // namespace vkattn

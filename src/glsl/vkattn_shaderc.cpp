// libvkattn_shaderc: the GLSL compiler that attention variants (user
// functions) load at run time (src/core/glsl_compiler.cpp), built from
// shaderc's static libraries. Debian 12's libshaderc1 cannot be loaded on
// its own (it leaves glslang's and SPIRV-Tools' symbols undefined and
// names no library that has them), so vkattn links shaderc, glslang and
// SPIRV-Tools (libshaderc-dev, glslang-dev, spirv-tools) into this module.
// shaderc's archive keeps its C functions hidden; the one export maps
// their names to their addresses.
#include <shaderc/shaderc.h>

#include <cstring>

namespace {

struct Entry {
  const char* name;
  void* fn;
};

#define VKATTN_SHADERC_FN(f) \
  { #f, reinterpret_cast < void*>(&f) }
const Entry kEntries[] = {
    VKATTN_SHADERC_FN(shaderc_compiler_initialize),
    VKATTN_SHADERC_FN(shaderc_compiler_release),
    VKATTN_SHADERC_FN(shaderc_compile_options_initialize),
    VKATTN_SHADERC_FN(shaderc_compile_options_release),
    VKATTN_SHADERC_FN(shaderc_compile_options_add_macro_definition),
    VKATTN_SHADERC_FN(shaderc_compile_options_set_target_env),
    VKATTN_SHADERC_FN(shaderc_compile_options_set_include_callbacks),
    VKATTN_SHADERC_FN(shaderc_compile_into_spv),
    VKATTN_SHADERC_FN(shaderc_result_release),
    VKATTN_SHADERC_FN(shaderc_result_get_length),
    VKATTN_SHADERC_FN(shaderc_result_get_bytes),
    VKATTN_SHADERC_FN(shaderc_result_get_compilation_status),
    VKATTN_SHADERC_FN(shaderc_result_get_error_message),
    VKATTN_SHADERC_FN(shaderc_get_spv_version),
};
#undef VKATTN_SHADERC_FN

}  // namespace

extern "C" __attribute__((visibility("default"))) void* vkattn_shaderc_symbol(const char* name) {
  for (const Entry& e : kEntries)
    if (std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}

/* Preloaded into the sanitizer runs (tools/checks.sh): keeps the Vulkan
 * driver and layers mapped until the process exits, so that LeakSanitizer,
 * which reports at exit, can name their frames (the loader unloads them
 * when the last instance is destroyed) and tests/sanitizers/lsan.supp can
 * match them by library. RTLD_LOCAL: nothing of theirs interposes on the
 * loader's symbols. */
#include <dlfcn.h>

__attribute__((constructor)) static void vkattn_keep_loaded(void) {
  static const char* const libs[] = {
      "libvulkan.so.1",
      "libvulkan_lvp.so",
      "libVkLayer_khronos_validation.so",
      "libVkLayer_MESA_device_select.so",
  };
  for (unsigned i = 0; i < sizeof(libs) / sizeof(libs[0]); ++i)
    dlopen(libs[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

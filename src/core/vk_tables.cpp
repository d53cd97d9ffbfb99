#include "core/vk_tables.h"

#include "core/error.h"

// Defined in core/volk_impl.c, beside volk's own static loader.
extern "C" void vkattn_volk_load_device_table(VolkDeviceTable* table, PFN_vkGetDeviceProcAddr gdpa,
                                              VkDevice device);

namespace vkattn {

namespace {
template <typename Fn>
void load(Fn& fn, PFN_vkGetInstanceProcAddr gipa, VkInstance instance, const char* name,
          bool required) {
  fn = reinterpret_cast<Fn>(gipa(instance, name));
  if (!fn && required)
    fail(VKATTN_ERROR_INTERNAL, "the Vulkan loader returned no ", name, " for this instance");
}
}  // namespace

void load_instance_table(InstanceTable& t, PFN_vkGetInstanceProcAddr gipa, VkInstance instance,
                         bool debug_utils) {
  if (!gipa) fail(VKATTN_ERROR_INTERNAL, "vkGetInstanceProcAddr is NULL");
  t = InstanceTable{};
  t.vkGetInstanceProcAddr = gipa;
#define VKATTN_LOAD(name) load(t.name, gipa, instance, #name, true)
  VKATTN_LOAD(vkDestroyInstance);
  VKATTN_LOAD(vkEnumeratePhysicalDevices);
  VKATTN_LOAD(vkGetPhysicalDeviceProperties);
  VKATTN_LOAD(vkGetPhysicalDeviceProperties2);
  VKATTN_LOAD(vkGetPhysicalDeviceFeatures2);
  VKATTN_LOAD(vkGetPhysicalDeviceMemoryProperties);
  VKATTN_LOAD(vkGetPhysicalDeviceQueueFamilyProperties);
  VKATTN_LOAD(vkEnumerateDeviceExtensionProperties);
  VKATTN_LOAD(vkCreateDevice);
  VKATTN_LOAD(vkGetDeviceProcAddr);
#undef VKATTN_LOAD
  load(t.vkCreateDebugUtilsMessengerEXT, gipa, instance, "vkCreateDebugUtilsMessengerEXT",
       debug_utils);
  load(t.vkDestroyDebugUtilsMessengerEXT, gipa, instance, "vkDestroyDebugUtilsMessengerEXT",
       debug_utils);
}

void load_device_table(VolkDeviceTable& t, PFN_vkGetDeviceProcAddr gdpa, VkDevice device) {
  if (!gdpa) fail(VKATTN_ERROR_INTERNAL, "vkGetDeviceProcAddr is NULL");
  vkattn_volk_load_device_table(&t, gdpa, device);
  if (!t.vkCreateBuffer || !t.vkQueueSubmit || !t.vkCmdDispatch)
    fail(VKATTN_ERROR_INTERNAL, "the Vulkan driver returned no core device functions");
}

}  // namespace vkattn

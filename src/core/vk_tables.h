// Per-instance and per-device Vulkan function tables.
//
// volk's global function pointers are loaded once per process
// (volkInitialize: the loader's global entry points such as
// vkCreateInstance) and never again. Every instance-level and device-level
// call goes through the table of the object it is made on, loaded from that
// object's own vkGetInstanceProcAddr / vkGetDeviceProcAddr. Contexts on
// different instances (with or without VK_EXT_debug_utils), created and
// destroyed from several threads in any order, never share a pointer that
// another instance could overwrite or that the loader resolved to NULL for
// them.
#pragma once

#include <volk.h>

namespace vkattn {

// The instance-level functions vkattn calls. Optional ones (extensions) may
// be NULL when the instance did not enable them.
struct InstanceTable {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkDestroyInstance vkDestroyInstance = nullptr;
  PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices = nullptr;
  PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties = nullptr;
  PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2 = nullptr;
  PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2 = nullptr;
  PFN_vkGetPhysicalDeviceMemoryProperties vkGetPhysicalDeviceMemoryProperties = nullptr;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties = nullptr;
  PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties = nullptr;
  PFN_vkCreateDevice vkCreateDevice = nullptr;
  PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr = nullptr;
  // VK_EXT_debug_utils (validation contexts only).
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

// Loads `t` for `instance` through `gipa`. Throws INTERNAL naming a core
// function the loader does not provide, or a debug-utils function when
// `debug_utils` is set.
void load_instance_table(InstanceTable& t, PFN_vkGetInstanceProcAddr gipa, VkInstance instance,
                         bool debug_utils);

// Loads every device-level function volk knows for `device` through `gdpa`
// (the instance's vkGetDeviceProcAddr): unlike volkLoadDeviceTable it never
// reads volk's global pointers.
void load_device_table(VolkDeviceTable& t, PFN_vkGetDeviceProcAddr gdpa, VkDevice device);

}  // namespace vkattn

// A Vulkan instance + logical device + one compute queue, and what the
// kernels need to know about it. Owned by a Context through shared_ptr.
#pragma once

#include <volk.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/coopmat.h"
#include "core/vk_tables.h"
#include "vkattn/vkattn.h"

namespace vkattn {

class Buffer;

// Loads the Vulkan loader once per process (volk). Throws NO_DEVICE if there
// is none.
void ensure_vulkan_loader();

// Limits and features the kernels and the planner read.
struct DeviceCaps {
  uint32_t subgroup_size = 0;
  uint32_t max_shared_memory = 0;
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_texel_buffer_elements = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_workgroup_invocations = 0;
  uint64_t min_storage_offset_alignment = 1;
  uint64_t min_texel_offset_alignment = 1;
  uint64_t max_allocation_size = 0;
  float timestamp_period_ns = 0.0f;  // 0 if the queue has no timestamps
  uint8_t device_uuid[16] = {};      // VkPhysicalDeviceIDProperties::deviceUUID
  // VK_EXT_subgroup_size_control (core in Vulkan 1.3), as enabled on the
  // device: pipelines may require full subgroups (computeFullSubgroups)
  // and a subgroup size in [min, max] (subgroupSizeControl, for compute).
  bool full_subgroups = false;
  bool subgroup_size_control = false;
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
  bool shader_float16 = false;
  bool storage_16bit = false;
  // Subgroup shuffles (subgroupShuffleXor) in compute shaders.
  bool subgroup_shuffle = false;
  bool prefer_host_visible = false;  // UMA / CPU devices: tensors live in mapped memory
  // lavapipe's loop cap (core/loop_budget.h) applies: CPU devices. GPUs
  // run any loop to its end, so bounds kept only for the cap (keys per
  // decode item, splits per combine item) are lifted there.
  bool loop_capped = false;
  // VKATTN_UNMAPPED_DATA=1: data buffers (tensors, caches, scratch) are never
  // mapped, so reads and writes take the staging paths of a discrete GPU
  // (how lavapipe tests them).
  bool unmapped_data = false;
  // Streaming multiprocessors / compute units, where the driver says
  // (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties,
  // VK_ARM_shader_core_builtins) or VKATTN_DEVICE_COMPUTE_UNITS; 0: unknown.
  uint32_t compute_units = 0;
  // VK_KHR_cooperative_matrix (core/coopmat.h): enabled on vkattn's own
  // devices where usable; adopted devices: as the caller enabled it.
  CoopmatSupport coopmat;
  // VK_KHR_pipeline_executable_properties with pipelineExecutableInfo:
  // the compiler's statistics per pipeline (VKATTN_LOG=stats). Enabled on
  // vkattn's own devices where offered; adopted devices: as the caller
  // enabled it.
  bool pipeline_stats = false;
  // Pipelines are made from the shaders' _soft_f16 variants (f16 -> f32 by
  // integer arithmetic, shaders/include/dtype.glsl): a driver whose
  // compiler aborts on the conversion (core/device.cpp needs_soft_f16), or
  // VKATTN_SOFT_F16=1.
  bool soft_f16 = false;
};

// Fills `out` from a physical device (used with and without a context).
void describe_physical_device(const InstanceTable& vki, VkPhysicalDevice phys,
                              vkattn_device_info* out);

// Shared (enable_shared_from_this) so that every Buffer keeps its device
// alive: whatever order handles are destroyed in, no Vulkan object outlives
// the VkDevice it was made on.
// A caller's Vulkan objects and what its device was created with
// (vkattn_context_create_from_vulkan).
struct AdoptedVulkan {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  uint32_t api_version = 0;
  PFN_vkGetInstanceProcAddr gipa = nullptr;  // NULL: the loader's
  const VkPhysicalDeviceFeatures2* features = nullptr;
  const char* const* extensions = nullptr;
  uint32_t extension_count = 0;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  // index < 0: VKATTN_DEVICE, else the best device by type.
  static std::shared_ptr<Device> create(int32_t index, bool validation);
  // Uses the caller's objects, never destroys them. Throws UNSUPPORTED
  // naming a required feature the caller's device was created without.
  static std::shared_ptr<Device> adopt(const AdoptedVulkan& v);
  ~Device();
  // vkattn created the instance and device (and destroys them).
  bool owned() const { return owned_; }
  uint32_t instance_api_version() const { return instance_api_; }
  PFN_vkGetInstanceProcAddr get_instance_proc_addr() const { return vki_.vkGetInstanceProcAddr; }
  // The feature chain and extensions vkattn created its device with (for
  // vkattn_context_get_vulkan; adopted devices: copies of the caller's
  // extension names, and a chain of vkattn's own holding the features it
  // read from the caller's, the rest 0).
  const VkPhysicalDeviceFeatures2* enabled_features() const { return enabled_features_; }
  const std::vector<const char*>& enabled_extensions() const { return enabled_extensions_; }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Function tables of this instance and device (core/vk_tables.h).
  const InstanceTable& vki() const { return vki_; }
  const VolkDeviceTable& vk() const { return vk_; }
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const vkattn_device_info& info() const { return info_; }
  const DeviceCaps& caps() const { return caps_; }
  uint32_t validation_messages() const { return validation_messages_.load(); }

  // A memory type index with all `required` flags among `type_bits`,
  // preferring one that also has `preferred`; UINT32_MAX if none.
  uint32_t find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                            VkMemoryPropertyFlags preferred) const;
  uint32_t memory_type_count() const { return memory_.memoryTypeCount; }
  VkMemoryPropertyFlags memory_type_flags(uint32_t type) const {
    return memory_.memoryTypes[type].propertyFlags;
  }

  // Accounts a device allocation of `bytes` before it is made: throws
  // OUT_OF_DEVICE_MEMORY above VKATTN_DEVICE_MEMORY_LIMIT (read when the
  // device is created) or at an injected fault (core/faults.h).
  void charge_memory(uint64_t bytes);
  void refund_memory(uint64_t bytes);
  uint64_t memory_used() const { return memory_used_.load(); }

  // Tensor buffers vkattn made, by handle: wrapping one of them
  // (vkattn_tensor_wrap_vk_buffer of a handle vkattn_tensor_get_vk_buffer
  // gave) shares its Buffer, so stream order and mapping stay one.
  void register_buffer(const std::shared_ptr<Buffer>& b);
  void unregister_buffer(VkBuffer handle);
  std::shared_ptr<Buffer> find_buffer(VkBuffer handle);

 private:
  Device() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* user);

  InstanceTable vki_{};
  VolkDeviceTable vk_{};
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  vkattn_device_info info_{};
  DeviceCaps caps_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  std::atomic<uint32_t> validation_messages_{0};
  std::atomic<uint32_t> driver_error_reports_{0};
  uint64_t memory_limit_ = 0;  // 0: none
  bool owned_ = true;
  uint32_t instance_api_ = 0;
  // Features enabled at device creation (owned devices), or those read
  // from an adopted device's chain.
  VkPhysicalDeviceFeatures2 features2_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features f11_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  CoopmatFeatures coopmat_features_;
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sgsc_features_{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR stats_features_{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  const VkPhysicalDeviceFeatures2* enabled_features_ = nullptr;
  std::vector<const char*> enabled_extensions_;  // into extension_names_
  std::vector<std::string> extension_names_;
  void init_caps();  // info_, caps_, memory_ of physical_ (queue_family_ chosen)
  std::atomic<uint64_t> memory_used_{0};
  std::mutex registry_mutex_;
  std::unordered_map<VkBuffer, std::weak_ptr<Buffer>> registry_;
};

// A short-lived instance for enumeration without a context.
class EnumerationInstance {
 public:
  EnumerationInstance();
  ~EnumerationInstance();
  EnumerationInstance(const EnumerationInstance&) = delete;
  EnumerationInstance& operator=(const EnumerationInstance&) = delete;
  const std::vector<VkPhysicalDevice>& devices() const { return devices_; }
  const InstanceTable& vki() const { return vki_; }

 private:
  InstanceTable vki_{};
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices_;
};

}  // namespace vkattn

#include "core/device.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/buffer.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/platform.h"

namespace vkattn {

namespace {

std::mutex g_loader_mutex;
bool g_loader_ready = false;

const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_instance_extension(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// Creates an instance and loads its table into `vki`; on failure nothing is
// left behind.
VkInstance make_instance(bool validation, const VkDebugUtilsMessengerCreateInfoEXT* messenger,
                         InstanceTable& vki) {
  ensure_vulkan_loader();
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkattn";
  app.pEngineName = "vkattn";
  app.apiVersion = VK_API_VERSION_1_2;
  std::vector<const char*> layers, exts;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    exts.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (validation) {
    if (!has_layer(kValidationLayer))
      fail(VKATTN_ERROR_UNSUPPORTED,
           "VKATTN_CONTEXT_VALIDATION: the Khronos validation layer is not installed "
           "(Debian: vulkan-validationlayers)");
    if (!has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      fail(VKATTN_ERROR_UNSUPPORTED, "VKATTN_CONTEXT_VALIDATION: VK_EXT_debug_utils is missing");
    layers.push_back(kValidationLayer);
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    ci.pNext = messenger;
  }
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&ci, vk_allocator(), &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) fail(VKATTN_ERROR_NO_DEVICE, "no Vulkan driver found");
  check_vk(r, "vkCreateInstance");
  try {
    // vkGetInstanceProcAddr is the loader's own export, the same for every
    // instance; everything else comes from this instance.
    load_instance_table(vki, vkGetInstanceProcAddr, instance, validation);
  } catch (...) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(
        vkGetInstanceProcAddr(instance, "vkDestroyInstance"));
    if (destroy) destroy(instance, vk_allocator());
    throw;
  }
  return instance;
}

std::vector<VkPhysicalDevice> list_devices(const InstanceTable& vki, VkInstance instance) {
  uint32_t n = 0;
  check_vk(vki.vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devs(n);
  if (n)
    check_vk(vki.vkEnumeratePhysicalDevices(instance, &n, devs.data()),
             "vkEnumeratePhysicalDevices");
  devs.resize(n);
  return devs;
}

int type_rank(uint32_t type) {
  switch (type) {
    case VKATTN_DEVICE_DISCRETE_GPU:
      return 4;
    case VKATTN_DEVICE_INTEGRATED_GPU:
      return 3;
    case VKATTN_DEVICE_VIRTUAL_GPU:
      return 2;
    case VKATTN_DEVICE_CPU:
      return 1;
    default:
      return 0;
  }
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Resolves device_index / VKATTN_DEVICE / best-by-type to an index.
uint32_t choose_device(const InstanceTable& vki, const std::vector<VkPhysicalDevice>& devs,
                       int32_t index) {
  if (devs.empty()) fail(VKATTN_ERROR_NO_DEVICE, "no Vulkan device found");
  if (index >= 0) {
    if (static_cast<size_t>(index) >= devs.size())
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "device_index ", index, " out of range: ", devs.size(),
           " device(s)");
    return static_cast<uint32_t>(index);
  }
  std::vector<vkattn_device_info> infos(devs.size());
  for (size_t i = 0; i < devs.size(); ++i) describe_physical_device(vki, devs[i], &infos[i]);
  if (const auto env_value = get_env("VKATTN_DEVICE"); env_value && !env_value->empty()) {
    const char* env = env_value->c_str();
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (*end == '\0') {
      if (v < 0 || static_cast<size_t>(v) >= devs.size())
        fail(VKATTN_ERROR_INVALID_ARGUMENT, "VKATTN_DEVICE=", env, " out of range: ", devs.size(),
             " device(s)");
      return static_cast<uint32_t>(v);
    }
    std::string want = lower(env);
    for (size_t i = 0; i < devs.size(); ++i)
      if (lower(infos[i].name).find(want) != std::string::npos) return static_cast<uint32_t>(i);
    fail(VKATTN_ERROR_NO_DEVICE, "VKATTN_DEVICE=\"", env, "\" matches no device name");
  }
  uint32_t best = 0;
  for (uint32_t i = 1; i < devs.size(); ++i)
    if (type_rank(infos[i].device_type) > type_rank(infos[best].device_type)) best = i;
  return best;
}

uint32_t find_compute_queue(const InstanceTable& vki, VkPhysicalDevice phys) {
  uint32_t n = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, fams.data());
  // Prefer a compute-only family (async compute), else any with compute.
  for (uint32_t i = 0; i < n; ++i)
    if ((fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
        !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      return i;
  for (uint32_t i = 0; i < n; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  fail(VKATTN_ERROR_UNSUPPORTED, "device has no compute queue");
}

}  // namespace

void ensure_vulkan_loader() {
  std::lock_guard<std::mutex> lock(g_loader_mutex);
  if (g_loader_ready) return;
  if (volkInitialize() != VK_SUCCESS)
    fail(VKATTN_ERROR_NO_DEVICE, "the Vulkan loader (libvulkan.so.1) was not found");
  g_loader_ready = true;
}

void describe_physical_device(const InstanceTable& vki, VkPhysicalDevice phys,
                              vkattn_device_info* out) {
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  VkPhysicalDeviceProperties basic;
  vki.vkGetPhysicalDeviceProperties(phys, &basic);
  if (basic.apiVersion >= VK_API_VERSION_1_2) subgroup.pNext = &driver;
  vki.vkGetPhysicalDeviceProperties2(phys, &props);

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (basic.apiVersion >= VK_API_VERSION_1_2) {
    feats.pNext = &f11;
    f11.pNext = &f12;
    vki.vkGetPhysicalDeviceFeatures2(phys, &feats);
  }

  vkattn_device_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.name, sizeof(info.name), "%s", props.properties.deviceName);
  std::snprintf(info.driver_name, sizeof(info.driver_name), "%s", driver.driverName);
  std::snprintf(info.driver_info, sizeof(info.driver_info), "%s", driver.driverInfo);
  info.vendor_id = props.properties.vendorID;
  info.device_id = props.properties.deviceID;
  switch (props.properties.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      info.device_type = VKATTN_DEVICE_INTEGRATED_GPU;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      info.device_type = VKATTN_DEVICE_DISCRETE_GPU;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      info.device_type = VKATTN_DEVICE_VIRTUAL_GPU;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      info.device_type = VKATTN_DEVICE_CPU;
      break;
    default:
      info.device_type = VKATTN_DEVICE_OTHER;
  }
  info.api_version = props.properties.apiVersion;
  info.driver_version = props.properties.driverVersion;
  info.subgroup_size = subgroup.subgroupSize;
  info.max_shared_memory = props.properties.limits.maxComputeSharedMemorySize;
  info.max_buffer_range = props.properties.limits.maxStorageBufferRange;
  info.supports_f16 = f12.shaderFloat16 ? 1u : 0u;
  info.supports_16bit_storage = f11.storageBuffer16BitAccess ? 1u : 0u;
  info.supports_bf16 = 0;
  *out = info;
}

namespace {

// The device extensions init_caps reads properties or features of
// (properties of a supported extension may be queried without enabling it).
struct OfferedExtensions {
  bool nv_sm = false, amd_core = false, arm_core = false, coopmat = false, sgsc = false,
       stats = false;
};

OfferedExtensions offered_extensions(const InstanceTable& vki, VkPhysicalDevice physical) {
  uint32_t n = 0;
  vki.vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vki.vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, exts.data());
  exts.resize(n);
  OfferedExtensions o;
  for (const auto& e : exts) {
    const char* x = e.extensionName;
    o.nv_sm |= std::strcmp(x, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME) == 0;
    o.amd_core |= std::strcmp(x, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME) == 0;
    o.arm_core |= std::strcmp(x, "VK_ARM_shader_core_builtins") == 0;
    o.coopmat |= std::strcmp(x, kCoopmatExtension) == 0;
    o.sgsc |= std::strcmp(x, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0;
    o.stats |= std::strcmp(x, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0;
  }
  return o;
}

// The limits vkattn plans against.
void read_limits(DeviceCaps& c, const VkPhysicalDeviceLimits& lim, VkDeviceSize max_allocation) {
  c.max_shared_memory = lim.maxComputeSharedMemorySize;
  c.max_storage_buffer_range = lim.maxStorageBufferRange;
  c.max_texel_buffer_elements = lim.maxTexelBufferElements;
  for (int i = 0; i < 3; ++i) c.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  c.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  c.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
  c.min_texel_offset_alignment = lim.minTexelBufferOffsetAlignment;
  c.max_allocation_size = max_allocation;
  // Test option: smaller binding limits, so that windowed and split paths
  // run on small tensors (docs/guide/environment.md).
  // (At least 64 bytes: a window's alignment and slack are subtracted
  // from it, core/binding_window.h.)
  if (const uint64_t small = env_number("VKATTN_BINDING_LIMIT", 0)) {
    c.max_storage_buffer_range =
        std::min<uint64_t>(c.max_storage_buffer_range, std::max<uint64_t>(small, 64));
    c.max_texel_buffer_elements = static_cast<uint32_t>(
        std::min<uint64_t>(c.max_texel_buffer_elements, std::max<uint64_t>(small / 4, 64)));
  }
}

// Drivers whose shader compiler aborts the process compiling an f16 -> f32
// conversion (unpackHalf2x16), so no self-check can step in: lavapipe of
// Mesa 22 on aarch64 (Debian 12's Mesa 22.3 over LLVM 15: "LLVM ERROR:
// Cannot select: v4f32 = AArch64ISD::VLSHR" for f16 K/V, "v4f32 =
// truncate" for 8-bit caches' f16 scales). Their pipelines come from the
// _soft_f16 variants (DeviceCaps::soft_f16). Mesa 26.1 (LLVM 19) on
// aarch64 compiles the conversion. lavapipe runs on the CPU that runs
// vkattn, so the build's architecture is the device's.
bool needs_soft_f16(const vkattn_device_info& info) {
#if defined(__aarch64__)
  return info.device_type == VKATTN_DEVICE_CPU && std::strcmp(info.driver_name, "llvmpipe") == 0 &&
         (info.driver_version >> 22) <= 22;  // VK_MAKE_VERSION(Mesa's major, minor, patch)
#else
  (void)info;
  return false;
#endif
}

// Compute units where the vendor reports them (NVIDIA SMs, AMD CUs, Arm
// cores), else 0.
uint32_t compute_units_of(const VkPhysicalDeviceShaderSMBuiltinsPropertiesNV& nv_sm,
                          const VkPhysicalDeviceShaderCorePropertiesAMD& amd_core,
                          uint32_t arm_cores) {
  if (nv_sm.shaderSMCount) return nv_sm.shaderSMCount;
  if (amd_core.computeUnitsPerShaderArray)
    return amd_core.shaderEngineCount * amd_core.shaderArraysPerEngineCount *
           amd_core.computeUnitsPerShaderArray;
  return arm_cores;
}

}  // namespace

void Device::init_caps() {
  VkPhysicalDeviceProperties props;
  vki_.vkGetPhysicalDeviceProperties(physical_, &props);
  const auto& lim = props.limits;
  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  m3.pNext = &sg;
  // Compute units where the vendor reports them (properties of a supported
  // extension may be queried without enabling it).
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv_sm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd_core{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  // VK_ARM_shader_core_builtins' properties (not in Debian 12's headers:
  // the registry's layout, structure type 1000497001).
  struct ArmCoreBuiltins {
    VkStructureType sType;
    void* pNext;
    uint64_t shaderCoreMask;
    uint32_t shaderCoreCount;
    uint32_t shaderWarpsPerCore;
  } arm_core{static_cast<VkStructureType>(1000497001), nullptr, 0, 0, 0};
  const OfferedExtensions offered = offered_extensions(vki_, physical_);
  if (offered.nv_sm) nv_sm.pNext = sg.pNext, sg.pNext = &nv_sm;
  if (offered.amd_core) amd_core.pNext = sg.pNext, sg.pNext = &amd_core;
  if (offered.arm_core) arm_core.pNext = sg.pNext, sg.pNext = &arm_core;
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sgsc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  if (offered.sgsc) {
    sgsc.pNext = m3.pNext;
    m3.pNext = &sgsc;
  }
  // The device's identity (self-check results are kept per device UUID).
  VkPhysicalDeviceIDProperties idp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  idp.pNext = m3.pNext;
  m3.pNext = &idp;
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vki_.vkGetPhysicalDeviceProperties2(physical_, &p2);
  std::memcpy(caps_.device_uuid, idp.deviceUUID, sizeof(caps_.device_uuid));
  vki_.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  DeviceCaps& c = caps_;
  c.subgroup_size = info_.subgroup_size;
  read_limits(c, lim, m3.maxMemoryAllocationSize);
  c.shader_float16 = info_.supports_f16 != 0;
  c.storage_16bit = info_.supports_16bit_storage != 0;
  c.subgroup_shuffle = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  c.prefer_host_visible = info_.device_type != VKATTN_DEVICE_DISCRETE_GPU;
  c.loop_capped = info_.device_type == VKATTN_DEVICE_CPU;
  // Subgroup size control and pipeline statistics: what the device
  // supports (the device's creation enables them, an adopted device keeps
  // what its creator enabled), in one query of the offered extensions'
  // feature structs.
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT f{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fs{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  if (offered.sgsc || offered.stats) {
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    if (offered.sgsc) f.pNext = f2.pNext, f2.pNext = &f;
    if (offered.stats) fs.pNext = f2.pNext, f2.pNext = &fs;
    vki_.vkGetPhysicalDeviceFeatures2(physical_, &f2);
  }
  c.pipeline_stats = offered.stats && fs.pipelineExecutableInfo != VK_FALSE;
  if (offered.sgsc) {
    c.full_subgroups = f.computeFullSubgroups != VK_FALSE;
    c.subgroup_size_control = f.subgroupSizeControl != VK_FALSE &&
                              (sgsc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              sgsc.minSubgroupSize <= c.subgroup_size &&
                              c.subgroup_size <= sgsc.maxSubgroupSize;
    c.min_subgroup_size = sgsc.minSubgroupSize, c.max_subgroup_size = sgsc.maxSubgroupSize;
  }
  c.unmapped_data = env_switch("VKATTN_UNMAPPED_DATA", false);
  c.soft_f16 = env_switch("VKATTN_SOFT_F16", needs_soft_f16(info_));
  c.compute_units = compute_units_of(nv_sm, amd_core, arm_core.shaderCoreCount);
  // Tests and tuning: VKATTN_DEVICE_COMPUTE_UNITS=n stands for the count
  // (the planner's target of 2 workgroups per compute unit follows it).
  if (const uint64_t cu = env_number("VKATTN_DEVICE_COMPUTE_UNITS", 0))
    c.compute_units = static_cast<uint32_t>(cu);

  {
    uint32_t n = 0;
    vki_.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vki_.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, fams.data());
    if (lim.timestampComputeAndGraphics && fams[queue_family_].timestampValidBits > 0)
      c.timestamp_period_ns = lim.timestampPeriod;
  }

  // The kill switch skips the query too: no call through the loader's
  // trampoline for the extension's command (Debian 12's loader 1.3.239 jumped
  // to address 0 there under test_faults' injected allocation failures on an
  // H100, 2026-11-23).
  const bool coopmat_off = env_switch("VKATTN_DISABLE_COOPMAT", false);
  if (!coopmat_off) c.coopmat = query_coopmat(vki_, instance_, physical_, offered.coopmat);
  c.coopmat.disabled = coopmat_off;
  memory_limit_ = env_number("VKATTN_DEVICE_MEMORY_LIMIT", 0);
}

std::shared_ptr<Device> Device::create(int32_t index, bool validation) {
  std::shared_ptr<Device> d(new Device());
  VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = &Device::on_message;
  mci.pUserData = d.get();
  d->instance_ = make_instance(validation, &mci, d->vki_);
  const InstanceTable& vki = d->vki_;
  if (validation)
    check_vk(vki.vkCreateDebugUtilsMessengerEXT(d->instance_, &mci, vk_allocator(), &d->messenger_),
             "vkCreateDebugUtilsMessengerEXT");

  auto devs = list_devices(vki, d->instance_);
  d->physical_ = devs[choose_device(vki, devs, index)];
  describe_physical_device(vki, d->physical_, &d->info_);
  if (d->info_.api_version < VK_API_VERSION_1_2)
    fail(VKATTN_ERROR_UNSUPPORTED, "device \"", d->info_.name, "\" supports Vulkan ",
         VK_API_VERSION_MAJOR(d->info_.api_version), ".",
         VK_API_VERSION_MINOR(d->info_.api_version), "; vkattn needs 1.2");

  d->queue_family_ = find_compute_queue(vki, d->physical_);
  d->init_caps();
  d->instance_api_ = VK_API_VERSION_1_2;
  const DeviceCaps& c = d->caps_;
  // Timeline semaphores order vkattn's submissions after work recorded
  // into a caller's command buffer (external mode) and serve
  // vkattn_context_flush_with.
  VkPhysicalDeviceVulkan12Features have12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 have{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  have.pNext = &have12;
  vki.vkGetPhysicalDeviceFeatures2(d->physical_, &have);
  if (!have12.timelineSemaphore)
    fail(VKATTN_ERROR_UNSUPPORTED, "device \"", d->info_.name,
         "\" lacks timelineSemaphore (Vulkan 1.2), which vkattn needs");
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = d->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  d->f12_.shaderFloat16 = c.shader_float16 ? VK_TRUE : VK_FALSE;
  d->f12_.timelineSemaphore = VK_TRUE;
  d->f11_.storageBuffer16BitAccess = c.storage_16bit ? VK_TRUE : VK_FALSE;
  d->f11_.pNext = &d->f12_;
  d->features2_.pNext = &d->f11_;
  d->enabled_features_ = &d->features2_;
  // Cooperative matrices where usable (the coopmat family's shaders use
  // the Vulkan memory model).
  if (c.coopmat.usable()) {
    d->f12_.vulkanMemoryModel = VK_TRUE;
    d->f12_.vulkanMemoryModelDeviceScope = VK_TRUE;
    d->coopmat_features_.cooperativeMatrix = VK_TRUE;
    d->f12_.pNext = &d->coopmat_features_;
    d->extension_names_.push_back(kCoopmatExtension);
  }
  // Subgroup size control where offered (the coopmat family asks for full
  // subgroups of the size its matrix shapes were queried for).
  if (c.full_subgroups || c.subgroup_size_control) {
    d->sgsc_features_.computeFullSubgroups = c.full_subgroups ? VK_TRUE : VK_FALSE;
    d->sgsc_features_.subgroupSizeControl = c.subgroup_size_control ? VK_TRUE : VK_FALSE;
    d->sgsc_features_.pNext = d->f12_.pNext;
    d->f12_.pNext = &d->sgsc_features_;
    d->extension_names_.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  // Pipeline statistics where offered (read only under VKATTN_LOG=stats:
  // capturing them costs compile time, enabling the feature does not).
  if (c.pipeline_stats) {
    d->stats_features_.pipelineExecutableInfo = VK_TRUE;
    d->stats_features_.pNext = d->f12_.pNext;
    d->f12_.pNext = &d->stats_features_;
    d->extension_names_.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  }
  for (const std::string& e : d->extension_names_) d->enabled_extensions_.push_back(e.c_str());
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &d->features2_;
  dci.enabledExtensionCount = static_cast<uint32_t>(d->enabled_extensions_.size());
  dci.ppEnabledExtensionNames = d->enabled_extensions_.data();
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  check_vk(vki.vkCreateDevice(d->physical_, &dci, vk_allocator(), &d->device_), "vkCreateDevice");
  load_device_table(d->vk_, vki.vkGetDeviceProcAddr, d->device_);
  d->vk_.vkGetDeviceQueue(d->device_, d->queue_family_, 0, &d->queue_);
  return d;
}

namespace {

// The adopted queue's family exists and has compute.
void check_queue_family(const InstanceTable& vki, VkPhysicalDevice physical, uint32_t family) {
  uint32_t n = 0;
  vki.vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vki.vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, fams.data());
  require(family < n, "queue_family_index ", family, " out of range: ", n, " famil(ies)");
  if (!(fams[family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    fail(VKATTN_ERROR_UNSUPPORTED, "queue family ", family, " has no compute");
}

// What the caller of vkattn_context_create_from_vulkan enabled, read from
// its features chain (Vulkan cannot be asked).
struct EnabledFeatures {
  bool timeline = false, f16 = false, storage16 = false, memory_model = false, device_scope = false,
       coopmat = false, full_sg = false, sg_size = false, stats = false;
};

EnabledFeatures read_enabled_features(const VkPhysicalDeviceFeatures2* features) {
  EnabledFeatures e;
  if (!features) return e;
  require(features->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
          "enabled_features must point at a VkPhysicalDeviceFeatures2 (sType ",
          static_cast<int>(features->sType), ")");
  int guard = 0;
  for (auto* p = static_cast<const VkBaseInStructure*>(features->pNext); p; p = p->pNext) {
    require(++guard < 256, "enabled_features: the pNext chain does not end");
    switch (static_cast<int64_t>(p->sType)) {
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceVulkan12Features*>(p);
        e.timeline |= f->timelineSemaphore != 0;
        e.f16 |= f->shaderFloat16 != 0;
        e.memory_model |= f->vulkanMemoryModel != 0;
        e.device_scope |= f->vulkanMemoryModelDeviceScope != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceVulkanMemoryModelFeatures*>(p);
        e.memory_model |= f->vulkanMemoryModel != 0;
        e.device_scope |= f->vulkanMemoryModelDeviceScope != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR:
        e.stats |=
            reinterpret_cast<const VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*>(p)
                ->pipelineExecutableInfo != 0;
        break;
      case kCoopmatFeaturesSType:
        e.coopmat |= reinterpret_cast<const CoopmatFeatures*>(p)->cooperativeMatrix != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceSubgroupSizeControlFeaturesEXT*>(p);
        e.full_sg |= f->computeFullSubgroups != 0;
        e.sg_size |= f->subgroupSizeControl != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceVulkan13Features*>(p);
        e.full_sg |= f->computeFullSubgroups != 0;
        e.sg_size |= f->subgroupSizeControl != 0;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
        e.timeline |= reinterpret_cast<const VkPhysicalDeviceTimelineSemaphoreFeatures*>(p)
                          ->timelineSemaphore != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES:
        e.f16 |=
            reinterpret_cast<const VkPhysicalDeviceShaderFloat16Int8Features*>(p)->shaderFloat16 !=
            0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
        e.storage16 |= reinterpret_cast<const VkPhysicalDeviceVulkan11Features*>(p)
                           ->storageBuffer16BitAccess != 0;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
        e.storage16 |= reinterpret_cast<const VkPhysicalDevice16BitStorageFeatures*>(p)
                           ->storageBuffer16BitAccess != 0;
        break;
      default:
        break;
    }
  }
  return e;
}

}  // namespace

std::shared_ptr<Device> Device::adopt(const AdoptedVulkan& v) {
  std::shared_ptr<Device> d(new Device());
  d->owned_ = false;
  d->instance_api_ = v.api_version;
  require(v.instance && v.physical && v.device && v.queue,
          "instance, physical_device, device and queue must not be NULL");
  require(v.api_version >= VK_API_VERSION_1_2, "api_version ", VK_API_VERSION_MAJOR(v.api_version),
          ".", VK_API_VERSION_MINOR(v.api_version),
          " is below 1.2 (the instance's apiVersion; vkattn needs Vulkan 1.2)");
  PFN_vkGetInstanceProcAddr gipa = v.gipa;
  if (!gipa) {
    ensure_vulkan_loader();
    gipa = vkGetInstanceProcAddr;
  }
  d->instance_ = v.instance;
  load_instance_table(d->vki_, gipa, v.instance, false);
  const InstanceTable& vki = d->vki_;
  d->physical_ = v.physical;
  describe_physical_device(vki, d->physical_, &d->info_);
  if (d->info_.api_version < VK_API_VERSION_1_2)
    fail(VKATTN_ERROR_UNSUPPORTED, "device \"", d->info_.name, "\" supports Vulkan ",
         VK_API_VERSION_MAJOR(d->info_.api_version), ".",
         VK_API_VERSION_MINOR(d->info_.api_version), "; vkattn needs 1.2");
  check_queue_family(vki, d->physical_, v.queue_family);
  const EnabledFeatures en = read_enabled_features(v.features);
  if (!en.timeline)
    fail(VKATTN_ERROR_UNSUPPORTED,
         "the device was created without timelineSemaphore (VkPhysicalDeviceVulkan12Features or "
         "VkPhysicalDeviceTimelineSemaphoreFeatures in enabled_features), which vkattn needs");
  require(v.extension_count == 0 || v.extensions != nullptr,
          "enabled_extensions is NULL but enabled_extension_count is ", v.extension_count);
  for (uint32_t i = 0; i < v.extension_count; ++i) {
    require(v.extensions[i] != nullptr, "enabled_extensions[", i, "] is NULL");
    d->extension_names_.push_back(v.extensions[i]);
  }
  for (const std::string& e : d->extension_names_) d->enabled_extensions_.push_back(e.c_str());
  // The flags vkattn read, copied into a chain of its own: the caller's
  // chain may be gone once this call returns (vkattn_context_get_vulkan
  // hands back this copy).
  d->f12_.timelineSemaphore = VK_TRUE;
  d->f12_.shaderFloat16 = en.f16 ? VK_TRUE : VK_FALSE;
  d->f12_.vulkanMemoryModel = en.memory_model ? VK_TRUE : VK_FALSE;
  d->f12_.vulkanMemoryModelDeviceScope = en.device_scope ? VK_TRUE : VK_FALSE;
  d->f11_.storageBuffer16BitAccess = en.storage16 ? VK_TRUE : VK_FALSE;
  d->f11_.pNext = &d->f12_;
  d->features2_.pNext = &d->f11_;
  if (en.coopmat) {
    d->coopmat_features_.cooperativeMatrix = VK_TRUE;
    d->f12_.pNext = &d->coopmat_features_;
  }
  if (en.full_sg || en.sg_size) {
    d->sgsc_features_.computeFullSubgroups = en.full_sg ? VK_TRUE : VK_FALSE;
    d->sgsc_features_.subgroupSizeControl = en.sg_size ? VK_TRUE : VK_FALSE;
    d->sgsc_features_.pNext = d->f12_.pNext;
    d->f12_.pNext = &d->sgsc_features_;
  }
  if (en.stats) {
    d->stats_features_.pipelineExecutableInfo = VK_TRUE;
    d->stats_features_.pNext = d->f12_.pNext;
    d->f12_.pNext = &d->stats_features_;
  }
  d->enabled_features_ = &d->features2_;
  d->queue_family_ = v.queue_family;
  d->init_caps();
  // Subgroup size control only as the caller enabled it (its extension, or
  // Vulkan 1.3's features on a 1.3 device).
  auto enabled = [&](const char* name) {
    for (const std::string& e : d->extension_names_)
      if (e == name) return true;
    return false;
  };
  const bool sgsc_ext =
      (d->info_.api_version >= VK_API_VERSION_1_3 && v.api_version >= VK_API_VERSION_1_3) ||
      enabled(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  d->caps_.full_subgroups = d->caps_.full_subgroups && en.full_sg && sgsc_ext;
  d->caps_.subgroup_size_control = d->caps_.subgroup_size_control && en.sg_size && sgsc_ext;
  d->caps_.shader_float16 = d->caps_.shader_float16 && en.f16;
  d->caps_.storage_16bit = d->caps_.storage_16bit && en.storage16;
  // Pipeline statistics only as the caller enabled them.
  d->caps_.pipeline_stats = d->caps_.pipeline_stats && en.stats &&
                            enabled(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  // Cooperative matrices only as the caller enabled them.
  CoopmatSupport& cm = d->caps_.coopmat;
  cm.extension = cm.extension && enabled(kCoopmatExtension);
  cm.feature = cm.feature && en.coopmat;
  cm.memory_model = cm.memory_model && en.memory_model;
  cm.device_scope = cm.device_scope && en.device_scope;
  d->device_ = v.device;
  d->queue_ = v.queue;
  load_device_table(d->vk_, vki.vkGetDeviceProcAddr, d->device_);
  return d;
}

Device::~Device() {
  if (!owned_) return;  // the caller's objects
  if (device_ && vk_.vkDestroyDevice) {
    vk_.vkDeviceWaitIdle(device_);
    vk_.vkDestroyDevice(device_, vk_allocator());
  }
  if (messenger_) vki_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, vk_allocator());
  if (instance_) vki_.vkDestroyInstance(instance_, vk_allocator());
}

void Device::charge_memory(uint64_t bytes) {
  if (device_alloc_fails())
    fail(VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, "allocating ", bytes,
         " bytes of device memory failed (injected fault, VKATTN_FAIL_ALLOC)");
  uint64_t used = memory_used_.fetch_add(bytes) + bytes;
  if (memory_limit_ && used > memory_limit_) {
    memory_used_.fetch_sub(bytes);
    fail(VKATTN_ERROR_OUT_OF_DEVICE_MEMORY, "allocating ", bytes, " bytes would exceed ",
         "VKATTN_DEVICE_MEMORY_LIMIT=", memory_limit_, " (", used - bytes, " bytes in use)");
  }
}

void Device::refund_memory(uint64_t bytes) {
  memory_used_.fetch_sub(bytes);
}

void Device::register_buffer(const std::shared_ptr<Buffer>& b) {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  registry_[b->handle()] = b;
  b->registered = true;
}

void Device::unregister_buffer(VkBuffer handle) {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  registry_.erase(handle);
}

std::shared_ptr<Buffer> Device::find_buffer(VkBuffer handle) {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  auto it = registry_.find(handle);
  return it == registry_.end() ? nullptr : it->second.lock();
}

uint32_t Device::find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                                  VkMemoryPropertyFlags preferred) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Device::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                  void* user) {
  auto* self = static_cast<Device*>(user);
  const char* msg = data && data->pMessage ? data->pMessage : "(no message)";
  // Mesa's drivers report every error they return through the messenger
  // too (message id 0, the text is the VkResult's name): that is the
  // driver saying "out of memory", which vkattn already turns into a
  // status, not a usage error. Everything else counts.
  if (data && data->messageIdNumber == 0 && std::strncmp(msg, "VK_ERROR_", 9) == 0) {
    self->driver_error_reports_.fetch_add(1);
    return VK_FALSE;
  }
  self->validation_messages_.fetch_add(1);
  logf((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? VKATTN_LOG_ERROR
                                                                  : VKATTN_LOG_WARNING,
       "validation %s [%s]: %s",
       (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning",
       data && data->pMessageIdName ? data->pMessageIdName : "-", msg);
  return VK_FALSE;
}

EnumerationInstance::EnumerationInstance() {
  instance_ = make_instance(false, nullptr, vki_);
  try {
    devices_ = list_devices(vki_, instance_);
  } catch (...) {
    vki_.vkDestroyInstance(instance_, vk_allocator());
    throw;
  }
}

EnumerationInstance::~EnumerationInstance() {
  if (instance_) vki_.vkDestroyInstance(instance_, vk_allocator());
}

}  // namespace vkattn

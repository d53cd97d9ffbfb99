// VK_KHR_cooperative_matrix as vkattn uses it: what a device offers
// (queried with or without a context) and what its logical device must
// enable. The structures are declared here, with the registry's values,
// because Debian 12's Vulkan headers (1.3.239) predate the extension.
#pragma once

#include <volk.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/vk_tables.h"

namespace vkattn {

constexpr const char* kCoopmatExtension = "VK_KHR_cooperative_matrix";
constexpr VkStructureType kCoopmatFeaturesSType = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kCoopmatPropertiesSType = static_cast<VkStructureType>(1000506001);

// VkPhysicalDeviceCooperativeMatrixFeaturesKHR.
struct CoopmatFeatures {
  VkStructureType sType = kCoopmatFeaturesSType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

// One matrix shape: A is m x k, B k x n, C and the result m x n.
struct CoopmatShape {
  uint32_t m = 0, n = 0, k = 0;
};

// What a physical device offers for vkattn's coopmat kernels: f16 A and B,
// f32 C and result, subgroup scope (bf16 A/B needs VK_KHR_shader_bfloat16,
// which vkattn does not use yet).
struct CoopmatSupport {
  bool disabled = false;      // VKATTN_DISABLE_COOPMAT=1 (read when the device is created)
  bool extension = false;     // the device lists VK_KHR_cooperative_matrix
  bool feature = false;       // cooperativeMatrix
  bool memory_model = false;  // vulkanMemoryModel (the shaders use the Vulkan memory model)
  bool device_scope = false;  // vulkanMemoryModelDeviceScope (their barriers and atomics)
  std::vector<CoopmatShape> f16_shapes;
  // Usable: all three and at least one shape.
  bool usable() const {
    return !disabled && extension && feature && memory_model && device_scope && !f16_shapes.empty();
  }
  // Why not, in words (empty when usable).
  std::string missing() const;
};

// offered: the device lists kCoopmatExtension (the caller enumerated them).
CoopmatSupport query_coopmat(const InstanceTable& vki, VkInstance instance, VkPhysicalDevice phys,
                             bool offered);

// The shapes as "16x16x16, 16x8x16".
std::string describe_shapes(const std::vector<CoopmatShape>& shapes);

}  // namespace vkattn

#include "core/coopmat.h"

namespace vkattn {

namespace {

// VkCooperativeMatrixPropertiesKHR and its enums.
struct CoopmatProperties {
  VkStructureType sType = kCoopmatPropertiesSType;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;
};
constexpr uint32_t kComponentFloat16 = 0, kComponentFloat32 = 1;
constexpr uint32_t kScopeSubgroup = 3;
using PFN_GetCoopmatProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*,
                                                      CoopmatProperties*);

}  // namespace

std::string CoopmatSupport::missing() const {
  if (disabled) return "VKATTN_DISABLE_COOPMAT=1";
  if (!extension) return "VK_KHR_cooperative_matrix is not offered (or not enabled) on the device";
  if (!feature) return "cooperativeMatrix is not enabled on the device";
  if (!memory_model) return "vulkanMemoryModel is not enabled on the device";
  if (!device_scope) return "vulkanMemoryModelDeviceScope is not enabled on the device";
  if (f16_shapes.empty()) return "the device offers no f16 x f16 -> f32 subgroup matrix shape";
  return {};
}

CoopmatSupport query_coopmat(const InstanceTable& vki, VkInstance instance, VkPhysicalDevice phys,
                             bool offered) {
  CoopmatSupport s;
  s.extension = offered;
  if (!s.extension) return s;
  CoopmatFeatures cm;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.pNext = &cm;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f12;
  vki.vkGetPhysicalDeviceFeatures2(phys, &f2);
  s.feature = cm.cooperativeMatrix != VK_FALSE;
  s.memory_model = f12.vulkanMemoryModel != VK_FALSE;
  s.device_scope = f12.vulkanMemoryModelDeviceScope != VK_FALSE;
  auto get = reinterpret_cast<PFN_GetCoopmatProperties>(
      vki.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!get) {
    s.extension = false;  // the loader or the instance cannot reach it
    return s;
  }
  uint32_t count = 0;
  if (get(phys, &count, nullptr) != VK_SUCCESS) return s;
  std::vector<CoopmatProperties> props(count);
  if (get(phys, &count, props.data()) < VK_SUCCESS) return s;
  props.resize(count);
  for (const CoopmatProperties& p : props)
    if (p.AType == kComponentFloat16 && p.BType == kComponentFloat16 &&
        p.CType == kComponentFloat32 && p.ResultType == kComponentFloat32 &&
        p.scope == kScopeSubgroup && !p.saturatingAccumulation)
      s.f16_shapes.push_back({p.MSize, p.NSize, p.KSize});
  return s;
}

std::string describe_shapes(const std::vector<CoopmatShape>& shapes) {
  std::string out;
  for (const CoopmatShape& s : shapes) {
    if (!out.empty()) out += ", ";
    out += std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
  }
  return out.empty() ? "none" : out;
}

}  // namespace vkattn

#include "core/error.h"

namespace vkattn {

vkattn_status status_from_vk(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return VKATTN_SUCCESS;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return VKATTN_ERROR_OUT_OF_HOST_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
      return VKATTN_ERROR_OUT_OF_DEVICE_MEMORY;
    case VK_ERROR_DEVICE_LOST:
      return VKATTN_ERROR_DEVICE_LOST;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
      return VKATTN_ERROR_NO_DEVICE;
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
      return VKATTN_ERROR_UNSUPPORTED;
    default:
      return VKATTN_ERROR_INTERNAL;
  }
}

void check_vk(VkResult r, const char* what) {
  if (r != VK_SUCCESS)
    fail(status_from_vk(r), what, " failed (VkResult ", static_cast<int>(r), ")");
}

}  // namespace vkattn

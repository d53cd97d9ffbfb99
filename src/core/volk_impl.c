/* volk's loader implementation, compiled into libvkattn with hidden
 * visibility so it never clashes with a host application's own volk.
 *
 * vkattn calls volkInitialize once (the loader's global entry points) and
 * never volkLoadInstance/volkLoadDevice: instance and device functions live
 * in per-object tables (core/vk_tables.h). The device table is filled by
 * volk's generated loader, fed with the instance's own vkGetDeviceProcAddr
 * instead of volk's global one. */
#include <volk.c>

struct vkattn_device_loader {
  PFN_vkGetDeviceProcAddr get_device_proc_addr;
  VkDevice device;
};

static PFN_vkVoidFunction vkattn_device_stub(void* context, const char* name) {
  struct vkattn_device_loader* l = (struct vkattn_device_loader*)context;
  return l->get_device_proc_addr(l->device, name);
}

void vkattn_volk_load_device_table(struct VolkDeviceTable* table,
                                   PFN_vkGetDeviceProcAddr get_device_proc_addr, VkDevice device) {
  struct vkattn_device_loader l = {get_device_proc_addr, device};
  volkGenLoadDeviceTable(table, &l, vkattn_device_stub);
}

/* vkattn-info: lists the Vulkan devices vkattn sees, opens the default one
 * and does a tensor round trip. Run it first to check a machine. */
#include <stdio.h>
#include <string.h>

#include "vkattn/vkattn.h"

static const char* type_name(uint32_t t) {
  switch (t) {
    case VKATTN_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case VKATTN_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case VKATTN_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case VKATTN_DEVICE_CPU: return "CPU";
    default: return "other";
  }
}

static int check(vkattn_status s, const char* what) {
  if (s == VKATTN_SUCCESS) return 0;
  fprintf(stderr, "%s failed: %s (%s)\n", what, vkattn_status_string(s), vkattn_last_error());
  return 1;
}

int main(void) {
  uint32_t n = 0, i;
  vkattn_context* ctx = NULL;
  vkattn_device_info info;
  vkattn_tensor* t = NULL;
  int64_t shape[2] = {3, 5};
  float x[15], y[15];
  vkattn_device_info_init(&info); /* the library writes up to struct_size */

  printf("vkattn %u\n", vkattn_version());
  if (check(vkattn_device_count(&n), "vkattn_device_count")) return 1;
  for (i = 0; i < n; ++i) {
    if (check(vkattn_device_get_info(i, &info), "vkattn_device_get_info")) return 1;
    printf("device %u: %s (%s), driver %s %s, Vulkan %u.%u, subgroup %u, shared %u KiB, "
           "max buffer %llu MiB, f16 %s\n",
           i, info.name, type_name(info.device_type), info.driver_name, info.driver_info,
           info.api_version >> 22, (info.api_version >> 12) & 0x3ff, info.subgroup_size,
           info.max_shared_memory / 1024, (unsigned long long)(info.max_buffer_range >> 20),
           info.supports_f16 ? "yes" : "no");
  }
  if (check(vkattn_context_create(NULL, &ctx), "vkattn_context_create")) return 1;
  vkattn_context_get_device_info(ctx, &info);
  printf("default device: %s\n", info.name);
  for (i = 0; i < 15; ++i) x[i] = (float)i * 0.5f;
  if (check(vkattn_tensor_create(ctx, VKATTN_F32, 2, shape, &t), "vkattn_tensor_create") ||
      check(vkattn_tensor_write(t, x, sizeof(x)), "vkattn_tensor_write") ||
      check(vkattn_tensor_read(t, y, sizeof(y)), "vkattn_tensor_read"))
    return 1;
  printf("tensor round trip [3, 5] f32: %s\n", memcmp(x, y, sizeof(x)) == 0 ? "ok" : "MISMATCH");
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
  return memcmp(x, y, sizeof(x)) == 0 ? 0 : 1;
}

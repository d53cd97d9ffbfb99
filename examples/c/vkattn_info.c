/* vkattn-info: lists the Vulkan devices vkattn sees, opens the default one,
 * prints the kernels the device table picks there (the table's row and the
 * kernel of a few prefill and decode shapes; VKATTN_ATTN_* forcing applies)
 * and does a tensor round trip. Run it first to check a machine.
 * `vkattn-info --version` prints only "vkattn MAJOR.MINOR.PATCH" of the
 * library loaded (no device is opened).
 * `vkattn-info --json` prints the same as one JSON object for scripts:
 * {"version" (text, "0.5.0"), "version_number" (vkattn_version()), "devices": [{"index", "name",
 * "type", "driver_name", "driver_info", "vendor_id", "device_id", "api_version", "subgroup_size",
 * "max_shared_memory", "max_buffer_range", "f16", "storage_16bit"}],
 * "default_device", "kernels": {"row", "shapes": [{"shape", "kernel"}]},
 * "round_trip": "ok" | "mismatch"}; on an error it prints
 * {"error": status, "message"} and exits 1. */
#include <stdio.h>
#include <string.h>

#include "common/info_kernels.h"
#include "vkattn/vkattn.h"

static const char* type_name(uint32_t t) {
  switch (t) {
    case VKATTN_DEVICE_DISCRETE_GPU:
      return "discrete GPU";
    case VKATTN_DEVICE_INTEGRATED_GPU:
      return "integrated GPU";
    case VKATTN_DEVICE_VIRTUAL_GPU:
      return "virtual GPU";
    case VKATTN_DEVICE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

static int json = 0;
/* Where the JSON object is: 0 not begun, 1 inside "devices", 2 open after a
 * field, 3 open right after "devices". An error completes the object with
 * "error", "message", "call". */
static int json_state = 0;

/* "vkattn MAJOR.MINOR.PATCH" (JSON: "MAJOR.MINOR.PATCH") of the library
 * loaded, without a newline. */
static void print_version(void) {
  const uint32_t v = vkattn_version();
  printf("%s%u.%u.%u", json ? "" : "vkattn ", VKATTN_VERSION_GET_MAJOR(v),
         VKATTN_VERSION_GET_MINOR(v), VKATTN_VERSION_GET_PATCH(v));
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(const char* s) {
  putchar('"');
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static int check(vkattn_status s, const char* what) {
  if (s == VKATTN_SUCCESS) return 0;
  if (json) {
    static const char* const before[4] = {"{", "\n  ], ", ", ", ""};
    printf("%s", before[json_state]);
    printf("\"error\": ");
    json_string(vkattn_status_string(s));
    printf(", \"message\": ");
    json_string(vkattn_last_error());
    printf(", \"call\": ");
    json_string(what);
    printf("}\n");
  } else {
    fprintf(stderr, "%s failed: %s (%s)\n", what, vkattn_status_string(s), vkattn_last_error());
  }
  return 1;
}

static void print_device_json(uint32_t i, const vkattn_device_info* info) {
  printf("%s\n    {\"index\": %u, \"name\": ", i ? "," : "", i);
  json_string(info->name);
  printf(", \"type\": ");
  json_string(type_name(info->device_type));
  printf(", \"driver_name\": ");
  json_string(info->driver_name);
  printf(", \"driver_info\": ");
  json_string(info->driver_info);
  printf(
      ", \"vendor_id\": %u, \"device_id\": %u, \"api_version\": \"%u.%u\", "
      "\"subgroup_size\": %u, \"max_shared_memory\": %u, \"max_buffer_range\": %llu, "
      "\"f16\": %s, \"storage_16bit\": %s}",
      info->vendor_id, info->device_id, info->api_version >> 22, (info->api_version >> 12) & 0x3ff,
      info->subgroup_size, info->max_shared_memory, (unsigned long long)info->max_buffer_range,
      info->supports_f16 ? "true" : "false", info->supports_16bit_storage ? "true" : "false");
}

/* The device table's row and the kernel each report shape gets on ctx's
 * device: text, or the "kernels" object of --json. */
static void print_kernels(vkattn_context* ctx) {
  uint32_t i, n = vkattn_info_shape_count();
  if (!json) {
    printf("%s", vkattn_info_table_row(ctx));
    for (i = 0; i < n; ++i)
      printf("  %-44s %s\n", vkattn_info_shape_name(i), vkattn_info_shape_kernel(ctx, i));
    return;
  }
  printf("{\"row\": ");
  json_string(vkattn_info_table_row(ctx));
  printf(", \"shapes\": [");
  for (i = 0; i < n; ++i) {
    printf("%s{\"shape\": ", i ? ", " : "");
    json_string(vkattn_info_shape_name(i));
    printf(", \"kernel\": ");
    json_string(vkattn_info_shape_kernel(ctx, i));
    printf("}");
  }
  printf("]}");
}

/* What the first-use self-checks recorded for ctx's device, driver and
 * build, per kernel family: text, or the "self_check" object of --json. */
static void print_self_checks(vkattn_context* ctx) {
  static const char* const names[4] = {"lanes", "tiled", "coopmat", "decode"};
  uint32_t f, passed, failed;
  if (!json) printf("self-check results (this device, driver and vkattn build):\n");
  for (f = 0; f < 4; ++f) {
    if (vkattn_context_self_check_counts(ctx, f, &passed, &failed) != VKATTN_SUCCESS)
      passed = failed = 0;
    if (json)
      printf("%s\"%s\": {\"passed\": %u, \"failed\": %u}", f ? ", " : "{", names[f], passed,
             failed);
    else if (passed + failed == 0)
      printf("  %-8s unchecked\n", names[f]);
    else
      printf("  %-8s %u pipeline(s) passed, %u failed%s\n", names[f], passed, failed,
             failed ? " (never used on this device)" : "");
  }
  if (json) printf("}");
}

int main(int argc, char** argv) {
  uint32_t n = 0, i;
  int same;
  vkattn_context* ctx = NULL;
  vkattn_device_info info;
  vkattn_tensor* t = NULL;
  int64_t shape[2] = {3, 5};
  float x[15], y[15];
  vkattn_device_info_init(&info); /* the library writes up to struct_size */
  for (i = 1; i < (uint32_t)argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--version") == 0 && argc == 2) {
      print_version();
      printf("\n");
      return 0;
    } else {
      fprintf(stderr, "usage: vkattn-info [--json | --version]\n");
      return 2;
    }
  }

  if (check(vkattn_device_count(&n), "vkattn_device_count")) return 1;
  if (json) {
    printf("{\"version\": \"");
    print_version();
    printf("\", \"version_number\": %u, \"devices\": [", vkattn_version());
    json_state = 1;
  } else {
    print_version();
    printf("\n");
  }
  for (i = 0; i < n; ++i) {
    if (check(vkattn_device_get_info(i, &info), "vkattn_device_get_info")) return 1;
    if (json) {
      print_device_json(i, &info);
      continue;
    }
    printf(
        "device %u: %s (%s), driver %s %s, Vulkan %u.%u, subgroup %u, shared %u KiB, "
        "max buffer %llu MiB, f16 %s\n",
        i, info.name, type_name(info.device_type), info.driver_name, info.driver_info,
        info.api_version >> 22, (info.api_version >> 12) & 0x3ff, info.subgroup_size,
        info.max_shared_memory / 1024, (unsigned long long)(info.max_buffer_range >> 20),
        info.supports_f16 ? "yes" : "no");
  }
  if (json) {
    printf("\n  ], ");
    json_state = 3;
  }
  if (check(vkattn_context_create(NULL, &ctx), "vkattn_context_create")) return 1;
  vkattn_context_get_device_info(ctx, &info);
  if (json) {
    printf("\"default_device\": ");
    json_string(info.name);
    printf(", \"kernels\": ");
    print_kernels(ctx);
    printf(", \"self_check\": ");
    print_self_checks(ctx);
    json_state = 2;
  } else {
    printf("default device: %s\n", info.name);
    print_kernels(ctx);
    print_self_checks(ctx);
  }
  for (i = 0; i < 15; ++i) x[i] = (float)i * 0.5f;
  if (check(vkattn_tensor_create(ctx, VKATTN_F32, 2, shape, &t), "vkattn_tensor_create") ||
      check(vkattn_tensor_write(t, x, sizeof(x)), "vkattn_tensor_write") ||
      check(vkattn_tensor_read(t, y, sizeof(y)), "vkattn_tensor_read"))
    return 1;
  same = memcmp(x, y, sizeof(x)) == 0;
  if (json)
    printf(", \"round_trip\": \"%s\"}\n", same ? "ok" : "mismatch");
  else
    printf("tensor round trip [3, 5] f32: %s\n", same ? "ok" : "MISMATCH");
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
  return same ? 0 : 1;
}

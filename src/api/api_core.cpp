// extern "C" shims for errors, version, devices, contexts and tensors.
// They only validate and translate; the work is in src/core.
#include <cstring>
#include <string>

#include "api/firewall.h"
#include "api/handles.h"
#include "core/abi.h"
#include "core/context.h"
#include "core/device.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/tensor.h"

namespace vkattn {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const char* function, const char* message) {
  t_last_error = std::string(function) + ": " + message;
}

}  // namespace vkattn

using namespace vkattn;

extern "C" {

VKATTN_API const char* vkattn_status_string(vkattn_status status) {
  switch (raw_enum(status)) {
    case VKATTN_SUCCESS:
      return "success";
    case VKATTN_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case VKATTN_ERROR_UNSUPPORTED:
      return "unsupported";
    case VKATTN_ERROR_OUT_OF_HOST_MEMORY:
      return "out of host memory";
    case VKATTN_ERROR_OUT_OF_DEVICE_MEMORY:
      return "out of device memory";
    case VKATTN_ERROR_CACHE_FULL:
      return "kv cache full";
    case VKATTN_ERROR_NO_DEVICE:
      return "no device";
    case VKATTN_ERROR_DEVICE_LOST:
      return "device lost";
    case VKATTN_ERROR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

VKATTN_API const char* vkattn_last_error(void) {
  return t_last_error.c_str();
}

VKATTN_API uint32_t vkattn_version(void) {
  return VKATTN_VERSION;
}

VKATTN_API void vkattn_set_log_callback(vkattn_log_fn fn, void* user) {
  set_log_sink(fn, user);
}

VKATTN_API vkattn_status vkattn_device_count(uint32_t* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(out);
    uint32_t n = 0;
    try {
      EnumerationInstance inst;
      n = static_cast<uint32_t>(inst.devices().size());
    } catch (const Error& e) {
      if (e.status() != VKATTN_ERROR_NO_DEVICE) throw;
    }
    *out = n;
  });
}

VKATTN_API void vkattn_device_info_init(vkattn_device_info* info) {
  if (!info) return;
  std::memset(info, 0, sizeof(*info));
  info->struct_size = sizeof(*info);
}

VKATTN_API vkattn_status vkattn_device_get_info(uint32_t index, vkattn_device_info* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(out);
    check_out_size(out, kDeviceInfoSizes, "out", "vkattn_device_info_init");
    EnumerationInstance inst;
    require(index < inst.devices().size(), "device index ", index,
            " out of range: ", inst.devices().size(), " device(s)");
    vkattn_device_info info;
    describe_physical_device(inst.vki(), inst.devices()[index], &info);
    write_out(out, info, kDeviceInfoSizes, "out", "vkattn_device_info_init");
  });
}

VKATTN_API void vkattn_context_desc_init(vkattn_context_desc* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
  desc->device_index = -1;
}

VKATTN_API vkattn_status vkattn_context_create(const vkattn_context_desc* desc,
                                               vkattn_context** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(out);
    vkattn_context_desc d;
    vkattn_context_desc_init(&d);
    if (desc)
      d = read_desc(desc, kContextDescSizes, &vkattn_context_desc_init, "desc",
                    "vkattn_context_desc_init");
    require(d.device_index >= -1, "device_index ", d.device_index, " is invalid (-1 = default)");
    require((d.flags & ~(VKATTN_CONTEXT_VALIDATION | VKATTN_CONTEXT_PROFILING |
                         VKATTN_CONTEXT_BATCH_INVARIANT)) == 0,
            "unknown flags 0x", std::hex, d.flags);
    require(d.reserved == 0, "reserved must be 0");
    host_alloc_point();
    auto handle = std::make_unique<vkattn_context>();
    handle->impl =
        std::make_shared<Context>(d.device_index, (d.flags & VKATTN_CONTEXT_VALIDATION) != 0,
                                  (d.flags & VKATTN_CONTEXT_PROFILING) != 0);
    if (d.flags & VKATTN_CONTEXT_BATCH_INVARIANT) handle->impl->set_batch_invariant();
    *out = handle.release();
  });
}

VKATTN_API void vkattn_context_destroy(vkattn_context* ctx) {
  if (!ctx) return;
  // In external mode (or with external work pending) the recorder's
  // destructor waits for the device instead of a caller's semaphore.
  guard_void(__func__, [&] { ctx->impl->recorder().drain(); });
  delete ctx;
}

VKATTN_API vkattn_status vkattn_context_flush(vkattn_context* ctx) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().flush();  // fails with DEVICE_LOST once lost
  });
}

VKATTN_API vkattn_status vkattn_context_synchronize(vkattn_context* ctx) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    ctx->impl->recorder().synchronize();
  });
}

VKATTN_API vkattn_status vkattn_context_get_device_info(vkattn_context* ctx,
                                                        vkattn_device_info* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    ctx->impl->recorder().check_alive();
    write_out(out, ctx->impl->device().info(), kDeviceInfoSizes, "out", "vkattn_device_info_init");
  });
}

VKATTN_API vkattn_status vkattn_context_validation_messages(vkattn_context* ctx, uint32_t* out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    ctx->impl->recorder().check_alive();
    *out = ctx->impl->device().validation_messages();
  });
}

VKATTN_API vkattn_status vkattn_context_last_gpu_time(vkattn_context* ctx, uint64_t* out_ns) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out_ns);
    ctx->impl->recorder().check_alive();
    *out_ns = ctx->impl->recorder().last_gpu_ns();
  });
}

VKATTN_API size_t vkattn_dtype_size(vkattn_dtype dtype) {
  const int64_t raw = raw_enum(dtype);
  return known_dtype(raw) ? dtype_size(dtype) : 0;
}

VKATTN_API vkattn_status vkattn_tensor_create(vkattn_context* ctx, vkattn_dtype dtype,
                                              uint32_t ndim, const int64_t* shape,
                                              vkattn_tensor** out) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(ctx);
    VKATTN_REQUIRE_ARG(out);
    ctx->impl->recorder().check_alive();
    const int64_t raw = raw_enum(dtype);
    require(known_dtype(raw), "unknown dtype ", raw);
    host_alloc_point();
    auto handle = std::make_unique<vkattn_tensor>();
    handle->impl = std::make_shared<Tensor>(ctx->impl, dtype, ndim, shape);
    *out = handle.release();
  });
}

VKATTN_API void vkattn_tensor_destroy(vkattn_tensor* tensor) {
  delete tensor;
}

VKATTN_API vkattn_status vkattn_tensor_write(vkattn_tensor* tensor, const void* src,
                                             size_t nbytes) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(tensor);
    Tensor& t = *tensor->impl;
    require(nbytes == t.nbytes(), "nbytes ", nbytes, " != tensor size ", t.nbytes());
    require(src != nullptr || nbytes == 0, "src is NULL");
    t.context().recorder().check_alive();
    require_not_external(t.context(), "vkattn_tensor_write");
    t.write(src);
  });
}

VKATTN_API vkattn_status vkattn_tensor_read(vkattn_tensor* tensor, void* dst, size_t nbytes) {
  return guard(__func__, [&] {
    VKATTN_REQUIRE_ARG(tensor);
    Tensor& t = *tensor->impl;
    require(nbytes == t.nbytes(), "nbytes ", nbytes, " != tensor size ", t.nbytes());
    require(dst != nullptr || nbytes == 0, "dst is NULL");
    t.context().recorder().check_alive();
    require_not_external(t.context(), "vkattn_tensor_read");
    t.read(dst);
  });
}

VKATTN_API vkattn_dtype vkattn_tensor_dtype(const vkattn_tensor* tensor) {
  return tensor ? tensor->impl->dtype() : static_cast<vkattn_dtype>(0);
}

VKATTN_API uint32_t vkattn_tensor_ndim(const vkattn_tensor* tensor) {
  return tensor ? tensor->impl->ndim() : 0;
}

VKATTN_API int64_t vkattn_tensor_shape(const vkattn_tensor* tensor, uint32_t dim) {
  return tensor ? tensor->impl->dim(dim) : -1;
}

VKATTN_API size_t vkattn_tensor_nbytes(const vkattn_tensor* tensor) {
  return tensor ? tensor->impl->nbytes() : 0;
}

}  // extern "C"

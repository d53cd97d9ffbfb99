/*
 * vkattn — LLM attention as Vulkan compute shaders behind a C ABI.
 *
 * One C99 header. Every fallible call returns a vkattn_status; on failure the
 * thread-local vkattn_last_error() says why, and outputs are left untouched.
 * No call keeps a pointer to caller memory after it returns.
 *
 * Threading: a context is externally synchronized (one thread at a time, like
 * a VkQueue); every object created from a context shares its rule. Separate
 * contexts are independent and may be used from different threads.
 *
 * Ownership: objects keep their context alive, so objects and contexts may
 * be destroyed in any order; device memory is freed when the last of them is
 * gone and the GPU no longer uses it.
 *
 * Execution model: work is recorded, not run, until the caller flushes,
 * synchronizes or reads a tensor back. Calls behave like a stream: a
 * vkattn_tensor_write is ordered after work already recorded.
 */
#ifndef VKATTN_VKATTN_H_
#define VKATTN_VKATTN_H_

#include <stddef.h>
#include <stdint.h>

#define VKATTN_VERSION_MAJOR 0
#define VKATTN_VERSION_MINOR 1
#define VKATTN_VERSION_PATCH 0

#if defined(_WIN32)
#if defined(VKATTN_BUILDING)
#define VKATTN_API __declspec(dllexport)
#else
#define VKATTN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define VKATTN_API __attribute__((visibility("default")))
#else
#define VKATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Errors and version                                                        */
/* ------------------------------------------------------------------------ */

/* Status codes. Values are explicit and never reused. */
typedef enum vkattn_status {
  VKATTN_SUCCESS = 0,
  VKATTN_ERROR_INVALID_ARGUMENT = 1,
  VKATTN_ERROR_UNSUPPORTED = 2,
  VKATTN_ERROR_OUT_OF_HOST_MEMORY = 3,
  VKATTN_ERROR_OUT_OF_DEVICE_MEMORY = 4,
  VKATTN_ERROR_CACHE_FULL = 5,
  VKATTN_ERROR_NO_DEVICE = 6,
  VKATTN_ERROR_DEVICE_LOST = 7,
  VKATTN_ERROR_INTERNAL = 8
} vkattn_status;

/* Static text for a status code ("unknown status" for unknown values). */
VKATTN_API const char* vkattn_status_string(vkattn_status status);

/* Message of this thread's last failed call ("" if none). The pointer stays
 * valid until the next vkattn call on this thread. */
VKATTN_API const char* vkattn_last_error(void);

/* major*10000 + minor*100 + patch of the library actually loaded. */
VKATTN_API uint32_t vkattn_version(void);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum vkattn_device_type {
  VKATTN_DEVICE_OTHER = 0,
  VKATTN_DEVICE_INTEGRATED_GPU = 1,
  VKATTN_DEVICE_DISCRETE_GPU = 2,
  VKATTN_DEVICE_VIRTUAL_GPU = 3,
  VKATTN_DEVICE_CPU = 4
} vkattn_device_type;

/* Filled wholly by the library (struct_size is set to sizeof this struct). */
typedef struct vkattn_device_info {
  uint32_t struct_size;
  char name[256];
  char driver_name[256];
  char driver_info[256];
  uint32_t vendor_id;
  uint32_t device_id;
  uint32_t device_type;        /* vkattn_device_type */
  uint32_t api_version;        /* VK_MAKE_API_VERSION encoding */
  uint32_t driver_version;     /* vendor encoding */
  uint32_t subgroup_size;      /* 0 if unknown */
  uint32_t max_shared_memory;  /* bytes per workgroup */
  uint64_t max_buffer_range;   /* maxStorageBufferRange, bytes */
  uint32_t supports_f16;       /* shaderFloat16 arithmetic */
  uint32_t supports_16bit_storage;
  uint32_t supports_bf16; /* bf16 is always handled as uint16 bits; this is
                             1 if the device has native bf16 arithmetic */
} vkattn_device_info;

/* Number of Vulkan devices visible to the loader. Creates no context; 0
 * devices (or no Vulkan loader) is a success with *out = 0. */
VKATTN_API vkattn_status vkattn_device_count(uint32_t* out);

/* Info of device `index` (0 .. count-1) without creating a context. */
VKATTN_API vkattn_status vkattn_device_get_info(uint32_t index, vkattn_device_info* out);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct vkattn_context vkattn_context;

/* Enable the Khronos validation layer with a debug messenger that counts
 * warnings and errors (see vkattn_context_validation_messages). Fails with
 * VKATTN_ERROR_UNSUPPORTED if the layer is not installed. */
#define VKATTN_CONTEXT_VALIDATION 0x1u

typedef struct vkattn_context_desc {
  uint32_t struct_size; /* sizeof(vkattn_context_desc); 0 is rejected */
  /* -1: the env var VKATTN_DEVICE (an index or a case-insensitive substring
   * of the device name), else the best device: discrete > integrated >
   * virtual > CPU. >= 0: that device index. */
  int32_t device_index;
  uint32_t flags;    /* VKATTN_CONTEXT_* bits; unknown bits are rejected */
  uint32_t reserved; /* must be 0 */
} vkattn_context_desc;

/* Fill defaults: device_index = -1, flags = 0. */
VKATTN_API void vkattn_context_desc_init(vkattn_context_desc* desc);

/* Create a context on one device. desc NULL means defaults. The caller owns
 * *out and releases it with vkattn_context_destroy. */
VKATTN_API vkattn_status vkattn_context_create(const vkattn_context_desc* desc,
                                               vkattn_context** out);

/* Submit pending work, wait for it, release the caller's reference. Device
 * memory lives on while tensors or other objects of this context exist.
 * NULL does nothing. */
VKATTN_API void vkattn_context_destroy(vkattn_context* ctx);

/* Submit what was recorded; do not wait. */
VKATTN_API vkattn_status vkattn_context_flush(vkattn_context* ctx);

/* Submit what was recorded and wait until the device has finished it. */
VKATTN_API vkattn_status vkattn_context_synchronize(vkattn_context* ctx);

VKATTN_API vkattn_status vkattn_context_get_device_info(vkattn_context* ctx,
                                                        vkattn_device_info* out);

/* Validation-layer warnings and errors seen so far (0 when validation is
 * off). Tests assert 0. */
VKATTN_API vkattn_status vkattn_context_validation_messages(vkattn_context* ctx, uint32_t* out);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct vkattn_tensor vkattn_tensor;

/* Element types. 0 is not a type, so a zeroed field is rejected. bf16 and
 * f16 are passed as their uint16 bit patterns. */
typedef enum vkattn_dtype {
  VKATTN_F32 = 1,
  VKATTN_F16 = 2,
  VKATTN_BF16 = 3,
  VKATTN_U8 = 4,
  VKATTN_I32 = 5
} vkattn_dtype;

/* Bytes per element (0 for an unknown dtype). */
VKATTN_API size_t vkattn_dtype_size(vkattn_dtype dtype);

/* A device tensor, row-major (innermost dim last), 1 <= ndim <= 4, every
 * dim >= 0 (zero-sized tensors are legal and own no device memory). The
 * contents start undefined. Caller owns *out. */
VKATTN_API vkattn_status vkattn_tensor_create(vkattn_context* ctx, vkattn_dtype dtype,
                                              uint32_t ndim, const int64_t* shape,
                                              vkattn_tensor** out);

/* Safe while recorded work still uses the tensor: its memory is released
 * when that work has finished. NULL does nothing. */
VKATTN_API void vkattn_tensor_destroy(vkattn_tensor* tensor);

/* Host -> device, the whole tensor; nbytes must equal vkattn_tensor_nbytes.
 * Ordered after work already recorded on the context (stream semantics);
 * src is read during the call only. */
VKATTN_API vkattn_status vkattn_tensor_write(vkattn_tensor* tensor, const void* src,
                                             size_t nbytes);

/* Device -> host, the whole tensor; nbytes must equal vkattn_tensor_nbytes.
 * Submits and waits for recorded work that the read depends on. */
VKATTN_API vkattn_status vkattn_tensor_read(vkattn_tensor* tensor, void* dst, size_t nbytes);

/* Getters; a NULL tensor gives 0. shape: dims [0, ndim), -1 outside. */
VKATTN_API vkattn_dtype vkattn_tensor_dtype(const vkattn_tensor* tensor);
VKATTN_API uint32_t vkattn_tensor_ndim(const vkattn_tensor* tensor);
VKATTN_API int64_t vkattn_tensor_shape(const vkattn_tensor* tensor, uint32_t dim);
VKATTN_API size_t vkattn_tensor_nbytes(const vkattn_tensor* tensor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VKATTN_VKATTN_H_ */

/**
 * @file vkattn.h
 * @brief vkattn — LLM attention as Vulkan compute shaders behind a C ABI.
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
 *
 * Errors: a failed call changes nothing the caller can see: no tensor, no
 * cache content or length, no step state (outputs untouched, nothing
 * recorded). Out of memory is VKATTN_ERROR_OUT_OF_HOST_MEMORY or
 * VKATTN_ERROR_OUT_OF_DEVICE_MEMORY and the call may be retried. Once a
 * device is lost (VKATTN_ERROR_DEVICE_LOST) every later call on its
 * context and the objects made from it fails with that status; they can
 * still be destroyed, in any order. Work recorded before a call that
 * submits it is never dropped: a submission that fails for lack of memory
 * is retried by the next call that submits.
 *
 * ABI stability: exported symbols are exactly the functions of this header
 * (C linkage, no C++ symbols). Descriptor and info structs start with
 * struct_size and grow only by appending fields. A descriptor is accepted
 * with the struct_size of this or any earlier release (fields an older
 * caller does not know take their defaults); any other size, 0 included,
 * is VKATTN_ERROR_INVALID_ARGUMENT. Output structs (vkattn_device_info) are
 * written only up to the caller's struct_size, which the caller sets (the
 * _init functions do); a struct_size larger than this release's gets this
 * release's struct and struct_size is lowered to what was written. Enum
 * values are never reused or renumbered; new ones are appended. The SONAME
 * carries the major version.
 *
 * Versions: VKATTN_VERSION_MAJOR/MINOR/PATCH below (and vkattn_version()
 * at run time, the library actually loaded) say which release this is;
 * CHANGELOG.md says what each release added, changed and fixed. Before
 * 1.0: a minor release (0.x.0) may only add, under the rules above (new
 * functions, fields appended to a struct, enumerators appended), and
 * every addition moves the minor version, so `#if VKATTN_VERSION_MINOR >=
 * 4` tells a caller that vkattn_attention_desc::window_right exists; a
 * patch release (0.x.y) changes no declaration (fixes and speed only); the
 * SONAME stays libvkattn.so.0 until a release breaks the ABI, which only
 * a major release may do. A caller built against release R passes R's
 * struct sizes, which every later release accepts. Each field appended
 * after 0.1 names the release that appended it.
 */
#ifndef VKATTN_VKATTN_H_
#define VKATTN_VKATTN_H_

#include <stddef.h>
#include <stdint.h>

/** Major version of this header; the SONAME carries it. @ingroup errors */
#define VKATTN_VERSION_MAJOR 0
/** Minor version of this header: moves with every addition to the API. @ingroup errors */
#define VKATTN_VERSION_MINOR 7
/** Patch version of this header: fixes only, no declaration changes. @ingroup errors */
#define VKATTN_VERSION_PATCH 0
/** This header's version as text, "MAJOR.MINOR.PATCH". @ingroup errors */
#define VKATTN_VERSION_STRING "0.7.0"
/** vkattn_version()'s encoding of a version: major * 10000 + minor * 100 +
 * patch (minor and patch stay below 100). @ingroup errors */
#define VKATTN_MAKE_VERSION(major, minor, patch) \
  ((uint32_t)(major)*10000u + (uint32_t)(minor)*100u + (uint32_t)(patch))
/** This header's version in vkattn_version()'s encoding: compare it with
 * vkattn_version() to see whether the loaded library is at least as new.
 * @ingroup errors */
#define VKATTN_VERSION \
  VKATTN_MAKE_VERSION(VKATTN_VERSION_MAJOR, VKATTN_VERSION_MINOR, VKATTN_VERSION_PATCH)
/** The major part of an encoded version (vkattn_version()). @ingroup errors */
#define VKATTN_VERSION_GET_MAJOR(v) ((uint32_t)(v) / 10000u)
/** The minor part of an encoded version. @ingroup errors */
#define VKATTN_VERSION_GET_MINOR(v) ((uint32_t)(v) / 100u % 100u)
/** The patch part of an encoded version. @ingroup errors */
#define VKATTN_VERSION_GET_PATCH(v) ((uint32_t)(v) % 100u)

/**
 * @def VKATTN_API
 * @brief Marks every function of this header as exported by the shared library:
 * dllexport/dllimport on Windows, default visibility with GCC and Clang, empty
 * elsewhere. On Windows a program linking vkattn.dll (through its import
 * library) defines nothing; one linking a static vkattn defines VKATTN_STATIC
 * before including this header (since 0.7).
 * @ingroup errors
 */
#if defined(_WIN32)
#if defined(VKATTN_BUILDING)
#define VKATTN_API __declspec(dllexport)
#elif defined(VKATTN_STATIC)
#define VKATTN_API
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
/**
 * @defgroup errors Errors and version
 * @brief Status codes, the thread's last error message, the library version
 * and the export macro.
 *
 * Every fallible call returns a vkattn_status; on failure
 * vkattn_last_error() says why (see the file description for what a failed
 * call leaves unchanged).
 * @{
 */

/** Status codes. Values are explicit and never reused. */
typedef enum vkattn_status {
  VKATTN_SUCCESS = 0,                    /**< The call succeeded. */
  VKATTN_ERROR_INVALID_ARGUMENT = 1,     /**< An argument, descriptor or shape is not valid. */
  VKATTN_ERROR_UNSUPPORTED = 2,          /**< The device, driver or build lacks what it needs. */
  VKATTN_ERROR_OUT_OF_HOST_MEMORY = 3,   /**< Host memory ran out; may be retried. */
  VKATTN_ERROR_OUT_OF_DEVICE_MEMORY = 4, /**< Device memory ran out; may be retried. */
  VKATTN_ERROR_CACHE_FULL = 5,           /**< The KV cache lacks the free pages of a step. */
  VKATTN_ERROR_NO_DEVICE = 6,            /**< No loader or device, or VKATTN_DEVICE names none. */
  VKATTN_ERROR_DEVICE_LOST = 7,          /**< Device lost; later calls on its context fail. */
  VKATTN_ERROR_INTERNAL = 8              /**< An unexpected failure inside vkattn. */
} vkattn_status;

/** Static text for a status code ("unknown status" for unknown values). */
VKATTN_API const char* vkattn_status_string(vkattn_status status);

/** Message of this thread's last failed call ("" if none). The pointer stays
 * valid until the next vkattn call on this thread. */
VKATTN_API const char* vkattn_last_error(void);

/** The version of the library actually loaded, major * 10000 + minor * 100
 * + patch (VKATTN_MAKE_VERSION; VKATTN_VERSION_GET_MAJOR/MINOR/PATCH take it
 * apart): 500 is 0.5.0. A program built against this header may check
 * vkattn_version() >= VKATTN_VERSION at startup. */
VKATTN_API uint32_t vkattn_version(void);

/** Levels of the library's messages (vkattn_set_log_callback). Since 0.7. */
typedef enum vkattn_log_level {
  VKATTN_LOG_ERROR = 1,   /**< Something failed that vkattn could not work around. */
  VKATTN_LOG_WARNING = 2, /**< A result or a choice changed: a self-check failed and a fallback
                               serves, a file could not be written, a VKATTN_LOG category is
                               unknown. */
  VKATTN_LOG_INFO = 3,    /**< The VKATTN_LOG categories compile, stats and files. */
  VKATTN_LOG_DEBUG = 4    /**< The VKATTN_LOG category kernels (a line per dispatch). */
} vkattn_log_level;

/** Receives one message: a single line without its newline and without the
 * "vkattn: " prefix stderr shows; `message` is valid during the call only. */
typedef void (*vkattn_log_fn)(vkattn_log_level level, const char* message, void* user);

/** Routes the library's messages to `fn` (with `user`), process-wide; NULL
 * restores the default, stderr lines "vkattn: <message>". Since 0.7.
 *
 * Errors and warnings always reach it; info and debug lines only for the
 * categories `VKATTN_LOG` names (kernels, compile, stats, files:
 * docs/guide/environment.md). Without a callback nothing else is printed:
 * the library writes to stderr only what reaches this sink.
 *
 * Thread-safe: once this returns, no message reaches the previous
 * callback (a message being delivered is waited for). The callback runs
 * synchronously on the thread that logs, possibly on several threads at
 * once, and must not call vkattn (vkattn_set_log_callback included: it
 * would wait for itself). */
VKATTN_API void vkattn_set_log_callback(vkattn_log_fn fn, void* user);

/** @} */

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup devices Devices and contexts
 * @brief Enumerate Vulkan devices, create a context on one, flush and
 * synchronize its recorded work.
 *
 * A context is externally synchronized (one thread at a time); objects made
 * from it keep it alive. See the file description for the threading,
 * ownership and execution rules.
 * @{
 */

/** Kind of a device, as Vulkan reports it (VkPhysicalDeviceType). */
typedef enum vkattn_device_type {
  VKATTN_DEVICE_OTHER = 0,          /**< Anything else. */
  VKATTN_DEVICE_INTEGRATED_GPU = 1, /**< A GPU that shares memory with the host. */
  VKATTN_DEVICE_DISCRETE_GPU = 2,   /**< A separate GPU. */
  VKATTN_DEVICE_VIRTUAL_GPU = 3,    /**< A virtualized GPU. */
  VKATTN_DEVICE_CPU = 4             /**< A CPU implementation, such as lavapipe. */
} vkattn_device_type;

/** Output struct: set struct_size first (vkattn_device_info_init); the
 * library writes up to it (see "ABI stability" at the top). */
typedef struct vkattn_device_info {
  uint32_t struct_size;            /**< in: the caller's sizeof; out: bytes written */
  char name[256];                  /**< Device name (deviceName), NUL-terminated. */
  char driver_name[256];           /**< Driver name (driverName; "" before Vulkan 1.2). */
  char driver_info[256];           /**< Driver version text (driverInfo; "" before Vulkan 1.2). */
  uint32_t vendor_id;              /**< PCI vendor id (vendorID). */
  uint32_t device_id;              /**< Vendor's device id (deviceID). */
  uint32_t device_type;            /**< vkattn_device_type */
  uint32_t api_version;            /**< VK_MAKE_API_VERSION encoding */
  uint32_t driver_version;         /**< vendor encoding */
  uint32_t subgroup_size;          /**< 0 if unknown */
  uint32_t max_shared_memory;      /**< bytes per workgroup */
  uint64_t max_buffer_range;       /**< maxStorageBufferRange, bytes */
  uint32_t supports_f16;           /**< shaderFloat16 arithmetic */
  uint32_t supports_16bit_storage; /**< storageBuffer16BitAccess (1 or 0). */
  uint32_t supports_bf16;          /**< always 0 today: bf16 tensors are stored as
                                        uint16 bits and every kernel computes in f32;
                                        reserved for native bf16 arithmetic
                                        (VK_KHR_shader_bfloat16), which no kernel uses */
} vkattn_device_info;

/** Zeroes *info and sets struct_size = sizeof(vkattn_device_info). */
VKATTN_API void vkattn_device_info_init(vkattn_device_info* info);

/** Number of Vulkan devices visible to the loader. Creates no context; 0
 * devices (or no Vulkan loader) is a success with *out = 0. */
VKATTN_API vkattn_status vkattn_device_count(uint32_t* out);

/** Info of device `index` (0 .. count-1) without creating a context. Set
 * out->struct_size first (vkattn_device_info_init). */
VKATTN_API vkattn_status vkattn_device_get_info(uint32_t index, vkattn_device_info* out);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

/** A context: one device and its queue, and the work recorded on it
 * (opaque; created by vkattn_context_create or
 * vkattn_context_create_from_vulkan). */
typedef struct vkattn_context vkattn_context;

/** Enable the Khronos validation layer with a debug messenger that counts
 * warnings and errors (see vkattn_context_validation_messages). Fails with
 * VKATTN_ERROR_UNSUPPORTED if the layer is not installed. */
#define VKATTN_CONTEXT_VALIDATION 0x1u
/** Write GPU timestamps around every submission (see
 * vkattn_context_last_gpu_time); ignored where the queue has none. */
#define VKATTN_CONTEXT_PROFILING 0x2u
/** Batch invariance: a sequence's attention outputs (and lse) are
 * bit-identical whatever else shares its call or step, in any position, in
 * decode-only and mixed steps of any size, and wherever its pages lie.
 * Without it, key ranges are split to fill the device (about 2 workgroups
 * per compute unit over the whole call), a call's kernel variant follows its
 * largest sequence, and keys are cut where a sequence's pages change pool
 * buffer, so a sequence's rounding depends on its batch. With it: a
 * decode-shaped sequence (at most 8 query tokens) is split into chunks of a
 * fixed number of keys (GPUs 256, CPU devices 2048;
 * VKATTN_ATTN_INVARIANT_SPLIT_KEYS), other sequences only where a work item
 * must end (lavapipe's loop cap, binding windows); the combine merges a
 * sequence's pieces in an order of its own; a call's decode-shaped and other
 * sequences are planned apart, each part with the kernel family and variant
 * the device gives that part whatever its lengths (one submission, two
 * passes); and a sequence whose pages lie in several binding windows (of
 * the cache's pool buffers or of caller pools) is read from a copy of its
 * pages gathered
 * into buffers of their own, cut at fixed positions of the sequence. The
 * cost: fewer splits for short batches (on a GPU a single decode over 4096
 * keys gets 16 splits per kv head instead of filling the device) and, in
 * pools larger than one binding, a copy of the pages of sequences that span
 * bindings. */
#define VKATTN_CONTEXT_BATCH_INVARIANT 0x4u

/** Descriptor of vkattn_context_create (vkattn_context_desc_init sets its
 * defaults). */
typedef struct vkattn_context_desc {
  uint32_t struct_size; /**< sizeof(vkattn_context_desc); 0 is rejected */
  /** -1: the env var VKATTN_DEVICE (an index or a case-insensitive substring
   * of the device name), else the best device: discrete > integrated >
   * virtual > CPU. >= 0: that device index. */
  int32_t device_index;
  uint32_t flags;    /**< VKATTN_CONTEXT_* bits; unknown bits are rejected */
  uint32_t reserved; /**< must be 0 */
} vkattn_context_desc;

/** Fill defaults: device_index = -1, flags = 0. */
VKATTN_API void vkattn_context_desc_init(vkattn_context_desc* desc);

/** Create a context on one device. desc NULL means defaults. The caller owns
 * *out and releases it with vkattn_context_destroy. */
VKATTN_API vkattn_status vkattn_context_create(const vkattn_context_desc* desc,
                                               vkattn_context** out);

/** Submit pending work, wait for it, release the caller's reference. Device
 * memory lives on while tensors or other objects of this context exist.
 * NULL does nothing. */
VKATTN_API void vkattn_context_destroy(vkattn_context* ctx);

/** Submit what was recorded; do not wait. Work that uses a tensor or cache
 * the work of a caller's command buffer (external mode) used is held back,
 * in order, until that command buffer has completed (see
 * vkattn_context_end_external); flush never waits for it. */
VKATTN_API vkattn_status vkattn_context_flush(vkattn_context* ctx);

/** Submit what was recorded and wait until the device has finished it. */
VKATTN_API vkattn_status vkattn_context_synchronize(vkattn_context* ctx);

/** Info of the context's device; set out->struct_size first
 * (vkattn_device_info_init). */
VKATTN_API vkattn_status vkattn_context_get_device_info(vkattn_context* ctx,
                                                        vkattn_device_info* out);

/** Validation-layer warnings and errors seen so far (0 when validation is
 * off). Tests assert 0. */
VKATTN_API vkattn_status vkattn_context_validation_messages(vkattn_context* ctx, uint32_t* out);

/** GPU time in nanoseconds between the first and the last command of the
 * last submission that has completed (0 without VKATTN_CONTEXT_PROFILING).
 * To time work: record it, synchronize, then read this. */
VKATTN_API vkattn_status vkattn_context_last_gpu_time(vkattn_context* ctx, uint64_t* out_ns);

/** @} */

/* ------------------------------------------------------------------------ */
/* Interop: the caller's Vulkan device, command buffers and semaphores       */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup interop Interop
 * @brief The caller's Vulkan device, command buffers and semaphores.
 *
 * Vulkan handles cross the ABI as void* (dispatchable: instance, physical
 * device, device, queue, command buffer) or uint64_t (non-dispatchable:
 * buffer, semaphore), so this header needs no vulkan.h.
 *
 * What vkattn needs of a caller's device:
 * @code{.unparsed}
 *   required  instance apiVersion and device >= Vulkan 1.2; a queue family
 *             with compute; timelineSemaphore enabled (VkPhysicalDevice
 *             Vulkan12Features or VkPhysicalDeviceTimelineSemaphoreFeatures
 *             in enabled_features). Missing: VKATTN_ERROR_UNSUPPORTED
 *             naming it.
 *   optional  shaderFloat16 (without it: no f16-arithmetic kernels,
 *             VKATTN_FORCE_F16_MATH falls back to f32 math);
 *             storageBuffer16BitAccess (unused today). No device extension
 *             is needed; VK_NV_shader_sm_builtins / VK_AMD_shader_core_
 *             properties, where the driver has them, are only queried.
 * @endcode
 * Buffers the caller wraps must be on that device; command buffers passed
 * to vkattn_context_begin_external must come from a pool of the context's
 * queue family.
 *
 * Tensors over the caller's buffers and views: see @ref views.
 * @{
 */

/** The caller's Vulkan objects: the input of vkattn_context_create_from_vulkan
 * and the output of vkattn_context_get_vulkan. */
typedef struct vkattn_vulkan_desc {
  uint32_t struct_size;             /**< sizeof(vkattn_vulkan_desc); 0 is rejected */
  uint32_t queue_family_index;      /**< of `queue` */
  void* instance;                   /**< VkInstance */
  void* physical_device;            /**< VkPhysicalDevice */
  void* device;                     /**< VkDevice */
  void* queue;                      /**< VkQueue vkattn submits its own work to */
  uint32_t api_version;             /**< the instance's apiVersion, >= 1.2 */
  uint32_t enabled_extension_count; /**< Entries of enabled_extensions. */
  void* get_instance_proc_addr;     /**< PFN_vkGetInstanceProcAddr; NULL = the loader's */
  /** Input: the VkPhysicalDeviceFeatures2 chain the device was created
   * with, read during the call only. Output of vkattn_context_get_vulkan:
   * a chain the context owns (VkPhysicalDeviceFeatures2 -> Vulkan11Features
   * -> Vulkan12Features, then VkPhysicalDeviceCooperativeMatrixFeaturesKHR
   * where enabled) holding the features vkattn reads (timelineSemaphore,
   * shaderFloat16, storageBuffer16BitAccess, vulkanMemoryModel(DeviceScope),
   * cooperativeMatrix) as the device has them; every other member is 0. It
   * is never the caller's pointer. */
  const void* enabled_features;
  const char* const* enabled_extensions; /**< the device extensions it was created with */
  /** VKATTN_CONTEXT_PROFILING, VKATTN_CONTEXT_BATCH_INVARIANT; VALIDATION is rejected
   * (the caller's business) */
  uint32_t flags;
  uint32_t reserved; /**< must be 0 */
} vkattn_vulkan_desc;

/** Zeroes the struct and sets struct_size. */
VKATTN_API void vkattn_vulkan_desc_init(vkattn_vulkan_desc* desc);

/** A context on the caller's device and queue. vkattn never destroys the
 * caller's objects: they must outlive the context and everything made from
 * it. vkattn submits to `queue` from the thread that calls it (flush,
 * synchronize, reads): the caller must not use the queue concurrently
 * (Vulkan's external synchronization rule for queues). */
VKATTN_API vkattn_status vkattn_context_create_from_vulkan(const vkattn_vulkan_desc* desc,
                                                           vkattn_context** out);

/** The instance, physical device, device, queue, family, API version,
 * vkGetInstanceProcAddr, feature chain and extension list of any context,
 * filled up to out->struct_size. The feature chain and the extension
 * names are the context's own copies (valid while it lives; see
 * vkattn_vulkan_desc::enabled_features), never pointers the caller passed
 * to vkattn_context_create_from_vulkan. For a context vkattn created, an
 * engine may record its own work on that device. */
VKATTN_API vkattn_status vkattn_context_get_vulkan(vkattn_context* ctx, vkattn_vulkan_desc* out);

/** Submits what was recorded (an empty submission if nothing was), waiting
 * on wait_semaphore >= wait_value and signalling signal_semaphore =
 * signal_value when it completes (timeline VkSemaphores as uint64_t; 0 =
 * none): an engine on another queue orders its work against vkattn's
 * without a host wait. Work held back for a caller's command buffer (see
 * vkattn_context_end_external) is submitted too, waiting for that command
 * buffer's semaphore on the GPU: submit the command buffer first, or to
 * another queue. */
VKATTN_API vkattn_status vkattn_context_flush_with(vkattn_context* ctx, uint64_t wait_semaphore,
                                                   uint64_t wait_value, uint64_t signal_semaphore,
                                                   uint64_t signal_value);

/** External mode. begin_external submits vkattn's pending work, then every
 * op records into the caller's `command_buffer` (VkCommandBuffer in the
 * recording state, from a pool of the context's queue family) and vkattn
 * submits nothing. Barrier contract: before and after every command vkattn
 * records there, a full memory barrier (compute and transfer stages,
 * shader and transfer reads and writes), so the caller's own dispatches
 * and copies may sit between vkattn's ops in the same buffer. vkattn binds
 * its own pipelines, descriptor sets and push constants: the caller
 * rebinds its own afterwards. While in external mode vkattn_tensor_read,
 * vkattn_tensor_write, vkattn_kv_cache_read, vkattn_context_flush(_with)
 * and vkattn_context_synchronize are rejected (INVALID_ARGUMENT) and no
 * timestamps are written. */
VKATTN_API vkattn_status vkattn_context_begin_external(vkattn_context* ctx, void* command_buffer);

/** Ends external mode. The caller signals `timeline_semaphore` = value when
 * its submission of the command buffer completes: memory the recorded
 * work uses is kept until then. No vkattn call waits on the host for work
 * only the caller can submit, and vkattn never submits work that waits for
 * a submission the caller has not made (on a queue that runs submissions
 * in order, such work would wedge the caller's own later submission):
 *   - vkattn's later work that uses none of the tensors, caches and
 *     buffers the recorded work used runs as usual;
 *   - later work that uses one of them is recorded and held back (with
 *     later work that shares a buffer with it, in order) until the
 *     semaphore reaches `value` (vkattn looks at every call; flush
 *     returns at once). Work is held back as the batch it was recorded
 *     in: the ops recorded since the last flush (or read, or synchronize)
 *     go together, so flush before and after such work to keep other
 *     work out of it;
 *   - calls that need such work's results wait for the semaphore on the
 *     host: a read of a tensor or cache that work wrote or that held-back
 *     work writes, and vkattn_context_synchronize (submit the command
 *     buffer first);
 *   - vkattn_context_flush_with submits held-back work at once, waiting
 *     for the semaphore on the GPU.
 * Destroying the context never waits on the semaphore: it waits for
 * vkattn's own submitted work, drops work still held back, then waits for
 * the device to be idle and frees (a command buffer recorded in external
 * mode must not be submitted after that, only reset or freed). */
VKATTN_API vkattn_status vkattn_context_end_external(vkattn_context* ctx,
                                                     uint64_t timeline_semaphore, uint64_t value);

/** @} */

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup tensors Tensors
 * @brief Device tensors: create, write, read, query.
 *
 * Writes and reads follow the execution model of the file description
 * (stream order; a read waits for the work it depends on).
 * @{
 */

/** A device tensor (opaque): a buffer range plus a dtype, a shape and
 * strides; see vkattn_tensor_create and @ref views. */
typedef struct vkattn_tensor vkattn_tensor;

/** Element types. 0 is not a type, so a zeroed field is rejected. bf16 and
 * f16 are passed as their uint16 bit patterns. */
typedef enum vkattn_dtype {
  VKATTN_F32 = 1,  /**< 32-bit float. */
  VKATTN_F16 = 2,  /**< 16-bit IEEE half, as its uint16 bits. */
  VKATTN_BF16 = 3, /**< bfloat16, as its uint16 bits. */
  VKATTN_U8 = 4,   /**< Unsigned byte (boolean masks). */
  VKATTN_I32 = 5,  /**< 32-bit signed integer. */
  /** Signed byte: a KV cache dtype (8-bit cache, see vkattn_kv_cache_desc).
   * A value is q * scale, q in -127..127, one f32 scale per (token, kv
   * head) for K and one for V, computed by the append kernel. */
  VKATTN_I8 = 6,
  /** OCP float8 e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa
   * bits; no infinities, 0x7f/0xff are NaN, largest finite 448): a KV
   * cache dtype. A value is x * scale, the scales set by the caller per
   * layer or per (layer, kv head) with vkattn_kv_cache_set_scales. */
  VKATTN_FP8_E4M3 = 7,
  /** 4-bit codes in blocks of 32 along the head dim, one f16 scale per
   * block: a KV cache dtype only (vkattn_kv_cache_desc::dtype, "Q4"
   * there); vkattn_tensor_create refuses it and vkattn_dtype_size gives 0
   * (not a whole number of bytes per element). */
  VKATTN_Q4 = 8
} vkattn_dtype;

/** Bytes per element (0 for an unknown dtype, and for VKATTN_Q4). */
VKATTN_API size_t vkattn_dtype_size(vkattn_dtype dtype);

/** A device tensor, row-major (innermost dim last), 1 <= ndim <= 4, every
 * dim >= 0 (zero-sized tensors are legal and own no device memory). The
 * contents start undefined. Caller owns *out. */
VKATTN_API vkattn_status vkattn_tensor_create(vkattn_context* ctx, vkattn_dtype dtype,
                                              uint32_t ndim, const int64_t* shape,
                                              vkattn_tensor** out);

/** Safe while recorded work still uses the tensor: its memory is released
 * when that work has finished. NULL does nothing. */
VKATTN_API void vkattn_tensor_destroy(vkattn_tensor* tensor);

/** Host -> device, the whole tensor; nbytes must equal vkattn_tensor_nbytes.
 * Ordered after work already recorded on the context (stream semantics);
 * src is read during the call only. */
VKATTN_API vkattn_status vkattn_tensor_write(vkattn_tensor* tensor, const void* src, size_t nbytes);

/** Device -> host, the whole tensor; nbytes must equal vkattn_tensor_nbytes.
 * Submits and waits for recorded work that the read depends on. */
VKATTN_API vkattn_status vkattn_tensor_read(vkattn_tensor* tensor, void* dst, size_t nbytes);

/** @name Getters
 * A NULL tensor gives 0 (dtype 0, ndim 0, nbytes 0); shape gives
 * dims [0, ndim) and -1 outside that range or for NULL.
 * @{ */
/** The tensor's dtype (0 for NULL). */
VKATTN_API vkattn_dtype vkattn_tensor_dtype(const vkattn_tensor* tensor);
/** Number of dims (0 for NULL). */
VKATTN_API uint32_t vkattn_tensor_ndim(const vkattn_tensor* tensor);
/** Size of dim `dim`; -1 outside [0, ndim) or for NULL. */
VKATTN_API int64_t vkattn_tensor_shape(const vkattn_tensor* tensor, uint32_t dim);
/** Bytes of the elements, as vkattn_tensor_write and vkattn_tensor_read take
 * them (0 for NULL). */
VKATTN_API size_t vkattn_tensor_nbytes(const vkattn_tensor* tensor);
/** @} */

/** @} */

/**
 * @defgroup views Views and caller buffers
 * @ingroup tensors
 * @brief Strided views of tensors and tensors over the caller's VkBuffers.
 *
 * Views and caller buffers ("Interop", since 0.2).
 *
 * A tensor is a buffer range plus a shape and strides (in elements): every
 * tensor vkattn_tensor_create makes is dense and row-major; views and
 * wrapped caller buffers may be strided. Every attention, step and append
 * entry point accepts views for q, k, v, out, k_new and v_new. Attention
 * reads q, k, v and writes out in place when each is [T, heads, dim] with
 * any token and head strides (innermost 1): slices of a fused QKV
 * projection output [T, (H + 2 Hkv) d], head-major (HND) layouts, rows at
 * any element offset (the kernels drop to narrower texel fetches when
 * offsets or strides are not multiples of 4 or 8 elements); padded
 * [B, S, heads, dim] views need B's stride = S x S's stride. Any other
 * view, a caller buffer created without UNIFORM_TEXEL_BUFFER usage (q, k,
 * v), and k_new/v_new views are packed into a temporary before the op and
 * copied back after it (the slower path; never a refusal). A written
 * tensor (out, lse) must not have overlapping elements (a zero or
 * interleaved stride): INVALID_ARGUMENT. lse, mask, alibi_slopes and every
 * vkattn_attention_merge argument must be contiguous
 * (VKATTN_ERROR_INVALID_ARGUMENT otherwise); out and lse must not overlap
 * q, k, v, the mask or each other.
 *
 * Overlap means sharing an element (a byte of one), tested exactly for
 * strided views, not by the span from first to last element: views whose
 * spans interleave but whose elements are disjoint are accepted (vLLM's
 * combined K/V pool [num_pages, 2, page_size, Hkv, d] as k and v views; an
 * out that is a column slice of the fused buffer q is a slice of). Only a
 * search that would take more than 65536 steps (never seen for the layouts
 * engines use) errs on the side of refusing.
 *
 * Written 16-bit (and 8-bit) data: vkattn changes exactly the bytes of an
 * output's elements. Where a view or a caller's buffer range starts or
 * ends inside a 32-bit word whose other half is not the output's (an odd
 * count of f16 at the end of a range), that half keeps its bits: the
 * kernels store such words with atomics, and a range whose last word
 * would reach past the caller's range goes through the packed path, whose
 * copies are exact.
 * @{
 */

/** A strided view of `base`: element (i0, .., i{n-1}) is element
 * offset + sum_k i_k * strides[k] of base's storage, counted in elements
 * from base's first element (a view of a view composes offsets; strides
 * are in the storage's elements, as PyTorch's as_strided). strides NULL =
 * row-major dense. Rules: 1 <= ndim <= 4, shape[k] >= 0, offset >= 0,
 * strides[k] >= 0, innermost stride 1, and every element within base's
 * span, the bytes from its first element to its last (checked without
 * overflow). The view has base's dtype and keeps base's memory alive; it
 * is destroyed with vkattn_tensor_destroy. Caller owns *out. */
VKATTN_API vkattn_status vkattn_tensor_view(vkattn_tensor* base, int64_t offset, uint32_t ndim,
                                            const int64_t* shape, const int64_t* strides,
                                            vkattn_tensor** out);

/** A dense row-major tensor over bytes [offset, offset + size) of the
 * caller's VkBuffer `buffer` (a VkBuffer handle as uint64_t), no copy. The
 * buffer must be on the context's device and outlive the tensor and every
 * op recorded with it; vkattn never frees it. usage_flags = the
 * VkBufferUsageFlags it was created with (Vulkan cannot report them):
 * STORAGE_BUFFER, TRANSFER_SRC and TRANSFER_DST are required (a missing
 * one is refused, named); without UNIFORM_TEXEL_BUFFER the kernels read
 * it through the packed path. The caller vouches that the range exists;
 * the shape's bytes must fit `size`. vkattn touches no byte of the buffer
 * outside [offset, offset + size) (an output whose range ends mid-word,
 * e.g. an odd count of f16, is written through the packed path). Reads and
 * writes of it go through staging (vkattn never maps caller memory).
 * Caller owns *out. */
VKATTN_API vkattn_status vkattn_tensor_wrap_vk_buffer(vkattn_context* ctx, uint64_t buffer,
                                                      uint64_t offset, uint64_t size,
                                                      uint32_t usage_flags, vkattn_dtype dtype,
                                                      uint32_t ndim, const int64_t* shape,
                                                      vkattn_tensor** out);

/** The buffer range behind a tensor: its VkBuffer (as uint64_t), the byte
 * of its first element and the bytes up to the end of its last element. A
 * tensor without elements gives buffer 0, offset 0, size 0. For a tensor
 * vkattn made, the buffer stays vkattn's: use it in the caller's commands
 * only while the tensor lives. */
VKATTN_API vkattn_status vkattn_tensor_get_vk_buffer(vkattn_tensor* tensor, uint64_t* buffer,
                                                     uint64_t* offset, uint64_t* size);

/** 1 for a row-major dense tensor (views that are dense included, at any
 * offset), 0 otherwise and for NULL. */
VKATTN_API int vkattn_tensor_is_contiguous(const vkattn_tensor* tensor);

/** @} */

/* ------------------------------------------------------------------------ */
/* RoPE                                                                      */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup rope Rotary position embedding
 * @brief RoPE of queries (vkattn_rope) and of keys as they are appended
 * (vkattn_step_append_rope, vkattn_paged_append_rope).
 *
 * Elements [rotary_offset, rotary_offset + rotary_dim) of every head row
 * are rotated by angle pos * inv_freq[i] per pair i < rotary_dim / 2; the
 * rest of the row is left as it is (DeepSeek MLA rotates only dims
 * 512..575 of its 576-wide keys: rotary_offset 512, rotary_dim 64). Pairs
 * are (i, i + rotary_dim / 2) for VKATTN_ROPE_NEOX (Hugging Face's
 * rotate_half, Llama) and (2i, 2i + 1) for VKATTN_ROPE_GPTJ (interleaved).
 *
 * @code{.unparsed}
 *   inv_freq[i] = theta^(-2i / rotary_dim), then the scaling's rule
 *   (x1, x2) -> (x1 cos a - x2 sin a, x2 cos a + x1 sin a) * attention_factor
 * @endcode
 *
 * Scalings follow Hugging Face transformers' rope types exactly: LINEAR
 * (inv_freq / factor), LLAMA3 (factor, low_freq_factor, high_freq_factor,
 * original_max_position) and YARN (factor, beta_fast, beta_slow,
 * original_max_position, truncate; attention_factor 0 = HF's default 0.1
 * ln(factor) + 1, or the caller's value, e.g. DeepSeek's mscale ratio).
 * cos and sin are computed on the host in double for each call's
 * positions and uploaded with the call; the device rotates in f32 and
 * rounds to the tensor's dtype (nearest even).
 * @{
 */

/** Pair layout of vkattn_rope_desc::layout. */
typedef enum vkattn_rope_layout {
  VKATTN_ROPE_NEOX = 0, /**< halves: pairs (i, i + rotary_dim / 2) */
  VKATTN_ROPE_GPTJ = 1  /**< interleaved: pairs (2i, 2i + 1) */
} vkattn_rope_layout;

/** Frequency scaling of vkattn_rope_desc::scaling (HF rope_type). */
typedef enum vkattn_rope_scaling {
  VKATTN_ROPE_SCALING_NONE = 0,   /**< "default" */
  VKATTN_ROPE_SCALING_LINEAR = 1, /**< "linear" */
  VKATTN_ROPE_SCALING_LLAMA3 = 2, /**< "llama3" */
  VKATTN_ROPE_SCALING_YARN = 3    /**< "yarn" */
} vkattn_rope_scaling;

/** What a rotation does (vkattn_rope_desc_init sets the defaults). */
typedef struct vkattn_rope_desc {
  uint32_t struct_size;           /**< sizeof(vkattn_rope_desc); 0 is rejected */
  uint32_t layout;                /**< vkattn_rope_layout */
  uint32_t rotary_dim;            /**< even; 0 = head_dim - rotary_offset (rounded down to even) */
  uint32_t rotary_offset;         /**< first rotated element of a head row */
  float theta;                    /**< base, > 1 (default 10000) */
  uint32_t scaling;               /**< vkattn_rope_scaling */
  float factor;                   /**< LINEAR, LLAMA3, YARN: > 0 (default 1) */
  float low_freq_factor;          /**< LLAMA3 (default 1) */
  float high_freq_factor;         /**< LLAMA3, > low_freq_factor (default 4) */
  uint32_t original_max_position; /**< LLAMA3, YARN: >= 1 (no default) */
  float beta_fast;                /**< YARN (default 32) */
  float beta_slow;                /**< YARN (default 1) */
  float attention_factor;         /**< multiplies cos and sin; 0 = the type's default */
  uint32_t yarn_truncate;         /**< YARN: floor/ceil the correction range (default 1) */
  uint32_t reserved[4];           /**< must be 0 */
} vkattn_rope_desc;

/** Defaults: NEOX, full rotary dim, theta 10000, no scaling, factor 1,
 * low/high freq factors 1/4, betas 32/1, attention_factor 0, truncate 1. */
VKATTN_API void vkattn_rope_desc_init(vkattn_rope_desc* desc);

/** Rotates x [total, heads, head_dim] (f32/f16/bf16; queries, or keys the
 * caller keeps) into out, same shape and dtype; out may be x (in place).
 * cu_seqlens (batch + 1 host ints, prefix sums, [batch] = total) packs the
 * sequences; token i of sequence b sits at position start_positions[b] +
 * i (host array, >= 0). */
VKATTN_API vkattn_status vkattn_rope(vkattn_context* ctx, const vkattn_rope_desc* desc,
                                     uint32_t batch, const int32_t* cu_seqlens,
                                     const int32_t* start_positions, vkattn_tensor* x,
                                     vkattn_tensor* out);
/** @} */

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup attention Attention
 * @brief Masked attention over packed (varlen), padded and paged batches,
 * paged appends and the merge of partial attentions.
 *
 * Per sequence: t query tokens, u key/value tokens, query i sits at absolute
 * position pos(i) = u - t + i ("bottom-right" alignment, as FlashAttention
 * >= 2.1, FlashInfer and vLLM; one-shot prefill, chunked prefill and decode
 * are the same formula). NOTE: PyTorch's is_causal is top-left aligned
 * (pos(i) = i) and differs from this whenever t != u.
 *
 * @code{.unparsed}
 *   S[i,j] = scale * dot(q_i, k_j)              scale 0 means 1/sqrt(head_dim)
 *   S[i,j] = softcap * tanh(S[i,j] / softcap)   if softcap > 0
 *   S[i,j] -= alibi_slopes[h] * |pos(i) - j|    if alibi_slopes is given
 *   S[i,j] += mask[i,j]                         if mask_type is ADDITIVE
 *   positional rule: visible(i, j) =
 *     ((!causal || j <= pos(i)) &&
 *      (window_left < 0 || pos(i) - j <= window_left) &&
 *      (window_right < 0 || j - pos(i) <= window_right) &&
 *      (chunk_size == 0 || floor(j / chunk_size) == floor(pos(i) / chunk_size)))
 *     || same_span(pos(i), j)     (both in one of the sequence's spans)
 *   key j is hidden from query i when: !visible(i, j); or a BOOL mask byte
 *     is 0; or an ADDITIVE mask value is -inf; or key j is padding; or
 *     j >= u - t and tree bit (i, j - (u - t)) is 0 (sequences with a
 *     tree); or j is not in query i's top-k list (calls with topk_indices;
 *     a key listed n times counts n times in out and lse).
 *   out[i] = softmax over the visible j of S[i,:] times v (f32 accumulation)
 *   lse[i] = log(sum over visible j of exp(S[i,j]))  (natural log)
 *   with sinks (per head h, a raw logit sink = sinks[h]):
 *   out[i] = sum_j exp(S[i,j]) v_j / (exp(sink) + sum_j exp(S[i,j]))
 *   lse[i] = log(exp(sink) + sum over visible j of exp(S[i,j]))
 * @endcode
 *
 * Attention sinks (gpt-oss; vkattn_attention_desc::sinks, f32 [H]): the
 * sink is a logit no scale, softcap, ALiBi or mask touches; it joins every
 * row's softmax denominator and adds no value, so rows sum to less than
 * one. A row with no visible key gives out = 0 and lse = sinks[h]. A sink
 * of -inf is no sink; a sink of +inf or NaN makes every row of its head
 * that sees a key NaN (out and lse), as the formula gives. Every attention
 * and step entry point honours it; a split over keys made inside vkattn
 * applies it once. A caller that splits the keys itself and joins the parts
 * with vkattn_attention_merge passes sinks to exactly one of the parts.
 *
 * window_left = W keeps the W keys before the query plus the query itself
 * (FlashAttention's convention); an HF/Mistral `sliding_window = W` is
 * window_left = W - 1. -1 means no window. window_right = W keeps the W
 * keys after the query (FlashAttention's window_size = (left, right));
 * with causal it changes nothing, without it window_left and window_right
 * make a two-sided window (encoders, local attention).
 *
 * chunk_size = C (chunked local attention, Llama 4's local layers): a
 * query sees only the keys of its own chunk of C positions, chunk
 * floor(pos / C) with floor division (a negative pos(i), t > u, lies in a
 * negative chunk and sees no key). With causal, query i sees keys
 * floor(pos(i) / C) * C .. pos(i). Keys outside every row's chunk are never
 * read: a decode over 131072 keys with C = 8192 reads at most 8192 of them.
 *
 * Window, chunk and causal combine by "and"; a row they leave without a
 * visible key is an empty row (out 0, lse -inf, or the sink's lse).
 *
 * Bidirectional spans (Gemma 3's image tokens, HF's token_type_ids; the
 * descriptor's span_indptr and spans): per sequence, sorted disjoint
 * ranges [start, end) of positions. A query whose position lies in a span
 * also sees every key of that span, whatever causal, the windows and the
 * chunk say (the "or" above); the mask, padding, ALiBi, softcap and sinks
 * apply on top as always. Positions count every key of the sequence (a
 * step's cached tokens included), so a span must end within the call's
 * keys (end <= u); spans wholly before the call's queries change nothing
 * and may be passed. Chunked prefill equals one shot when no chunk edge
 * cuts a span: schedule chunks so (as vLLM does for images). Work no
 * query sees is never read: rows before a span do not read it, rows in a
 * span read up to its end. The arrays are read during the call only.
 *
 * Trees (speculative decoding: the descriptor's tree_indptr and
 * tree_mask; FlashInfer's packed custom masks, a few bits per query): a
 * step verifies t draft tokens laid out as a tree. The t keys of the
 * queries' own block (positions u - t .. u - 1) are visible to query i
 * only where bit (j - (u - t)) % 32, least significant first, of word
 * (j - (u - t)) / 32 of its row is set (set i's ancestors and i itself);
 * keys before the block (the cached prefix) are untouched by the tree.
 * Bits at or past t in a row's last word are ignored. The tree is one more
 * "and": causal, windows, chunks, masks, padding and spans apply as
 * always, and a span never re-opens a key the tree hides. A row the tree
 * and the rest leave empty is an empty row. The prefix is read once per
 * tile of queries, as without a tree; the words are uploaded with the
 * call's plan (a tree larger than one storage binding, past 30000 nodes or
 * so, is UNSUPPORTED).
 *
 * Top-k (the descriptor's topk_indices): query i sees key j only if j is
 * listed for it: entries are key positions within the query's own
 * sequence, 0 .. u - 1 (a step's u = len + t), never packed or page
 * offsets; entries below 0 or at or past u are skipped (-1 pads a short
 * list); a position listed twice counts twice (callers pass distinct
 * positions, as top-k gives); K = 0 leaves every row empty. The list is
 * one more "and" like the tree's: causal, windows, masks, padding, trees
 * and spans still apply to the listed keys. vkattn never reads the tensor
 * on the host (an indexer may write it on the GPU just before the call)
 * and never reads a key that is not listed: a top-k call runs in tiles of
 * one query token whose work is its list's K slots (VKATTN_LOG=kernels:
 * read= and pairs= count list slots, K per tile and per row), on the
 * decode family by default, whose work items first compact their slots to
 * the listed keys in shared memory (in slot order, so results are
 * deterministic), or on the lanes family when it is forced or tuned
 * (VKATTN_ATTN_KERNEL=lanes). Forcing tiled or coopmat, whose tiles share
 * keys across rows, is logged as a decline to decode, never an error. On
 * CPU devices each decode tile also reads ahead one word a cache line of
 * the listed K/V rows of a later tile (VKATTN_ATTN_TOUCH_AHEAD; listed keys
 * lie anywhere, so no hardware prefetcher follows them); those words never
 * reach a result.
 * Over a paged cache or caller pools whose pages lie in several buffers
 * (or binding windows of one), each one's pass reads the listed keys of its
 * own pages (decode: only those reach the tile loop); the passes merge by
 * lse.
 *
 * Hidden keys are selected out, never multiplied by zero: K/V at hidden or
 * padding positions may hold NaN/Inf without reaching any visible output.
 * A query row with no visible key gives out = 0 and lse = -inf. t = 0,
 * u = 0 and batch = 0 are legal (nothing is recorded for empty work).
 *
 * Non-finite scores, in every kernel family and however a call's keys are
 * split (the rule the f64 reference of src/reference follows): a visible
 * S[i,j] of -inf adds nothing (a row whose visible scores are all -inf is
 * a row with no visible key); a visible S[i,j] that is NaN or +inf makes
 * query i's out and lse NaN (exp(NaN), exp(inf - inf)); every merge of
 * partial results keeps a NaN lse NaN (vkattn_attention_merge included).
 * S is computed in f32 as scale times the dot product, never as a product
 * of scale * q with k: it is finite whenever every product q_c * k_c, the
 * dot product and scale * dot are finite in f32, for any finite scale. The
 * variants that compute in f16 (the coopmat family; tiled with f16
 * arithmetic: VKATTN_FORCE_F16_MATH or the device table) multiply q by
 * scale first, in f16, as tensor-core FlashAttention does: they need
 * |scale * q| <= 65504 and the products within f16's range, and a larger
 * value follows the rule above as the inf or NaN it becomes. out is
 * accumulated as FlashAttention accumulates it: the weights exp(S - the
 * row's running maximum), each at most 1, times v, summed in f32 and
 * divided by the weights' sum at the end; the sum before that division is
 * at most (the row's visible keys) x max |v|, so out is finite wherever
 * max |v| <= FLT_MAX / u (any f16 v; f32 or bf16 values past about 1e33
 * over long rows may overflow to inf there).
 *
 * Dtypes: q and out share one of f32/f16/bf16; k and v share q's dtype or
 * f16/bf16 (f32 q over f16 k/v is fine); accumulation is f32; results are
 * rounded to nearest even. lse is f32. Head dims 1..VKATTN_MAX_HEAD_DIM
 * (576: DeepSeek MLA's d 576 / dv 512 with one kv head; d and dv may
 * differ). GQA/MQA: query head h reads kv head h / (num_heads/num_kv_heads).
 *
 * Kernel families (docs/guide/kernels.md) compute the same result; which one
 * serves a call depends on the device and on the call's shape (on GPUs,
 * sequences of at most 8 query tokens go to the decode family). A call
 * (or step) that mixes such decode-shaped sequences with longer ones runs
 * each class on the family chosen for it where the two differ, in the
 * same call (decodes on decode, a prefill chunk on tiled or coopmat, as
 * FlashInfer and vLLM split a serving step); VKATTN_ATTN_KERNEL_DECODE
 * and VKATTN_ATTN_KERNEL_PREFILL force a family per class, and
 * VKATTN_LOG=kernels prints a line per family a call ran. How a call's
 * keys are split depends on the whole batch, unless the
 * context is VKATTN_CONTEXT_BATCH_INVARIANT. The coopmat
 * family (cooperative matrices: tensor cores; chosen by the device table
 * for prefill with f16 k/v where the driver is known good, never on CPU
 * devices) rounds scale * q and the softmax weights to f16 before its
 * matrix products (f32 accumulation), as tensor-core FlashAttention does:
 * outputs are good to about 1e-3 of max |v|. On it a NaN/Inf in v at a key
 * that some query of a 16-64-row tile sees can also reach the tile's rows
 * that do not see it (0 * NaN inside the product); keys that no query of
 * the sequence sees, and padding, stay selected out.
 *
 * The tensors must belong to the context passed in; the call records work
 * (see the execution model at the top) and reads host arrays only during
 * the call. A call that fails records nothing and changes no tensor.
 * @{
 */

/** Largest head_dim and head_dim_v of attention, caches and pools
 * (576 since 0.3; 256 before). */
#define VKATTN_MAX_HEAD_DIM 576

/** Kind of vkattn_attention_desc::mask. */
typedef enum vkattn_mask_type {
  VKATTN_MASK_NONE = 0,    /**< No mask. */
  VKATTN_MASK_BOOL = 1,    /**< u8, nonzero = attend */
  VKATTN_MASK_ADDITIVE = 2 /**< f32/f16/bf16 added to S; -inf hides */
} vkattn_mask_type;

/** Attention variant (user functions): an opaque object holding GLSL
 * functions of the user's that change which keys a query sees and what
 * its scores are, compiled on the device at first use
 * (vkattn_variant_create); keeps its context alive, like every object. */
typedef struct vkattn_variant vkattn_variant;

/** What to compute: heads, dims, scale, causal flag, window, softcap, mask,
 * ALiBi and lse (vkattn_attention_desc_init sets the defaults). */
typedef struct vkattn_attention_desc {
  uint32_t struct_size;  /**< sizeof(vkattn_attention_desc); 0 is rejected */
  uint32_t num_heads;    /**< H */
  uint32_t num_kv_heads; /**< Hkv, divides H */
  uint32_t head_dim;     /**< d, 1..VKATTN_MAX_HEAD_DIM */
  uint32_t head_dim_v;   /**< dv, 1..VKATTN_MAX_HEAD_DIM; 0 = head_dim */
  float scale;           /**< 0 = 1/sqrt(head_dim) */
  uint32_t causal;       /**< 0 or 1, bottom-right aligned */
  int32_t window_left;   /**< -1 = none, else >= 0 */
  float softcap;         /**< 0 = off, else > 0 (below FLT_MIN acts as FLT_MIN) */
  uint32_t mask_type;    /**< vkattn_mask_type */
  /* Optional tensors (NULL = absent); borrowed for the call only. */
  vkattn_tensor* alibi_slopes; /**< [H] f32; optional (NULL = absent), borrowed for the call */
  vkattn_tensor* mask;         /**< see each entry point for its shape; optional, borrowed */
  vkattn_tensor* lse;          /**< output, f32, see each entry point; optional, borrowed */
  uint32_t reserved[4];        /**< must be 0 */
  /* Appended in 0.3; a struct_size of 80 (0.1, 0.2) reads as NULL. */
  vkattn_tensor* sinks; /**< [H] f32 attention-sink logits (gpt-oss); optional, borrowed */
  /* Appended in 0.4; a struct_size of 80 or 88 (0.1 to 0.3) reads as
   * window_right -1, chunk_size 0 and no spans. */
  /** -1 = none, else >= 0: key j is hidden when j - pos(i) > window_right.
   * WARNING: a struct filled without vkattn_attention_desc_init (memset 0,
   * struct_size = sizeof) gets 0 here: nothing to the right of the query,
   * which is causal. */
  int32_t window_right;
  /** 0 = off, else chunked local attention over chunks of this many
   * positions (see above). */
  uint32_t chunk_size;
  /** Bidirectional spans (Gemma 3's image tokens; see above): host arrays,
   * borrowed for the call, span_indptr NULL = none. span_indptr
   * [batch + 1] holds prefix sums of the sequences' span counts ([0] = 0,
   * non-decreasing); sequence b's spans are the (start, end) pairs
   * spans[2 * span_indptr[b] .. 2 * span_indptr[b + 1]), sorted and
   * disjoint (adjacent is fine), 0 <= start < end <= u (an empty span is
   * INVALID_ARGUMENT). A step's sequences come in step order; the padded
   * entry point's batch rows each have u = Sk. spans may be NULL when
   * span_indptr counts no span; spans without span_indptr is
   * INVALID_ARGUMENT. */
  const int32_t* span_indptr;
  const int32_t* spans; /**< see span_indptr */
  /* Appended in 0.6; a struct_size of 80 to 112 (0.1 to 0.5) reads as no
   * tree and no top-k list. */
  /** Tree attention for speculative decoding (EAGLE, Medusa, SpecInfer; see
   * "Trees" above): host arrays, read during the call only; tree_indptr
   * NULL = no trees. tree_indptr [batch + 1] holds prefix sums of 32-bit
   * words ([0] = 0, non-decreasing); sequence b has a tree when
   * tree_indptr[b + 1] > tree_indptr[b], and then exactly t_b * W_b words,
   * W_b = ceil(t_b / 32): row i's bits at tree_mask[tree_indptr[b] +
   * i * W_b ..]. A tree on a sequence with t_b > u_b, or another word
   * count, is INVALID_ARGUMENT; tree_mask may be NULL when tree_indptr
   * counts no word; tree_mask without tree_indptr is INVALID_ARGUMENT.
   * Steps take sequences in step order; the padded entry point one tree
   * per batch row (t = Sq, u = Sk). */
  const int32_t* tree_indptr;
  const uint32_t* tree_mask; /**< see tree_indptr */
  /** Top-k sparse attention (DeepSeek V3.2's DSA, NSA-style selection; see
   * "Top-k" above): an I32 tensor [rows, K] (one list per query row, every
   * head) or [rows, Hkv, K] (a list per kv head), rows = the call's query
   * tokens in its order (total_q; padded: B * Sq; steps: step order);
   * optional, borrowed for the call, never read on the host. Another
   * dtype, rank or first/middle dim is INVALID_ARGUMENT; a tensor larger
   * than one storage binding of the device is UNSUPPORTED. */
  vkattn_tensor* topk_indices;
  /* Appended in 0.7; a struct_size of 80 to 136 (0.1 to 0.6) reads as no
   * variant. */
  /** Attention variant (user functions; see "Attention variants" below),
   * NULL = none: its vkattn_mask_mod hides keys in addition to every
   * built-in rule, its vkattn_score_mod rewrites scores after every built-in
   * term. A variant of another context is INVALID_ARGUMENT. */
  vkattn_variant* variant;
  /** The variant's parameter tensors, borrowed for the call: slot s holds a
   * tensor of the dtype param_dtypes[s] declared (any shape, read as its
   * elements in row-major order; views are packed), or NULL where the
   * variant declares no slot s. A declared slot left NULL, an undeclared
   * slot given a tensor, another dtype, or a tensor without a variant is
   * INVALID_ARGUMENT, with nothing recorded. */
  vkattn_tensor* variant_params[4];
} vkattn_attention_desc;

/** Defaults: causal 0, window_left -1, window_right -1, chunk_size 0, scale
 * 0, softcap 0, no mask/ALiBi/lse/sinks/spans; head counts and dims 0 (must
 * be set). */
VKATTN_API void vkattn_attention_desc_init(vkattn_attention_desc* desc);

/** Attention variants (user functions): what vkattn_variant_create takes.
 * FlexAttention's score_mod / mask_mod and FlashInfer's JIT variants in
 * GLSL: a model's new visibility rule or score term written by its user,
 * without a release and without a dense mask in memory
 * (docs/guide/variants.md). `source` defines one or both of
 *
 *     bool  vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos);
 *     float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos);
 *
 * and any helpers (GLSL 4.50 without a version line, and no bindings),
 * and reads its parameters through vkattn_param_f32(slot, index) and
 * vkattn_param_i32(slot, index): slot a literal 0..3 declared with that
 * dtype in param_dtypes, index a uint; an index past the slot's tensor
 * reads 0.
 *   - seq: the sequence's index in the call (varlen and caller pools: b;
 *     padded: the batch row; steps: step order); head: the query head,
 *     0..H-1; q_pos: the query's absolute position u - t + i (bottom-right
 *     alignment; negative for rows of t > u; GLSL's integer / rounds
 *     toward zero and its % of a negative int is undefined, where a rule
 *     usually wants floor division: see the guide's helpers); k_pos: the key's position
 *     j in its sequence, 0..u-1.
 *   - vkattn_mask_mod returning false hides the key, in addition to every
 *     built-in rule (causal, windows, chunks, spans, trees, top-k, masks,
 *     padding).
 *   - vkattn_score_mod gets the score after every built-in term (scale x
 *     q.k, softcap, ALiBi, additive mask) and returns the score the softmax
 *     sees: -inf hides the key, NaN makes its row NaN, as a built-in score
 *     would; sinks do not pass through it; lse and the split-KV merge see
 *     the modified scores.
 *   - The functions must be pure (same inputs, same result), terminate,
 *     and read only their arguments and parameters: a source that names
 *     layout, buffer, uniform, shared, barriers, atomics, images, subgroup
 *     operations or gl_ built-ins is INVALID_ARGUMENT (comments aside).
 *   - Every entry point (varlen, padded, caller pools, steps), every cache
 *     dtype, GQA, head dim, lse and mode takes a variant. Families: lanes,
 *     tiled and decode; coopmat takes variant calls only where the loaded
 *     compiler knows GL_KHR_cooperative_matrix (glslang 14 or later), and
 *     otherwise hands them to tiled, saying so once (warning). The cascade
 *     over shared prefixes does not run with a variant (its prefix pass
 *     cannot apply a per-row rule exactly): such calls run uncascaded.
 *   - Hidden tiles cost no loads: a mask function is evaluated over a
 *     tile's pairs (those the built-in range, causal and window rules
 *     leave) before any of its K/V is loaded, and
 *     keys none of the tile's rows sees are neither loaded nor (lanes,
 *     tiled) computed: lanes decides per lane and block of keys, tiled per
 *     workgroup and tile, decode per key group and tile (its math runs on
 *     zeros). coopmat visits only the tiles from the first to the last
 *     that some row of its work item sees, and applies the function per
 *     pair after its loads.
 *     Skipping is exact: results are bit for bit those without it.
 *   - Compiled with shaderc (libshaderc.so.1, Debian's libshaderc1; on
 *     Windows shaderc_shared.dll, which Debian does not ship), loaded at
 *     run time (VKATTN_SHADERC_LIBRARY names another); a process without
 *     it gets VKATTN_ERROR_UNSUPPORTED from vkattn_variant_create, naming
 *     the library. The SPIR-V of each family shader x source x
 *     param_dtypes x compiler is cached on disk beside the pipeline cache;
 *     VKATTN_LOG=compile logs each compile.
 *   - vkattn_variant_create: INVALID_ARGUMENT (vkattn_last_error() holding
 *     the compiler's message, lines counted from 1 in `source`) for a NULL
 *     source, a source that does not compile, one that defines neither
 *     function, one that reads a slot param_dtypes leaves 0 or through the
 *     other dtype's accessor, a param_dtypes value other than 0,
 *     VKATTN_F32 and VKATTN_I32.
 *   - A variant is used only with its own context's calls and follows that
 *     context's threading rule; destroy it in any order (calls recorded
 *     with it keep what they need). */
typedef struct vkattn_variant_desc {
  uint32_t struct_size;     /**< sizeof(vkattn_variant_desc) */
  const char* source;       /**< GLSL text defining the functions above */
  uint32_t param_dtypes[4]; /**< VKATTN_F32 or VKATTN_I32 per slot read; 0 = unused */
} vkattn_variant_desc;

/** Defaults: struct_size set, no source, no parameters. */
VKATTN_API void vkattn_variant_desc_init(vkattn_variant_desc* desc);
/** Checks and compiles `desc->source` (see above); *out = the variant. */
VKATTN_API vkattn_status vkattn_variant_create(vkattn_context* ctx, const vkattn_variant_desc* desc,
                                               vkattn_variant** out);
/** NULL is fine; any destroy order. */
VKATTN_API void vkattn_variant_destroy(vkattn_variant* variant);

/** Packed ("varlen") batch without padding: the tokens of all sequences are
 * concatenated. cu_seqlens_q/k are host prefix sums of batch + 1 entries,
 * [0] = 0, non-decreasing, [batch] = the tensor's first dim.
 * q [total_q, H, d], k [total_k, Hkv, d], v [total_k, Hkv, dv],
 * out [total_q, H, dv], lse [total_q, H]; mask 1-D with sum_b t_b*u_b
 * elements, each sequence's t_b x u_b block row-major, in batch order. */
VKATTN_API vkattn_status vkattn_attention_varlen(vkattn_context* ctx,
                                                 const vkattn_attention_desc* desc, uint32_t batch,
                                                 const int32_t* cu_seqlens_q,
                                                 const int32_t* cu_seqlens_k, vkattn_tensor* q,
                                                 vkattn_tensor* k, vkattn_tensor* v,
                                                 vkattn_tensor* out);

/** Padded batch (what HF users hold): q [B, Sq, H, d], k [B, Sk, Hkv, d],
 * v [B, Sk, Hkv, dv], out [B, Sq, H, dv], lse [B, Sq, H], mask [B, Sq, Sk].
 * Alignment is by index (t = Sq, u = Sk for every b). key_mask is a host
 * array [B * Sk] of 0/1 (HF attention_mask; 0 = padding key) or NULL; since
 * it only hides keys, left and right padding both work. Output rows of
 * padding queries are unspecified (0 when all their keys are hidden). */
VKATTN_API vkattn_status vkattn_attention_padded(vkattn_context* ctx,
                                                 const vkattn_attention_desc* desc,
                                                 vkattn_tensor* q, vkattn_tensor* k,
                                                 vkattn_tensor* v, const int32_t* key_mask,
                                                 vkattn_tensor* out);

/** Attention over caller-owned page pools (engines that manage their own
 * pages, vLLM / FlashInfer style): q [total_q, H, d] as in
 * vkattn_attention_varlen; k_pages [num_pages, page_size, Hkv, d] and
 * v_pages [num_pages, page_size, Hkv, dv] (views welcome: FlashInfer's
 * HND layout [num_pages, Hkv, page_size, d] is the view with strides
 * {Hkv*ps*d, d, ps*d, 1}; vLLM's combined [num_pages, 2, ps, Hkv, d]
 * tensor gives k and v as views at offsets 0 and ps*Hkv*d). page_size is
 * any value >= 1 (a view with token stride 0 makes a page of 2^32 - 1
 * slots cost one row); counts and offsets are computed in 64 bits, and
 * only what one dispatch cannot address is refused (UNSUPPORTED). Sequence b
 * has seq_lens_k[b] keys, key j in page page_indices[page_indptr[b] +
 * j / page_size], slot j % page_size (host arrays). Every used index is
 * checked < num_pages and every sequence must have enough pages, so no
 * table makes a shader read outside the pools. Bottom-right causal with
 * u = seq_lens_k[b]; window, softcap, ALiBi, lse and masks (per sequence
 * t_b x u_b, packed) as in vkattn_attention_varlen. Pools larger than one
 * binding are bound in windows of pages. Pools (and the k / v of the dense
 * ops) are f32, f16 or bf16: 8-bit pools give VKATTN_ERROR_UNSUPPORTED
 * (an 8-bit cache is a vkattn_kv_cache of dtype VKATTN_I8 / FP8_E4M3). */
VKATTN_API vkattn_status vkattn_attention_paged(
    vkattn_context* ctx, const vkattn_attention_desc* desc, uint32_t batch,
    const int32_t* cu_seqlens_q, const int32_t* seq_lens_k, const int32_t* page_indptr,
    const int32_t* page_indices, uint32_t page_size, vkattn_tensor* q, vkattn_tensor* k_pages,
    vkattn_tensor* v_pages, vkattn_tensor* out);

/** Writes new K/V rows into caller pools (the pools of vkattn_attention_
 * paged): k_new [total_new, Hkv, d], v_new [total_new, Hkv, dv] (f32, f16
 * or bf16, converted to the pools' dtype, round to nearest even); the
 * cu_seqlens_new[b + 1] - cu_seqlens_new[b] new tokens of sequence b go to
 * positions [seq_lens_before[b], seq_lens_before[b] + t_b) of its pages
 * (page_indptr / page_indices as in vkattn_attention_paged, which must
 * cover seq_lens_before[b] + t_b keys). Every used index is checked below
 * num_pages, and two new tokens mapped to one pool slot (a write race)
 * are refused; the pools must not overlap each other or the new rows.
 * 8-bit pools give VKATTN_ERROR_UNSUPPORTED. */
VKATTN_API vkattn_status vkattn_paged_append(vkattn_context* ctx, uint32_t batch,
                                             const int32_t* cu_seqlens_new,
                                             const int32_t* seq_lens_before,
                                             const int32_t* page_indptr,
                                             const int32_t* page_indices, uint32_t page_size,
                                             vkattn_tensor* k_new, vkattn_tensor* v_new,
                                             vkattn_tensor* k_pages, vkattn_tensor* v_pages);
/** vkattn_paged_append with k_new rotated by `rope` before it is stored:
 * new token i of sequence b sits at position seq_lens_before[b] + i. */
VKATTN_API vkattn_status vkattn_paged_append_rope(vkattn_context* ctx, const vkattn_rope_desc* rope,
                                                  uint32_t batch, const int32_t* cu_seqlens_new,
                                                  const int32_t* seq_lens_before,
                                                  const int32_t* page_indptr,
                                                  const int32_t* page_indices, uint32_t page_size,
                                                  vkattn_tensor* k_new, vkattn_tensor* v_new,
                                                  vkattn_tensor* k_pages, vkattn_tensor* v_pages);

/** Combines two partial attentions of the same queries over disjoint key
 * sets (shared prefix + suffix, split-KV): outs [n, H, dv] of one dtype,
 * lses [n, H] f32. out may alias out_a or out_b and lse may alias lse_a or
 * lse_b; lse may be NULL. A side whose lse is -inf is returned unchanged
 * from the other (its out may hold anything); a NaN lse on either side
 * gives NaN out and lse (a +inf lse: NaN, unless the other side is -inf).
 * A 16-bit out with an odd
 * element count leaves the element after it (the caller's) unchanged. */
VKATTN_API vkattn_status vkattn_attention_merge(vkattn_context* ctx, vkattn_tensor* out_a,
                                                vkattn_tensor* lse_a, vkattn_tensor* out_b,
                                                vkattn_tensor* lse_b, vkattn_tensor* out,
                                                vkattn_tensor* lse);

/**
 * Self-check at first use (docs/guide/self-check.md). The first time a context
 * is about to record an attention pipeline (kernel family and
 * specialization: head dims, dtypes, texel widths, paged or not, the
 * transforms compiled in) that has not been checked on this device, driver
 * and build of vkattn, vkattn runs that pipeline on vkattn's own queue on
 * a small known-answer problem of the same specialization and compares it
 * with a host reference. A pipeline that fails is never used: the call
 * runs on the next family that passes its own check (coopmat, then tiled,
 * then lanes; lanes falls back to tiled; decode to the device table's
 * family), and when none is left it fails with VKATTN_ERROR_UNSUPPORTED
 * naming the failed checks: a wrong kernel never reaches a caller's
 * output. VKATTN_LOG=kernels logs "attention fallback from A to B:
 * self-check failed (max err E)" (A, B: families); without it one line per
 * process says "vkattn: self-check failed: family=A ...; using B". A check
 * costs one small dispatch per new pipeline; a failed check changes no
 * caller tensor.
 *
 * Results are kept beside the pipeline cache (VKATTN_PIPELINE_CACHE_DIR,
 * else $XDG_CACHE_HOME/vkattn, else ~/.cache/vkattn; an empty
 * VKATTN_PIPELINE_CACHE_DIR keeps them in memory only) in
 * self-check-UUID.txt (the device UUID in hex), one section per device
 * UUID, driver version and build id of vkattn (a hash of its SPIR-V and
 * version): a process rewrites only its own section and keeps the other
 * builds' (the newest 4 sections in all), so builds sharing a machine do
 * not erase each other's results; a damaged section is dropped. Nothing is
 * said about other sections or damage unless VKATTN_LOG=files asks. VKATTN_SELF_CHECK=0 turns
 * checks off. The results file is trusted as written: a "fail" line edited to "pass" lets a kernel
 * that failed serve calls. Where that file may be tampered with, or a
 * driver changes without its version, delete it (or point
 * VKATTN_PIPELINE_CACHE_DIR elsewhere) to check again. A results file
 * that cannot be written (a read-only cache folder) is logged once per
 * process and fails nothing: the results stay in memory.
 * A 16-bit output pipeline is checked both with rows on word boundaries
 * and with rows that share 32-bit words with their neighbours (odd
 * offsets or dims: another store path of the same pipeline).
 * VKATTN_FAULT_KERNEL=FAMILY[,FAMILY] (lanes, tiled, coopmat, decode)
 * makes those families' kernels write wrong outputs, to watch the checks
 * catch them.
 * A call with an attention variant (user functions, desc->variant) runs
 * its family's pipeline with the functions spliced in, and that pipeline
 * is checked as itself (recorded as "SHADER#uHASH:SPEC"): a small kernel
 * evaluates the variant's functions on the device over the check's pairs
 * into a table, with parameter tensors of the check's own (1024 elements
 * per declared slot: I32 values 0..3 in runs of three, F32 in [-1, 1)),
 * and the host reference uses that table, so a splice a family gets wrong
 * is caught without a host copy of the functions. VKATTN_FAULT_USER=1
 * splices them wrongly into every family (not into the table), to watch.
 *
 * External mode: nothing is submitted there, so a pipeline first met in
 * external mode runs unchecked (logged once). Engines check up front with
 * vkattn_context_self_check, or run each call shape once before
 * vkattn_context_begin_external.
 */

/** Runs now the self-checks of the pipelines a call with `desc` would
 * record: q and out of `q_dtype`, K/V of `kv_dtype` (paged = 1: a paged
 * call, over a cache or caller pools; VKATTN_I8 and VKATTN_FP8_E4M3 need
 * paged = 1), sequences of `query_tokens` query tokens (1 for decode; the
 * family depends on it). The transforms desc names are checked too
 * (softcap, ALiBi, mask_type, lse and sinks by their presence; the tensors
 * are not read); a padded call's key_mask is not representable here: run
 * one such call first. query_tokens above 8 also checks the pipelines of
 * a decode (1 token) of the same desc: a call or step that mixes decodes
 * with longer sequences runs each class on its own family where the two
 * differ (see vkattn_attention_varlen), and both must be checked before
 * external mode. A mask_type needs no mask tensor here (its shape
 * depends on lengths this call has not); one that is given is checked as
 * a call checks it. Covered: every pipeline a call of this shape could
 * run at any key count: the device table's choice and, unless the
 * environment forces a kernel, the tuning file's entry for every key class
 * of the shape (a call's longest sequence picks its class), each failing
 * one replaced as for a call. Returns VKATTN_SUCCESS when such a call would
 * run on checked families, VKATTN_ERROR_UNSUPPORTED when every family
 * failed. With desc->variant, the variant pipelines are checked; its
 * declared parameter slots need tensors of their dtypes (checked as a
 * call checks them, not read: the check uses its own). Refused in external
 * mode. */
VKATTN_API vkattn_status vkattn_context_self_check(vkattn_context* ctx,
                                                   const vkattn_attention_desc* desc,
                                                   vkattn_dtype q_dtype, vkattn_dtype kv_dtype,
                                                   uint32_t paged, uint32_t query_tokens);

/** Self-check results recorded for this context's device, driver and
 * build: the pipelines of kernel family `family` (0 lanes, 1 tiled,
 * 2 coopmat, 3 decode) that passed and that failed (vkattn-info lists
 * them). */
VKATTN_API vkattn_status vkattn_context_self_check_counts(vkattn_context* ctx, uint32_t family,
                                                          uint32_t* passed, uint32_t* failed);

/**
 * Tuning on the user's own GPU (docs/guide/tuning.md). vkattn_tune measures, on
 * this context's device, the candidate kernel configurations of every
 * family the device can run for each shape class of a set of cases
 * (vkattn-bench's: prefill by head dims and dtypes, decode by GQA group and
 * keys, dense or paged, int8 and fp8 caches), within a time budget: the device table's own
 * choice first, then the others cheapest to compile first, each one
 * self-checked and its answers checked against a host reference on sampled
 * rows before it is timed (GPU timestamps: a warm-up, then the median of
 * five). A candidate that fails either check is never chosen. The fastest
 * is recorded per class in the device's tuning file (VKATTN_TUNING_FILE,
 * else tuning-UUID.txt beside the pipeline cache), which every context of
 * the device loads when it is created and uses before the device table
 * (VKATTN_TUNING=0 ignores it; a kernel choice forced through the
 * environment wins over it). A class is a call's prefill or decode shape,
 * head dims, GQA group, q and K/V dtypes, paged or not, and its longest
 * sequence's keys rounded down to a power of two; in a batch-invariant
 * context the keys are left out, so a tuned choice never depends on the
 * batch. No compile or run is ever started after the budget is spent (one
 * candidate under way may finish past it).
 *
 * A file entry is a suggestion, never a force: an entry whose values are
 * out of their knobs' ranges, that its family refuses or that this device
 * or build cannot run (coopmat in a build without it) is ignored with one
 * logged line per process and entry, and the call takes the device
 * table's choice; an entry whose family declines the call's shape falls
 * back as a forced family does. A damaged file, or one of another device,
 * driver or build, is ignored with one line per process. A
 * VKATTN_TUNING_FILE without a folder names a file in the current folder.
 */

/** Progress of vkattn_tune: `case_name` the case, `candidate` the kernel
 * options a candidate forces ("-": the device table's choice; "winner: ..."
 * once per case for the one recorded), `ms` its median GPU time, or a
 * negative value when it was not timed (-1: failed its self-check or its
 * answer check; -2: not valid on this device). */
typedef void (*vkattn_tune_progress)(void* user, const char* case_name, const char* candidate,
                                     double ms);

/** What vkattn_tune measures. */
typedef struct vkattn_tune_desc {
  uint32_t struct_size;          /**< sizeof(vkattn_tune_desc); 0 is rejected */
  double seconds;                /**< budget, wall clock, > 0 (compiles count) */
  uint32_t num_cases;            /**< entries of `cases`; 0 = every default case */
  const char* const* cases;      /**< fnmatch patterns over the case names (vkattn-bench's) */
  vkattn_tune_progress progress; /**< optional */
  void* user;                    /**< handed to progress */
  uint32_t reserved[4];          /**< must be 0 */
} vkattn_tune_desc;

/** Defaults: 60 seconds, every case, no progress callback. */
VKATTN_API void vkattn_tune_desc_init(vkattn_tune_desc* desc);

/** Runs the tuning (above) on ctx's device and writes the winners; the
 * device table's choice is always among the candidates measured. A pattern
 * that matches no case is INVALID_ARGUMENT. A tuning file that cannot be
 * written is VKATTN_ERROR_UNSUPPORTED naming the path and the OS's reason
 * (the winners stay in memory, for this context). With no file at all (an
 * empty VKATTN_PIPELINE_CACHE_DIR and no VKATTN_TUNING_FILE) the winners
 * stay in memory and it succeeds. Refused in external mode. */
VKATTN_API vkattn_status vkattn_tune(vkattn_context* ctx, const vkattn_tune_desc* desc);

/** The name of default tuning case `index` (NULL past the last). */
VKATTN_API const char* vkattn_tune_case_name(uint32_t index);

/** @} */

/* ------------------------------------------------------------------------ */
/* Paged KV cache and steps (continuous batching)                            */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup kvcache Paged KV cache
 * @brief A pool of pages holding K and V of every layer for sequences named
 * by caller-chosen ids: create, fork, truncate, remove, read back.
 * @{
 */

/** A pool of pages; one page holds page_size tokens of K and V for every kv
 * head of every layer: bytes per page = num_layers x (K block + V block),
 * a K block being round16(page_size x num_kv_heads x head_dim x dtype
 * size), plus round16(page_size x num_kv_heads x 4) for an int8 cache (its
 * per-token K scales, beside the rows); V likewise with head_dim_v.
 * round16 rounds up to a multiple of 16 bytes. An 8-bit cache (VKATTN_I8,
 * VKATTN_FP8_E4M3) thus takes half the bytes of f16 per token (int8: plus
 * 4 bytes per token, kv head and K or V for the scales). A VKATTN_Q4 K
 * block is round16(page_size x num_kv_heads x 4 x ceil(head_dim / 8))
 * (rows of codes, 8 to a 32-bit word) plus round16(page_size x
 * num_kv_heads x 2 x ceil(head_dim / 32)) (the blocks' f16 scales): 4.5
 * bits per element where head_dim is a multiple of 32, 4.5/16 of f16's
 * bytes. Sequences are
 * named by caller-chosen int64 ids and own a list of pages; pages are
 * reference counted, so a
 * forked sequence shares its source's pages until one side appends into a
 * shared partial page (that page alone is then copied, on the device).
 * Pools larger than one device buffer are split across several, by layers
 * first: while one layer of every page fits a buffer, each buffer holds
 * whole layers, so a layer's attention reads one buffer; beyond that, a
 * layer's pages are split into groups too. A buffer of an f32, f16, bf16 or
 * fp8 cache holds up to what attention's widest texel view covers (2^27
 * 16-byte texels, fp8 8-byte: 2 GiB on lavapipe and NVIDIA, fp8 1 GiB; at
 * most 2 GiB and the device's allocation limit), more than one storage binding may cover
 * (128 MiB on lavapipe): appends and attention bind it in windows of whole
 * pages, one dispatch per window their pages touch. int8 and q4 caches'
 * buffers stay within one storage binding (maxStorageBufferRange). */
typedef struct vkattn_kv_cache vkattn_kv_cache;
/** One open step of a cache: the sequences that take part and their new
 * token counts, with room reserved for those tokens. @ingroup steps */
typedef struct vkattn_step vkattn_step;

/** Shape of a cache: layers, kv heads, head dims, pages and dtype
 * (vkattn_kv_cache_desc_init sets the defaults). */
typedef struct vkattn_kv_cache_desc {
  uint32_t struct_size;  /**< sizeof(vkattn_kv_cache_desc); 0 is rejected */
  uint32_t num_layers;   /**< >= 1 */
  uint32_t num_kv_heads; /**< Hkv >= 1 */
  uint32_t head_dim;     /**< d, 1..VKATTN_MAX_HEAD_DIM */
  uint32_t head_dim_v;   /**< dv, 1..VKATTN_MAX_HEAD_DIM; 0 = head_dim */
  uint32_t page_size;    /**< tokens per page, >= 1 (default 16) */
  uint32_t num_pages;    /**< pages in the pool, >= 1 */
  /** f32, f16, bf16 (default f16), or an 8-bit cache:
   *  - VKATTN_I8: symmetric int8; the append kernel computes one scale per
   *    (token, kv head) for K and one for V, absmax / 127 of the row after
   *    RoPE (the device's f32 division), and stores round-to-nearest-even
   *    (x / scale) for that stored scale, exactly (ties included),
   *    saturated to +-127. An all-zero row: scale 0, codes 0. A row holding
   *    inf or NaN (int8 has no code for them): scale NaN, codes 0, so the
   *    row reads back as NaN (vkattn_kv_cache_read_scales) and every query
   *    that sees the key gets NaN outputs and lse. This is int8's rule,
   *    not f16's: an f16/bf16/f32 cache keeps inf, and the key's score is
   *    then +inf, -inf or NaN per query as the formula gives (a -inf
   *    score adds nothing, so those rows stay finite). vkattn_kv_cache_read
   *    returns the int8 rows and vkattn_kv_cache_read_scales their scales.
   *  - VKATTN_FP8_E4M3: code = e4m3fn(x / scale), the quotient rounded to
   *    nearest even exactly (ties included; not x * (1 / scale)),
   *    saturating at +-448 (NaN stays NaN); scale from
   *    vkattn_kv_cache_set_scales, required before a layer's first append.
   *  Attention dequantizes (code x scale, f32) in every kernel family; q,
   *  out and k_new / v_new stay f32/f16/bf16.
   *  - VKATTN_Q4: 4-bit codes, for K and V alike. Each row (token, kv head)
   *    is cut into blocks of 32 consecutive elements along the head dim
   *    (the last block of a row whose dim is not a multiple of 32 holds
   *    the dim % 32 elements left). The append kernel (after RoPE) finds a
   *    block's element of largest magnitude m (the first on a tie) and
   *    stores scale = m / -8 rounded to f16, nearest even, saturated at
   *    +-65504, so m itself codes to -8 as in ggml's q4_0; then codes =
   *    x / scale (that stored f16 scale) rounded to nearest even exactly
   *    (ties included; q4_0 rounds ties up), clamped to -8..7 (so -m codes
   *    to 7, one step short, as in q4_0). value = code x scale. A block
   *    whose scale rounds to 0 keeps codes 0 (reads back as 0); a block
   *    holding inf or NaN gets scale NaN and codes 0, so every value of it
   *    is NaN and every query that sees the key gets NaN outputs and lse
   *    (int8's rule, per block). 4.5 bits per element, as q4_0; the
   *    layout is not q4_0's (its 18-byte blocks interleave scale and
   *    codes, and its nibble order pairs elements i and i + 16): codes and
   *    scales sit apart so that a kernel reads 8 codes per 32-bit word,
   *    and a pool in ggml's block_q4_0 layout cannot be handed to vkattn.
   *    vkattn_kv_cache_read returns one int8 code (-8..7) per element and
   *    vkattn_kv_cache_read_block_scales the scales. Attention dequantizes
   *    (code x its block's scale, f32; coopmat into its f16 tiles) in
   *    every kernel family, split or not, batch-invariant or not.
   *    K and V share the dtype; a separate V dtype would come as a new
   *    field appended to this struct (0 = the same as dtype), as
   *    llama.cpp's -ctk / -ctv. */
  vkattn_dtype dtype;
  uint32_t reserved[4]; /**< must be 0 */
  /** vkattn_kv_cache_flag bits (default 0): VKATTN_KV_ROTATE_KEYS. Added
   * in 0.5; a struct_size of 48 (0.1-0.4) reads as 0. */
  uint32_t flags;
} vkattn_kv_cache_desc;

/** Flags of vkattn_kv_cache_desc.flags. */
typedef enum vkattn_kv_cache_flag {
  /** VKATTN_Q4 caches only (INVALID_ARGUMENT otherwise): keys are rotated
   * by the normalized Walsh-Hadamard transform before they are quantized,
   * which spreads the few outlier channels real keys have over the whole
   * head dim, so a 4-bit block's scale is no longer set by one channel
   * (QuaRot; measured in docs/bench/k4-accuracy-2026-11-28.md: the
   * median output error falls to about half of q4_0's). The transform
   * acts on each group of h consecutive elements of a key row, h the
   * largest power of two dividing head_dim: the whole row for 64, 128,
   * 256 or 512; groups of 32 for 96, of 16 for 80 and 112, of 64 for MLA's
   * 576; an odd head_dim has h = 1 and is stored as it is. Each group x
   * becomes x H / sqrt(h), H the h x h Sylvester Hadamard matrix (entry
   * (i, j) = (-1)^popcount(i & j)); the append applies it after RoPE and
   * before the block scales and codes are computed. vkattn_step_attention
   * over a rotated layer rotates the queries the same way first (a pass
   * over q into a temporary of q's dtype, f32 arithmetic) and then runs the
   * same kernels, so every q . k is the unrotated one up to rounding;
   * outputs, lse, masks, sinks and merges are unaffected. Values are not
   * rotated (values have no outlier channels; rotating them as well
   * changed the measured error by under 1 %). vkattn_kv_cache_read and
   * vkattn_kv_cache_read_block_scales return the rotated keys' codes and
   * scales: rotate a dequantized key row by the same transform (it is its
   * own inverse) to get back the key it stands for.
   * Range: both rotations compute the normalized transform without any
   * intermediate past sqrt(h) x the group's largest magnitude, within a
   * few f32 ulps of the exact transform, so a key row whose transform is
   * finite gets finite codes (its block scales saturated at +-65504, as
   * for any row), and the rotated queries are finite wherever the exact
   * transform fits q's dtype (an f16 q whose rotated elements pass 65504
   * becomes inf there, as it would stored as f16). Subnormal elements
   * follow the device's f32 denormal mode (they may be flushed to zero).
   * The self-check of a pipeline that reads VKATTN_Q4 runs twice, over an unrotated and a
   * rotated cache, and passes only if both pass, so
   * vkattn_context_self_check with kv_dtype VKATTN_Q4 checks both. */
  VKATTN_KV_ROTATE_KEYS = 1
} vkattn_kv_cache_flag;

/** Defaults: page_size 16, dtype f16, head_dim_v 0; the rest 0 (must be set). */
VKATTN_API void vkattn_kv_cache_desc_init(vkattn_kv_cache_desc* desc);
/** Allocates the page pool (device memory, not initialized). */
VKATTN_API vkattn_status vkattn_kv_cache_create(vkattn_context* ctx,
                                                const vkattn_kv_cache_desc* desc,
                                                vkattn_kv_cache** out);
/** NULL is accepted. An open step keeps its cache alive until it is
 * committed or aborted. */
VKATTN_API void vkattn_kv_cache_destroy(vkattn_kv_cache* cache);
/** Committed tokens of a sequence; 0 if it does not exist. */
VKATTN_API vkattn_status vkattn_kv_cache_length(vkattn_kv_cache* cache, int64_t seq_id,
                                                int32_t* out);
/** Frees the sequence's pages (shared pages stay while referenced). Unknown
 * ids are INVALID_ARGUMENT. Rejected while a step is open. */
VKATTN_API vkattn_status vkattn_kv_cache_remove(vkattn_kv_cache* cache, int64_t seq_id);
/** dst (a new id) shares every page of src; nothing is copied. Rejected
 * while a step is open. */
VKATTN_API vkattn_status vkattn_kv_cache_fork(vkattn_kv_cache* cache, int64_t src, int64_t dst);
/** Drops the tail: 0 <= new_length <= length (rejected speculative tokens).
 * Pages past the new length are released; a kept shared partial page stays
 * shared and is copied at the next append. Rejected while a step is open. */
VKATTN_API vkattn_status vkattn_kv_cache_truncate(vkattn_kv_cache* cache, int64_t seq_id,
                                                  int32_t new_length);
/** Pages referenced by no sequence and not reserved by an open step. */
VKATTN_API vkattn_status vkattn_kv_cache_num_free_pages(vkattn_kv_cache* cache, uint32_t* out);
/** Host copy of committed tokens [start, start + count) of one layer, in the
 * cache dtype: k_dst [count, Hkv, d] (k_bytes exactly that), v_dst
 * [count, Hkv, dv]. A VKATTN_Q4 cache gives one int8 code (-8..7) per
 * element, unpacked (k_bytes = count x Hkv x d). Waits for recorded work
 * that writes the cache. */
VKATTN_API vkattn_status vkattn_kv_cache_read(vkattn_kv_cache* cache, uint32_t layer,
                                              int64_t seq_id, int32_t start, int32_t count,
                                              void* k_dst, size_t k_bytes, void* v_dst,
                                              size_t v_bytes);
/** 8-bit caches: the f32 factors that dequantize the rows
 * vkattn_kv_cache_read returns for tokens [start, start + count) of one
 * layer, k_scales and v_scales [count, Hkv] (host arrays of count x Hkv
 * floats): value = code x scale. int8: the per-token scales the append
 * kernel stored; fp8: the layer's scales set by vkattn_kv_cache_set_scales,
 * repeated per token. Other cache dtypes: INVALID_ARGUMENT. Waits for
 * recorded work that writes the cache; rejected in external mode. */
VKATTN_API vkattn_status vkattn_kv_cache_read_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                     int64_t seq_id, int32_t start, int32_t count,
                                                     float* k_scales, float* v_scales);
/** VKATTN_Q4 caches: the block scales of tokens [start, start + count) of
 * one layer, widened to f32: k_scales [count, Hkv, ceil(d / 32)] (k_count
 * floats, exactly that), v_scales [count, Hkv, ceil(dv / 32)] (v_count);
 * value of element e = code x scale of block e / 32. Other cache dtypes:
 * INVALID_ARGUMENT (8-bit caches: vkattn_kv_cache_read_scales). Waits for
 * recorded work that writes the cache; rejected in external mode. */
VKATTN_API vkattn_status vkattn_kv_cache_read_block_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                           int64_t seq_id, int32_t start,
                                                           int32_t count, float* k_scales,
                                                           size_t k_count, float* v_scales,
                                                           size_t v_count);
/** fp8 caches: the scales of one layer's K and V (value = code x scale),
 * num_scales = 1 (the whole layer) or Hkv (one per kv head), each finite
 * and > 0. Must be called before the layer's first append (vkattn_step_
 * append* of that layer), and cannot change after it: an append to a layer
 * without scales is INVALID_ARGUMENT with nothing recorded. Calling it
 * again before the first append replaces the scales. Other cache dtypes:
 * INVALID_ARGUMENT (int8 computes its scales per token). */
VKATTN_API vkattn_status vkattn_kv_cache_set_scales(vkattn_kv_cache* cache, uint32_t layer,
                                                    uint32_t num_scales, const float* k_scales,
                                                    const float* v_scales);

/** @} */

/**
 * @defgroup steps Steps (continuous batching)
 * @brief One step of a packed batch over a cache: begin (reserve pages),
 * append and attend per layer, then commit or abort.
 * @{
 */

/** Opens a step over a packed batch: num_seqs distinct ids, each bringing
 * num_new_tokens[i] >= 0 tokens (unknown ids start new sequences at length
 * 0). Reserves every page the new tokens need, including copies of shared
 * partial last pages (the copies are recorded here, on the device).
 * VKATTN_ERROR_CACHE_FULL (or any failure) leaves the cache exactly as it
 * was. One open step per cache. The batch order of the step is the order of
 * seq_ids: new tokens of all layers' tensors are packed in that order. The
 * attention plan is built at the step's first vkattn_step_attention and
 * reused by every layer with the same heads, causal flag and window; each
 * layer's q and out are its own (views at other offsets of one activation
 * buffer included: where they lie is bound per call). */
VKATTN_API vkattn_status vkattn_step_begin(vkattn_kv_cache* cache, uint32_t num_seqs,
                                           const int64_t* seq_ids, const int32_t* num_new_tokens,
                                           vkattn_step** out);
/** Writes the step's new tokens of one layer at positions [len, len + t) of
 * each sequence, converted to the cache dtype (round to nearest even):
 * k_new [total_new, Hkv, d], v_new [total_new, Hkv, dv], f32/f16/bf16.
 * One dispatch per storage-binding window of a pool buffer that receives
 * tokens (one when the layer's pages fit one binding); copies of shared
 * pages were recorded by vkattn_step_begin.
 * Appending a layer twice overwrites it. */
VKATTN_API vkattn_status vkattn_step_append(vkattn_step* step, uint32_t layer, vkattn_tensor* k_new,
                                            vkattn_tensor* v_new);
/** vkattn_step_append with the keys rotated by `rope` before they are
 * stored (and before any quantization): new token i of a sequence sits at
 * position len + i. vkattn_kv_cache_read returns the rotated keys; values
 * are stored as given. */
VKATTN_API vkattn_status vkattn_step_append_rope(vkattn_step* step, uint32_t layer,
                                                 const vkattn_rope_desc* rope, vkattn_tensor* k_new,
                                                 vkattn_tensor* v_new);
/** Attention of the step's queries q [total_new, H, d] over the len + t
 * tokens of their sequence in this layer (append the layer first): out
 * [total_new, H, dv] in q's dtype, desc->lse [total_new, H] f32. Causal is
 * bottom-right (u = len + t); window, softcap, ALiBi and masks as in
 * vkattn_attention_varlen (mask: per sequence t x (len + t), in step order);
 * desc->num_kv_heads, head_dim and head_dim_v must match the cache. The
 * desc may differ per layer.
 *
 * Shared prefixes are read once (cascade attention): consecutive sequences
 * of the step whose block tables begin with the same full pages (forks of
 * one parent: parallel samples, beams, a shared system prompt) form a
 * group; their query rows attend to those shared keys as one prefill-like
 * tile, each sequence attends to the rest of its keys alone, and the two
 * merge by lse in the same submission (both in f32; out is rounded once,
 * so results match the call without cascade to f32 rounding). The shared
 * keys are the full pages every member held before this step (a fork's
 * copied partial page is its own). A group needs two members with queries
 * and at least 256 shared keys or 16 shared pages, whichever is fewer;
 * VKATTN_CASCADE=0 turns it off, =1 groups from one shared page. Under a
 * left window or chunks the group's tile covers the shared keys every
 * member's rows see (from the first key its furthest row sees); the keys
 * below that stay with each sequence (the threshold counts the keys the
 * tile covers). Causal, right windows, spans, trees, softcap and sinks
 * cascade as they are. Calls with ALiBi, a mask or top-k lists, a strided
 * out or lse, and batch-invariant contexts are not cascaded.
 * vkattn_attention_paged does the same over equal leading page_indices. */
VKATTN_API vkattn_status vkattn_step_attention(vkattn_step* step, uint32_t layer,
                                               const vkattn_attention_desc* desc, vkattn_tensor* q,
                                               vkattn_tensor* out);
/** Lengths advance by the step's token counts; frees the step. */
VKATTN_API vkattn_status vkattn_step_commit(vkattn_step* step);
/** Frees the step; lengths and pages are as before vkattn_step_begin (tokens
 * appended by the step are dropped). NULL is accepted. */
VKATTN_API void vkattn_step_abort(vkattn_step* step);

/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VKATTN_VKATTN_H_ */

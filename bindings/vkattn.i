/* vkattn.i: the SWIG interface shared by the Java, C#, Go and Python
 * bindings.
 *
 * SWIG reads include/vkattn/vkattn.h itself (enums, constants, the plain
 * structs); this file only says how handles become classes (%extend), how
 * a failing status becomes the language's error (%exception) and which
 * array parameters the languages fill. The per-language files
 * (java/vkattn_java.i, csharp/vkattn_csharp.i, go/vkattn_go.i,
 * python/vkattn_python.i) supply VKATTNX_RAISE, VKATTNX_CALL (how a native
 * call runs: Python releases the GIL around it) and the array typemaps
 * named IN_F32, OUT_F32, ... below. Nothing here falls back to one
 * language: each choice names its languages, and another language is an
 * error.
 *
 * Naming in this file: methods are written m_lowerCamel and renamed per
 * language (Java and Python's low-level module lowerCamel, C# and Go
 * UpperCamel); helpers that are not part of the C API start with vkattnx_.
 */
#if defined(SWIGGO)
%module vkattnraw
#elif defined(SWIGCSHARP)
%module Library
#elif defined(SWIGJAVA)
%module Vkattn
#elif defined(SWIGPYTHON)
/* The low-level module vkattn.vkattnraw (its extension: _vkattnraw). */
%module(package="vkattn") vkattnraw
#else
#error "vkattn.i: no binding for this SWIG language (Java, C#, Go, Python)"
#endif

%{
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SWIGGO)
/* A copy in the Go package directory: Go's build cache tracks only the
 * package's own files (bindings/CMakeLists.txt keeps the copy current). */
#include "vkattn.h"
#else
#include "vkattn/vkattn.h"
#endif

/* The status of the last call made by a wrapper on this thread and, for
 * checks the wrapper makes itself, its own message (NULL: the message is
 * vkattn_last_error()). %exception clears both, runs the call, and raises
 * within the same native call, so no other vkattn call can overwrite the
 * thread-local message in between. */
static _Thread_local int vkattnx_status;
static _Thread_local const char* vkattnx_message;
static _Thread_local char vkattnx_message_buf[512];

/* Records a C API status; returns nonzero on success. */
static int vkattnx_ok(vkattn_status status) {
  vkattnx_status = (int)status;
  vkattnx_message = NULL;
  return status == VKATTN_SUCCESS;
}

/* A check of the wrapper's own failed: INVALID_ARGUMENT with this message. */
static void vkattnx_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void vkattnx_fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(vkattnx_message_buf, sizeof vkattnx_message_buf, fmt, ap);
  va_end(ap);
  vkattnx_status = VKATTN_ERROR_INVALID_ARGUMENT;
  vkattnx_message = vkattnx_message_buf;
}

/* A closed (or never created) object reaches native code as NULL. */
#define VKATTNX_OPEN(self, what, ret)                             \
  do {                                                            \
    if (!(self)) {                                                \
      vkattnx_fail("vkattn: this " what " is closed");            \
      return ret;                                                 \
    }                                                             \
  } while (0)

static const char* vkattnx_dtype_name(vkattn_dtype d) {
  switch (d) {
    case VKATTN_F32: return "f32";
    case VKATTN_F16: return "f16";
    case VKATTN_BF16: return "bf16";
    case VKATTN_U8: return "u8";
    case VKATTN_I32: return "i32";
    case VKATTN_I8: return "i8";
    case VKATTN_FP8_E4M3: return "fp8_e4m3";
    case VKATTN_Q4: return "q4";
  }
  return "unknown";
}

/* Host array <-> tensor. `ok_dtype` says which tensor dtypes the array's
 * element type fits; the byte count is checked by the C API. */
static void vkattnx_transfer(vkattn_tensor* t, void* data, int64_t count, size_t elem,
                             int write, const char* array_kind, int ok_dtype) {
  if (!t) {
    vkattnx_fail("vkattn: this Tensor is closed");
    return;
  }
  if (!data && (count != 0 || vkattn_tensor_nbytes(t) != 0)) {
    vkattnx_fail("vkattn: the %s array is null", array_kind);
    return;
  }
  if (!ok_dtype) {
    vkattnx_fail("vkattn: a %s array does not fit a %s tensor", array_kind,
                 vkattnx_dtype_name(vkattn_tensor_dtype(t)));
    return;
  }
  static const char dummy = 0; /* a non-NULL pointer for zero-sized tensors */
  size_t nbytes = (size_t)count * elem;
  if (write)
    vkattnx_ok(vkattn_tensor_write(t, data ? data : &dummy, nbytes));
  else
    vkattnx_ok(vkattn_tensor_read(t, data ? data : (void*)&dummy, nbytes));
}

#define VKATTNX_IS16(t) \
  (vkattn_tensor_dtype(t) == VKATTN_F16 || vkattn_tensor_dtype(t) == VKATTN_BF16)

/* vkattn_tune's progress as text lines "case\tcandidate\tms\n". */
struct vkattnx_text {
  char* s;
  size_t n, cap;
};
static void vkattnx_tune_line(void* user, const char* name, const char* cand, double ms) {
  struct vkattnx_text* t = (struct vkattnx_text*)user;
  char line[512];
  int len = snprintf(line, sizeof line, "%s\t%s\t%.6g\n", name, cand, ms);
  if (len <= 0) return;
  if ((size_t)len >= sizeof line) len = (int)sizeof line - 1;
  if (t->n + (size_t)len + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->n + (size_t)len + 1) cap *= 2;
    char* s = (char*)realloc(t->s, cap);
    if (!s) return;
    t->s = s, t->cap = cap;
  }
  memcpy(t->s + t->n, line, (size_t)len);
  t->n += (size_t)len;
  t->s[t->n] = 0;
}
%}

%include <stdint.i>
#if defined(SWIGJAVA) || defined(SWIGCSHARP)
/* With SWIGWORDSIZE64, stdint.i makes int64_t a C long, which Java and C#
 * would map to a 32-bit int; uint64_t would become a BigInteger in Java.
 * Both are a signed 64-bit long here. */
%apply long long { int64_t };
%apply long long { uint64_t };
#endif

/* Every wrapped call: clear, call, and raise in the same native call.
 * VKATTNX_RAISE and VKATTNX_CALL come from the language's file. */
%exception {
  vkattnx_status = 0;
  vkattnx_message = NULL;
  VKATTNX_CALL($action)
  if (vkattnx_status != 0) {
    VKATTNX_RAISE(vkattnx_status, vkattnx_message ? vkattnx_message : vkattn_last_error());
  }
}

/* Per-language typemaps, VKATTNX_RAISE and class decorations. */
#if defined(SWIGJAVA)
%include "java/vkattn_java.i"
#elif defined(SWIGCSHARP)
%include "csharp/vkattn_csharp.i"
#elif defined(SWIGGO)
%include "go/vkattn_go.i"
#elif defined(SWIGPYTHON)
%include "python/vkattn_python.i"
#endif


/* ---- names ---------------------------------------------------------- */
/* The raw C functions are not wrapped: the classes below call them. */
%rename("$ignore", %$isfunction, %$not %$ismember) "";
%rename("%(strip:[VKATTN_])s", %$isenumitem) "";
%rename("%(strip:[VKATTN_])s", %$isconstant) "";
%ignore VKATTN_API;
%ignore VKATTN_VKATTN_H_;
%ignore vkattn_context_desc; /* Context's constructor takes its two fields */
/* Attention variants (user functions, 0.7): the C API's for now; the
 * bindings' Variant objects follow. */
%ignore vkattn_attention_desc::variant;
%ignore vkattn_attention_desc::variant_params;
%ignore vkattn_variant_desc;

%rename(Status) vkattn_status;
/* The library's messages: each language's .i file routes them to its
 * logging (vkattn_set_log_callback is not wrapped as a function pointer). */
%rename(LogLevel) vkattn_log_level;
%rename(DeviceType) vkattn_device_type;
%rename(Dtype) vkattn_dtype;
%rename(MaskType) vkattn_mask_type;
%rename(DeviceInfo) vkattn_device_info;
%rename(AttentionDesc) vkattn_attention_desc;
%rename(KvCacheDesc) vkattn_kv_cache_desc;
%rename(KvCacheFlag) vkattn_kv_cache_flag;
%rename(RopeDesc) vkattn_rope_desc;
%rename(RopeLayout) vkattn_rope_layout;
%rename(RopeScaling) vkattn_rope_scaling;
%rename(Context) vkattn_context;
%rename(Tensor) vkattn_tensor;

/* Plain structs: struct_size and reserved are the wrapper's business. */
%ignore vkattn_device_info::struct_size;
%ignore vkattn_attention_desc::struct_size;
%ignore vkattn_attention_desc::reserved;
/* Bidirectional spans: set through m_setSpans, which copies the arrays. */
%ignore vkattn_attention_desc::span_indptr;
%ignore vkattn_attention_desc::spans;
/* Trees (speculative decoding): set through m_setTrees, which copies the arrays. */
%ignore vkattn_attention_desc::tree_indptr;
%ignore vkattn_attention_desc::tree_mask;
%ignore vkattn_kv_cache_desc::struct_size;
%ignore vkattn_kv_cache_desc::reserved;
%ignore vkattn_rope_desc::struct_size;
%ignore vkattn_rope_desc::reserved;
%immutable vkattn_device_info::name;
%immutable vkattn_device_info::driver_name;
%immutable vkattn_device_info::driver_info;
%immutable vkattn_device_info::vendor_id;
%immutable vkattn_device_info::device_id;
%immutable vkattn_device_info::device_type;
%immutable vkattn_device_info::api_version;
%immutable vkattn_device_info::driver_version;
%immutable vkattn_device_info::subgroup_size;
%immutable vkattn_device_info::max_shared_memory;
%immutable vkattn_device_info::max_buffer_range;
%immutable vkattn_device_info::supports_f16;
%immutable vkattn_device_info::supports_16bit_storage;
%immutable vkattn_device_info::supports_bf16;

%{
/* AttentionDesc's spans (m_setSpans): one block holding the two arrays'
 * lengths, then span_indptr, then the pairs; desc->span_indptr points
 * past the lengths. The C API reads span_indptr[0 .. batch] and the
 * span_indptr[batch] pairs, so every call checks first that they exist
 * (vkattnx_spans_fit): an array shorter than the call needs raises
 * instead of reading past its end. */
typedef struct {
  int64_t indptr_len, pairs_len; /* int32 entries */
} vkattnx_spans_head;

static vkattnx_spans_head* vkattnx_spans_block(const vkattn_attention_desc* d) {
  return d->span_indptr ? (vkattnx_spans_head*)((char*)d->span_indptr -
                                                sizeof(vkattnx_spans_head))
                        : NULL;
}

static int vkattnx_spans_fit(const vkattn_attention_desc* d, int64_t batch) {
  const vkattnx_spans_head* h;
  int64_t n;
  if (!d || !d->span_indptr) return 1;
  h = vkattnx_spans_block(d);
  if (h->indptr_len != batch + 1) {
    vkattnx_fail("vkattn: AttentionDesc span_indptr has %lld entries, the call needs %lld "
                 "(batch + 1)", (long long)h->indptr_len, (long long)(batch + 1));
    return 0;
  }
  n = d->span_indptr[batch];
  if (n > 0 && 2 * n > h->pairs_len) {
    vkattnx_fail("vkattn: AttentionDesc span_indptr counts %lld spans, the spans array holds "
                 "%lld values (2 per span)", (long long)n, (long long)h->pairs_len);
    return 0;
  }
  return 1;
}

/* AttentionDesc's trees (m_setTrees), laid out as the spans: one block
 * holding the two arrays' lengths, then tree_indptr, then the words;
 * desc->tree_indptr points past the lengths. The C API reads
 * tree_indptr[0 .. batch] and the tree_indptr[batch] words, so every call
 * checks first that they exist (vkattnx_trees_fit). */
typedef struct {
  int64_t indptr_len, words_len; /* 32-bit entries */
} vkattnx_trees_head;

static vkattnx_trees_head* vkattnx_trees_block(const vkattn_attention_desc* d) {
  return d->tree_indptr ? (vkattnx_trees_head*)((char*)d->tree_indptr -
                                                sizeof(vkattnx_trees_head))
                        : NULL;
}

static int vkattnx_trees_fit(const vkattn_attention_desc* d, int64_t batch) {
  const vkattnx_trees_head* h;
  int64_t n;
  if (!d || !d->tree_indptr) return 1;
  h = vkattnx_trees_block(d);
  if (h->indptr_len != batch + 1) {
    vkattnx_fail("vkattn: AttentionDesc tree_indptr has %lld entries, the call needs %lld "
                 "(batch + 1)", (long long)h->indptr_len, (long long)(batch + 1));
    return 0;
  }
  n = d->tree_indptr[batch];
  if (n > 0 && n > h->words_len) {
    vkattnx_fail("vkattn: AttentionDesc tree_indptr counts %lld words, the tree_mask array "
                 "holds %lld", (long long)n, (long long)h->words_len);
    return 0;
  }
  return 1;
}
%}

/* Array parameters: each language maps (T* NAME, int64_t LEN) to one array
 * (Java T[], C# T[], Go []T); the names below select the typemaps. Class
 * members are wrapped where the class is declared, so these come first. */
%apply (const int32_t* IN_I32, int64_t IN_LEN) {
  (const int32_t* cuQ, int64_t cuQLen),
  (const int32_t* cuK, int64_t cuKLen),
  (const int32_t* keyMask, int64_t keyMaskLen),
  (const int32_t* cuSeqlens, int64_t cuSeqlensLen),
  (const int32_t* startPositions, int64_t startPositionsLen),
  (const int32_t* spanIndptr, int64_t spanIndptrLen),
  (const int32_t* spanPairs, int64_t spanPairsLen),
  (const int32_t* treeIndptr, int64_t treeIndptrLen)
};
%apply (const uint32_t* IN_U32, int64_t IN_LEN) { (const uint32_t* treeMask, int64_t treeMaskLen) };
%apply (const int64_t* IN_I64, int64_t IN_LEN) { (const int64_t* shape, int64_t ndim) };
%apply (const float* IN_F32, int64_t IN_LEN) { (const float* data, int64_t count) };
%apply (const uint16_t* IN_U16, int64_t IN_LEN) { (const uint16_t* data, int64_t count) };
%apply (const int32_t* IN_I32, int64_t IN_LEN) { (const int32_t* data, int64_t count) };
%apply (const uint8_t* IN_U8, int64_t IN_LEN) { (const uint8_t* data, int64_t count) };
%apply (float* OUT_F32, int64_t OUT_LEN) { (float* dst, int64_t count) };
%apply (uint16_t* OUT_U16, int64_t OUT_LEN) { (uint16_t* dst, int64_t count) };
%apply (int32_t* OUT_I32, int64_t OUT_LEN) { (int32_t* dst, int64_t count) };
%apply (uint8_t* OUT_U8, int64_t OUT_LEN) { (uint8_t* dst, int64_t count) };
#if defined(SWIGJAVA)
/* A shape is the constructor's last parameter: new Tensor(ctx, Dtype.F32, 4, 2, 8). */
%typemap(jstype) (const int64_t* shape, int64_t ndim) "long..."
#elif defined(SWIGCSHARP)
%typemap(cstype) (const int64_t* shape, int64_t ndim) "params long[]"
#endif

/* The plain structs' field accessors would dereference a deleted (NULL)
 * object: raise instead. */
#if defined(SWIGGO)
#define VKATTNX_RETURN_NULL /* the raise panics */
#elif defined(SWIGPYTHON)
#define VKATTNX_RETURN_NULL /* the raise jumps to the wrapper's fail label */
#else /* Java, C# */
#define VKATTNX_RETURN_NULL return $null;
#endif
%define VKATTNX_PLAIN_STRUCT(STRUCT, NAME)
%typemap(check) struct STRUCT* self %{
  if (!$1) {
    VKATTNX_RAISE(VKATTN_ERROR_INVALID_ARGUMENT, "vkattn: this " NAME " was deleted");
    VKATTNX_RETURN_NULL
  }
%}
%enddef
VKATTNX_PLAIN_STRUCT(vkattn_attention_desc, "AttentionDesc")

#if defined(SWIGJAVA) || defined(SWIGCSHARP)
/* AttentionDesc's tensor fields: the proxy keeps the Tensor objects and
 * checks, before every call that reads the desc, that each is still open
 * (a Tensor closed after it was stored would leave the native struct a
 * dangling pointer); the per-language .i files add those accessors over
 * this one setter (field 0 alibi_slopes, 1 mask, 2 lse, 3 sinks,
 * 4 topk_indices). */
%ignore vkattn_attention_desc::alibi_slopes;
%ignore vkattn_attention_desc::mask;
%ignore vkattn_attention_desc::lse;
%ignore vkattn_attention_desc::sinks;
%ignore vkattn_attention_desc::topk_indices;
%extend vkattn_attention_desc {
  void m_setTensorField(int32_t field, vkattn_tensor* t) {
    if (field == 0) self->alibi_slopes = t;
    else if (field == 1) self->mask = t;
    else if (field == 2) self->lse = t;
    else if (field == 3) self->sinks = t;
    else if (field == 4) self->topk_indices = t;
  }
}
#endif
VKATTNX_PLAIN_STRUCT(vkattn_kv_cache_desc, "KvCacheDesc")
VKATTNX_PLAIN_STRUCT(vkattn_rope_desc, "RopeDesc")
VKATTNX_PLAIN_STRUCT(vkattn_device_info, "DeviceInfo")

/* ---- handles -------------------------------------------------------- */
/* SWIG sees the handles as empty structs; the C types stay incomplete and
 * %extend supplies constructor, destructor and methods. */
%nodefaultctor vkattn_device_info;
%nodefaultctor vkattn_context;
%nodefaultctor vkattn_tensor;
struct vkattn_context {};
struct vkattn_tensor {};
/* Attention variants (user functions): each language's Variant (Python
 * vkattn.Variant, Java's AutoCloseable, C#'s IDisposable, Go's *Variant). */
%nodefaultctor vkattn_variant;
%rename(Variant) vkattn_variant;
struct vkattn_variant {};

%newobject vkattn_context::m_deviceInfo;
%newobject vkattn_context::m_tune;
%newobject vkattnx_device_info;


%include "vkattn/vkattn.h"

/* ---- module-level functions ------------------------------------------ */
#if defined(SWIGJAVA) || defined(SWIGPYTHON)
%rename(version) vkattnx_version;
%rename(statusString) vkattnx_status_string;
%rename(dtypeSize) vkattnx_dtype_size;
%rename(deviceCount) vkattnx_device_count;
%rename(deviceInfo) vkattnx_device_info;
#else /* C#, Go */
%rename(Version) vkattnx_version;
%rename(StatusString) vkattnx_status_string;
%rename(DtypeSize) vkattnx_dtype_size;
%rename(DeviceCount) vkattnx_device_count;
%rename(GetDeviceInfo) vkattnx_device_info; /* DeviceInfo is the class */
#endif
%inline %{
/* major*10000 + minor*100 + patch of the loaded library. */
static int64_t vkattnx_version(void) { return (int64_t)vkattn_version(); }
static const char* vkattnx_status_string(vkattn_status s) { return vkattn_status_string(s); }
static int64_t vkattnx_dtype_size(vkattn_dtype d) { return (int64_t)vkattn_dtype_size(d); }
/* Vulkan devices visible (0 without a loader); creates no context. */
static int64_t vkattnx_device_count(void) {
  uint32_t n = 0;
  vkattnx_ok(vkattn_device_count(&n));
  return (int64_t)n;
}
static vkattn_device_info* vkattnx_device_info(int64_t index) {
  if (index < 0 || index > UINT32_MAX) {
    vkattnx_fail("vkattn: device index %lld out of range", (long long)index);
    return NULL;
  }
  vkattn_device_info* info = (vkattn_device_info*)calloc(1, sizeof *info);
  if (info) vkattn_device_info_init(info);
  if (!info) {
    vkattnx_fail("vkattn: out of host memory");
    return NULL;
  }
  if (!vkattnx_ok(vkattn_device_get_info((uint32_t)index, info))) {
    free(info);
    return NULL;
  }
  return info;
}
%}

/* ---- plain structs ---------------------------------------------------- */
%extend vkattn_device_info {
  ~vkattn_device_info() { free(self); }
}


%extend vkattn_attention_desc {
  /* Bidirectional spans: copies of span_indptr (batch + 1 prefix sums of
   * the sequences' span counts) and the (start, end) pairs, flattened;
   * a null span_indptr clears them. */
  void m_setSpans(const int32_t* spanIndptr, int64_t spanIndptrLen, const int32_t* spanPairs,
                  int64_t spanPairsLen) {
    /* Checked and allocated first: a failed set keeps the spans it had. */
    vkattnx_spans_head* h = NULL;
    int32_t* data;
    if (!spanIndptr && spanPairs && spanPairsLen > 0) {
      vkattnx_fail("vkattn: spans given without span_indptr");
      return;
    }
    if (spanIndptr && (spanIndptrLen < 1 || spanPairsLen < 0 || spanPairsLen % 2)) {
      vkattnx_fail("vkattn: span_indptr needs batch + 1 >= 1 entries (has %lld) and the spans "
                   "2 values per span (has %lld)", (long long)spanIndptrLen,
                   (long long)spanPairsLen);
      return;
    }
    if (spanIndptr) {
      h = (vkattnx_spans_head*)malloc(sizeof *h + 4 * (size_t)(spanIndptrLen + spanPairsLen));
      if (!h) {
        vkattnx_fail("vkattn: out of host memory");
        return;
      }
    }
    free(vkattnx_spans_block(self));
    self->span_indptr = NULL;
    self->spans = NULL;
    if (!h) return;
    h->indptr_len = spanIndptrLen;
    h->pairs_len = spanPairsLen;
    data = (int32_t*)(h + 1);
    memcpy(data, spanIndptr, 4 * (size_t)spanIndptrLen);
    if (spanPairsLen) memcpy(data + spanIndptrLen, spanPairs, 4 * (size_t)spanPairsLen);
    self->span_indptr = data;
    self->spans = data + spanIndptrLen;
  }
  /* Trees (speculative decoding): copies of tree_indptr (batch + 1 prefix
   * sums of the sequences' word counts) and the words, t_b * ceil(t_b / 32)
   * per sequence with a tree; a null tree_indptr (and a null tree_mask)
   * clears them. A call that raises leaves the trees set before it: they
   * are replaced only once the new arrays are checked and copied (a failed
   * set used to clear them, so the next call ran without its tree). A
   * tree_mask without tree_indptr raises also when it is empty (a
   * non-null array of no words), as the C API rejects one. */
  void m_setTrees(const int32_t* treeIndptr, int64_t treeIndptrLen, const uint32_t* treeMask,
                  int64_t treeMaskLen) {
    vkattnx_trees_head* h = NULL;
    int32_t* data = NULL;
    if (!treeIndptr && treeMask) {
      vkattnx_fail("vkattn: tree_mask given without tree_indptr");
      return;
    }
    if (treeIndptr && (treeIndptrLen < 1 || treeMaskLen < 0)) {
      vkattnx_fail("vkattn: tree_indptr needs batch + 1 >= 1 entries (has %lld)",
                   (long long)treeIndptrLen);
      return;
    }
    if (treeIndptr) {
      h = (vkattnx_trees_head*)malloc(sizeof *h + 4 * (size_t)(treeIndptrLen + treeMaskLen));
      if (!h) {
        vkattnx_fail("vkattn: out of host memory");
        return;
      }
    }
    free(vkattnx_trees_block(self));
    self->tree_indptr = NULL;
    self->tree_mask = NULL;
    if (!h) return;
    h->indptr_len = treeIndptrLen;
    h->words_len = treeMaskLen;
    data = (int32_t*)(h + 1);
    memcpy(data, treeIndptr, 4 * (size_t)treeIndptrLen);
    if (treeMaskLen) memcpy(data + treeIndptrLen, treeMask, 4 * (size_t)treeMaskLen);
    self->tree_indptr = data;
    self->tree_mask = (const uint32_t*)(data + treeIndptrLen);
  }
  /* Defaults of vkattn_attention_desc_init: windows -1, chunk 0, no mask/ALiBi/lse;
   * head counts and dims must be set. */
  vkattn_attention_desc() {
    vkattn_attention_desc* d = (vkattn_attention_desc*)calloc(1, sizeof *d);
    if (!d) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    vkattn_attention_desc_init(d);
    return d;
  }
  ~vkattn_attention_desc() {
    free(vkattnx_spans_block(self));
    free(vkattnx_trees_block(self));
    free(self);
  }
}

%extend vkattn_rope_desc {
  /* Defaults of vkattn_rope_desc_init: NeoX halves, full rotary dim,
   * theta 10000, no scaling. */
  vkattn_rope_desc() {
    vkattn_rope_desc* d = (vkattn_rope_desc*)calloc(1, sizeof *d);
    if (!d) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    vkattn_rope_desc_init(d);
    return d;
  }
  ~vkattn_rope_desc() { free(self); }
}

/* ---- Context ---------------------------------------------------------- */
%extend vkattn_context {
  /* The default device (VKATTN_DEVICE, else the best one). */
  vkattn_context() {
    vkattn_context* ctx = NULL;
    vkattnx_ok(vkattn_context_create(NULL, &ctx));
    return ctx;
  }
  /* device_index -1 = default; flags = CONTEXT_VALIDATION | CONTEXT_PROFILING |
     CONTEXT_BATCH_INVARIANT. */
  vkattn_context(int32_t deviceIndex, int64_t flags) {
    vkattn_context_desc d;
    vkattn_context* ctx = NULL;
    if (flags < 0 || flags > UINT32_MAX) {
      vkattnx_fail("vkattn: flags %lld out of range", (long long)flags);
      return NULL;
    }
    vkattn_context_desc_init(&d);
    d.device_index = deviceIndex;
    d.flags = (uint32_t)flags;
    vkattnx_ok(vkattn_context_create(&d, &ctx));
    return ctx;
  }
  ~vkattn_context() { vkattn_context_destroy(self); }

  void m_flush() {
    VKATTNX_OPEN(self, "Context", );
    vkattnx_ok(vkattn_context_flush(self));
  }
  void m_synchronize() {
    VKATTNX_OPEN(self, "Context", );
    vkattnx_ok(vkattn_context_synchronize(self));
  }
  vkattn_device_info* m_deviceInfo() {
    vkattn_device_info* info;
    VKATTNX_OPEN(self, "Context", NULL);
    info = (vkattn_device_info*)calloc(1, sizeof *info);
    if (info) vkattn_device_info_init(info);
    if (!info) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    if (!vkattnx_ok(vkattn_context_get_device_info(self, info))) {
      free(info);
      return NULL;
    }
    return info;
  }
  int64_t m_validationMessages() {
    uint32_t n = 0;
    VKATTNX_OPEN(self, "Context", 0);
    vkattnx_ok(vkattn_context_validation_messages(self, &n));
    return (int64_t)n;
  }
  /* vkattn_context_self_check: raises where no family passed (UNSUPPORTED). */
  void m_selfCheck(const vkattn_attention_desc* desc, int32_t qDtype, int32_t kvDtype,
                   int32_t paged, int64_t queryTokens) {
    VKATTNX_OPEN(self, "Context", );
    if (paged != 0 && paged != 1) {
      vkattnx_fail("vkattn: paged must be 0 or 1, got %d", (int)paged);
      return;
    }
    if (queryTokens < 1 || queryTokens > (1 << 24)) {
      vkattnx_fail("vkattn: query_tokens must be 1 .. 2^24, got %lld", (long long)queryTokens);
      return;
    }
    vkattnx_ok(vkattn_context_self_check(self, desc, (vkattn_dtype)qDtype, (vkattn_dtype)kvDtype,
                                         paged ? 1u : 0u, (uint32_t)queryTokens));
  }
  /* vkattn_tune over comma-separated case patterns ("" = every case; an
   * empty pattern in a list is a caller error, never "every case"): the
   * progress as lines "case\tcandidate\tms". Patterns are passed whole,
   * however many and however long. */
  char* m_tune(double seconds, const char* cases) {
    struct vkattnx_text t = {NULL, 0, 0};
    const char** pats = NULL;
    char* buf = NULL;
    uint32_t n = 0;
    size_t len = cases ? strlen(cases) : 0, most = 1;
    vkattn_tune_desc d;
    vkattn_status st;
    VKATTNX_OPEN(self, "Context", NULL);
    for (size_t i = 0; i < len; ++i) most += cases[i] == ',';
    if (len > 0) {
      buf = (char*)malloc(len + 1);
      pats = (const char**)malloc(most * sizeof(*pats));
      if (!buf || !pats) {
        free(buf);
        free(pats);
        vkattnx_fail("vkattn: out of host memory for %zu case patterns", most);
        return NULL;
      }
      memcpy(buf, cases, len + 1);
      for (char* p = buf;;) {
        char* e = strchr(p, ',');
        if (e) *e = 0;
        if (!*p) {
          free(buf);
          free(pats);
          vkattnx_fail("vkattn: case pattern %u is empty (pass no patterns to tune every case)",
                       (unsigned)n);
          return NULL;
        }
        pats[n++] = p;
        if (!e) break;
        p = e + 1;
      }
    }
    vkattn_tune_desc_init(&d);
    d.seconds = seconds;
    d.num_cases = n;
    d.cases = n ? pats : NULL;
    d.progress = vkattnx_tune_line;
    d.user = &t;
    st = vkattn_tune(self, &d);
    free(buf);
    free(pats);
    if (!vkattnx_ok(st)) {
      free(t.s);
      return NULL;
    }
    if (!t.s) t.s = (char*)calloc(1, 1);
    return t.s;
  }
  /* vkattn_context_self_check_counts: passed (failed = 0) or failed (1). */
  int64_t m_selfCheckCount(int32_t family, int32_t failed) {
    uint32_t p = 0, f = 0;
    VKATTNX_OPEN(self, "Context", 0);
    if (family < 0) {
      vkattnx_fail("vkattn: family %d is not an attention family", (int)family);
      return 0;
    }
    vkattnx_ok(vkattn_context_self_check_counts(self, (uint32_t)family, &p, &f));
    return failed ? (int64_t)f : (int64_t)p;
  }
  /* GPU nanoseconds of the last completed submission (PROFILING only). */
  int64_t m_lastGpuTimeNs() {
    uint64_t ns = 0;
    VKATTNX_OPEN(self, "Context", 0);
    vkattnx_ok(vkattn_context_last_gpu_time(self, &ns));
    return (int64_t)ns;
  }

  /* Packed batch: cuQ and cuK are the prefix sums (batch + 1 entries). */
  void m_attentionVarlen(const vkattn_attention_desc* desc, const int32_t* cuQ,
                         int64_t cuQLen, const int32_t* cuK, int64_t cuKLen,
                         vkattn_tensor* q, vkattn_tensor* k, vkattn_tensor* v,
                         vkattn_tensor* out) {
    VKATTNX_OPEN(self, "Context", );
    if (!cuQ || !cuK) {
      vkattnx_fail("vkattn: cu_seqlens_%s is null", cuQ ? "k" : "q");
      return;
    }
    if (cuQLen < 1 || cuQLen - 1 > UINT32_MAX) {
      vkattnx_fail("vkattn: cu_seqlens_q needs batch + 1 >= 1 entries, has %lld",
                   (long long)cuQLen);
      return;
    }
    if (cuKLen != cuQLen) {
      vkattnx_fail("vkattn: cu_seqlens_k has %lld entries, cu_seqlens_q %lld (both batch + 1)",
                   (long long)cuKLen, (long long)cuQLen);
      return;
    }
    if (!vkattnx_spans_fit(desc, cuQLen - 1) || !vkattnx_trees_fit(desc, cuQLen - 1)) return;
    vkattnx_ok(vkattn_attention_varlen(self, desc, (uint32_t)(cuQLen - 1), cuQ, cuK, q, k,
                                       v, out));
  }

  /* Padded batch; keyMask (B * Sk entries of 0/1) may be null. */
  void m_attentionPadded(const vkattn_attention_desc* desc, vkattn_tensor* q,
                         vkattn_tensor* k, vkattn_tensor* v, const int32_t* keyMask,
                         int64_t keyMaskLen, vkattn_tensor* out) {
    VKATTNX_OPEN(self, "Context", );
    /* The C API cannot see the array's length: check it here (q and k are
     * checked by the C call when this check passes or does not apply). */
    if (keyMask && q && k && vkattn_tensor_ndim(q) == 4 && vkattn_tensor_ndim(k) == 4) {
      int64_t want = vkattn_tensor_shape(q, 0) * vkattn_tensor_shape(k, 1);
      if (keyMaskLen != want) {
        vkattnx_fail("vkattn: keyMask has %lld entries, expected B * Sk = %lld",
                     (long long)keyMaskLen, (long long)want);
        return;
      }
    }
    if (q && vkattn_tensor_ndim(q) == 4) {
      int64_t batch = vkattn_tensor_shape(q, 0);
      if (!vkattnx_spans_fit(desc, batch) || !vkattnx_trees_fit(desc, batch)) return;
    }
    vkattnx_ok(vkattn_attention_padded(self, desc, q, k, v, keyMask, out));
  }

  /* RoPE of x [total, heads, head_dim] into out (may be x): cuSeqlens has
   * batch + 1 prefix sums, startPositions batch entries. */
  void m_rope(const vkattn_rope_desc* desc, const int32_t* cuSeqlens, int64_t cuSeqlensLen,
              const int32_t* startPositions, int64_t startPositionsLen, vkattn_tensor* x,
              vkattn_tensor* out) {
    VKATTNX_OPEN(self, "Context", );
    if (!cuSeqlens || cuSeqlensLen < 1 || cuSeqlensLen - 1 > UINT32_MAX) {
      vkattnx_fail("vkattn: cu_seqlens needs batch + 1 >= 1 entries");
      return;
    }
    if (startPositionsLen != cuSeqlensLen - 1) {
      vkattnx_fail("vkattn: start_positions has %lld entries, expected batch = %lld",
                   (long long)startPositionsLen, (long long)(cuSeqlensLen - 1));
      return;
    }
    vkattnx_ok(vkattn_rope(self, desc, (uint32_t)(cuSeqlensLen - 1), cuSeqlens, startPositions,
                           x, out));
  }

  /* Combines two partial attentions over disjoint key sets; lse may be null. */
  void m_attentionMerge(vkattn_tensor* outA, vkattn_tensor* lseA, vkattn_tensor* outB,
                        vkattn_tensor* lseB, vkattn_tensor* out, vkattn_tensor* lse) {
    VKATTNX_OPEN(self, "Context", );
    vkattnx_ok(vkattn_attention_merge(self, outA, lseA, outB, lseB, out, lse));
  }
}

/* ---- Tensor ----------------------------------------------------------- */

%extend vkattn_variant {
  /* The user's GLSL (vkattn.h "Attention variants") and the dtype of each
     parameter slot (0 = unused). */
  vkattn_variant(vkattn_context* ctx, const char* source, int64_t d0, int64_t d1, int64_t d2,
                 int64_t d3) {
    vkattn_variant_desc d;
    vkattn_variant* v = NULL;
    const int64_t dt[4] = {d0, d1, d2, d3};
    vkattn_variant_desc_init(&d);
    d.source = source;
    for (int s = 0; s < 4; ++s) {
      if (dt[s] < 0 || dt[s] > UINT32_MAX) {
        vkattnx_fail("vkattn: param_dtypes[%d] = %lld is not a dtype", s, (long long)dt[s]);
        return NULL;
      }
      d.param_dtypes[s] = (uint32_t)dt[s];
    }
    vkattnx_ok(vkattn_variant_create(ctx, &d, &v));
    return v;
  }
  ~vkattn_variant() { vkattn_variant_destroy(self); }
}
%extend vkattn_attention_desc {
  /* desc->variant and desc->variant_params[slot] (NULL: none); each
     language's desc keeps the objects and checks them before a call. */
  void m_setVariantHandle(vkattn_variant* v) { self->variant = v; }
  void m_setVariantParamHandle(int64_t slot, vkattn_tensor* t) {
    if (slot < 0 || slot > 3) {
      vkattnx_fail("vkattn: variant parameter slot %lld is not 0..3", (long long)slot);
      return;
    }
    self->variant_params[slot] = t;
  }
}

%extend vkattn_tensor {
  /* A device tensor, row-major, 1..4 dims; the contents start undefined. */
  vkattn_tensor(vkattn_context* ctx, vkattn_dtype dtype, const int64_t* shape, int64_t ndim) {
    vkattn_tensor* t = NULL;
    if (!shape) {
      vkattnx_fail("vkattn: the shape array is null");
      return NULL;
    }
    if (ndim < 0 || ndim > UINT32_MAX) ndim = 0; /* rejected by the C call */
    vkattnx_ok(vkattn_tensor_create(ctx, dtype, (uint32_t)ndim, shape, &t));
    return t;
  }
  ~vkattn_tensor() { vkattn_tensor_destroy(self); }

  /* Whole-tensor transfers; the array length must equal the element count.
   * f32 <-> float, f16/bf16 <-> 16-bit bit patterns, i32 <-> int; bytes fit
   * any dtype (length = nbytes). */
  void m_writeF32(const float* data, int64_t count) {
    vkattnx_transfer(self, (void*)data, count, 4, 1, "float",
                     self && vkattn_tensor_dtype(self) == VKATTN_F32);
  }
  void m_writeU16(const uint16_t* data, int64_t count) {
    vkattnx_transfer(self, (void*)data, count, 2, 1, "16-bit", self && VKATTNX_IS16(self));
  }
  void m_writeI32(const int32_t* data, int64_t count) {
    vkattnx_transfer(self, (void*)data, count, 4, 1, "int",
                     self && vkattn_tensor_dtype(self) == VKATTN_I32);
  }
  void m_writeBytes(const uint8_t* data, int64_t count) {
    vkattnx_transfer(self, (void*)data, count, 1, 1, "byte", 1);
  }
  void m_readF32(float* dst, int64_t count) {
    vkattnx_transfer(self, dst, count, 4, 0, "float",
                     self && vkattn_tensor_dtype(self) == VKATTN_F32);
  }
  void m_readU16(uint16_t* dst, int64_t count) {
    vkattnx_transfer(self, dst, count, 2, 0, "16-bit", self && VKATTNX_IS16(self));
  }
  void m_readI32(int32_t* dst, int64_t count) {
    vkattnx_transfer(self, dst, count, 4, 0, "int",
                     self && vkattn_tensor_dtype(self) == VKATTN_I32);
  }
  void m_readBytes(uint8_t* dst, int64_t count) {
    vkattnx_transfer(self, dst, count, 1, 0, "byte", 1);
  }

  vkattn_dtype m_dtype() {
    VKATTNX_OPEN(self, "Tensor", VKATTN_F32);
    return vkattn_tensor_dtype(self);
  }
  int32_t m_ndim() {
    VKATTNX_OPEN(self, "Tensor", 0);
    return (int32_t)vkattn_tensor_ndim(self);
  }
  /* Size of dimension i, 0 <= i < ndim. */
  int64_t m_dim(int32_t i) {
    VKATTNX_OPEN(self, "Tensor", 0);
    if (i < 0 || (uint32_t)i >= vkattn_tensor_ndim(self)) {
      vkattnx_fail("vkattn: dim %d out of range: the tensor has %u dims", (int)i,
                   vkattn_tensor_ndim(self));
      return 0;
    }
    return vkattn_tensor_shape(self, (uint32_t)i);
  }
  int64_t m_nbytes() {
    VKATTNX_OPEN(self, "Tensor", 0);
    return (int64_t)vkattn_tensor_nbytes(self);
  }
  /* Number of elements. */
  int64_t m_numel() {
    int64_t n = 1;
    uint32_t i;
    VKATTNX_OPEN(self, "Tensor", 0);
    for (i = 0; i < vkattn_tensor_ndim(self); ++i) n *= vkattn_tensor_shape(self, i);
    return n;
  }
}

%include "vkattn_kv.i"

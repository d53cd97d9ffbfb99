"""vkattn: LLM attention as Vulkan compute shaders (the Python binding).

A thin layer over the C library (libvkattn) through the SWIG-generated
module ``vkattn.vkattnraw``:

    import numpy as np, vkattn
    with vkattn.Context() as ctx:
        q = ctx.tensor(np.random.rand(7, 8, 64).astype(np.float32))  # [T, H, d]
        k = ctx.tensor(np.random.rand(9, 2, 64).astype(np.float32))  # [U, Hkv, d]
        v = ctx.tensor(np.random.rand(9, 2, 64).astype(np.float32))
        out = vkattn.attention_varlen(q, k, v, [0, 7], [0, 9], causal=True)
        print(out.numpy().shape)  # (7, 8, 64)

Semantics are the C header's (include/vkattn/vkattn.h): bottom-right causal
alignment, windows, bool/additive masks, ALiBi, softcap, GQA/MQA, lse. Every
failing call raises ``vkattn.Error`` with the library's status and message.
Objects own device memory: close them (``with`` blocks or ``close()``);
they may be closed in any order. A Context and the objects made from it are
used by one thread at a time; the GIL is released inside every native call.

Host arrays: NumPy float32 <-> f32, float16 <-> f16, uint16 <-> bf16 (bit
patterns, as in the C API), int32 <-> i32, uint8 <-> u8. Transfers read and
write C-contiguous arrays in place (no copy beyond the device transfer);
other arrays are made contiguous first.
"""

import atexit as _atexit
import logging as _logging
import operator as _operator

import numpy as _np

from . import vkattnraw as _raw
from ._version import __version__

__all__ = [
    "__version__", "Error", "Context", "Tensor", "KvCache", "Step", "AttentionDesc", "Variant",
    "F32", "F16", "BF16", "U8", "I32", "I8", "FP8_E4M3", "Q4", "MASK_NONE", "MASK_BOOL", "MASK_ADDITIVE",
    "version", "device_count", "device_info", "attention_varlen", "attention_padded",
    "attention_merge", "spans_from_token_type_ids", "tree_mask_from_bool",
    "rope", "RopeDesc", "ROPE_NEOX", "ROPE_GPTJ", "ROPE_SCALING_NONE",
    "ROPE_SCALING_LINEAR", "ROPE_SCALING_LLAMA3", "ROPE_SCALING_YARN",
    "set_log_handler", "LOG_ERROR", "LOG_WARNING", "LOG_INFO", "LOG_DEBUG",
]

F32, F16, BF16, U8, I32 = _raw.F32, _raw.F16, _raw.BF16, _raw.U8, _raw.I32
# 8-bit KV cache dtypes (KvCache(dtype=...)): int8 codes, fp8 e4m3fn codes;
# Q4: 4-bit codes with an f16 scale per block of 32 (a cache dtype only).
I8, FP8_E4M3, Q4 = _raw.I8, _raw.FP8_E4M3, _raw.Q4
MASK_NONE, MASK_BOOL, MASK_ADDITIVE = _raw.MASK_NONE, _raw.MASK_BOOL, _raw.MASK_ADDITIVE
CONTEXT_VALIDATION, CONTEXT_PROFILING = _raw.CONTEXT_VALIDATION, _raw.CONTEXT_PROFILING
CONTEXT_BATCH_INVARIANT = _raw.CONTEXT_BATCH_INVARIANT
ROPE_NEOX, ROPE_GPTJ = _raw.ROPE_NEOX, _raw.ROPE_GPTJ
ROPE_SCALING_NONE, ROPE_SCALING_LINEAR = _raw.ROPE_SCALING_NONE, _raw.ROPE_SCALING_LINEAR
ROPE_SCALING_LLAMA3, ROPE_SCALING_YARN = _raw.ROPE_SCALING_LLAMA3, _raw.ROPE_SCALING_YARN

# Status codes (vkattn_status).
SUCCESS = _raw.SUCCESS
ERROR_INVALID_ARGUMENT = _raw.ERROR_INVALID_ARGUMENT
ERROR_UNSUPPORTED = _raw.ERROR_UNSUPPORTED
ERROR_OUT_OF_HOST_MEMORY = _raw.ERROR_OUT_OF_HOST_MEMORY
ERROR_OUT_OF_DEVICE_MEMORY = _raw.ERROR_OUT_OF_DEVICE_MEMORY
ERROR_CACHE_FULL = _raw.ERROR_CACHE_FULL
ERROR_NO_DEVICE = _raw.ERROR_NO_DEVICE
ERROR_DEVICE_LOST = _raw.ERROR_DEVICE_LOST
ERROR_INTERNAL = _raw.ERROR_INTERNAL


class Error(Exception):
    """A failed vkattn call: ``status`` (a vkattn_status code), its name
    ``status_name`` and the library's ``message`` for that call (read in the
    same native call), or the binding's own message when it rejected the
    call first (a closed object, a wrong array)."""

    def __init__(self, status, message=""):
        super().__init__(status, message)
        self.status = int(status)
        self.message = message

    @property
    def status_name(self):
        return _raw.statusString(self.status)

    def __str__(self):
        return "%s: %s" % (self.status_name, self.message)


_raw.setErrorClass(Error)

# The library's messages (vkattn_set_log_callback): by default to the
# ``logging`` logger "vkattn" at the matching level (errors and warnings;
# VKATTN_LOG's categories as INFO and DEBUG: configure logging to see
# them, e.g. ``logging.basicConfig(level=logging.DEBUG)``).
LOG_ERROR, LOG_WARNING = _raw.LOG_ERROR, _raw.LOG_WARNING
LOG_INFO, LOG_DEBUG = _raw.LOG_INFO, _raw.LOG_DEBUG
logger = _logging.getLogger("vkattn")
_LOGGING_LEVEL = {LOG_ERROR: _logging.ERROR, LOG_WARNING: _logging.WARNING,
                  LOG_INFO: _logging.INFO, LOG_DEBUG: _logging.DEBUG}


def _to_logging(level, message):
    logger.log(_LOGGING_LEVEL.get(level, _logging.WARNING), "%s", message)


def set_log_handler(handler=_to_logging):
    """Where the library's messages go, process-wide: ``handler(level,
    message)`` with ``level`` one of LOG_ERROR, LOG_WARNING, LOG_INFO,
    LOG_DEBUG and ``message`` one line (str). The default hands them to
    the ``logging`` logger "vkattn"; ``None`` gives them back to the
    library, which prints them on stderr as "vkattn: <message>". The
    handler runs on the thread that logs, holding the GIL; it must not call
    vkattn. An exception it raises is reported as unraisable and ignored.
    Once this returns, the previous handler receives nothing more."""
    if handler is not None and not callable(handler):
        raise TypeError("vkattn: set_log_handler takes a callable(level, message) or None")
    _raw.setLogHandler(handler)


set_log_handler(_to_logging)
# (At exit the handler goes first: a message after the interpreter's end
# goes to stderr.)
_atexit.register(_raw.setLogHandler, None)

_NP_OF = {F32: _np.float32, F16: _np.float16, BF16: _np.uint16, I32: _np.int32, U8: _np.uint8,
          I8: _np.int8, FP8_E4M3: _np.uint8, Q4: _np.int8}
_VK_OF = {_np.dtype(_np.float32): F32, _np.dtype(_np.float16): F16, _np.dtype(_np.int32): I32,
          _np.dtype(_np.uint8): U8, _np.dtype(_np.bool_): U8}
_NAMES = {F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", U8: "u8", I8: "i8",
          FP8_E4M3: "fp8_e4m3", Q4: "q4"}


def _fail(message):
    return Error(ERROR_INVALID_ARGUMENT, "vkattn: " + message)


# Caller values are converted exactly or refused before the C call: an
# integer argument takes a Python int, a NumPy integer or a bool within the
# C type's range; a float (3.0 included), a string or None is a TypeError,
# a value outside the range an OverflowError. Integer arrays take integer
# NumPy arrays of any width and sequences of such values (bool arrays only
# where 0/1 is meant: key_mask), checked element by element alike.
_RANGES = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
           "int64": (-2**63, 2**63 - 1)}


def _int(value, name, ctype="int32"):
    """``value`` as a Python int that fits ``ctype`` (see above)."""
    if isinstance(value, (float, complex, _np.floating, _np.complexfloating)):
        raise TypeError("vkattn: %s must be an integer, got the float %r" % (name, value))
    try:
        v = _operator.index(value)
    except TypeError:
        raise TypeError("vkattn: %s must be an integer, got %r" % (name, value)) from None
    lo, hi = _RANGES[ctype]
    if not lo <= v <= hi:
        raise OverflowError("vkattn: %s = %d is outside %s (%d..%d)" % (name, v, ctype, lo, hi))
    return v


def _flag(value, name):
    """A yes/no argument: a bool (Python or NumPy) or the integer 0 or 1."""
    if isinstance(value, (bool, _np.bool_)):
        return 1 if value else 0
    v = _int(value, name, "uint32")
    if v not in (0, 1):
        raise ValueError("vkattn: %s must be True/False or 0/1, got %d" % (name, v))
    return v


def _ints(values, name, ctype="int32", allow_bool=False):
    """``values`` (an integer array or a sequence of integers) as a flat,
    C-contiguous NumPy array of ``ctype``, every element checked as _int
    checks one (an empty sequence is an empty array)."""
    if values is None or isinstance(values, (str, bytes)):
        raise TypeError("vkattn: %s must be an array of integers, got %r" % (name, values))
    a = _np.asarray(values)
    lo, hi = _RANGES[ctype]
    if a.size == 0:
        return _np.zeros(0, ctype)
    if not isinstance(values, _np.ndarray) and a.dtype.kind not in "iub":
        # A sequence NumPy did not read as integers: Python ints past int64
        # (read as floats or objects), floats, strings, None; each element
        # is checked as it is.
        a = _np.asarray(values, dtype=object)
    if a.dtype == _np.bool_:
        if not allow_bool:
            raise TypeError("vkattn: %s must hold integers, got a bool array" % name)
        return _np.ascontiguousarray(a, dtype=ctype).reshape(-1)
    if a.dtype.kind in "iu":
        if int(a.min()) < lo or int(a.max()) > hi:
            bad = a.reshape(-1)[(a.reshape(-1) < lo) | (a.reshape(-1) > hi)][0]
            raise OverflowError("vkattn: %s holds %d, outside %s (%d..%d)" %
                                (name, int(bad), ctype, lo, hi))
        return _np.ascontiguousarray(a, dtype=ctype).reshape(-1)
    if a.dtype.kind == "O":  # Python ints past int64, or mixed objects
        return _np.array([_int(x, name + " element", ctype) for x in a.reshape(-1)], ctype)
    raise TypeError("vkattn: %s must hold integers, got %s values (%r)" %
                    (name, a.dtype, a.reshape(-1)[0]))


def version():
    """major*10000 + minor*100 + patch of the loaded library (``__version__``
    is this package's release as text, "MAJOR.MINOR.PATCH")."""
    return _raw.version()


def device_count():
    """Vulkan devices visible (0 without a loader); creates no context."""
    return _raw.deviceCount()


def _info_dict(info):
    return {
        "name": info.name, "driver_name": info.driver_name, "driver_info": info.driver_info,
        "vendor_id": info.vendor_id, "device_id": info.device_id,
        "device_type": info.device_type, "api_version": info.api_version,
        "driver_version": info.driver_version, "subgroup_size": info.subgroup_size,
        "max_shared_memory": info.max_shared_memory, "max_buffer_range": info.max_buffer_range,
        "supports_f16": bool(info.supports_f16),
        "supports_16bit_storage": bool(info.supports_16bit_storage),
    }


def device_info(index):
    """The device at ``index`` (0 <= index < device_count()) as a dict of
    vkattn_device_info's fields."""
    return _info_dict(_raw.deviceInfo(index))


class _Owned:
    """Something that owns a C handle: close() once, then every use raises."""

    _h = None
    _kind = "object"

    def _handle(self):
        if self._h is None:
            raise _fail("this %s is closed" % self._kind)
        return self._h

    def close(self):
        """Releases the handle (device memory is freed once no recorded work
        uses it). Closing twice does nothing."""
        h, self._h = self._h, None
        if h is not None:
            type(h).__swig_destroy__(h)  # the C destroy, now (not at GC time)

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the module may be gone
            pass


class Context(_Owned):
    """One Vulkan device and its queue. ``device_index`` -1 is the default
    (VKATTN_DEVICE, else the best device); ``validation`` turns on the Khronos
    validation layer (``validation_messages`` counts what it reported);
    ``profiling`` records GPU time (``last_gpu_time_ns``); ``batch_invariant``
    makes a sequence's outputs bit-identical whatever shares its batch
    (VKATTN_CONTEXT_BATCH_INVARIANT)."""

    _kind = "Context"

    def __init__(self, device_index=-1, validation=False, profiling=False, batch_invariant=False):
        flags = (CONTEXT_VALIDATION if _flag(validation, "validation") else 0)
        flags |= CONTEXT_PROFILING if _flag(profiling, "profiling") else 0
        flags |= CONTEXT_BATCH_INVARIANT if _flag(batch_invariant, "batch_invariant") else 0
        self._h = _raw.Context(_int(device_index, "device_index"), flags)

    @property
    def device_info(self):
        """The context's device as a dict (see vkattn.device_info)."""
        return _info_dict(self._handle().deviceInfo())

    @property
    def validation_messages(self):
        return self._handle().validationMessages()

    @property
    def last_gpu_time_ns(self):
        return self._handle().lastGpuTimeNs()

    def self_check(self, q_dtype=F16, kv_dtype=F16, paged=False, query_tokens=1, **desc):
        """Runs now the first-use self-checks (docs/guide/self-check.md) of the
        pipelines a call with this descriptor (AttentionDesc keywords:
        num_heads, num_kv_heads, head_dim, causal, softcap, ...), dtypes,
        paged or not and query tokens per sequence would use; raises
        vkattn.Error (UNSUPPORTED) when every family failed. Call it before
        external mode, where checks cannot run."""
        d = AttentionDesc(**desc)
        self._handle().selfCheck(d._native(), _vk_dtype(q_dtype), _vk_dtype(kv_dtype),
                                 _flag(paged, "paged"), _int(query_tokens, "query_tokens", "uint32"))

    def tune(self, seconds=60, cases=None):
        """Tunes this device's kernel choices (docs/guide/tuning.md;
        vkattn_tune): the candidates of the default cases whose names match
        ``cases`` (fnmatch patterns; None = every case) within ``seconds``,
        each self-checked and answer-checked before it is timed; the
        winners go to the device's tuning file, which every later context
        uses. Returns the progress as (case, candidate, ms) tuples
        (candidate "-": the device table's choice; "winner: ...": the one
        recorded; ms < 0: not timed)."""
        if isinstance(cases, str):
            cases = [cases]
        cases = list(cases or [])
        for c in cases:
            if not isinstance(c, str) or not c or "," in c:
                raise ValueError("vkattn: a case pattern must be a non-empty string without "
                                 "commas, got %r (cases=None tunes every case)" % (c,))
        if isinstance(seconds, (str, bytes)) or seconds is None:
            raise TypeError("vkattn: seconds must be a number, got %r" % (seconds,))
        text = self._handle().tune(float(seconds), ",".join(cases))
        rows = []
        for line in (text or "").splitlines():
            name, cand, ms = line.split("\t")
            rows.append((name, cand, float(ms)))
        return rows

    @property
    def self_check_results(self):
        """{family: (passed, failed)}: the pipelines each kernel family
        passed and failed on this device, driver and build."""
        h = self._handle()
        return {name: (h.selfCheckCount(i, 0), h.selfCheckCount(i, 1))
                for i, name in enumerate(("lanes", "tiled", "coopmat", "decode"))}

    def flush(self):
        """Submits recorded work without waiting."""
        self._handle().flush()

    def synchronize(self):
        """Submits recorded work and waits for it (the GIL is released)."""
        self._handle().synchronize()

    def empty(self, shape, dtype=F32):
        """A new device tensor of ``shape`` (1 to 4 dims); contents undefined.
        ``dtype`` is F32, F16, BF16, I32, U8 or a NumPy dtype."""
        return Tensor(self, shape, dtype)

    def tensor(self, array, dtype=None):
        """A new device tensor holding ``array`` (a NumPy array or anything
        np.asarray takes). uint16 arrays need ``dtype`` (F16 or BF16 bits)."""
        a = _np.asarray(array)
        if dtype is None:
            if a.dtype not in _VK_OF:
                raise _fail("no tensor dtype for a %s array (give dtype=)" % a.dtype)
            dtype = _VK_OF[a.dtype]
        t = Tensor(self, a.shape, dtype)
        try:
            t.write(a)
        except BaseException:
            t.close()
            raise
        return t

    def kv_cache(self, num_layers, num_kv_heads, head_dim, num_pages, head_dim_v=0,
                 page_size=16, dtype=F16, rotate_keys=False):
        """A paged KV cache (vkattn_kv_cache_desc's fields as keywords;
        ``rotate_keys``: VKATTN_KV_ROTATE_KEYS, Q4 caches only)."""
        return KvCache(self, num_layers=num_layers, num_kv_heads=num_kv_heads,
                       head_dim=head_dim, head_dim_v=head_dim_v, page_size=page_size,
                       num_pages=num_pages, dtype=dtype, rotate_keys=rotate_keys)


def _vk_dtype(dtype):
    if dtype is None or isinstance(dtype, (bool, _np.bool_)):
        raise TypeError("vkattn: dtype must be a vkattn dtype or a NumPy dtype, got %r" % dtype)
    if isinstance(dtype, (int, _np.integer)):
        if int(dtype) in _NAMES:
            return int(dtype)
        raise _fail("unknown dtype %d (F32, F16, BF16, U8, I32, I8, FP8_E4M3, Q4 or a NumPy "
                    "dtype)" % dtype)
    try:
        d = _np.dtype(dtype)
    except TypeError:
        raise TypeError("vkattn: dtype must be a vkattn dtype or a NumPy dtype, got %r"
                        % (dtype,)) from None
    if d not in _VK_OF:
        raise _fail("no tensor dtype for %s (uint16: give F16 or BF16)" % d)
    return _VK_OF[d]


class Tensor(_Owned):
    """A device tensor, row-major, 1 to 4 dims. ``numpy()`` reads it back,
    ``write(array)`` fills it; both check the element type and count."""

    _kind = "Tensor"

    def __init__(self, ctx, shape, dtype=F32):
        if _np.isscalar(shape) and not isinstance(shape, (str, bytes)):
            shape = (shape,)
        shape = tuple(int(s) for s in _ints(shape, "shape", "int64"))
        self.context = ctx
        # Fixed for the tensor's life: kept here, not asked of the library.
        self._shape, self._dtype = shape, _vk_dtype(dtype)
        self._h = _raw.Tensor(ctx._handle(), self._dtype, _np.asarray(shape, _np.int64))

    @property
    def dtype(self):
        self._handle()  # a closed tensor raises
        return self._dtype

    @property
    def shape(self):
        self._handle()
        return self._shape

    @property
    def nbytes(self):
        return self._handle().nbytes()

    def _array_for(self, array):
        dt = self.dtype
        a = _np.ascontiguousarray(array)
        want = _np.dtype(_NP_OF[dt])
        if a.dtype == _np.bool_ and dt == U8:
            a = a.view(_np.uint8)
        if a.dtype != want:
            raise _fail("a %s array does not fit a %s tensor (want %s)"
                        % (a.dtype, _NAMES[dt], want))
        return a

    def write(self, array):
        """Copies ``array`` (element count = the tensor's, any shape) to the
        device; waits for nothing else."""
        a = self._array_for(array)
        if a.size != int(_np.prod(self.shape, dtype=_np.int64)):
            raise _fail("the array has %d elements, the tensor %s"
                        % (a.size, "x".join(map(str, self.shape)) or "1"))
        self._handle().writeBytes(a.reshape(-1).view(_np.uint8))

    def numpy(self, out=None):
        """The tensor's contents as a new array of its shape (f32 float32,
        f16 float16, bf16 uint16 bits, i32 int32, u8 uint8), or into ``out``
        (C-contiguous, same element count and dtype). Waits for the work that
        writes the tensor (the GIL is released)."""
        dt = self.dtype
        if out is None:
            out = _np.empty(self.shape, _NP_OF[dt])
        elif not (isinstance(out, _np.ndarray) and out.flags.c_contiguous):
            raise _fail("out must be a C-contiguous NumPy array")
        self._array_for(out)
        if out.size != int(_np.prod(self.shape, dtype=_np.int64)):
            raise _fail("out has %d elements, the tensor %s" % (out.size, self.shape))
        self._handle().readBytes(out.reshape(-1).view(_np.uint8))
        return out

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        if self._h is None:
            return "vkattn.Tensor(closed)"
        return "vkattn.Tensor(shape=%s, dtype=%s)" % (self.shape, _NAMES[self.dtype])


class Variant(_Owned):
    """An attention variant (user functions): GLSL defining
    ``bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos)``
    and/or ``float vkattn_score_mod(float score, uint seq, uint head, int
    q_pos, int k_pos)``, reading parameter slot s through
    ``vkattn_param_f32(s, index)`` / ``vkattn_param_i32(s, index)``;
    ``param_dtypes`` gives each slot's dtype (up to four of F32, I32 or
    None). Compiled on the device at first use (docs/guide/variants.md).
    Pass it as ``variant=`` with ``variant_params=`` (Tensors) to any
    attention call. A context manager; close() releases it."""

    _kind = "Variant"

    def __init__(self, ctx, source, param_dtypes=()):
        if not isinstance(source, str):
            raise TypeError("vkattn: source must be a str of GLSL, got %r" % type(source).__name__)
        dts = list(param_dtypes)
        if len(dts) > 4:
            raise _fail("param_dtypes holds at most 4 slots, got %d" % len(dts))
        codes = [0 if d is None else _vk_dtype(d) for d in dts] + [0] * (4 - len(dts))
        self.context = ctx
        self._dtypes = tuple(None if c == 0 else c for c in codes)
        self._h = _raw.Variant(ctx._handle(), source, *codes)

    @property
    def param_dtypes(self):
        return self._dtypes

    def __repr__(self):
        return "vkattn.Variant(closed)" if self._h is None else "vkattn.Variant(%s)" % (
            ", ".join("None" if d is None else _NAMES[d] for d in self._dtypes))


class AttentionDesc:
    """vkattn_attention_desc as keywords: num_heads, num_kv_heads, head_dim,
    head_dim_v (0 = head_dim), scale (0 = 1/sqrt(head_dim)), causal,
    window_left (-1 = none), window_right (-1 = none), chunk_size (0 = off:
    chunked local attention), softcap (0 = off), mask_type, alibi_slopes,
    mask, lse, sinks (Tensors or None; sinks: [H] f32 attention-sink logits),
    span_indptr and spans (bidirectional spans, Gemma 3's image tokens:
    span_indptr holds batch + 1 prefix sums of the sequences' span counts,
    spans the (start, end) position pairs, flattened or [n, 2]; a query
    inside a span also sees every key of it; spans_from_token_type_ids
    builds both from HF's token_type_ids), tree_indptr and tree_mask
    (speculative-decoding trees: tree_indptr holds batch + 1 prefix sums of
    the sequences' 32-bit word counts, tree_mask the words, t * ceil(t / 32)
    per sequence with a tree, row i's bits saying which of the t draft
    tokens query i sees; tree_mask_from_bool builds both from boolean
    [t, t] matrices) and topk_indices (top-k sparse attention: an i32
    Tensor [rows, K] or [rows, Hkv, K], rows = the call's query tokens;
    query i sees only the key positions 0 .. u - 1 of its own sequence
    that its list holds, other entries skipped), variant (an attention
    variant: a vkattn.Variant of user functions, or None) and
    variant_params (its parameter Tensors: a sequence of up to four, None
    where the variant declares no slot)."""

    FIELDS = ("num_heads", "num_kv_heads", "head_dim", "head_dim_v", "scale", "causal",
              "window_left", "window_right", "chunk_size", "softcap", "mask_type",
              "alibi_slopes", "mask", "lse", "sinks", "span_indptr", "spans",
              "tree_indptr", "tree_mask", "topk_indices", "variant", "variant_params")
    TENSORS = ("alibi_slopes", "mask", "lse", "sinks", "topk_indices")
    SPANS = ("span_indptr", "spans")
    TREES = ("tree_indptr", "tree_mask")
    # The C types of the integer fields (converted by _int before SWIG).
    INTS = {"num_heads": "uint32", "num_kv_heads": "uint32", "head_dim": "uint32",
            "head_dim_v": "uint32", "window_left": "int32", "window_right": "int32",
            "chunk_size": "uint32", "mask_type": "uint32"}

    def __init__(self, **fields):
        self._d = _raw.AttentionDesc()
        self._keep = {}
        for name, value in fields.items():
            self[name] = value
        # A mask without mask_type: bool for a u8 tensor, else additive.
        if fields.get("mask") is not None and "mask_type" not in fields:
            self["mask_type"] = MASK_BOOL if fields["mask"].dtype == U8 else MASK_ADDITIVE

    def __setitem__(self, name, value):
        if name not in self.FIELDS:
            raise TypeError("vkattn: AttentionDesc has no field %r" % name)
        if name in self.SPANS:
            fields = {n: self._keep.get(n) for n in self.SPANS}
            fields[name] = None if value is None else _ints(value, name)
            indptr, spans = fields["span_indptr"], fields["spans"]
            if indptr is None and spans is None:
                self._d.setSpans(None, None)
            elif indptr is not None:  # (spans alone wait for their span_indptr)
                self._d.setSpans(indptr, _np.zeros(0, _np.int32) if spans is None else spans)
            self._keep.update(fields)  # (as the trees: only once the native desc took them)
            return
        if name in self.TREES:
            ctype = "uint32" if name == "tree_mask" else "int32"
            trees = {n: self._keep.get(n) for n in self.TREES}
            trees[name] = None if value is None else _ints(value, name, ctype)
            indptr, words = trees["tree_indptr"], trees["tree_mask"]
            if indptr is None and words is None:
                self._d.setTrees(None, None)
            elif indptr is not None:  # (words alone wait for their tree_indptr)
                self._d.setTrees(indptr, _np.zeros(0, _np.uint32) if words is None else words)
            # Kept only once the native desc took them: a set that raises
            # leaves both as they were (the field read back is the tree the
            # calls use).
            self._keep.update(trees)
            return
        if name == "variant":
            if value is not None and not isinstance(value, Variant):
                raise TypeError("vkattn: variant must be a vkattn.Variant or None")
            if value is not None and value.closed:
                raise _fail("AttentionDesc.variant: this Variant is closed")
            self._d.setVariantHandle(None if value is None else value._handle())
            self._keep[name] = value
            return
        if name == "variant_params":
            params = [] if value is None else list(value)
            if len(params) > 4:
                raise _fail("variant_params holds at most 4 tensors, got %d" % len(params))
            for p in params:
                if p is not None and not isinstance(p, Tensor):
                    raise TypeError("vkattn: variant_params must hold vkattn.Tensors or None")
                if p is not None and p.closed:
                    raise _fail("AttentionDesc.variant_params: a Tensor is closed")
            params += [None] * (4 - len(params))
            for slot, p in enumerate(params):
                self._d.setVariantParamHandle(slot, None if p is None else p._handle())
            self._keep[name] = tuple(params)
            return
        if name in self.TENSORS:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("vkattn: %s must be a vkattn.Tensor or None" % name)
            if value is not None and value.closed:
                raise _fail("AttentionDesc.%s: this Tensor is closed" % name)
            self._keep[name] = value  # the Tensor stays open while the desc is used
            value = None if value is None else value._handle()
        elif name == "causal":
            value = _flag(value, name)
        elif name == "mask_type" and value is None:
            value = MASK_NONE
        elif name in self.INTS:
            value = _int(value, name, self.INTS[name])
        elif isinstance(value, (str, bytes)) or value is None:  # scale, softcap
            raise TypeError("vkattn: %s must be a number, got %r" % (name, value))
        setattr(self._d, name, value)

    def __getitem__(self, name):
        if (name in self.TENSORS or name in self.SPANS or name in self.TREES or
                name in ("variant", "variant_params")):
            return self._keep.get(name)
        return getattr(self._d, name)

    def _native(self):
        # Every call that reads the desc: a Tensor closed after it was stored
        # raises, naming the field (the native struct would keep a dangling
        # pointer).
        for name in self.TENSORS:
            t = self._keep.get(name)
            if t is not None and t.closed:
                raise _fail("AttentionDesc.%s: this Tensor is closed" % name)
        v = self._keep.get("variant")
        if v is not None and v.closed:
            raise _fail("AttentionDesc.variant: this Variant is closed")
        for p in self._keep.get("variant_params") or ():
            if p is not None and p.closed:
                raise _fail("AttentionDesc.variant_params: a Tensor is closed")
        if self._keep.get("spans") is not None and self._keep.get("span_indptr") is None:
            raise _fail("AttentionDesc.spans is set but span_indptr is not")
        if self._keep.get("tree_mask") is not None and self._keep.get("tree_indptr") is None:
            raise _fail("AttentionDesc.tree_mask is set but tree_indptr is not")
        return self._d


def _desc(q, k, v, heads_dim, kw):
    """The descriptor of a call: head counts and dims from the tensors
    (dimension ``heads_dim`` holds the heads), then the caller's keywords."""
    qs, ks, vs = q.shape, k.shape, v.shape
    fields = {
        "num_heads": qs[heads_dim] if len(qs) > heads_dim else 0,
        "num_kv_heads": ks[heads_dim] if len(ks) > heads_dim else 0,
        "head_dim": qs[-1], "head_dim_v": vs[-1],
    }
    fields.update(kw)
    return AttentionDesc(**fields)


def spans_from_token_type_ids(token_type_ids, span_type=1):
    """Bidirectional spans from HF's ``token_type_ids`` convention (Gemma 3:
    1 marks an image token): each run of consecutive tokens of type
    ``span_type`` is one span, the image's tokens seeing each other both
    ways. ``token_type_ids`` is one sequence's ids (1-D), a list of them
    (ragged batch) or a [B, S] array (padded batch), indexed by position
    over the whole sequence (cached tokens included). Returns
    ``(span_indptr, spans)`` as int32 arrays for AttentionDesc (or the
    attention calls' keywords of the same names)."""
    if isinstance(token_type_ids, _np.ndarray) and token_type_ids.ndim == 1:
        seqs = [token_type_ids]
    elif isinstance(token_type_ids, _np.ndarray):
        seqs = list(token_type_ids)
    elif len(token_type_ids) and _np.ndim(token_type_ids[0]) == 0:
        seqs = [token_type_ids]
    else:
        seqs = list(token_type_ids)
    indptr, spans = [0], []
    for ids in seqs:
        ids = _np.asarray(ids).reshape(-1)
        inside = _np.concatenate(([False], ids == span_type, [False]))
        edges = _np.flatnonzero(inside[1:] != inside[:-1])
        for start, end in zip(edges[0::2], edges[1::2]):
            spans += [int(start), int(end)]
        indptr.append(len(spans) // 2)
    return _np.asarray(indptr, _np.int32), _np.asarray(spans, _np.int32)


def tree_mask_from_bool(masks):
    """Speculative-decoding trees from boolean matrices: ``masks`` holds one
    [t, t] array per sequence (a list; a single [t, t] array is one
    sequence, a [B, t, t] array one per batch row), ``masks[b][i, j]`` true
    where draft token i sees draft token j (its ancestors and itself), or
    None for a sequence without a tree. Returns ``(tree_indptr, tree_mask)``
    for AttentionDesc (or the attention calls' keywords of the same names):
    int32 prefix sums of the word counts and the uint32 words, each row
    ceil(t / 32) words, bit j % 32 of word j // 32 (least significant
    first) for column j. The entries are bools or the integers 0 and 1: a
    float, a string or None is a TypeError, another integer (2, -1) a
    ValueError."""
    if isinstance(masks, _np.ndarray) and masks.ndim == 2:
        masks = [masks]
    elif isinstance(masks, _np.ndarray) and masks.ndim < 2:
        raise ValueError("vkattn: tree_mask_from_bool takes [t, t] or [B, t, t] bools, got "
                         "shape %s" % (masks.shape,))
    if masks is None or isinstance(masks, (str, bytes)) or not hasattr(masks, "__iter__"):
        raise TypeError("vkattn: tree_mask_from_bool takes a list of [t, t] bool arrays (None "
                        "for a sequence without a tree), got %r" % (masks,))
    indptr, words = [0], []
    for b, m in enumerate(masks):
        if m is None:
            indptr.append(indptr[-1])
            continue
        try:
            m = _np.asarray(m)
        except ValueError:  # ragged rows
            raise ValueError("vkattn: tree mask %d must be square [t, t], its rows differ in "
                             "length" % b) from None
        # Only bools and 0/1 are read: 0.5, NaN or 2 is no "true" (each used
        # to be taken as one by a comparison with 0).
        if m.dtype != _np.bool_ and m.dtype.kind not in "iu":
            raise TypeError("vkattn: tree mask %d must hold bools (or 0/1 integers), got %s "
                            "values" % (b, m.dtype))
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError("vkattn: tree mask %d must be square [t, t], got shape %s"
                             % (b, m.shape))
        if m.dtype.kind in "iu" and m.size and (m.min() < 0 or m.max() > 1):
            raise ValueError("vkattn: tree mask %d holds %d, must be bool or 0/1"
                             % (b, int(m[(m < 0) | (m > 1)][0])))
        m = m != 0
        t = m.shape[0]
        w = (t + 31) // 32
        rows = _np.zeros((t, 32 * w), bool)
        rows[:, :t] = m
        # Little bit order within each byte, little-endian bytes in each word.
        packed = _np.packbits(rows, axis=1, bitorder="little")
        words.append(_np.ascontiguousarray(packed).view("<u4").astype(_np.uint32).reshape(-1))
        indptr.append(indptr[-1] + t * w)
    if indptr[-1] > 2**31 - 1:
        raise OverflowError("vkattn: the trees hold %d words, past int32" % indptr[-1])
    return (_np.asarray(indptr, _np.int32),
            _np.concatenate(words) if words else _np.zeros(0, _np.uint32))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, out=None, **desc):
    """Packed ("varlen") attention: q [total_q, H, d], k [total_k, Hkv, d],
    v [total_k, Hkv, dv]; cu_seqlens_q/k are prefix sums (batch + 1 ints).
    Keywords are vkattn_attention_desc's fields (causal, window_left,
    window_right, chunk_size, softcap, scale, mask_type, mask, alibi_slopes, lse, sinks,
    span_indptr, spans, tree_indptr, tree_mask, ...). Returns ``out``
    [total_q, H, dv] (a new tensor of q's dtype unless given). Records the
    work; read the result with out.numpy()."""
    ctx = q.context
    d = _desc(q, k, v, 1, desc)
    if out is None:
        qs = q.shape
        out = Tensor(ctx, (qs[0], qs[1] if len(qs) > 1 else 0, v.shape[-1]), q.dtype)
    ctx._handle().attentionVarlen(d._native(), _ints(cu_seqlens_q, "cu_seqlens_q"),
                                  _ints(cu_seqlens_k, "cu_seqlens_k"), q._handle(),
                                  k._handle(), v._handle(), out._handle())
    return out


def attention_padded(q, k, v, key_mask=None, out=None, **desc):
    """Padded attention: q [B, Sq, H, d], k [B, Sk, Hkv, d], v [B, Sk, Hkv,
    dv]; ``key_mask`` [B, Sk] of 0/1 (HF's attention_mask) or None. Returns
    ``out`` [B, Sq, H, dv]."""
    ctx = q.context
    d = _desc(q, k, v, 2, desc)
    if out is None:
        qs = q.shape
        out = Tensor(ctx, tuple(qs[:3]) + (v.shape[-1],), q.dtype)
    mask = None if key_mask is None else _ints(key_mask, "key_mask", allow_bool=True)
    ctx._handle().attentionPadded(d._native(), q._handle(), k._handle(), v._handle(), mask,
                                  out._handle())
    return out


def attention_merge(out_a, lse_a, out_b, lse_b, out=None, lse=None):
    """Combines two partial attentions of the same queries over disjoint key
    sets (outs [n, H, dv], lses [n, H] f32). ``out``/``lse`` may be one of
    the inputs (in place); a new ``out`` is made when None. Returns (out,
    lse)."""
    ctx = out_a.context
    if out is None:
        out = Tensor(ctx, out_a.shape, out_a.dtype)
    ctx._handle().attentionMerge(out_a._handle(), lse_a._handle(), out_b._handle(),
                                 lse_b._handle(), out._handle(),
                                 None if lse is None else lse._handle())
    return out, lse


class RopeDesc:
    """vkattn_rope_desc as keywords: layout (ROPE_NEOX / ROPE_GPTJ),
    rotary_dim (0 = the rest of the row), rotary_offset, theta, scaling
    (ROPE_SCALING_*), factor, low_freq_factor, high_freq_factor,
    original_max_position, beta_fast, beta_slow, attention_factor (0 = the
    scaling's default), yarn_truncate. Defaults as vkattn_rope_desc_init."""

    FIELDS = ("layout", "rotary_dim", "rotary_offset", "theta", "scaling", "factor",
              "low_freq_factor", "high_freq_factor", "original_max_position", "beta_fast",
              "beta_slow", "attention_factor", "yarn_truncate")
    INTS = ("layout", "rotary_dim", "rotary_offset", "scaling", "original_max_position",
            "yarn_truncate")

    def __init__(self, **fields):
        self._d = _raw.RopeDesc()
        for name, value in fields.items():
            if name not in self.FIELDS:
                raise TypeError("vkattn: RopeDesc has no field %r" % name)
            if name in self.INTS:
                value = _int(value, name, "uint32")
            elif isinstance(value, (str, bytes)) or value is None:
                raise TypeError("vkattn: %s must be a number, got %r" % (name, value))
            setattr(self._d, name, value)


def rope(x, cu_seqlens, start_positions, out=None, **desc):
    """Rotary position embedding of x [total, heads, head_dim] (a Tensor):
    token i of sequence b sits at start_positions[b] + i; cu_seqlens are the
    batch + 1 prefix sums. Keywords are RopeDesc's fields. ``out`` may be
    ``x`` (in place); a new tensor when None. Returns ``out``."""
    d = RopeDesc(**desc)
    if out is None:
        out = Tensor(x.context, x.shape, x.dtype)
    x.context._handle().rope(d._d, _ints(cu_seqlens, "cu_seqlens"),
                             _ints(start_positions, "start_positions"), x._handle(),
                             out._handle())
    return out


class KvCache(_Owned):
    """A paged KV cache on a context's device (vkattn_kv_cache_desc's fields
    as keywords; ``Context.kv_cache`` makes one). Sequences are int64 ids."""

    _kind = "KvCache"

    def __init__(self, ctx, num_layers, num_kv_heads, head_dim, num_pages, head_dim_v=0,
                 page_size=16, dtype=F16, rotate_keys=False):
        d = _raw.KvCacheDesc()
        d.num_layers = _int(num_layers, "num_layers", "uint32")
        d.num_kv_heads = _int(num_kv_heads, "num_kv_heads", "uint32")
        d.head_dim = _int(head_dim, "head_dim", "uint32")
        d.head_dim_v = _int(head_dim_v, "head_dim_v", "uint32")
        d.page_size = _int(page_size, "page_size", "uint32")
        d.num_pages = _int(num_pages, "num_pages", "uint32")
        d.dtype = _vk_dtype(dtype)
        # Keys rotated by the normalized Walsh-Hadamard transform before
        # they are quantized (vkattn.h, VKATTN_KV_ROTATE_KEYS); read()
        # returns the rotated codes.
        d.flags = _raw.KV_ROTATE_KEYS if _flag(rotate_keys, "rotate_keys") else 0
        self.rotate_keys = bool(d.flags)
        self.context = ctx
        self.head_dim = d.head_dim
        self.head_dim_v = d.head_dim_v or d.head_dim
        self.num_kv_heads = d.num_kv_heads
        self._h = _raw.KvCache(ctx._handle(), d)

    @property
    def dtype(self):
        return self._handle().dtype()

    def length(self, seq_id):
        """Committed tokens of a sequence (0 if it does not exist)."""
        return self._handle().length(_int(seq_id, "seq_id", "int64"))

    def remove(self, seq_id):
        self._handle().remove(_int(seq_id, "seq_id", "int64"))

    def fork(self, src, dst):
        """``dst`` (a new id) shares every page of ``src`` (copy on write)."""
        self._handle().fork(_int(src, "src", "int64"), _int(dst, "dst", "int64"))

    def truncate(self, seq_id, new_length):
        self._handle().truncate(_int(seq_id, "seq_id", "int64"), _int(new_length, "new_length"))

    @property
    def num_free_pages(self):
        return self._handle().numFreePages()

    def read(self, layer, seq_id, start=0, count=None):
        """Committed tokens [start, start + count) of one layer as NumPy
        arrays (k [count, Hkv, d], v [count, Hkv, dv]; f32 cache float32,
        f16 float16, bf16 uint16 bits, i8 int8 codes, fp8 uint8 codes, q4
        int8 codes -8..7). Waits for the cache's work."""
        layer, seq_id, start, count = self._range(layer, seq_id, start, count)
        dt = self.dtype
        k = _np.empty((count, self.num_kv_heads, self.head_dim), _NP_OF[dt])
        v = _np.empty((count, self.num_kv_heads, self.head_dim_v), _NP_OF[dt])
        h = self._handle()
        if dt == F32:
            h.readF32(layer, seq_id, start, count, k.reshape(-1), v.reshape(-1))
        elif dt in (I8, FP8_E4M3, Q4):
            h.readBytes(layer, seq_id, start, count,
                        k.reshape(-1).view(_np.uint8), v.reshape(-1).view(_np.uint8))
        else:
            h.readU16(layer, seq_id, start, count,
                      k.reshape(-1).view(_np.uint16), v.reshape(-1).view(_np.uint16))
        return k, v

    def _range(self, layer, seq_id, start, count):
        """read*'s arguments, checked (count None: to the end)."""
        layer = _int(layer, "layer", "uint32")
        seq_id, start = _int(seq_id, "seq_id", "int64"), _int(start, "start")
        count = self.length(seq_id) - start if count is None else _int(count, "count")
        if count < 0:
            raise _fail("read: count %d is negative (start %d past the sequence's %d tokens?)"
                        % (count, start, self.length(seq_id)))
        return layer, seq_id, start, count

    def read_scales(self, layer, seq_id, start=0, count=None):
        """8-bit caches: the float32 scales [count, Hkv] of K and V that
        dequantize read()'s codes (value = code * scale)."""
        layer, seq_id, start, count = self._range(layer, seq_id, start, count)
        k = _np.empty((count, self.num_kv_heads), _np.float32)
        v = _np.empty((count, self.num_kv_heads), _np.float32)
        self._handle().readScales(layer, seq_id, start, count, k.reshape(-1),
                                  v.reshape(-1))
        return k, v

    def read_block_scales(self, layer, seq_id, start=0, count=None):
        """Q4 caches: the float32 block scales of K [count, Hkv, ceil(d / 32)]
        and V [count, Hkv, ceil(dv / 32)]; element e of a row is read()'s
        code times the scale of block e // 32."""
        layer, seq_id, start, count = self._range(layer, seq_id, start, count)
        k = _np.empty((count, self.num_kv_heads, (self.head_dim + 31) // 32), _np.float32)
        v = _np.empty((count, self.num_kv_heads, (self.head_dim_v + 31) // 32), _np.float32)
        self._handle().readBlockScales(layer, seq_id, start, count,
                                       k.reshape(-1), v.reshape(-1))
        return k, v

    def set_scales(self, layer, k_scales, v_scales):
        """fp8 caches: one layer's K and V scales (1 or Hkv each), before its
        first append."""
        k = _np.ascontiguousarray(k_scales, dtype=_np.float32).reshape(-1)
        v = _np.ascontiguousarray(v_scales, dtype=_np.float32).reshape(-1)
        self._handle().setScales(_int(layer, "layer", "uint32"), k, v)

    def begin(self, seq_ids, num_new_tokens):
        """Opens a step: ``seq_ids[i]`` brings ``num_new_tokens[i]`` new tokens
        (unknown ids start new sequences). Raises Error(ERROR_CACHE_FULL) with
        the cache unchanged when pages run out. Use it as a context manager:
        leaving the block without commit() aborts the step."""
        ids = _ints(seq_ids, "seq_ids", "int64")
        counts = _ints(num_new_tokens, "num_new_tokens")
        return Step(self, self._handle().begin(ids, counts), int(counts.sum()))


class Step(_Owned):
    """One continuous-batching step over a KvCache (KvCache.begin): per
    layer append() the new K/V, then attention(); finally commit() (lengths
    advance) or abort(). Closing an open step aborts it."""

    _kind = "Step"

    def __init__(self, cache, handle, total_new):
        self.cache = cache
        self.total_new = total_new
        self._h = handle

    @property
    def active(self):
        """True until committed, aborted or closed."""
        return self._h is not None and self._h.isActive()

    def append(self, layer, k_new, v_new, rope=None):
        """Writes this step's new K/V of one layer: [total_new, Hkv, d] and
        [total_new, Hkv, dv] Tensors (NumPy arrays are uploaded first). With
        ``rope`` (a RopeDesc or a dict of its fields) the keys are rotated
        first, token i of a sequence at position len + i."""
        ctx = self.cache.context
        if isinstance(rope, dict):
            rope = RopeDesc(**rope)
        k_t = k_new if isinstance(k_new, Tensor) else ctx.tensor(k_new)
        v_t = v_new if isinstance(v_new, Tensor) else ctx.tensor(v_new)
        try:
            if rope is None:
                self._handle().append(_int(layer, "layer", "uint32"), k_t._handle(),
                                      v_t._handle())
            else:
                self._handle().appendRope(_int(layer, "layer", "uint32"), rope._d, k_t._handle(),
                                          v_t._handle())
        finally:
            if k_t is not k_new:
                k_t.close()
            if v_t is not v_new:
                v_t.close()

    def attention(self, layer, q, out=None, **desc):
        """Attention of q [total_new, H, d] over each sequence's cached plus
        new tokens of this layer (append it first). Keywords as in
        attention_varlen (num_heads etc. come from q and the cache). Returns
        ``out`` [total_new, H, dv]."""
        ctx = self.cache.context
        q_t = q if isinstance(q, Tensor) else ctx.tensor(q)
        qs = q_t.shape
        fields = {"num_heads": qs[1], "num_kv_heads": self.cache.num_kv_heads,
                  "head_dim": self.cache.head_dim, "head_dim_v": self.cache.head_dim_v}
        fields.update(desc)
        d = AttentionDesc(**fields)
        if out is None:
            out = Tensor(ctx, (qs[0], qs[1], self.cache.head_dim_v), q_t.dtype)
        try:
            self._handle().attention(_int(layer, "layer", "uint32"), d._native(), q_t._handle(),
                                     out._handle())
        finally:
            if q_t is not q:
                q_t.close()
        return out

    def commit(self):
        """Lengths advance by the step's token counts; the step is finished
        (submits and waits on the GIL-free side where the library does)."""
        self._handle().commit()

    def abort(self):
        """Drops the step's tokens; a finished step is left as it is."""
        self._handle().abort()

    def __exit__(self, *exc):
        if self._h is not None and self._h.isActive():
            self._h.abort()
        self.close()
        return False

/* C# part of the bindings (namespace Vkattn), included by ../vkattn.i.
 * Errors become Vkattn.VkattnException (status + the C message): the
 * native side calls a registered delegate that sets SWIG's pending
 * exception, and SWIG's check after each call throws it. The handle
 * classes are IDisposable (no finalizer); arrays are pinned, not copied. */

%{
typedef void(SWIGSTDCALL* vkattnx_cs_raise_fn)(int status, const char* message);
static vkattnx_cs_raise_fn vkattnx_cs_raise;

#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL VkattnxRegisterRaise(vkattnx_cs_raise_fn fn) {
  vkattnx_cs_raise = fn;
}

#define VKATTNX_RAISE(status, message) \
  do {                                 \
    if (vkattnx_cs_raise) vkattnx_cs_raise((status), (message)); \
  } while (0)
#define VKATTNX_CALL(...) __VA_ARGS__ /* the native call, as it is */

/* The library's messages into Vkattn.Log (vkattn_set_log_callback): the
 * managed delegate, kept alive by Log, or NULL (the library's stderr). */
typedef void(SWIGSTDCALL* vkattnx_cs_log_fn)(int level, const char* message);
static vkattnx_cs_log_fn vkattnx_cs_log;
static void vkattnx_cs_log_callback(vkattn_log_level level, const char* message, void* user) {
  vkattnx_cs_log_fn fn = vkattnx_cs_log;
  (void)user;
  if (fn) fn((int)level, message);
}
#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL VkattnxRouteLog(vkattnx_cs_log_fn fn) {
  if (fn) vkattnx_cs_log = fn;
  vkattn_set_log_callback(fn ? vkattnx_cs_log_callback : NULL, NULL); /* waits for messages in flight */
}

/* A pinned managed array: what the C# side passes by ref. */
typedef struct vkattnx_span {
  void* ptr;
  int64_t count;
} vkattnx_span;
%}

%pragma(csharp) imclasscode=%{
  protected class VkattnxRaiseHelper {
    public delegate void RaiseDelegate(int status, string message);
    static RaiseDelegate raiseDelegate = new RaiseDelegate(Raise);

    [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="VkattnxRegisterRaise")]
    public static extern void VkattnxRegisterRaise(RaiseDelegate fn);

    static void Raise(int status, string message) {
      SWIGPendingException.Set(new VkattnException((Status)status, message));
    }

    static VkattnxRaiseHelper() {
      VkattnxRegisterRaise(raiseDelegate);
    }
  }
  protected static VkattnxRaiseHelper vkattnxRaiseHelper = new VkattnxRaiseHelper();

  // Vkattn.Log's native side: its delegate (null: the library's stderr).
  internal delegate void VkattnxLogDelegate(int level, string message);
  [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="VkattnxRouteLog")]
  internal static extern void VkattnxRouteLog(VkattnxLogDelegate fn);
%}

/* ---- names: methods and properties UpperCamel ------------------------ */
%rename("%(regex:/^m_(.)(.*)/\\U\\1\\E\\2/)s", %$isfunction) "";
%rename("%(camelcase)s", %$isvariable, %$ismember) "";
%rename(Write) vkattn_tensor::m_writeF32;
%rename(Write) vkattn_tensor::m_writeU16;
%rename(Write) vkattn_tensor::m_writeI32;
%rename(Write) vkattn_tensor::m_writeBytes;
%rename(Read) vkattn_tensor::m_readF32;
%rename(Read) vkattn_tensor::m_readU16;
%rename(Read) vkattn_tensor::m_readI32;
%rename(Read) vkattn_tensor::m_readBytes;

%rename(Read) vkattnx_kv_cache::m_readF32;
%rename(Read) vkattnx_kv_cache::m_readU16;
%rename(Read) vkattnx_kv_cache::m_readBytes;

/* ---- arrays ---------------------------------------------------------- */
/* (T* NAME, int64_t LEN) <-> one C# array, pinned for the call (VkattnPin);
 * null gives (NULL, 0). */
%define VKATTNX_CS_ARRAY(CTYPE, CSTYPE, IN, OUT)
%typemap(ctype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "vkattnx_span*"
%typemap(imtype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "ref VkattnSpan"
%typemap(cstype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "CSTYPE[]"
%typemap(csin, pre="    VkattnPin pin_$csinput = new VkattnPin($csinput);",
         post="      pin_$csinput.Dispose();")
    (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "ref pin_$csinput.Span"
%typemap(in) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) {
  $1 = (CTYPE*)$input->ptr;
  $2 = $input->count;
}
%enddef

VKATTNX_CS_ARRAY(float, float, IN_F32, OUT_F32)
VKATTNX_CS_ARRAY(uint16_t, ushort, IN_U16, OUT_U16)
VKATTNX_CS_ARRAY(int32_t, int, IN_I32, OUT_I32)
VKATTNX_CS_ARRAY(uint32_t, uint, IN_U32, OUT_U32)
VKATTNX_CS_ARRAY(uint8_t, byte, IN_U8, OUT_U8)
VKATTNX_CS_ARRAY(int64_t, long, IN_I64, OUT_I64)

/* ---- handle classes: IDisposable, no finalizer ------------------------
 * A context is externally synchronized, so objects are not destroyed from
 * the finalizer thread: dispose them (using). Dispose is idempotent; a
 * disposed object raises VkattnException when used. */
%define VKATTNX_CS_HANDLE(STRUCT)
%typemap(csdispose) struct STRUCT %{
  /// <summary>Releases the native object; further calls are a no-op.</summary>
  public void Dispose() {
    Dispose(true);
  }
%}
%enddef
VKATTNX_CS_HANDLE(vkattn_context)
VKATTNX_CS_HANDLE(vkattn_tensor)
VKATTNX_CS_HANDLE(vkattn_variant)
VKATTNX_CS_HANDLE(vkattnx_kv_cache)
/* A Step's Dispose() aborts it unless it was committed. */
VKATTNX_CS_HANDLE(vkattnx_step)
%typemap(cscode) struct vkattnx_kv_cache, struct vkattnx_step %{
  /// <summary>True until Dispose().</summary>
  public bool IsOpen { get { return swigCPtr.Handle != global::System.IntPtr.Zero; } }
%}
%typemap(cscode) struct vkattn_context %{
  /// <summary>True until Dispose().</summary>
  public bool IsOpen { get { return swigCPtr.Handle != global::System.IntPtr.Zero; } }
%}
/* An attention variant (user functions): a desc holding a disposed one
 * throws at the call. */
%typemap(cscode) struct vkattn_variant %{
  /// <summary>True until Dispose().</summary>
  public bool IsOpen { get { return swigCPtr.Handle != global::System.IntPtr.Zero; } }

  /// <summary>Compiles GLSL source defining vkattn_mask_mod and/or
  /// vkattn_score_mod (vkattn.h, "Attention variants"); paramDtypes: the
  /// dtype of each parameter slot the source reads, from slot 0 (Dtype.F32,
  /// Dtype.I32, or null for an unused slot; at most 4).</summary>
  public Variant(Context ctx, string source, params global::Vkattn.Dtype?[] paramDtypes)
      : this(ctx, source, SlotCode(paramDtypes, 0), SlotCode(paramDtypes, 1),
             SlotCode(paramDtypes, 2), SlotCode(paramDtypes, 3)) {}

  private static long SlotCode(global::Vkattn.Dtype?[] d, int slot) {
    if (d != null && d.Length > 4)
      throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                "vkattn: a Variant has 4 parameter slots, not " + d.Length);
    return d == null || slot >= d.Length || d[slot] == null ? 0 : (long)d[slot].Value;
  }
%}
%typemap(cscode) struct vkattn_tensor %{
  /// <summary>True until Dispose().</summary>
  public bool IsOpen { get { return swigCPtr.Handle != global::System.IntPtr.Zero; } }

  /// <summary>The dims, outermost first.</summary>
  public long[] Shape {
    get {
      long[] s = new long[Ndim()];
      for (int i = 0; i < s.Length; ++i) s[i] = Dim(i);
      return s;
    }
  }

  /// <summary>A new f32 tensor holding data (its length must match the shape).</summary>
  public static Tensor Of(Context ctx, float[] data, params long[] shape) {
    Tensor t = new Tensor(ctx, global::Vkattn.Dtype.F32, shape);
    try { t.Write(data); } catch { t.Dispose(); throw; }
    return t;
  }

  /// <summary>A new f16 or bf16 tensor holding the bit patterns in data.</summary>
  public static Tensor Of(Context ctx, global::Vkattn.Dtype dtype, ushort[] data, params long[] shape) {
    Tensor t = new Tensor(ctx, dtype, shape);
    try { t.Write(data); } catch { t.Dispose(); throw; }
    return t;
  }

  /// <summary>Reads an f32 tensor.</summary>
  public float[] ToFloatArray() { var a = new float[checked((int)Numel())]; Read(a); return a; }
  /// <summary>Reads the bit patterns of an f16 or bf16 tensor.</summary>
  public ushort[] ToUShortArray() { var a = new ushort[checked((int)Numel())]; Read(a); return a; }
  /// <summary>Reads an i32 tensor.</summary>
  public int[] ToIntArray() { var a = new int[checked((int)Numel())]; Read(a); return a; }
  /// <summary>Reads the raw bytes of any tensor.</summary>
  public byte[] ToByteArray() { var a = new byte[checked((int)Nbytes())]; Read(a); return a; }
%}

/* ---- AttentionDesc's tensors (see ../vkattn.i) ------------------------ */
%csmethodmodifiers vkattn_attention_desc::m_setTensorField "private";
%csmethodmodifiers vkattn_attention_desc::m_setVariantHandle "private";
%csmethodmodifiers vkattn_attention_desc::m_setVariantParamHandle "private";
%typemap(cscode) struct vkattn_attention_desc %{
  private Tensor alibiSlopes_, mask_, lse_, sinks_, topkIndices_;
  private Variant variant_;
  private readonly Tensor[] variantParams_ = new Tensor[4];

  /// <summary>The attention variant (user functions) of the calls, or null.</summary>
  public Variant Variant { get { return variant_; } set { SetVariantHandle(value); variant_ = value; } }
  /// <summary>Parameter slot 0..3 of the variant: a Tensor of the dtype it
  /// declared (any shape, read in row-major order), or null.</summary>
  public void SetVariantParam(int slot, Tensor t) {
    SetVariantParamHandle(slot, t);
    variantParams_[slot] = t;
  }
  /// <summary>What SetVariantParam put in slot 0..3.</summary>
  public Tensor GetVariantParam(int slot) {
    if (slot < 0 || slot > 3)
      throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                "vkattn: variant parameter slot " + slot + " is not 0..3");
    return variantParams_[slot];
  }

  /// <summary>ALiBi slopes, f32 [H], or null.</summary>
  public Tensor AlibiSlopes { get { return alibiSlopes_; } set { SetTensorField(0, value); alibiSlopes_ = value; } }
  /// <summary>The mask (see MaskType), or null.</summary>
  public Tensor Mask { get { return mask_; } set { SetTensorField(1, value); mask_ = value; } }
  /// <summary>Optional f32 lse output, or null.</summary>
  public Tensor Lse { get { return lse_; } set { SetTensorField(2, value); lse_ = value; } }
  /// <summary>Attention-sink logits, f32 [H], or null.</summary>
  public Tensor Sinks { get { return sinks_; } set { SetTensorField(3, value); sinks_ = value; } }
  /// <summary>Top-k lists, i32 [rows, K] or [rows, Hkv, K] (rows = the call's
  /// query tokens), or null: query i sees only the key positions 0 .. u-1 of
  /// its own sequence that its list holds (others skipped).</summary>
  public Tensor TopkIndices { get { return topkIndices_; } set { SetTensorField(4, value); topkIndices_ = value; } }

  /// <summary>Speculative-decoding trees from one bool [t, t] matrix per
  /// sequence (null: no tree): masks[b][i, j] is true where draft token i
  /// sees draft token j (its ancestors and itself). Packs them with
  /// PackTrees and sets them as SetTrees(int[], uint[]) does; null clears
  /// the trees.</summary>
  public void SetTrees(bool[][,] masks) {
    if (masks == null) {
      SetTrees(null, null);
      return;
    }
    int[] treeIndptr;
    uint[] treeMask;
    PackTrees(masks, out treeIndptr, out treeMask);
    SetTrees(treeIndptr, treeMask);
  }

  /// <summary>treeIndptr and treeMask of one bool [t, t] matrix per
  /// sequence (null: no tree): row i of a tree takes ceil(t / 32) words,
  /// column j at bit j % 32 of word j / 32 (least significant
  /// first). A null masks, a matrix that is not square or trees past
  /// 2^31 - 1 words (int[]'s reach) throw VkattnException
  /// (ERROR_INVALID_ARGUMENT), never NullReferenceException or
  /// OverflowException.</summary>
  public static void PackTrees(bool[][,] masks, out int[] treeIndptr, out uint[] treeMask) {
    if (masks == null)
      throw new VkattnException(
          global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
          "vkattn: PackTrees: masks is null (SetTrees(null) clears the trees)");
    treeIndptr = new int[masks.Length + 1];
    for (int b = 0; b < masks.Length; ++b) {
      int t = masks[b] == null ? 0 : masks[b].GetLength(0);
      if (masks[b] != null && masks[b].GetLength(1) != t)
        throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                  "vkattn: tree mask " + b + " is " + t + " x " +
                                  masks[b].GetLength(1) + ", must be square");
      long n = treeIndptr[b] + (long)t * ((t + 31) / 32);
      if (n > int.MaxValue)
        throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                  "vkattn: tree mask " + b + ": the trees pass 2^31 - 1 words (" +
                                  n + ")");
      treeIndptr[b + 1] = (int)n;
    }
    treeMask = new uint[treeIndptr[masks.Length]];
    for (int b = 0; b < masks.Length; ++b) {
      if (masks[b] == null) continue;
      int t = masks[b].GetLength(0), w = (t + 31) / 32;
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < t; ++j)
          if (masks[b][i, j]) treeMask[treeIndptr[b] + i * w + j / 32] |= 1u << (j % 32);
    }
  }

  // Every call that reads the desc checks first that the Tensors stored in
  // it are still open.
  internal void CheckTensors() {
    Check(alibiSlopes_, "AlibiSlopes");
    Check(mask_, "Mask");
    Check(lse_, "Lse");
    Check(sinks_, "Sinks");
    Check(topkIndices_, "TopkIndices");
    for (int s = 0; s < 4; ++s) Check(variantParams_[s], "VariantParam(" + s + ")");
    if (variant_ != null && !variant_.IsOpen)
      throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                "vkattn: AttentionDesc.Variant: this Variant is disposed");
  }

  private static void Check(Tensor t, string field) {
    if (t != null && !t.IsOpen)
      throw new VkattnException(global::Vkattn.Status.ERROR_INVALID_ARGUMENT,
                                "vkattn: AttentionDesc." + field + ": this Tensor is disposed");
  }
%}
%typemap(csin, pre="    if ($csinput != null) $csinput.CheckTensors();")
    const vkattn_attention_desc* desc "AttentionDesc.getCPtr($csinput)"

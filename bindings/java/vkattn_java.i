/* Java part of the bindings (package org.vkattn), included by ../vkattn.i.
 * Errors become org.vkattn.VkattnException (status + the C message); the
 * handle classes are AutoCloseable; arrays are Java primitive arrays and
 * tensors also take direct ByteBuffers. */

%{
/* Throws org.vkattn.VkattnException(status, message) unless an exception
 * (e.g. OutOfMemoryError from an array typemap) is already pending. */
static void vkattnx_java_throw(JNIEnv* jenv, int status, const char* message) {
  jclass cls;
  jmethodID ctor;
  jstring jmsg;
  jobject ex;
  if ((*jenv)->ExceptionCheck(jenv)) return;
  cls = (*jenv)->FindClass(jenv, "org/vkattn/VkattnException");
  if (!cls) return; /* NoClassDefFoundError is pending */
  ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(ILjava/lang/String;)V");
  if (!ctor) return;
  jmsg = (*jenv)->NewStringUTF(jenv, message);
  if (!jmsg) return;
  ex = (*jenv)->NewObject(jenv, cls, ctor, (jint)status, jmsg);
  if (ex) (*jenv)->Throw(jenv, (jthrowable)ex);
}
/* No `return` after the throw: the wrapper falls through so that freearg
 * releases the Java arrays; the proxy sees the pending exception. */
#define VKATTNX_RAISE(status, message) vkattnx_java_throw(jenv, (status), (message))
#define VKATTNX_CALL(...) __VA_ARGS__ /* the native call, as it is */
%}

/* uint32_t fields are Java longs (SWIG's mapping): a value outside
 * 0 .. 2^32 - 1 throws VkattnException (INVALID_ARGUMENT) and the field
 * keeps its value, never a value cut to 32 bits. (int32_t is Java's int:
 * exact. No method takes a uint32_t besides the fields' setters.) */
%typemap(in) uint32_t %{
  if ($input < 0 || $input > (jlong)0xFFFFFFFFu) {
    char m[256];
    snprintf(m, sizeof m, "vkattn: %lld does not fit the uint32_t of $symname (0 .. 4294967295)",
             (long long)$input);
    vkattnx_java_throw(jenv, VKATTN_ERROR_INVALID_ARGUMENT, m);
    return $null;
  }
  $1 = ($1_ltype)$input;
%}

/* The JNI class loads the native library (from java.library.path, else
 * from the jar; see NativeLoader). */
%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
    Log.routeByDefault(); // the library's messages to System.Logger "vkattn"
  }
%}

/* ---- messages: vkattn_set_log_callback into org.vkattn.Log ----------- */
%{
static JavaVM* vkattnx_java_vm = NULL;
static jclass vkattnx_java_log_class = NULL;      /* org.vkattn.Log (a global reference) */
static jmethodID vkattnx_java_log_dispatch = NULL; /* static void dispatch(int, byte[]) */

/* vkattn's callback: on the logging thread, attached to the JVM for the
 * call if it was not (and detached again); the message travels as UTF-8
 * bytes (NewStringUTF takes modified UTF-8 only). An exception pending on
 * the thread is set aside and rethrown; one the handler throws is dropped
 * (Log.dispatch already catches what it can). */
static void vkattnx_java_log_callback(vkattn_log_level level, const char* message, void* user) {
  JNIEnv* env = NULL;
  int attached = 0;
  jthrowable pending;
  jbyteArray bytes;
  jsize n = (jsize)strlen(message);
  (void)user;
  if ((*vkattnx_java_vm)->GetEnv(vkattnx_java_vm, (void**)&env, JNI_VERSION_1_6) != JNI_OK) {
    if ((*vkattnx_java_vm)->AttachCurrentThreadAsDaemon(vkattnx_java_vm, (void**)&env, NULL) !=
        JNI_OK)
      return;
    attached = 1;
  }
  pending = (*env)->ExceptionOccurred(env);
  if (pending) (*env)->ExceptionClear(env);
  bytes = (*env)->NewByteArray(env, n);
  if (bytes) {
    (*env)->SetByteArrayRegion(env, bytes, 0, n, (const jbyte*)message);
    (*env)->CallStaticVoidMethod(env, vkattnx_java_log_class, vkattnx_java_log_dispatch,
                                 (jint)level, bytes);
    (*env)->DeleteLocalRef(env, bytes);
  }
  if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
  if (pending) {
    (*env)->Throw(env, pending);
    (*env)->DeleteLocalRef(env, pending);
  }
  if (attached) (*vkattnx_java_vm)->DetachCurrentThread(vkattnx_java_vm);
}

/* Routes the messages to org.vkattn.Log (on != 0) or back to the
 * library's stderr lines; called by Log with its class initialized. */
static void vkattnx_java_log_route(JNIEnv* jenv, int32_t on) {
  if (on && !vkattnx_java_log_class) {
    jclass cls = (*jenv)->FindClass(jenv, "org/vkattn/Log");
    if (!cls) return; /* NoClassDefFoundError is pending */
    vkattnx_java_log_dispatch = (*jenv)->GetStaticMethodID(jenv, cls, "dispatch", "(I[B)V");
    if (!vkattnx_java_log_dispatch || (*jenv)->GetJavaVM(jenv, &vkattnx_java_vm) != JNI_OK) return;
    vkattnx_java_log_class = (jclass)(*jenv)->NewGlobalRef(jenv, cls);
    (*jenv)->DeleteLocalRef(jenv, cls);
    if (!vkattnx_java_log_class) return;
  }
  vkattn_set_log_callback(on && vkattnx_java_log_class ? vkattnx_java_log_callback : NULL, NULL);
}
%}
%typemap(in, numinputs=0) JNIEnv* jenv "$1 = jenv;"
%rename(logRoute) vkattnx_java_log_route;
%noexception vkattnx_java_log_route;
void vkattnx_java_log_route(JNIEnv* jenv, int32_t on);

/* Proper Java enums (Status, Dtype, ...), not SWIG's typesafe-enum classes. */
%include "enums.swg"

/* ---- names ----------------------------------------------------------- */
%rename("%(regex:/^m_(.*)/\\1/)s", %$isfunction) "";
%rename("%(lowercamelcase)s", %$isvariable, %$ismember) "";
%rename(write) vkattn_tensor::m_writeF32;
%rename(write) vkattn_tensor::m_writeU16;
%rename(write) vkattn_tensor::m_writeI32;
%rename(write) vkattn_tensor::m_writeBytes;
%rename(read) vkattn_tensor::m_readF32;
%rename(read) vkattn_tensor::m_readU16;
%rename(read) vkattn_tensor::m_readI32;
%rename(read) vkattn_tensor::m_readBytes;

%rename(read) vkattnx_kv_cache::m_readF32;
%rename(read) vkattnx_kv_cache::m_readU16;
%rename(read) vkattnx_kv_cache::m_readBytes;

/* ---- arrays ---------------------------------------------------------- */
/* (T* NAME, int64_t LEN) <-> one Java array; null gives (NULL, 0), which
 * the methods reject or read as "absent". Inputs are released with
 * JNI_ABORT (nothing copied back), outputs with 0. */
%define VKATTNX_JAVA_ARRAY(CTYPE, JTYPE, JNIELEM, JNIARRAY, NAME, IN, OUT)
%typemap(jni) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "JNIARRAY"
%typemap(jtype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "JTYPE[]"
%typemap(jstype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "JTYPE[]"
%typemap(javain) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "$javainput"
%typemap(in) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) {
  $1 = NULL;
  $2 = 0;
  if ($input) {
    $2 = (int64_t)(*jenv)->GetArrayLength(jenv, $input);
    $1 = (CTYPE*)(*jenv)->Get##NAME##ArrayElements(jenv, $input, NULL);
    if (!$1) return $null; /* OutOfMemoryError is pending */
  }
}
%typemap(freearg) (const CTYPE* IN, int64_t IN_LEN) {
  if ($1) (*jenv)->Release##NAME##ArrayElements(jenv, $input, (JNIELEM*)$1, JNI_ABORT);
}
%typemap(freearg) (CTYPE* OUT, int64_t OUT_LEN) {
  if ($1) (*jenv)->Release##NAME##ArrayElements(jenv, $input, (JNIELEM*)$1, 0);
}
%enddef

VKATTNX_JAVA_ARRAY(float, float, jfloat, jfloatArray, Float, IN_F32, OUT_F32)
VKATTNX_JAVA_ARRAY(uint16_t, short, jshort, jshortArray, Short, IN_U16, OUT_U16)
VKATTNX_JAVA_ARRAY(int32_t, int, jint, jintArray, Int, IN_I32, OUT_I32)
/* uint32 words (tree masks) as int[] holding their bits. */
VKATTNX_JAVA_ARRAY(uint32_t, int, jint, jintArray, Int, IN_U32, OUT_U32)
VKATTNX_JAVA_ARRAY(uint8_t, byte, jbyte, jbyteArray, Byte, IN_U8, OUT_U8)
VKATTNX_JAVA_ARRAY(int64_t, long, jlong, jlongArray, Long, IN_I64, OUT_I64)


/* Direct ByteBuffer: its address and capacity (NULL and -1 for a heap
 * buffer or null). */
%typemap(jni) (void* BUF, int64_t BUF_CAP) "jobject"
%typemap(jtype) (void* BUF, int64_t BUF_CAP) "java.nio.ByteBuffer"
%typemap(jstype) (void* BUF, int64_t BUF_CAP) "java.nio.ByteBuffer"
%typemap(javain) (void* BUF, int64_t BUF_CAP) "$javainput"
%typemap(in) (void* BUF, int64_t BUF_CAP) {
  $1 = NULL;
  $2 = -1;
  if ($input) {
    $1 = (*jenv)->GetDirectBufferAddress(jenv, $input);
    if ($1) $2 = (int64_t)(*jenv)->GetDirectBufferCapacity(jenv, $input);
  }
}

/* ---- handle classes: AutoCloseable, no finalizer ------------------------
 * A context is externally synchronized, so objects are not destroyed from
 * the finalizer thread: close them (try-with-resources). close() is
 * idempotent; a closed object raises VkattnException when used. */
%define VKATTNX_JAVA_HANDLE(STRUCT)
%typemap(javainterfaces) struct STRUCT "AutoCloseable"
%typemap(javafinalize) struct STRUCT ""
%typemap(javacode) struct STRUCT %{
  /** Releases the native object; further calls are a no-op. */
  @Override
  public void close() {
    delete();
  }

  /** True until close(). */
  public boolean isOpen() {
    return swigCPtr != 0;
  }
%}
%enddef

VKATTNX_JAVA_HANDLE(vkattn_context)
VKATTNX_JAVA_HANDLE(vkattnx_kv_cache)
/* A Step's close() aborts it unless it was committed. */
VKATTNX_JAVA_HANDLE(vkattnx_step)

/* An attention variant (user functions): AutoCloseable like every handle;
 * a desc that holds a closed one throws at the call. */
%typemap(javainterfaces) struct vkattn_variant "AutoCloseable"
%typemap(javafinalize) struct vkattn_variant ""
%typemap(javacode) struct vkattn_variant %{
  /** Releases the variant; further use is a VkattnException (calls already
   * made keep what they need). */
  @Override
  public void close() {
    delete();
  }

  /** True until close(). */
  public boolean isOpen() {
    return swigCPtr != 0;
  }

  /** Compiles GLSL source defining vkattn_mask_mod and/or vkattn_score_mod
   * (vkattn.h, "Attention variants"); paramDtypes: the dtype of each
   * parameter slot the source reads, from slot 0 (Dtype.F32, Dtype.I32, or
   * null for an unused slot; at most 4). */
  public Variant(Context ctx, String source, Dtype... paramDtypes) {
    this(ctx, source, slotCode(paramDtypes, 0), slotCode(paramDtypes, 1),
        slotCode(paramDtypes, 2), slotCode(paramDtypes, 3));
  }

  private static long slotCode(Dtype[] d, int slot) {
    if (d != null && d.length > 4)
      throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                "vkattn: a Variant has 4 parameter slots, not " + d.length);
    return d == null || slot >= d.length || d[slot] == null ? 0 : d[slot].swigValue();
  }
%}

%typemap(javainterfaces) struct vkattn_tensor "AutoCloseable"
%typemap(javafinalize) struct vkattn_tensor ""
%typemap(javacode) struct vkattn_tensor %{
  /** Releases the device tensor; further calls are a no-op. */
  @Override
  public void close() {
    delete();
  }

  /** True until close(). */
  public boolean isOpen() {
    return swigCPtr != 0;
  }

  /** The dims, outermost first. */
  public long[] shape() {
    long[] s = new long[ndim()];
    for (int i = 0; i < s.length; ++i) s[i] = dim(i);
    return s;
  }

  /** A new f32 tensor holding data (data.length must match the shape). */
  public static Tensor of(Context ctx, float[] data, long... shape) {
    Tensor t = new Tensor(ctx, Dtype.F32, shape);
    try {
      t.write(data);
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
    return t;
  }

  /** A new f16 or bf16 tensor holding the bit patterns in data. */
  public static Tensor of(Context ctx, Dtype dtype, short[] data, long... shape) {
    Tensor t = new Tensor(ctx, dtype, shape);
    try {
      t.write(data);
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
    return t;
  }

  /** Reads an f32 tensor. */
  public float[] toFloatArray() {
    float[] a = new float[Math.toIntExact(numel())];
    read(a);
    return a;
  }

  /** Reads the bit patterns of an f16 or bf16 tensor. */
  public short[] toShortArray() {
    short[] a = new short[Math.toIntExact(numel())];
    read(a);
    return a;
  }

  /** Reads an i32 tensor. */
  public int[] toIntArray() {
    int[] a = new int[Math.toIntExact(numel())];
    read(a);
    return a;
  }

  /** Reads the raw bytes (native byte order) of any tensor. */
  public byte[] toByteArray() {
    byte[] a = new byte[Math.toIntExact(nbytes())];
    read(a);
    return a;
  }

  /** Writes the whole tensor from b's remaining bytes (position to limit,
   * which must be nbytes(); native byte order). The position is unchanged. */
  public void write(java.nio.ByteBuffer b) {
    if (b == null || b.isDirect()) {
      writeBuffer(b, b == null ? 0 : b.position(), b == null ? 0 : b.remaining());
    } else {
      byte[] a = new byte[b.remaining()];
      b.duplicate().get(a);
      write(a);
    }
  }

  /** Reads the whole tensor into b's remaining bytes (which must be
   * nbytes()). The position is unchanged. */
  public void read(java.nio.ByteBuffer b) {
    if (b != null && b.isReadOnly()) throw new java.nio.ReadOnlyBufferException();
    if (b == null || b.isDirect()) {
      readBuffer(b, b == null ? 0 : b.position(), b == null ? 0 : b.remaining());
    } else {
      byte[] a = new byte[b.remaining()];
      read(a);
      b.duplicate().put(a);
    }
  }
%}

%javamethodmodifiers vkattn_tensor::m_writeBuffer "private";
%javamethodmodifiers vkattn_tensor::m_readBuffer "private";

%extend vkattn_tensor {
  void m_writeBuffer(void* BUF, int64_t BUF_CAP, int64_t offset, int64_t length) {
    VKATTNX_OPEN(self, "Tensor", );
    if (!BUF) {
      vkattnx_fail("vkattn: the ByteBuffer is null or not direct");
      return;
    }
    if (offset < 0 || length < 0 || offset + length > BUF_CAP) {
      vkattnx_fail("vkattn: ByteBuffer range out of bounds");
      return;
    }
    vkattnx_ok(vkattn_tensor_write(self, (char*)BUF + offset, (size_t)length));
  }
  void m_readBuffer(void* BUF, int64_t BUF_CAP, int64_t offset, int64_t length) {
    VKATTNX_OPEN(self, "Tensor", );
    if (!BUF) {
      vkattnx_fail("vkattn: the ByteBuffer is null or not direct");
      return;
    }
    if (offset < 0 || length < 0 || offset + length > BUF_CAP) {
      vkattnx_fail("vkattn: ByteBuffer range out of bounds");
      return;
    }
    vkattnx_ok(vkattn_tensor_read(self, (char*)BUF + offset, (size_t)length));
  }
}

/* ---- AttentionDesc's tensors (see ../vkattn.i) ------------------------ */
%javamethodmodifiers vkattn_attention_desc::m_setTensorField "private";
%javamethodmodifiers vkattn_attention_desc::m_setVariantHandle "private";
%javamethodmodifiers vkattn_attention_desc::m_setVariantParamHandle "private";
%typemap(javacode) struct vkattn_attention_desc %{
  private Tensor alibiSlopes, mask, lse, sinks, topkIndices;
  private Variant variant;
  private final Tensor[] variantParams = new Tensor[4];

  /** The attention variant (user functions) of the calls, or null. */
  public void setVariant(Variant v) { setVariantHandle(v); variant = v; }
  public Variant getVariant() { return variant; }
  /** Parameter slot 0..3 of the variant: a Tensor of the dtype it declared
   * (any shape, read in row-major order), or null. */
  public void setVariantParam(int slot, Tensor t) {
    setVariantParamHandle(slot, t);
    variantParams[slot] = t;
  }
  public Tensor getVariantParam(int slot) {
    if (slot < 0 || slot > 3)
      throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                "vkattn: variant parameter slot " + slot + " is not 0..3");
    return variantParams[slot];
  }

  /** ALiBi slopes, f32 [H], or null. */
  public void setAlibiSlopes(Tensor t) { setTensorField(0, t); alibiSlopes = t; }
  public Tensor getAlibiSlopes() { return alibiSlopes; }
  /** The mask (see setMaskType), or null. */
  public void setMask(Tensor t) { setTensorField(1, t); mask = t; }
  public Tensor getMask() { return mask; }
  /** Optional f32 lse output, or null. */
  public void setLse(Tensor t) { setTensorField(2, t); lse = t; }
  public Tensor getLse() { return lse; }
  /** Attention-sink logits, f32 [H], or null. */
  public void setSinks(Tensor t) { setTensorField(3, t); sinks = t; }
  public Tensor getSinks() { return sinks; }
  /** Top-k lists, i32 [rows, K] or [rows, Hkv, K] (rows = the call's query
   * tokens), or null: query i sees only the key positions 0 .. u-1 of its
   * own sequence that its list holds (others skipped). */
  public void setTopkIndices(Tensor t) { setTensorField(4, t); topkIndices = t; }
  public Tensor getTopkIndices() { return topkIndices; }

  /** Speculative-decoding trees from one boolean [t][t] matrix per sequence
   * (null: no tree): masks[b][i][j] is true where draft token i sees draft
   * token j (its ancestors and itself). Packs them with packTrees and sets
   * them as setTrees(int[], int[]) does; null clears the trees. */
  public void setTrees(boolean[][][] masks) {
    if (masks == null) {
      setTrees(null, null);
      return;
    }
    int[][] packed = packTrees(masks);
    setTrees(packed[0], packed[1]);
  }

  /** {treeIndptr, treeMask} of one boolean [t][t] matrix per sequence (null:
   * no tree): row i of a tree takes ceil(t / 32) words, column j at bit
   * j % 32 of word j / 32 (least significant first; the ints hold the
   * uint32 words' bits). A null masks, a row of another length than t or
   * trees past 2^31 - 1 words (int[]'s reach) throw VkattnException
   * (INVALID_ARGUMENT), never NullPointerException, ArithmeticException or
   * OutOfMemoryError: the rows are checked before the words are allocated
   * (t null rows cost 8 t bytes but asked for t * ceil(t / 32) words). */
  public static int[][] packTrees(boolean[][][] masks) {
    if (masks == null)
      throw new VkattnException(
          Status.ERROR_INVALID_ARGUMENT.swigValue(),
          "vkattn: packTrees: masks is null (setTrees(null) clears the trees)");
    int[] indptr = new int[masks.length + 1];
    for (int b = 0; b < masks.length; ++b) {
      long t = masks[b] == null ? 0 : masks[b].length, n = indptr[b] + t * ((t + 31) / 32);
      if (n > Integer.MAX_VALUE)
        throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                  "vkattn: tree mask " + b + ": the trees pass 2^31 - 1 words ("
                                      + n + ")");
      for (int i = 0; i < t; ++i) {
        boolean[] row = masks[b][i];
        if (row == null || row.length != t)
          throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                    "vkattn: tree mask " + b + ": row " + i + " has "
                                        + (row == null ? 0 : row.length) + " entries, want " + t);
      }
      indptr[b + 1] = (int) n;
    }
    int[] words = new int[indptr[masks.length]];
    for (int b = 0; b < masks.length; ++b) {
      if (masks[b] == null) continue;
      int t = masks[b].length, w = (t + 31) / 32;
      for (int i = 0; i < t; ++i) {
        boolean[] row = masks[b][i];
        for (int j = 0; j < t; ++j)
          if (row[j]) words[indptr[b] + i * w + j / 32] |= 1 << (j % 32);
      }
    }
    return new int[][] {indptr, words};
  }

  /* Every call that reads the desc checks first that the Tensors stored
   * in it are still open. */
  void checkTensors() {
    check(alibiSlopes, "alibiSlopes");
    check(mask, "mask");
    check(lse, "lse");
    check(sinks, "sinks");
    check(topkIndices, "topkIndices");
    for (int s = 0; s < 4; ++s) check(variantParams[s], "variantParams[" + s + "]");
    if (variant != null && !variant.isOpen())
      throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                "vkattn: AttentionDesc.variant: this Variant is closed");
  }

  private static void check(Tensor t, String field) {
    if (t != null && !t.isOpen())
      throw new VkattnException(Status.ERROR_INVALID_ARGUMENT.swigValue(),
                                "vkattn: AttentionDesc." + field + ": this Tensor is closed");
  }
%}
%typemap(javain, pre="    if ($javainput != null) $javainput.checkTensors();")
    const vkattn_attention_desc* desc "AttentionDesc.getCPtr($javainput)"

/* Python part of the bindings, included by ../vkattn.i. SWIG generates the
 * low-level module vkattn.vkattnraw (extension _vkattnraw) from this; the hand-written package
 * vkattn (vkattn/__init__.py) on top gives Context, Tensor, KvCache and Step
 * with context managers, NumPy transfers and keyword arguments.
 *
 * A failing call raises vkattn.Error(status, message) (the package
 * registers the class; RuntimeError before it does), formatted in the same
 * native call. Every native call runs with the GIL released (VKATTNX_CALL):
 * its arguments are plain C values and buffers held until it returns, so
 * other Python threads run while a call waits on the GPU (synchronize,
 * reads, a step's commit). */

%{
static PyObject* vkattnx_py_error = NULL; /* vkattn.Error */

static void vkattnx_py_raise(int status, const char* message) {
  PyObject* cls = vkattnx_py_error ? vkattnx_py_error : PyExc_RuntimeError;
  PyObject* args = Py_BuildValue("(is)", status, message ? message : "");
  if (args) {
    PyErr_SetObject(cls, args);
    Py_DECREF(args);
  }
}
#define VKATTNX_RAISE(status, message) \
  do {                                 \
    vkattnx_py_raise((status), (message)); \
    SWIG_fail;                         \
  } while (0)
#define VKATTNX_CALL(...)                                \
  {                                                      \
    PyThreadState* vkattnx_ts = PyEval_SaveThread();     \
    __VA_ARGS__                                          \
    PyEval_RestoreThread(vkattnx_ts);                    \
  }

/* The package's exception class (a subclass of Exception taking (status,
 * message)); called once at import, with the GIL held. */
static void vkattnx_set_error_class(PyObject* cls) {
  Py_XINCREF(cls);
  Py_XDECREF(vkattnx_py_error);
  vkattnx_py_error = cls;
}
%}

%rename(setErrorClass) vkattnx_set_error_class;
%noexception vkattnx_set_error_class;
void vkattnx_set_error_class(PyObject* cls);

/* ---- messages: vkattn_set_log_callback into a Python callable --------- */
%{
/* The package's handler: a callable(level, message), or NULL (stderr).
 * Read and replaced with the GIL held. */
static PyObject* vkattnx_py_log = NULL;

/* vkattn's callback: takes the GIL (the logging call may come from any
 * thread, holding it or not) and calls the handler; a handler that raises
 * is reported as unraisable and the library goes on. */
static void vkattnx_py_log_callback(vkattn_log_level level, const char* message, void* user) {
  PyGILState_STATE gil;
  (void)user;
  if (!Py_IsInitialized()) return;
  gil = PyGILState_Ensure();
  if (vkattnx_py_log) {
    PyObject* fn = vkattnx_py_log;
    PyObject* text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    PyObject* r = NULL;
    Py_INCREF(fn);
    if (text) r = PyObject_CallFunction(fn, "iO", (int)level, text);
    if (!r) PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    Py_XDECREF(text);
    Py_DECREF(fn);
  }
  PyGILState_Release(gil);
}

/* Sets the handler (None: the library's stderr lines). The library's
 * setter waits for messages being delivered, which need the GIL: it runs
 * with the GIL released. */
static void vkattnx_set_log_handler(PyObject* fn) {
  PyThreadState* ts;
  if (fn == Py_None) fn = NULL;
  if (fn) {
    PyObject* old = vkattnx_py_log;
    Py_INCREF(fn);
    vkattnx_py_log = fn;
    Py_XDECREF(old);
  }
  ts = PyEval_SaveThread();
  vkattn_set_log_callback(fn ? vkattnx_py_log_callback : NULL, NULL);
  PyEval_RestoreThread(ts);
  if (!fn) Py_CLEAR(vkattnx_py_log);
}
%}
%rename(setLogHandler) vkattnx_set_log_handler;
%noexception vkattnx_set_log_handler;
void vkattnx_set_log_handler(PyObject* fn);

/* ---- names: methods lowerCamel (the package maps them to snake_case);
 * struct fields keep their C names (keyword arguments match them). ------ */
%rename("%(regex:/^m_(.*)/\\1/)s", %$isfunction) "";

/* ---- arrays: (T* NAME, int64_t LEN) <-> any C-contiguous buffer (NumPy
 * arrays, array.array, bytes), no copy; held until the call returns. The
 * element size must match; byte arrays take any buffer (LEN = bytes). --- */
%define VKATTNX_PY_ARRAY(CTYPE, IN, OUT)
%typemap(in) (const CTYPE* IN, int64_t IN_LEN) (Py_buffer view, int got = 0) {
  if ($input == Py_None) { /* an optional array (key_mask) */
    $1 = NULL;
    $2 = 0;
    goto vkattnx_done_$argnum;
  }
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) SWIG_fail;
  got = 1;
  if (view.itemsize != (Py_ssize_t)sizeof(CTYPE)) {
    PyErr_Format(PyExc_TypeError, "vkattn: expected an array of %d-byte elements, got %d-byte",
                 (int)sizeof(CTYPE), (int)view.itemsize);
    SWIG_fail;
  }
  $1 = (CTYPE*)view.buf;
  $2 = (int64_t)(view.len / view.itemsize);
vkattnx_done_$argnum:;
}
%typemap(freearg) (const CTYPE* IN, int64_t IN_LEN) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}
%typemap(in) (CTYPE* OUT, int64_t OUT_LEN) (Py_buffer view, int got = 0) {
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) != 0)
    SWIG_fail;
  got = 1;
  if (view.itemsize != (Py_ssize_t)sizeof(CTYPE)) {
    PyErr_Format(PyExc_TypeError, "vkattn: expected an array of %d-byte elements, got %d-byte",
                 (int)sizeof(CTYPE), (int)view.itemsize);
    SWIG_fail;
  }
  $1 = (CTYPE*)view.buf;
  $2 = (int64_t)(view.len / view.itemsize);
}
%typemap(freearg) (CTYPE* OUT, int64_t OUT_LEN) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}
%enddef

VKATTNX_PY_ARRAY(float, IN_F32, OUT_F32)
VKATTNX_PY_ARRAY(uint16_t, IN_U16, OUT_U16)
VKATTNX_PY_ARRAY(int32_t, IN_I32, OUT_I32)
VKATTNX_PY_ARRAY(uint32_t, IN_U32, OUT_U32)
VKATTNX_PY_ARRAY(int64_t, IN_I64, OUT_I64)

%typemap(in) (const uint8_t* IN_U8, int64_t IN_LEN) (Py_buffer view, int got = 0) {
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  got = 1;
  $1 = (uint8_t*)view.buf;
  $2 = (int64_t)view.len;
}
%typemap(freearg) (const uint8_t* IN_U8, int64_t IN_LEN) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}
%typemap(in) (uint8_t* OUT_U8, int64_t OUT_LEN) (Py_buffer view, int got = 0) {
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  got = 1;
  $1 = (uint8_t*)view.buf;
  $2 = (int64_t)view.len;
}
%typemap(freearg) (uint8_t* OUT_U8, int64_t OUT_LEN) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}

/* Go part of the bindings, included by ../vkattn.i. SWIG generates the
 * low-level package vkattn/internal/vkattnraw from this; the hand-written
 * package vkattn (vkattn.go) on top returns error values and has Close().
 * Here a failing call panics with "vkattn:<status>:<message>", formatted
 * in the same native call, and vkattn.go recovers it into *vkattn.Error.
 * The panic unwinds the C frames without running freearg, so nothing here
 * allocates. */

%insert(cgo_comment_typedefs) %{
#cgo pkg-config: vkattn
%}

%{
static void vkattnx_go_raise(int status, const char* message) {
  char buf[1024];
  snprintf(buf, sizeof buf, "vkattn:%d:%s", status, message);
  _swig_gopanic(buf);
}
#define VKATTNX_RAISE(status, message) vkattnx_go_raise((status), (message))
#define VKATTNX_CALL(...) __VA_ARGS__ /* the native call, as it is */
%}

/* ---- 32-bit integers: Go passes its 64-bit int and uint --------------- */
/* A value past the C type panics (an *Error, ErrorInvalidArgument), never
 * reaches C cut to 32 bits. vkattn.go checks what callers give it first
 * (u32, i32: messages that name the field); this catches the rest. */
%{
static void vkattnx_go_range(const char* where, long long value, int is_unsigned) {
  char m[256];
  if (is_unsigned)
    snprintf(m, sizeof m, "vkattn: %llu does not fit the uint32_t of %s", (unsigned long long)value,
             where);
  else
    snprintf(m, sizeof m, "vkattn: %lld does not fit the int32_t of %s", value, where);
  vkattnx_go_raise(VKATTN_ERROR_INVALID_ARGUMENT, m); /* does not return */
}
%}
%typemap(in) uint32_t %{
  if ((unsigned long long)$input > 0xFFFFFFFFull) vkattnx_go_range("$symname", (long long)$input, 1);
  $1 = ($1_ltype)$input;
%}
%typemap(in) int32_t %{
  if ((long long)$input < INT32_MIN || (long long)$input > INT32_MAX)
    vkattnx_go_range("$symname", (long long)$input, 0);
  $1 = ($1_ltype)$input;
%}

/* ---- names: methods UpperCamel (Go exports them) ---------------------- */
%rename("%(regex:/^m_(.)(.*)/\\U\\1\\E\\2/)s", %$isfunction) "";
%rename("%(camelcase)s", %$isvariable, %$ismember) "";

/* ---- arrays: (T* NAME, int64_t LEN) <-> one Go slice, zero-copy ------- */
%define VKATTNX_GO_ARRAY(CTYPE, GOTYPE, IN, OUT)
%typemap(gotype) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) "[]GOTYPE"
%typemap(in) (const CTYPE* IN, int64_t IN_LEN), (CTYPE* OUT, int64_t OUT_LEN) {
  $1 = (CTYPE*)$input.array;
  $2 = (int64_t)$input.len;
}
%enddef

VKATTNX_GO_ARRAY(float, float32, IN_F32, OUT_F32)
VKATTNX_GO_ARRAY(uint16_t, uint16, IN_U16, OUT_U16)
VKATTNX_GO_ARRAY(int32_t, int32, IN_I32, OUT_I32)
VKATTNX_GO_ARRAY(uint32_t, uint32, IN_U32, OUT_U32)
VKATTNX_GO_ARRAY(uint8_t, byte, IN_U8, OUT_U8)
VKATTNX_GO_ARRAY(int64_t, int64, IN_I64, OUT_I64)

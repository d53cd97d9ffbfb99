// Package vkattn is the Go binding of vkattn: LLM attention as Vulkan
// compute shaders. It wraps the SWIG-generated package internal/vkattnraw:
// every call that can fail returns an error (a *Error with the library's
// status and message), and every object has Close().
//
// Objects must be closed (defer x.Close()); they may be closed in any
// order. A Context and the objects made from it are used by one goroutine
// at a time.
package vkattn

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	raw "vkattn/internal/vkattnraw"
)

// Status is a vkattn_status code.
type Status int

// Status codes (values from the C header).
var (
	Success                Status = Status(raw.SUCCESS)
	ErrorInvalidArgument   Status = Status(raw.ERROR_INVALID_ARGUMENT)
	ErrorUnsupported       Status = Status(raw.ERROR_UNSUPPORTED)
	ErrorOutOfHostMemory   Status = Status(raw.ERROR_OUT_OF_HOST_MEMORY)
	ErrorOutOfDeviceMemory Status = Status(raw.ERROR_OUT_OF_DEVICE_MEMORY)
	ErrorCacheFull         Status = Status(raw.ERROR_CACHE_FULL)
	ErrorNoDevice          Status = Status(raw.ERROR_NO_DEVICE)
	ErrorDeviceLost        Status = Status(raw.ERROR_DEVICE_LOST)
	ErrorInternal          Status = Status(raw.ERROR_INTERNAL)
)

// String is the library's text for the code.
func (s Status) String() string { return raw.StatusString(raw.Enum_SS_vkattn_status(s)) }

// Error is a failed call: the status and the library's message for that
// call (read in the same native call), or the binding's own message when
// it rejected the call first (closed object, nil slice, wrong length).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrClosed is returned by Close on an object that is already closed.
var ErrClosed = errors.New("vkattn: already closed")

// recoverErr turns the SWIG layer's panic "vkattn:<status>:<message>" into
// *Error; other panics go on.
func recoverErr(err *error) {
	r := recover()
	if r == nil {
		return
	}
	s, ok := r.(string)
	if !ok || !strings.HasPrefix(s, "vkattn:") {
		panic(r)
	}
	rest := s[len("vkattn:"):]
	i := strings.IndexByte(rest, ':')
	code, convErr := strconv.Atoi(rest[:max(i, 0)])
	if i < 0 || convErr != nil {
		panic(r)
	}
	*err = &Error{Status: Status(code), Message: rest[i+1:]}
}

// Checked conversions of the caller's ints to the C types: a value that
// does not fit is an *Error (ErrorInvalidArgument) naming the argument,
// never a wrapped or truncated value (Go's int is 64 bits; the C fields
// are 32). They panic in the SWIG layer's form, so the exported function
// that calls them (with defer recoverErr) returns the error.
func u32(what string, x int) uint {
	if x < 0 || int64(x) > 0xFFFFFFFF {
		panic(fmt.Sprintf("vkattn:%d:vkattn: %s = %d does not fit uint32 (0 .. 4294967295)",
			int(ErrorInvalidArgument), what, x))
	}
	return uint(x)
}

func i32(what string, x int) int {
	if int64(x) < -0x80000000 || int64(x) > 0x7FFFFFFF {
		panic(fmt.Sprintf("vkattn:%d:vkattn: %s = %d does not fit int32 (-2147483648 .. 2147483647)",
			int(ErrorInvalidArgument), what, x))
	}
	return x
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Dtype is an element type.
type Dtype int

// Element types; F16 and BF16 are handled as uint16 bit patterns.
var (
	F32  Dtype = Dtype(raw.F32)
	F16  Dtype = Dtype(raw.F16)
	BF16 Dtype = Dtype(raw.BF16)
	U8   Dtype = Dtype(raw.U8)
	I32  Dtype = Dtype(raw.I32)
	// 8-bit KV cache dtypes (KvCacheDesc.Dtype): symmetric int8 with
	// per-token scales, and OCP e4m3fn with the caller's scales.
	I8      Dtype = Dtype(raw.I8)
	FP8E4M3 Dtype = Dtype(raw.FP8_E4M3)
	// 4-bit KV cache dtype: codes -8..7 with an f16 scale per block of 32
	// elements (a cache dtype only; see vkattn_quant.go).
	Q4 Dtype = Dtype(raw.Q4)
)

// Size is the number of bytes per element (0 for an unknown dtype).
func (d Dtype) Size() int { return int(raw.DtypeSize(raw.Enum_SS_vkattn_dtype(d))) }

// MaskType says how AttentionDesc.Mask is read.
type MaskType int

var (
	MaskNone     MaskType = MaskType(raw.MASK_NONE)
	MaskBool     MaskType = MaskType(raw.MASK_BOOL)
	MaskAdditive MaskType = MaskType(raw.MASK_ADDITIVE)
)

// Context flags.
const (
	ContextValidation = uint32(raw.CONTEXT_VALIDATION)
	ContextProfiling  = uint32(raw.CONTEXT_PROFILING)
	// ContextBatchInvariant: a sequence's outputs are bit-identical
	// whatever shares its batch (VKATTN_CONTEXT_BATCH_INVARIANT).
	ContextBatchInvariant = uint32(raw.CONTEXT_BATCH_INVARIANT)
)

// Version is major*10000 + minor*100 + patch of the loaded library.
func Version() int { return int(raw.Version()) }

// DeviceInfo describes a Vulkan device.
type DeviceInfo struct {
	Name, DriverName, DriverInfo string
	VendorID, DeviceID           uint32
	DeviceType                   int // 0 other, 1 integrated, 2 discrete, 3 virtual, 4 CPU
	APIVersion, DriverVersion    uint32
	SubgroupSize                 uint32 // 0 if unknown
	MaxSharedMemory              uint32
	MaxBufferRange               uint64
	SupportsF16                  bool
	Supports16bitStorage         bool
	SupportsBF16                 bool
}

func toDeviceInfo(r raw.DeviceInfo) DeviceInfo {
	defer raw.DeleteDeviceInfo(r)
	return DeviceInfo{
		Name: r.GetName(), DriverName: r.GetDriverName(), DriverInfo: r.GetDriverInfo(),
		VendorID: uint32(r.GetVendorId()), DeviceID: uint32(r.GetDeviceId()),
		DeviceType: int(r.GetDeviceType()), APIVersion: uint32(r.GetApiVersion()),
		DriverVersion: uint32(r.GetDriverVersion()), SubgroupSize: uint32(r.GetSubgroupSize()),
		MaxSharedMemory: uint32(r.GetMaxSharedMemory()), MaxBufferRange: r.GetMaxBufferRange(),
		SupportsF16: r.GetSupportsF16() != 0, Supports16bitStorage: r.GetSupports16bitStorage() != 0,
		SupportsBF16: r.GetSupportsBf16() != 0,
	}
}

// DeviceCount is the number of Vulkan devices visible; it creates no context.
func DeviceCount() (n int, err error) {
	defer recoverErr(&err)
	return int(raw.DeviceCount()), nil
}

// DeviceInfoAt describes device index (0 .. DeviceCount()-1).
func DeviceInfoAt(index int) (info DeviceInfo, err error) {
	defer recoverErr(&err)
	return toDeviceInfo(raw.GetDeviceInfo(int64(index))), nil
}

// ---- Context ----------------------------------------------------------

// Context is a Vulkan device with its queue; close it when done.
type Context struct{ h raw.Context }

// NewContext opens the default device (env VKATTN_DEVICE, else the best).
func NewContext() (c *Context, err error) {
	defer recoverErr(&err)
	return &Context{h: raw.NewContext()}, nil
}

// NewContextOn opens device deviceIndex (-1: the default) with flags
// (ContextValidation, ContextProfiling).
func NewContextOn(deviceIndex int, flags uint32) (c *Context, err error) {
	defer recoverErr(&err)
	return &Context{h: raw.NewContext(i32("deviceIndex", deviceIndex), int64(flags))}, nil
}

func (c *Context) handle() raw.Context {
	if c == nil || c.h == nil {
		return raw.SwigcptrContext(0) // the native side reports "closed"
	}
	return c.h
}

// Close submits pending work, waits for it and releases the context;
// objects made from it stay usable until they are closed.
func (c *Context) Close() error {
	if c == nil || c.h == nil {
		return ErrClosed
	}
	raw.DeleteContext(c.h)
	c.h = nil
	return nil
}

// Flush submits recorded work without waiting.
func (c *Context) Flush() (err error) {
	defer recoverErr(&err)
	c.handle().Flush()
	return nil
}

// Synchronize submits recorded work and waits for it.
func (c *Context) Synchronize() (err error) {
	defer recoverErr(&err)
	c.handle().Synchronize()
	return nil
}

// DeviceInfo describes the context's device.
func (c *Context) DeviceInfo() (info DeviceInfo, err error) {
	defer recoverErr(&err)
	return toDeviceInfo(c.handle().DeviceInfo()), nil
}

// LastGPUTimeNs is the GPU time of the last completed submission
// (ContextProfiling only, else 0).
func (c *Context) LastGPUTimeNs() (ns int64, err error) {
	defer recoverErr(&err)
	return c.handle().LastGpuTimeNs(), nil
}

// ---- Tensor -------------------------------------------------------------

// Tensor is a row-major device tensor of 1 to 4 dims.
type Tensor struct{ h raw.Tensor }

// NewTensor makes a tensor; its contents start undefined.
func (c *Context) NewTensor(dtype Dtype, shape ...int64) (t *Tensor, err error) {
	defer recoverErr(&err)
	if shape == nil {
		shape = []int64{} // a nil slice would read as a null array
	}
	return &Tensor{h: raw.NewTensor(c.handle(), raw.Enum_SS_vkattn_dtype(dtype), shape)}, nil
}

// TensorF32 makes an f32 tensor holding data.
func (c *Context) TensorF32(data []float32, shape ...int64) (*Tensor, error) {
	t, err := c.NewTensor(F32, shape...)
	if err != nil {
		return nil, err
	}
	if err := t.WriteF32(data); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// TensorU16 makes an f16 or bf16 tensor holding the bit patterns in data.
func (c *Context) TensorU16(dtype Dtype, data []uint16, shape ...int64) (*Tensor, error) {
	t, err := c.NewTensor(dtype, shape...)
	if err != nil {
		return nil, err
	}
	if err := t.WriteU16(data); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Tensor) handle() raw.Tensor {
	if t == nil || t.h == nil {
		return raw.SwigcptrTensor(0)
	}
	return t.h
}

// Close releases the tensor (safe while recorded work still uses it).
func (t *Tensor) Close() error {
	if t == nil || t.h == nil {
		return ErrClosed
	}
	raw.DeleteTensor(t.h)
	t.h = nil
	return nil
}

// Whole-tensor transfers: len(data) must equal Numel() (Nbytes() for bytes).

func (t *Tensor) WriteF32(data []float32) (err error) {
	defer recoverErr(&err)
	t.handle().WriteF32(data)
	return nil
}

func (t *Tensor) WriteU16(data []uint16) (err error) {
	defer recoverErr(&err)
	t.handle().WriteU16(data)
	return nil
}

func (t *Tensor) WriteI32(data []int32) (err error) {
	defer recoverErr(&err)
	t.handle().WriteI32(data)
	return nil
}

func (t *Tensor) WriteBytes(data []byte) (err error) {
	defer recoverErr(&err)
	t.handle().WriteBytes(data)
	return nil
}

func (t *Tensor) ReadF32Into(dst []float32) (err error) {
	defer recoverErr(&err)
	t.handle().ReadF32(dst)
	return nil
}

func (t *Tensor) ReadU16Into(dst []uint16) (err error) {
	defer recoverErr(&err)
	t.handle().ReadU16(dst)
	return nil
}

func (t *Tensor) ReadI32Into(dst []int32) (err error) {
	defer recoverErr(&err)
	t.handle().ReadI32(dst)
	return nil
}

func (t *Tensor) ReadBytesInto(dst []byte) (err error) {
	defer recoverErr(&err)
	t.handle().ReadBytes(dst)
	return nil
}

// ReadF32 reads an f32 tensor into a new slice.
func (t *Tensor) ReadF32() ([]float32, error) {
	n, err := t.Numel()
	if err != nil {
		return nil, err
	}
	dst := make([]float32, n)
	return dst, t.ReadF32Into(dst)
}

// ReadU16 reads the bit patterns of an f16 or bf16 tensor.
func (t *Tensor) ReadU16() ([]uint16, error) {
	n, err := t.Numel()
	if err != nil {
		return nil, err
	}
	dst := make([]uint16, n)
	return dst, t.ReadU16Into(dst)
}

// Dtype is the element type.
func (t *Tensor) Dtype() (d Dtype, err error) {
	defer recoverErr(&err)
	return Dtype(t.handle().Dtype()), nil
}

// Shape is the dims, outermost first.
func (t *Tensor) Shape() (shape []int64, err error) {
	defer recoverErr(&err)
	h := t.handle()
	shape = make([]int64, h.Ndim())
	for i := range shape {
		shape[i] = h.Dim(i)
	}
	return shape, nil
}

// Numel is the number of elements.
func (t *Tensor) Numel() (n int64, err error) {
	defer recoverErr(&err)
	return t.handle().Numel(), nil
}

// Nbytes is the size in bytes.
func (t *Tensor) Nbytes() (n int64, err error) {
	defer recoverErr(&err)
	return t.handle().Nbytes(), nil
}

// ---- attention variants (user functions) --------------------------------

// Variant is an attention variant: GLSL functions vkattn_mask_mod and/or
// vkattn_score_mod that the calls given it (AttentionDesc.Variant) apply
// after their built-in rules (the C header's "Attention variants"). Close
// it when done; calls already made keep what they need.
type Variant struct{ h raw.Variant }

// NewVariant compiles source; paramDtypes are the dtypes of the parameter
// slots the source reads, from slot 0 (F32, I32, or 0 for an unused slot;
// at most 4). A source that does not compile is an *Error holding the
// compiler's message, lines counted from 1 in source; no GLSL compiler in
// the process is ErrorUnsupported.
func (c *Context) NewVariant(source string, paramDtypes ...Dtype) (v *Variant, err error) {
	defer recoverErr(&err)
	if len(paramDtypes) > 4 {
		return nil, &Error{Status: ErrorInvalidArgument,
			Message: fmt.Sprintf("vkattn: a Variant has 4 parameter slots, not %d", len(paramDtypes))}
	}
	var d [4]int64
	for s, t := range paramDtypes {
		d[s] = int64(t)
	}
	return &Variant{h: raw.NewVariant(c.handle(), source, d[0], d[1], d[2], d[3])}, nil
}

// Close releases the variant.
func (v *Variant) Close() error {
	if v == nil || v.h == nil {
		return ErrClosed
	}
	raw.DeleteVariant(v.h)
	v.h = nil
	return nil
}

// ---- attention ---------------------------------------------------------

// AttentionDesc configures attention; start from NewAttentionDesc (the zero
// value has WindowLeft and WindowRight 0, a window of one key). See the C header for the
// formula.
type AttentionDesc struct {
	NumHeads, NumKvHeads int
	HeadDim, HeadDimV    int     // HeadDimV 0 = HeadDim
	Scale                float32 // 0 = 1/sqrt(HeadDim)
	Causal               bool    // bottom-right aligned
	WindowLeft           int     // -1 = none
	WindowRight          int     // -1 = none (the zero value: nothing right of the query)
	ChunkSize            int     // 0 = off; chunked local attention over chunks of this many positions
	Softcap              float32 // 0 = off
	MaskType             MaskType
	AlibiSlopes          *Tensor // [H] f32 or nil
	Mask                 *Tensor // nil = none
	Lse                  *Tensor // optional f32 output
	Sinks                *Tensor // [H] f32 attention-sink logits (gpt-oss) or nil
	// Bidirectional spans (Gemma 3's image tokens), nil = none: SpanIndptr
	// holds batch + 1 prefix sums of the sequences' span counts, Spans the
	// (start, end) position pairs; a query inside a span sees all of it.
	SpanIndptr, Spans []int32
	// Speculative-decoding trees, nil = none: TreeIndptr holds batch + 1
	// prefix sums of the sequences' word counts, TreeMask the words,
	// t*ceil(t/32) per sequence with a tree (row i's bits: the draft tokens
	// query i sees); TreeMaskFromBool builds both from [t][t] bools.
	TreeIndptr []int32
	TreeMask   []uint32
	// Top-k sparse attention: i32 [rows, K] or [rows, Hkv, K] (rows = the
	// call's query tokens), or nil; query i sees only the key positions
	// 0 .. u-1 of its own sequence that its list holds (others skipped).
	TopkIndices *Tensor
	// An attention variant (user functions: NewVariant), or nil, and its
	// parameter tensors: slot s holds a tensor of the dtype the variant
	// declared for it (any shape, read in row-major order), nil where the
	// variant declares none.
	Variant       *Variant
	VariantParams [4]*Tensor
}

// NewAttentionDesc is the library's defaults with the head counts and dim set.
func NewAttentionDesc(numHeads, numKvHeads, headDim int) AttentionDesc {
	return AttentionDesc{NumHeads: numHeads, NumKvHeads: numKvHeads, HeadDim: headDim, WindowLeft: -1,
		WindowRight: -1}
}

// withRaw runs f with the native form of d (nil for a nil d); the native
// copy is freed also when f panics.
func (d *AttentionDesc) withRaw(f func(raw.AttentionDesc)) {
	if d == nil {
		f(raw.SwigcptrAttentionDesc(0))
		return
	}
	r := raw.NewAttentionDesc()
	defer raw.DeleteAttentionDesc(r)
	r.SetNumHeads(u32("AttentionDesc.NumHeads", d.NumHeads))
	r.SetNumKvHeads(u32("AttentionDesc.NumKvHeads", d.NumKvHeads))
	r.SetHeadDim(u32("AttentionDesc.HeadDim", d.HeadDim))
	r.SetHeadDimV(u32("AttentionDesc.HeadDimV", d.HeadDimV))
	r.SetScale(d.Scale)
	if d.Causal {
		r.SetCausal(1)
	}
	r.SetWindowLeft(i32("AttentionDesc.WindowLeft", d.WindowLeft))
	r.SetWindowRight(i32("AttentionDesc.WindowRight", d.WindowRight))
	r.SetChunkSize(u32("AttentionDesc.ChunkSize", d.ChunkSize))
	r.SetSoftcap(d.Softcap)
	r.SetMaskType(u32("AttentionDesc.MaskType", int(d.MaskType)))
	r.SetAlibiSlopes(d.AlibiSlopes.optional("AlibiSlopes"))
	r.SetMask(d.Mask.optional("Mask"))
	r.SetLse(d.Lse.optional("Lse"))
	r.SetSinks(d.Sinks.optional("Sinks"))
	r.SetTopkIndices(d.TopkIndices.optional("TopkIndices"))
	if d.Variant != nil {
		if d.Variant.h == nil {
			panic(fmt.Sprintf("vkattn:%d:vkattn: AttentionDesc.Variant: this Variant is closed",
				int(ErrorInvalidArgument)))
		}
		r.SetVariantHandle(d.Variant.h)
	}
	for s, p := range d.VariantParams {
		r.SetVariantParamHandle(int64(s), p.optional(fmt.Sprintf("VariantParams[%d]", s)))
	}
	if d.SpanIndptr != nil || d.Spans != nil {
		r.SetSpans(d.SpanIndptr, d.Spans)
	}
	if d.TreeIndptr != nil || d.TreeMask != nil {
		r.SetTrees(d.TreeIndptr, d.TreeMask)
	}
	f(r)
}

// TreeMaskFromBool packs speculative-decoding trees for
// AttentionDesc.TreeIndptr and TreeMask: masks[b] is sequence b's [t][t]
// matrix, masks[b][i][j] true where draft token i sees draft token j (its
// ancestors and itself), or nil for a sequence without a tree. Row i takes
// ceil(t/32) words, column j at bit j%32 of word j/32 (least significant
// first). A row of another length than t is an *Error. The rows are
// checked before the words are allocated: t nil rows (24t bytes) asked for
// t*ceil(t/32) words, an allocation that could end the process.
func TreeMaskFromBool(masks [][][]bool) (treeIndptr []int32, treeMask []uint32, err error) {
	treeIndptr = make([]int32, len(masks)+1)
	n := 0
	for b, m := range masks {
		t := len(m)
		n += t * ((t + 31) / 32)
		if int64(n) > 0x7FFFFFFF {
			return nil, nil, &Error{Status: ErrorInvalidArgument,
				Message: fmt.Sprintf("vkattn: the trees pass %d words (int32) at sequence %d", 0x7FFFFFFF, b)}
		}
		for i, row := range m {
			if len(row) != t {
				return nil, nil, &Error{Status: ErrorInvalidArgument,
					Message: fmt.Sprintf("vkattn: tree mask %d: row %d has %d entries, want %d", b, i, len(row), t)}
			}
		}
		treeIndptr[b+1] = int32(n)
	}
	treeMask = make([]uint32, n)
	for b, m := range masks {
		w := (len(m) + 31) / 32
		for i, row := range m {
			words := treeMask[int(treeIndptr[b])+i*w:]
			for j, on := range row {
				if on {
					words[j/32] |= 1 << (j % 32)
				}
			}
		}
	}
	return treeIndptr, treeMask, nil
}

// optional is the handle of t, NULL for nil (absent). A closed t fails the
// call (an *Error naming the field: the callers recover it), never reads
// as absent.
func (t *Tensor) optional(field string) raw.Tensor {
	if t != nil && t.h == nil {
		panic(fmt.Sprintf("vkattn:%d:vkattn: AttentionDesc.%s: this Tensor is closed",
			int(ErrorInvalidArgument), field))
	}
	return t.handle()
}

// AttentionVarlen runs attention over a packed batch: cuQ and cuK are the
// prefix sums of the query and key counts (batch + 1 entries each).
func (c *Context) AttentionVarlen(d *AttentionDesc, cuQ, cuK []int32, q, k, v, out *Tensor) (err error) {
	defer recoverErr(&err)
	d.withRaw(func(r raw.AttentionDesc) {
		c.handle().AttentionVarlen(r, cuQ, cuK, q.handle(), k.handle(), v.handle(), out.handle())
	})
	return nil
}

// AttentionPadded runs attention over a padded batch; keyMask is nil or
// B*Sk entries of 0/1.
func (c *Context) AttentionPadded(d *AttentionDesc, q, k, v *Tensor, keyMask []int32, out *Tensor) (err error) {
	defer recoverErr(&err)
	d.withRaw(func(r raw.AttentionDesc) {
		c.handle().AttentionPadded(r, q.handle(), k.handle(), v.handle(), keyMask, out.handle())
	})
	return nil
}

// AttentionMerge combines two partial attentions over disjoint key sets;
// out may alias outA or outB, lse may be nil.
func (c *Context) AttentionMerge(outA, lseA, outB, lseB, out, lse *Tensor) (err error) {
	defer recoverErr(&err)
	c.handle().AttentionMerge(outA.handle(), lseA.handle(), outB.handle(), lseB.handle(),
		out.handle(), lse.handle())
	return nil
}

// ---- paged KV cache -----------------------------------------------------

// KvCacheDesc describes a paged KV cache; start from NewKvCacheDesc.
type KvCacheDesc struct {
	NumLayers, NumKvHeads int
	HeadDim, HeadDimV     int // HeadDimV 0 = HeadDim
	PageSize              int // tokens per page
	NumPages              int
	Dtype                 Dtype // F32, F16, BF16, I8, FP8E4M3 or Q4 (see vkattn_quant.go)
	// RotateKeys (VKATTN_KV_ROTATE_KEYS, Q4 caches only): keys are rotated
	// by the normalized Walsh-Hadamard transform before they are
	// quantized; attention rotates the queries alike, ReadBytes returns
	// the rotated codes.
	RotateKeys bool
}

// NewKvCacheDesc is the library's defaults (page size, dtype) with the
// required counts set.
func NewKvCacheDesc(numLayers, numKvHeads, headDim, numPages int) KvCacheDesc {
	r := raw.NewKvCacheDesc()
	defer raw.DeleteKvCacheDesc(r)
	return KvCacheDesc{NumLayers: numLayers, NumKvHeads: numKvHeads, HeadDim: headDim,
		HeadDimV: int(r.GetHeadDimV()), PageSize: int(r.GetPageSize()), NumPages: numPages,
		Dtype: Dtype(r.GetDtype())}
}

// KvCache is a pool of pages holding K and V of sequences named by int64 ids.
type KvCache struct{ h raw.KvCache }

// NewKvCache allocates the page pool on the context's device.
func (c *Context) NewKvCache(d *KvCacheDesc) (kv *KvCache, err error) {
	defer recoverErr(&err)
	r := raw.KvCacheDesc(raw.SwigcptrKvCacheDesc(0))
	if d != nil {
		r = raw.NewKvCacheDesc()
		defer raw.DeleteKvCacheDesc(r)
		r.SetNumLayers(u32("KvCacheDesc.NumLayers", d.NumLayers))
		r.SetNumKvHeads(u32("KvCacheDesc.NumKvHeads", d.NumKvHeads))
		r.SetHeadDim(u32("KvCacheDesc.HeadDim", d.HeadDim))
		r.SetHeadDimV(u32("KvCacheDesc.HeadDimV", d.HeadDimV))
		r.SetPageSize(u32("KvCacheDesc.PageSize", d.PageSize))
		r.SetNumPages(u32("KvCacheDesc.NumPages", d.NumPages))
		r.SetDtype(raw.Enum_SS_vkattn_dtype(i32("KvCacheDesc.Dtype", int(d.Dtype))))
		if d.RotateKeys {
			r.SetFlags(uint(raw.KV_ROTATE_KEYS))
		}
	}
	return &KvCache{h: raw.NewKvCache(c.handle(), r)}, nil
}

func (kv *KvCache) handle() raw.KvCache {
	if kv == nil || kv.h == nil {
		return raw.SwigcptrKvCache(0)
	}
	return kv.h
}

// Close releases the cache (an open step keeps it alive until it ends).
func (kv *KvCache) Close() error {
	if kv == nil || kv.h == nil {
		return ErrClosed
	}
	raw.DeleteKvCache(kv.h)
	kv.h = nil
	return nil
}

// Length is the number of committed tokens of a sequence (0 if unknown).
func (kv *KvCache) Length(seq int64) (n int, err error) {
	defer recoverErr(&err)
	return kv.handle().Length(seq), nil
}

// Remove frees a sequence's pages.
func (kv *KvCache) Remove(seq int64) (err error) {
	defer recoverErr(&err)
	kv.handle().Remove(seq)
	return nil
}

// Fork makes dst (a new id) share every page of src.
func (kv *KvCache) Fork(src, dst int64) (err error) {
	defer recoverErr(&err)
	kv.handle().Fork(src, dst)
	return nil
}

// Truncate drops a sequence's tokens from newLength on.
func (kv *KvCache) Truncate(seq int64, newLength int) (err error) {
	defer recoverErr(&err)
	kv.handle().Truncate(seq, i32("newLength", newLength))
	return nil
}

// NumFreePages is the number of pages in no sequence and no open step.
func (kv *KvCache) NumFreePages() (n int, err error) {
	defer recoverErr(&err)
	return int(kv.handle().NumFreePages()), nil
}

// ReadF32 copies committed tokens [start, start+count) of one layer of an
// f32 cache: k [count, Hkv, d], v [count, Hkv, dv].
func (kv *KvCache) ReadF32(layer int, seq int64, start, count int, k, v []float32) (err error) {
	defer recoverErr(&err)
	kv.handle().ReadF32(i32("layer", layer), seq, i32("start", start), i32("count", count), k, v)
	return nil
}

// ReadU16 is ReadF32 for f16/bf16 caches (bit patterns).
func (kv *KvCache) ReadU16(layer int, seq int64, start, count int, k, v []uint16) (err error) {
	defer recoverErr(&err)
	kv.handle().ReadU16(i32("layer", layer), seq, i32("start", start), i32("count", count), k, v)
	return nil
}

// Begin opens a step: seqIDs[i] brings numNew[i] new tokens (unknown ids
// start new sequences). ErrorCacheFull leaves the cache as it was.
func (kv *KvCache) Begin(seqIDs []int64, numNew []int32) (s *Step, err error) {
	defer recoverErr(&err)
	return &Step{h: kv.handle().Begin(seqIDs, numNew)}, nil
}

// Step is one open step of a cache. Commit it, or Close it to abort.
type Step struct{ h raw.Step }

func (s *Step) handle() raw.Step {
	if s == nil || s.h == nil {
		return raw.SwigcptrStep(0)
	}
	return s.h
}

// Append writes this step's new K/V of one layer: k [total_new, Hkv, d],
// v [total_new, Hkv, dv], packed in the order of Begin's ids.
func (s *Step) Append(layer int, k, v *Tensor) (err error) {
	defer recoverErr(&err)
	s.handle().Append(i32("layer", layer), k.handle(), v.handle())
	return nil
}

// Commit advances the lengths by the step's token counts; the step ends.
func (s *Step) Commit() (err error) {
	defer recoverErr(&err)
	s.handle().Commit()
	return nil
}

// Abort drops the step's tokens (nothing happens to an ended step).
func (s *Step) Abort() (err error) {
	defer recoverErr(&err)
	s.handle().Abort()
	return nil
}

// Active is true until the step is committed, aborted or closed.
func (s *Step) Active() bool { return s.handle().IsActive() }

// Close aborts the step unless it was committed and frees it; deferring
// Close after Commit is fine.
func (s *Step) Close() error {
	if s == nil || s.h == nil {
		return ErrClosed
	}
	raw.DeleteStep(s.h)
	s.h = nil
	return nil
}

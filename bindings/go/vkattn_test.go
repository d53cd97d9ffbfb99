package vkattn

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

const tH, tHkv, tD = 4, 2, 8

// reference is plain attention over a packed batch (bottom-right causal,
// window, GQA); it returns out [tq*h*d] and lse [tq*h].
func reference(q, k, v []float32, cuQ, cuK []int32, h, hkv, d int, causal bool, window int) ([]float32, []float32) {
	return referenceWith(q, k, v, cuQ, cuK, h, hkv, d, causal, window, nil, nil)
}

// referenceWith is reference with an attention variant's functions on the
// host (nil: none).
func referenceWith(q, k, v []float32, cuQ, cuK []int32, h, hkv, d int, causal bool, window int,
	mask func(seq, head, qPos, kPos int) bool,
	score func(s float64, seq, head, qPos, kPos int) float64) ([]float32, []float32) {
	tq := int(cuQ[len(cuQ)-1])
	out := make([]float32, tq*h*d)
	lse := make([]float32, tq*h)
	scale := 1 / math.Sqrt(float64(d))
	for b := 0; b+1 < len(cuQ); b++ {
		t, u := int(cuQ[b+1]-cuQ[b]), int(cuK[b+1]-cuK[b])
		for i := 0; i < t; i++ {
			pos := u - t + i
			for hh := 0; hh < h; hh++ {
				kh, row := hh/(h/hkv), (int(cuQ[b])+i)*h+hh
				s := make([]float64, u)
				m := math.Inf(-1)
				for j := 0; j < u; j++ {
					s[j] = math.Inf(-1)
					if (causal && j > pos) || (window >= 0 && pos-j > window) {
						continue
					}
					if mask != nil && !mask(b, hh, pos, j) {
						continue
					}
					dot := 0.0
					for e := 0; e < d; e++ {
						dot += float64(q[row*d+e]) * float64(k[((int(cuK[b])+j)*hkv+kh)*d+e])
					}
					s[j] = dot * scale
					if score != nil {
						s[j] = score(s[j], b, hh, pos, j)
					}
					m = math.Max(m, s[j])
				}
				l, acc := 0.0, make([]float64, d)
				for j := 0; j < u; j++ {
					if math.IsInf(s[j], -1) {
						continue
					}
					p := math.Exp(s[j] - m)
					l += p
					for e := 0; e < d; e++ {
						acc[e] += p * float64(v[((int(cuK[b])+j)*hkv+kh)*d+e])
					}
				}
				for e := 0; e < d; e++ {
					if l > 0 {
						out[row*d+e] = float32(acc[e] / l)
					}
				}
				lse[row] = float32(m + math.Log(l))
			}
		}
	}
	return out, lse
}

func randoms(r *rand.Rand, n int) []float32 {
	a := make([]float32, n)
	for i := range a {
		a[i] = r.Float32() - 0.5
	}
	return a
}

func maxDiff(t *testing.T, a, b []float32) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("lengths %d != %d", len(a), len(b))
	}
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// must unwraps calls that are not under test (a failure aborts the run).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newContext(t *testing.T) *Context {
	c := must(NewContext())
	t.Cleanup(func() { c.Close() })
	return c
}

func tensorF32(t *testing.T, c *Context, data []float32, shape ...int64) *Tensor {
	x := must(c.TensorF32(data, shape...))
	t.Cleanup(func() { x.Close() })
	return x
}

func tensor(t *testing.T, c *Context, dtype Dtype, shape ...int64) *Tensor {
	x := must(c.NewTensor(dtype, shape...))
	t.Cleanup(func() { x.Close() })
	return x
}

// wantError checks err is a *Error whose message starts with prefix.
func wantError(t *testing.T, err error, prefix string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *vkattn.Error with %q, got %v", prefix, err)
	}
	if !strings.HasPrefix(e.Message, prefix) {
		t.Fatalf("message %q does not start with %q", e.Message, prefix)
	}
	return e
}

func TestVarlenCausalWindowMatchesReference(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(1))
	cuQ, cuK := []int32{0, 3, 5, 6}, []int32{0, 7, 9, 13}
	const tq, tk, window = 6, 13, 2
	q, k, v := randoms(r, tq*tH*tD), randoms(r, tk*tHkv*tD), randoms(r, tk*tHkv*tD)
	refOut, refLse := reference(q, k, v, cuQ, cuK, tH, tHkv, tD, true, window)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.Causal, d.WindowLeft = true, window
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)
}

// WindowRight 0 without Causal is causal; ChunkSize 1 leaves each query its
// own key, as WindowLeft 0 does.
func TestRightWindowAndChunksMatchTheirEquivalents(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(3))
	cuQ, cuK := []int32{0, 3, 5, 6}, []int32{0, 7, 9, 13}
	const tq, tk, window = 6, 13, 2
	q, k, v := randoms(r, tq*tH*tD), randoms(r, tk*tHkv*tD), randoms(r, tk*tHkv*tD)
	refOut, refLse := reference(q, k, v, cuQ, cuK, tH, tHkv, tD, true, window)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.WindowLeft, d.WindowRight = window, 0
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)
	refOut, refLse = reference(q, k, v, cuQ, cuK, tH, tHkv, tD, true, 0)
	d = NewAttentionDesc(tH, tHkv, tD)
	d.Causal, d.ChunkSize = true, 1
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)
}

// A bidirectional span over each whole sequence makes causal attention see
// every key: it equals attention without Causal. A SpanIndptr that does not
// fit the batch is an error.
func TestSpansOverWholeSequencesUndoCausal(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(4))
	cuQ, cuK := []int32{0, 3, 5, 6}, []int32{0, 7, 9, 13}
	const tq, tk = 6, 13
	q, k, v := randoms(r, tq*tH*tD), randoms(r, tk*tHkv*tD), randoms(r, tk*tHkv*tD)
	refOut, refLse := reference(q, k, v, cuQ, cuK, tH, tHkv, tD, false, -1)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.Causal = true
	d.SpanIndptr, d.Spans = []int32{0, 1, 2, 3}, []int32{0, 7, 0, 2, 0, 4}
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)
	d.SpanIndptr, d.Spans = []int32{0, 1}, []int32{0, 7}
	err := c.AttentionVarlen(&d, cuQ, cuK, tensorF32(t, c, q, tq, tH, tD),
		tensorF32(t, c, k, tk, tHkv, tD), tensorF32(t, c, v, tk, tHkv, tD), tensor(t, c, F32, tq, tH, tD))
	if err == nil || !strings.Contains(err.Error(), "span_indptr has 2 entries") {
		t.Fatalf("want the span_indptr length error, got %v", err)
	}
}

// randomTree is a draft tree of n tokens, node i's parent drawn from
// [0, i): row i of the [n][n] matrix is its parent's row plus i itself.
func randomTree(r *rand.Rand, n int) [][]bool {
	m := make([][]bool, n)
	for i := range m {
		m[i] = make([]bool, n)
		if i > 0 {
			copy(m[i], m[r.Intn(i)])
		}
		m[i][i] = true
	}
	return m
}

// treeCase is two sequences: a 9-token draft tree over 40 keys, then 5
// queries over 12 keys without a tree; its trees and the bool mask that
// equals them (each sequence's t x u block row-major, in batch order).
func treeCase(r *rand.Rand) (cuQ, cuK []int32, trees [][][]bool, mask []byte) {
	cuQ, cuK = []int32{0, 9, 14}, []int32{0, 40, 52}
	trees = [][][]bool{randomTree(r, 9), nil}
	for b, tree := range trees {
		t, u := int(cuQ[b+1]-cuQ[b]), int(cuK[b+1]-cuK[b])
		for i := 0; i < t; i++ {
			for j := 0; j < u; j++ {
				// Keys before the queries' own block: untouched by the tree.
				on := tree == nil || j < u-t || tree[i][j-(u-t)]
				if on {
					mask = append(mask, 1)
				} else {
					mask = append(mask, 0)
				}
			}
		}
	}
	return cuQ, cuK, trees, mask
}

func TestTreeMaskFromBoolPacksBitsLowFirst(t *testing.T) {
	m := make([][]bool, 33)
	for i := range m {
		m[i] = make([]bool, 33)
		m[i][i] = true
	}
	m[32][0] = true
	indptr, words, err := TreeMaskFromBool([][][]bool{nil, {{true, true}, {true, true}}, m})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(indptr) != "[0 0 2 68]" {
		t.Fatalf("indptr %v", indptr)
	}
	if words[0] != 3 || words[1] != 3 || words[2] != 1 || words[2+31*2] != 1<<31 ||
		words[2+32*2] != 1 || words[2+32*2+1] != 1 {
		t.Fatalf("words %v", words)
	}
	_, _, err = TreeMaskFromBool([][][]bool{{{true, true}}})
	wantError(t, err, "vkattn: tree mask 0: row 0 has 2 entries, want 1")
}

// A varlen call with a draft tree on one sequence (and none on the other)
// equals the same call with the equivalent bool mask. Tree arrays shorter
// than the call needs are an error.
func TestSpeculativeTreesEqualTheirBoolMask(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(14))
	cuQ, cuK, trees, mask := treeCase(r)
	tq, tk := int64(cuQ[2]), int64(cuK[2])
	q := tensorF32(t, c, randoms(r, int(tq)*tH*tD), tq, tH, tD)
	k := tensorF32(t, c, randoms(r, int(tk)*tHkv*tD), tk, tHkv, tD)
	v := tensorF32(t, c, randoms(r, int(tk)*tHkv*tD), tk, tHkv, tD)
	m := tensor(t, c, U8, int64(len(mask)))
	if err := m.WriteBytes(mask); err != nil {
		t.Fatal(err)
	}
	indptr, words, err := TreeMaskFromBool(trees)
	if err != nil {
		t.Fatal(err)
	}
	for _, causal := range []bool{true, false} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal = causal
		d.TreeIndptr, d.TreeMask = indptr, words
		got := tensor(t, c, F32, tq, tH, tD)
		if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, v, got); err != nil {
			t.Fatal(err)
		}
		d = NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.Mask, d.MaskType = causal, m, MaskBool
		want := tensor(t, c, F32, tq, tH, tD)
		if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, v, want); err != nil {
			t.Fatal(err)
		}
		if diff := maxDiff(t, must(want.ReadF32()), must(got.ReadF32())); diff > 1e-5 {
			t.Errorf("causal %v: tree vs bool mask, max diff %g", causal, diff)
		}
	}

	out := tensor(t, c, F32, tq, tH, tD)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.TreeIndptr, d.TreeMask = indptr[:2], words
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, v, out),
		"vkattn: AttentionDesc tree_indptr has 2 entries, the call needs 3")
	d.TreeIndptr, d.TreeMask = indptr, words[:8]
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, v, out),
		"vkattn: AttentionDesc tree_indptr counts 9 words, the tree_mask array holds 8")
	d.TreeIndptr = nil
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, v, out),
		"vkattn: tree_mask given without tree_indptr")
}

// Tree arguments that do not fit are an *Error with the reason, never a
// panic or a tree cut into range: oversized TreeMaskFromBool input, empty
// slices, prefix sums that are negative, decreasing, 2^31 - 1 or another
// word count than t*ceil(t/32). An empty non-nil TreeMask without
// TreeIndptr is an error as a longer one is (it used to be dropped).
func TestBadTreeArgumentsAreErrors(t *testing.T) {
	// 300000 nil rows: t*ceil(t/32) words pass int32.
	_, _, err := TreeMaskFromBool([][][]bool{make([][]bool, 300000)})
	wantError(t, err, "vkattn: the trees pass 2147483647 words (int32) at sequence 0")
	// 262000 nil rows fit int32 (2145256000 words): the rows are checked
	// before the 8.6 GB of words are allocated.
	_, _, err = TreeMaskFromBool([][][]bool{nil, make([][]bool, 262000)})
	wantError(t, err, "vkattn: tree mask 1: row 0 has 0 entries, want 262000")

	c := newContext(t)
	r := rand.New(rand.NewSource(17))
	cuQ, cuK, trees, _ := treeCase(r)
	tq, tk := int64(cuQ[2]), int64(cuK[2])
	q := tensorF32(t, c, make([]float32, int(tq)*tH*tD), tq, tH, tD)
	k := tensorF32(t, c, make([]float32, int(tk)*tHkv*tD), tk, tHkv, tD)
	out := tensor(t, c, F32, tq, tH, tD)
	indptr, words, err := TreeMaskFromBool(trees)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		indptr []int32
		words  []uint32
		want   string
	}{
		{[]int32{}, words, "vkattn: tree_indptr needs batch + 1 >= 1 entries (has 0)"},
		{nil, []uint32{}, "vkattn: tree_mask given without tree_indptr"},
		{nil, words, "vkattn: tree_mask given without tree_indptr"},
		{[]int32{0, -9, -9}, words, "vkattn_attention_varlen: desc->tree_indptr decreases at 1 (0 -> -9)"},
		{[]int32{0, math.MinInt32, 0}, words, "vkattn_attention_varlen: desc->tree_indptr decreases at 1 (0 -> -2147483648)"},
		{[]int32{0, 100, 9}, words, "vkattn_attention_varlen: desc->tree_indptr decreases at 2 (100 -> 9)"},
		{[]int32{5, 9, 9}, words, "vkattn_attention_varlen: desc->tree_indptr[0] is 5, must be 0"},
		{[]int32{0, math.MaxInt32, math.MaxInt32}, words,
			"vkattn: AttentionDesc tree_indptr counts 2147483647 words, the tree_mask array holds 9"},
		{[]int32{0, 8, 8}, words, "vkattn_attention_varlen: desc->tree_indptr: sequence 0 has 8 words, must be t * ceil(t / 32) = 9"},
		{[]int32{0, 0, 9}, words, "vkattn_attention_varlen: desc->tree_indptr: sequence 1 has 9 words, must be t * ceil(t / 32) = 5"},
	} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.TreeIndptr, d.TreeMask = true, tc.indptr, tc.words
		e := wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out), tc.want)
		if e.Status != ErrorInvalidArgument {
			t.Errorf("%v: status %v", tc.indptr, e.Status)
		}
	}
	// uint32 words take every bit pattern: 0xFFFFFFFF sees the whole block.
	all := make([]uint32, len(words))
	for i := range all {
		all[i] = math.MaxUint32
	}
	d := NewAttentionDesc(tH, tHkv, tD)
	d.TreeIndptr, d.TreeMask = indptr, all
	if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out); err != nil {
		t.Fatal(err)
	}
	// No tree at all: a nil TreeIndptr and nil TreeMask, or an indptr of zeros.
	d.TreeIndptr, d.TreeMask = []int32{0, 0, 0}, nil
	if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out); err != nil {
		t.Fatal(err)
	}
}

// randomTopk is top-k lists, k entries for each query row of a packed
// batch: row i of sequence b lists distinct random positions 0 .. u_b - 1,
// the first row only k - 3 of them, then -1 pads. It returns the lists
// [tq*k] and the bool mask that equals them (1 exactly where the key is
// listed; each sequence's t x u block row-major, in batch order).
func randomTopk(r *rand.Rand, cuQ, cuK []int32, k int) (lists []int32, mask []byte) {
	for b := 0; b+1 < len(cuQ); b++ {
		t, u := int(cuQ[b+1]-cuQ[b]), int(cuK[b+1]-cuK[b])
		for i := 0; i < t; i++ {
			n := k
			if len(lists) == 0 {
				n = k - 3
			}
			row, listed := make([]int32, k), make([]byte, u)
			for x, j := range r.Perm(u)[:n] {
				row[x], listed[j] = int32(j), 1
			}
			for x := n; x < k; x++ {
				row[x] = -1
			}
			lists, mask = append(lists, row...), append(mask, listed...)
		}
	}
	return lists, mask
}

// A varlen call with top-k lists (K = 8, i32 [tq, K]; 3 queries over 40
// keys, 1 over 25) equals the same call with the equivalent bool mask.
func TestTopkListsEqualTheirBoolMask(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(16))
	cuQ, cuK := []int32{0, 3, 4}, []int32{0, 40, 65}
	const tq, tk, kk = 4, 65, 8
	lists, mask := randomTopk(r, cuQ, cuK, kk)
	q := tensorF32(t, c, randoms(r, tq*tH*tD), tq, tH, tD)
	k := tensorF32(t, c, randoms(r, tk*tHkv*tD), tk, tHkv, tD)
	v := tensorF32(t, c, randoms(r, tk*tHkv*tD), tk, tHkv, tD)
	m := tensor(t, c, U8, int64(len(mask)))
	if err := m.WriteBytes(mask); err != nil {
		t.Fatal(err)
	}
	topk := tensor(t, c, I32, tq, kk)
	if err := topk.WriteI32(lists); err != nil {
		t.Fatal(err)
	}
	for _, causal := range []bool{true, false} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.TopkIndices = causal, topk
		got := tensor(t, c, F32, tq, tH, tD)
		if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, v, got); err != nil {
			t.Fatal(err)
		}
		d = NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.Mask, d.MaskType = causal, m, MaskBool
		want := tensor(t, c, F32, tq, tH, tD)
		if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, v, want); err != nil {
			t.Fatal(err)
		}
		if diff := maxDiff(t, must(want.ReadF32()), must(got.ReadF32())); diff > 1e-5 {
			t.Errorf("causal %v: top-k vs bool mask, max diff %g", causal, diff)
		}
	}
}

// checkVarlen runs packed attention of f32 q, k, v (tH / tHkv heads of tD)
// with d (its Lse set here) and compares out and lse with the reference.
func checkVarlen(t *testing.T, c *Context, d *AttentionDesc, cuQ, cuK []int32, q, k, v,
	refOut, refLse []float32) {
	t.Helper()
	tq, tk := int64(cuQ[len(cuQ)-1]), int64(cuK[len(cuK)-1])
	out, lse := tensor(t, c, F32, tq, tH, tD), tensor(t, c, F32, tq, tH)
	d.Lse = lse
	err := c.AttentionVarlen(d, cuQ, cuK, tensorF32(t, c, q, tq, tH, tD),
		tensorF32(t, c, k, tk, tHkv, tD), tensorF32(t, c, v, tk, tHkv, tD), out)
	if err != nil {
		t.Fatal(err)
	}
	if m := maxDiff(t, refOut, must(out.ReadF32())); m > 1e-5 {
		t.Errorf("out: max diff %g", m)
	}
	if m := maxDiff(t, refLse, must(lse.ReadF32())); m > 1e-5 {
		t.Errorf("lse: max diff %g", m)
	}
}

// bf16 bits of values that bf16 holds exactly are the top half of the f32 bits.
// withSinks is a reference row set joined with per-head sinks: lse' =
// logaddexp(lse, sink), out' = out * exp(lse - lse').
func withSinks(out, lse, sinks []float32, h, dv int) ([]float32, []float32) {
	o2, l2 := make([]float32, len(out)), make([]float32, len(lse))
	for row := range lse {
		l, s := float64(lse[row]), float64(sinks[row%h])
		m := math.Max(l, s)
		j := m + math.Log(math.Exp(l-m)+math.Exp(s-m))
		l2[row] = float32(j)
		for e := 0; e < dv; e++ {
			o2[row*dv+e] = float32(float64(out[row*dv+e]) * math.Exp(l-j))
		}
	}
	return o2, l2
}

// Top-k tensors that do not fit the call are an *Error naming the
// problem: another dtype, another context, a rank other than 2 or 3, a
// first dim other than the query tokens, a middle dim other than Hkv; a
// Tensor closed before the call, also in a cache step. K = 0 and lists of
// out-of-range positions are valid (every row empty: 0).
func TestBadTopkListsAreErrors(t *testing.T) {
	c := newContext(t)
	other := newContext(t)
	r := rand.New(rand.NewSource(18))
	cuQ, cuK := []int32{0, 3, 4}, []int32{0, 40, 65}
	const tq, tk, kk = 4, 65, 8
	q := tensorF32(t, c, randoms(r, tq*tH*tD), tq, tH, tD)
	k := tensorF32(t, c, randoms(r, tk*tHkv*tD), tk, tHkv, tD) // a listed key: a row other than 0
	out := tensor(t, c, F32, tq, tH, tD)
	for _, tc := range []struct {
		topk *Tensor
		want string
	}{
		{tensor(t, c, F32, tq, kk), "vkattn_attention_varlen: desc->topk_indices must be i32, got f32"},
		{tensor(t, c, U8, tq, kk), "vkattn_attention_varlen: desc->topk_indices must be i32, got u8"},
		{tensor(t, other, I32, tq, kk), "vkattn_attention_varlen: desc->topk_indices belongs to another context"},
		{tensor(t, c, I32, tq*kk), "vkattn_attention_varlen: desc->topk_indices must be [rows, K] or [rows, Hkv, K], got [32]"},
		{tensor(t, c, I32, tq, tHkv, 1, kk), "vkattn_attention_varlen: desc->topk_indices must be [rows, K] or [rows, Hkv, K], got [4, 2, 1, 8]"},
		{tensor(t, c, I32, tq+1, kk), "vkattn_attention_varlen: desc->topk_indices' first dim is 5, must be the call's query tokens 4"},
		{tensor(t, c, I32, tq-1, tHkv, kk), "vkattn_attention_varlen: desc->topk_indices' first dim is 3"},
		{tensor(t, c, I32, tq, tHkv+1, kk), "vkattn_attention_varlen: desc->topk_indices' middle dim is 3, must be num_kv_heads 2"},
		{tensor(t, c, I32, tq, tH, kk), "vkattn_attention_varlen: desc->topk_indices' middle dim is 4, must be num_kv_heads 2"},
	} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.TopkIndices = true, tc.topk
		e := wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out), tc.want)
		if e.Status != ErrorInvalidArgument {
			t.Errorf("%q: status %v", tc.want, e.Status)
		}
	}
	far := make([]int32, tq*kk)
	for i := range far {
		far[i] = math.MaxInt32
		if i%2 == 0 {
			far[i] = math.MinInt32
		}
	}
	farList := tensor(t, c, I32, tq, kk)
	if err := farList.WriteI32(far); err != nil {
		t.Fatal(err)
	}
	for _, topk := range []*Tensor{tensor(t, c, I32, tq, 0), tensor(t, c, I32, tq, tHkv, 0), farList} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal, d.TopkIndices = true, topk
		if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out); err != nil {
			t.Fatal(err)
		}
		if diff := maxDiff(t, make([]float32, tq*tH*tD), must(out.ReadF32())); diff != 0 {
			t.Errorf("empty lists: a row is not 0 (%g)", diff)
		}
	}

	closed := tensor(t, c, I32, tq, kk)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	d := NewAttentionDesc(tH, tHkv, tD)
	d.TopkIndices = closed
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out),
		"vkattn: AttentionDesc.TopkIndices: this Tensor is closed")
	kv := must(c.NewKvCache(cacheDesc(1, 4)))
	defer kv.Close()
	s := must(kv.Begin([]int64{1}, []int32{1}))
	defer s.Close()
	k1 := tensorF32(t, c, make([]float32, tHkv*tD), 1, tHkv, tD)
	q1 := tensorF32(t, c, make([]float32, tH*tD), 1, tH, tD)
	if err := s.Append(0, k1, k1); err != nil {
		t.Fatal(err)
	}
	wantError(t, s.Attention(0, &d, q1, tensor(t, c, F32, 1, tH, tD)),
		"vkattn: AttentionDesc.TopkIndices: this Tensor is closed")
	d.TopkIndices = nil // cleared: the call runs
	if err := c.AttentionVarlen(&d, cuQ, cuK, q, k, k, out); err != nil {
		t.Fatal(err)
	}
}

func TestSinksJoinTheDenominator(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(5))
	cuQ, cuK := []int32{0, 3, 5, 6}, []int32{0, 7, 9, 13}
	const tq, tk = 6, 13
	q, k, v := randoms(r, tq*tH*tD), randoms(r, tk*tHkv*tD), randoms(r, tk*tHkv*tD)
	sinks := make([]float32, tH)
	for h := range sinks {
		sinks[h] = 0.5*float32(h) - 1
	}
	refOut, refLse := reference(q, k, v, cuQ, cuK, tH, tHkv, tD, true, -1)
	refOut, refLse = withSinks(refOut, refLse, sinks, tH, tD)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.Causal, d.Sinks = true, tensorF32(t, c, sinks, tH)
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)
	out := tensor(t, c, F32, tq, tH, tD)
	d.Sinks = tensorF32(t, c, sinks[:tH-1], tH-1)
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, tensorF32(t, c, q, tq, tH, tD),
		tensorF32(t, c, k, tk, tHkv, tD), tensorF32(t, c, v, tk, tHkv, tD), out),
		"vkattn_attention_varlen: desc->sinks has shape")
}

func TestBF16ThroughUint16Slices(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(2))
	cuQ, cuK := []int32{0, 2}, []int32{0, 5}
	exact := func(n int) ([]float32, []uint16) {
		f, b := make([]float32, n), make([]uint16, n)
		for i := range f {
			f[i] = float32(r.Intn(256)-128) / 256
			b[i] = uint16(math.Float32bits(f[i]) >> 16)
		}
		return f, b
	}
	q, qb := exact(2 * tH * tD)
	k, kb := exact(5 * tHkv * tD)
	v, vb := exact(5 * tHkv * tD)
	ref, _ := reference(q, k, v, cuQ, cuK, tH, tHkv, tD, true, -1)
	mk := func(data []uint16, shape ...int64) *Tensor {
		x := must(c.TensorU16(BF16, data, shape...))
		t.Cleanup(func() { x.Close() })
		return x
	}
	out := tensor(t, c, BF16, 2, tH, tD)
	d := NewAttentionDesc(tH, tHkv, tD)
	d.Causal = true
	if err := c.AttentionVarlen(&d, cuQ, cuK, mk(qb, 2, tH, tD), mk(kb, 5, tHkv, tD), mk(vb, 5, tHkv, tD), out); err != nil {
		t.Fatal(err)
	}
	bits := must(out.ReadU16())
	got := make([]float32, len(bits))
	for i, b := range bits {
		got[i] = math.Float32frombits(uint32(b) << 16)
	}
	if m := maxDiff(t, ref, got); m > 8e-3 {
		t.Errorf("max diff %g", m)
	}
}

func TestMergeOfTwoKeyHalvesEqualsFullAttention(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(3))
	const n, u = 3, 6
	q, k, v := randoms(r, n*tH*tD), randoms(r, u*tHkv*tD), randoms(r, u*tHkv*tD)
	refOut, refLse := reference(q, k, v, []int32{0, n}, []int32{0, u}, tH, tHkv, tD, false, -1)
	half := u / 2 * tHkv * tD
	tq := tensorF32(t, c, q, n, tH, tD)
	o1, o2 := tensor(t, c, F32, n, tH, tD), tensor(t, c, F32, n, tH, tD)
	l1, l2 := tensor(t, c, F32, n, tH), tensor(t, c, F32, n, tH)
	d := NewAttentionDesc(tH, tHkv, tD)
	for i, part := range []struct{ o, l *Tensor }{{o1, l1}, {o2, l2}} {
		d.Lse = part.l
		ks := tensorF32(t, c, k[i*half:(i+1)*half], u/2, tHkv, tD)
		vs := tensorF32(t, c, v[i*half:(i+1)*half], u/2, tHkv, tD)
		if err := c.AttentionVarlen(&d, []int32{0, n}, []int32{0, u / 2}, tq, ks, vs, part.o); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AttentionMerge(o1, l1, o2, l2, o1, l1); err != nil {
		t.Fatal(err)
	}
	if m := maxDiff(t, refOut, must(o1.ReadF32())); m > 1e-5 {
		t.Errorf("out: max diff %g", m)
	}
	if m := maxDiff(t, refLse, must(l1.ReadF32())); m > 1e-5 {
		t.Errorf("lse: max diff %g", m)
	}
}

func TestGettersAndDevices(t *testing.T) {
	c := newContext(t)
	x := tensor(t, c, F16, 5, 0, 3)
	if d := must(x.Dtype()); d != F16 {
		t.Errorf("dtype %v", d)
	}
	if s := must(x.Shape()); len(s) != 3 || s[0] != 5 || s[1] != 0 || s[2] != 3 {
		t.Errorf("shape %v", s)
	}
	if n := must(x.ReadU16()); len(n) != 0 {
		t.Errorf("read %d elements", len(n))
	}
	v := Version()
	if F16.Size() != 2 || fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100) != ModuleVersion {
		t.Errorf("size %d version %d, module version %s", F16.Size(), v, ModuleVersion)
	}
	info := must(c.DeviceInfo())
	if info.Name == "" || info.MaxBufferRange == 0 {
		t.Errorf("device info %+v", info)
	}
	n := must(DeviceCount())
	found := false
	for i := 0; i < n; i++ {
		found = found || must(DeviceInfoAt(i)).Name == info.Name
	}
	if !found {
		t.Errorf("%q not among %d devices", info.Name, n)
	}
	_, err := DeviceInfoAt(n)
	wantError(t, err, "vkattn_device_get_info: ")
	if ErrorInvalidArgument.String() != "invalid argument" {
		t.Errorf("status string %q", ErrorInvalidArgument.String())
	}
}

func TestBadInputReturnsTheLibraryMessage(t *testing.T) {
	c := newContext(t)
	x := tensor(t, c, F32, 2, 3)
	e := wantError(t, x.WriteF32(make([]float32, 5)), "vkattn_tensor_write: nbytes 20 != tensor size 24")
	if e.Status != ErrorInvalidArgument {
		t.Errorf("status %v", e.Status)
	}
	wantError(t, x.ReadF32Into(make([]float32, 7)), "vkattn_tensor_read: nbytes 28")
	wantError(t, x.WriteU16(make([]uint16, 6)), "vkattn: a 16-bit array does not fit a f32 tensor")
	_, err := c.NewTensor(F32, 1, 2, 3, 4, 5)
	wantError(t, err, "vkattn_tensor_create: ")
	_, err = NewContextOn(1000, 0)
	wantError(t, err, "vkattn_context_create: ")
	q := tensor(t, c, F32, 2, tH, tD)
	d := NewAttentionDesc(tH, tHkv, 0)
	wantError(t, c.AttentionVarlen(&d, []int32{0, 2}, []int32{0, 2}, q, q, q, q), "vkattn_attention_varlen: ")
	d = NewAttentionDesc(tH, tHkv, tD)
	wantError(t, c.AttentionVarlen(&d, []int32{0, 2}, []int32{0}, q, q, q, q), "vkattn: cu_seqlens_k has 1 entries")
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	c := must(NewContext())
	x := must(c.TensorF32([]float32{1, 2, 3}, 3))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != ErrClosed {
		t.Errorf("second close: %v", err)
	}
	wantError(t, c.Synchronize(), "vkattn: this Context is closed")
	_, err := c.NewTensor(F32, 1)
	wantError(t, err, "vkattn_tensor_create: ")
	// Objects keep their context alive.
	if got := must(x.ReadF32()); got[0] != 1 || got[2] != 3 {
		t.Errorf("read after context close: %v", got)
	}
	x.Close()
	if err := x.Close(); err != ErrClosed {
		t.Errorf("second close: %v", err)
	}
	wantError(t, x.WriteF32([]float32{1, 2, 3}), "vkattn: this Tensor is closed")
	_, err = x.ReadF32()
	wantError(t, err, "vkattn: this Tensor is closed")
	_, err = x.Shape()
	wantError(t, err, "vkattn: this Tensor is closed")
}

func TestNilArguments(t *testing.T) {
	c := newContext(t)
	x := tensor(t, c, F32, 2, tH, tD)
	wantError(t, x.WriteF32(nil), "vkattn: the float array is null")
	var nilTensor *Tensor
	wantError(t, nilTensor.WriteF32([]float32{1}), "vkattn: this Tensor is closed")
	var nilContext *Context
	_, err := nilContext.NewTensor(F32, 1)
	wantError(t, err, "vkattn_tensor_create: ")
	d := NewAttentionDesc(tH, tHkv, tD)
	wantError(t, c.AttentionVarlen(nil, []int32{0, 2}, []int32{0, 2}, x, x, x, x), "vkattn_attention_varlen: ")
	wantError(t, c.AttentionVarlen(&d, nil, nil, x, x, x, x), "vkattn: cu_seqlens_q is null")
	wantError(t, c.AttentionVarlen(&d, []int32{0, 2}, []int32{0, 2}, nil, x, x, x), "vkattn_attention_varlen: ")
	wantError(t, c.AttentionMerge(nil, nil, nil, nil, nil, nil), "vkattn_attention_merge: ")
	wantError(t, c.AttentionPadded(&d, x, x, x, []int32{1}, x), "vkattn_attention_padded: ")
}

// Errors are read in the same native call, so goroutines that fail at
// once (and may share OS threads) each get their own message.
func TestConcurrentErrorsKeepTheirMessages(t *testing.T) {
	const goroutines, calls = 8, 20
	type result struct {
		g   int
		err error
	}
	results := make(chan result, goroutines*calls)
	for g := 0; g < goroutines; g++ {
		go func(g int) {
			for i := 0; i < calls; i++ {
				_, err := DeviceInfoAt(1000 + g)
				results <- result{g, err}
			}
		}(g)
	}
	for i := 0; i < goroutines*calls; i++ {
		r := <-results
		wantError(t, r.err, "vkattn_device_get_info: device index "+strconv.Itoa(1000+r.g)+" out of range")
	}
}

// A Tensor closed after it was stored in an AttentionDesc fails the call
// with an error naming the field (it used to be dropped silently).
func TestClosedTensorInTheDescFails(t *testing.T) {
	c := newContext(t)
	cu := []int32{0, 2}
	q := tensorF32(t, c, make([]float32, 2*tH*tD), 2, tH, tD)
	kv := tensorF32(t, c, make([]float32, 2*tHkv*tD), 2, tHkv, tD)
	out := tensor(t, c, F32, 2, tH, tD)
	for _, field := range []string{"Lse", "Sinks", "AlibiSlopes"} {
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal = true
		x := tensor(t, c, F32, tH)
		switch field {
		case "Lse":
			x = tensor(t, c, F32, 2, tH)
			d.Lse = x
		case "Sinks":
			d.Sinks = x
		case "AlibiSlopes":
			d.AlibiSlopes = x
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		wantError(t, c.AttentionVarlen(&d, cu, cu, q, kv, kv, out),
			"vkattn: AttentionDesc."+field+": this Tensor is closed")
	}
	d := NewAttentionDesc(tH, tHkv, tD)
	if err := c.AttentionVarlen(&d, cu, cu, q, kv, kv, out); err != nil {
		t.Fatal(err)
	}
}

// ContextBatchInvariant: a decode over 3000 keys gives the same bits alone
// and in the middle of a batch of decodes.
func TestBatchInvariantContextKeepsADecodesBits(t *testing.T) {
	c := must(NewContextOn(-1, ContextBatchInvariant))
	t.Cleanup(func() { c.Close() })
	r := rand.New(rand.NewSource(3))
	lens := []int32{500, 3000, 1200}
	qs, ks, vs := make([][]float32, 3), make([][]float32, 3), make([][]float32, 3)
	for i, u := range lens {
		qs[i], ks[i], vs[i] = randoms(r, tH*tD), randoms(r, int(u)*tHkv*tD), randoms(r, int(u)*tHkv*tD)
	}
	run := func(idx []int) []float32 {
		var q, k, v []float32
		cuQ, cuK := []int32{0}, []int32{0}
		for _, i := range idx {
			q, k, v = append(q, qs[i]...), append(k, ks[i]...), append(v, vs[i]...)
			cuQ, cuK = append(cuQ, cuQ[len(cuQ)-1]+1), append(cuK, cuK[len(cuK)-1]+lens[i])
		}
		tq, tk := int64(len(idx)), int64(cuK[len(cuK)-1])
		out := tensor(t, c, F32, tq, tH, tD)
		d := NewAttentionDesc(tH, tHkv, tD)
		d.Causal = true
		if err := c.AttentionVarlen(&d, cuQ, cuK, tensorF32(t, c, q, tq, tH, tD),
			tensorF32(t, c, k, tk, tHkv, tD), tensorF32(t, c, v, tk, tHkv, tD), out); err != nil {
			t.Fatal(err)
		}
		return must(out.ReadF32())
	}
	alone, batch := run([]int{1}), run([]int{0, 1, 2})[tH*tD:2*tH*tD]
	for i := range alone {
		if math.Float32bits(alone[i]) != math.Float32bits(batch[i]) {
			t.Fatalf("out[%d]: %v alone, %v in the batch", i, alone[i], batch[i])
		}
	}
}

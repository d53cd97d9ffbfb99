package vkattn

import (
	"math"
	"math/bits"
	"math/rand"
	"strings"
	"testing"
)

// e4m3 decodes an OCP e4m3fn code (bias 7, no infinities, 0x7f/0xff NaN).
func e4m3(c byte) float32 {
	sign, exp, man := float64(1), int(c>>3)&15, float64(c&7)
	if c&0x80 != 0 {
		sign = -1
	}
	switch {
	case exp == 15 && c&7 == 7:
		return float32(math.NaN())
	case exp == 0:
		return float32(sign * man / 8 * math.Ldexp(1, -6))
	}
	return float32(sign * (1 + man/8) * math.Ldexp(1, exp-7))
}

// dequantize turns codes and per-(token, head) scales back into values,
// checking them against the appended ones within the dtype's rounding.
func dequantize(t *testing.T, dt Dtype, codes []byte, scales, orig []float32, dim int) []float32 {
	t.Helper()
	out := make([]float32, len(codes))
	for i, c := range codes {
		s := scales[i/dim]
		want, bound := float64(orig[i]), 0.0
		if dt == I8 {
			out[i] = float32(int8(c)) * s
			bound = 0.5 * float64(s)
		} else {
			out[i] = e4m3(c) * s
			want = math.Max(-448*float64(s), math.Min(448*float64(s), want))
			bound = math.Max(math.Abs(want)/16, float64(s)/1024)
		}
		if d := math.Abs(float64(out[i]) - want); !(d <= bound*1.001+1e-7) {
			t.Fatalf("element %d: %g dequantizes to %g (bound %g)", i, orig[i], out[i], bound)
		}
	}
	return out
}

// 8-bit caches: the codes and scales read back dequantize to the appended
// values within the rounding, and step attention equals the reference over
// those dequantized values. fp8 needs its scales before the first append.
func TestEightBitCachesDequantizeToWhatAttentionSees(t *testing.T) {
	c := newContext(t)
	const n, row = 5, tHkv * tD
	for _, dt := range []Dtype{I8, FP8E4M3} {
		r := rand.New(rand.NewSource(8))
		d := cacheDesc(1, 4)
		d.Dtype = dt
		kv := must(c.NewKvCache(d))
		defer kv.Close()
		k, v, q := randoms(r, n*row), randoms(r, n*row), randoms(r, n*tH*tD)
		for i := range k {
			k[i] *= 4 // up to 2: beyond fp8's 448 x 1/256, saturates
		}
		kt, vt := tensorF32(t, c, k, n, tHkv, tD), tensorF32(t, c, v, n, tHkv, tD)
		step := must(kv.Begin([]int64{3}, []int32{n}))
		if dt == FP8E4M3 {
			wantError(t, step.Append(0, kt, vt), "vkattn_step_append: ")
			wantError(t, kv.SetScales(0, []float32{1}, []float32{1, 1}), "vkattn: setScales wants")
			wantError(t, kv.SetScales(0, []float32{-1}, []float32{1}), "vkattn_kv_cache_set_scales: ")
			if err := kv.SetScales(0, []float32{1.0 / 256}, []float32{1.0 / 64}); err != nil {
				t.Fatal(err)
			}
		} else {
			wantError(t, kv.SetScales(0, []float32{1}, []float32{1}), "vkattn_kv_cache_set_scales: ")
		}
		if err := step.Append(0, kt, vt); err != nil {
			t.Fatal(err)
		}
		if dt == FP8E4M3 {
			wantError(t, kv.SetScales(0, []float32{1}, []float32{1}), "vkattn_kv_cache_set_scales: ")
		}
		desc := NewAttentionDesc(tH, tHkv, tD)
		desc.Causal = true
		out := tensor(t, c, F32, n, tH, tD)
		if err := step.Attention(0, &desc, tensorF32(t, c, q, n, tH, tD), out); err != nil {
			t.Fatal(err)
		}
		if err := step.Commit(); err != nil {
			t.Fatal(err)
		}
		step.Close()
		kb, vb := make([]byte, n*row), make([]byte, n*row)
		ks, vs := make([]float32, n*tHkv), make([]float32, n*tHkv)
		if err := kv.ReadBytes(0, 3, 0, n, kb, vb); err != nil {
			t.Fatal(err)
		}
		if err := kv.ReadScales(0, 3, 0, n, ks, vs); err != nil {
			t.Fatal(err)
		}
		wantError(t, kv.ReadScales(0, 3, 0, n, ks[:1], vs), "vkattn: the scale arrays hold")
		wantError(t, kv.ReadF32(0, 3, 0, n, k, v), "vkattn: a float array does not fit")
		if dt == I8 {
			for i := 0; i < n*tHkv; i++ {
				amax := 0.0
				for e := 0; e < tD; e++ {
					amax = math.Max(amax, math.Abs(float64(k[i*tD+e])))
				}
				if math.Abs(float64(ks[i])-amax/127) > 1e-6*amax {
					t.Errorf("k scale %d: %g, absmax/127 %g", i, ks[i], amax/127)
				}
			}
		} else if ks[0] != 1.0/256 || vs[n*tHkv-1] != 1.0/64 {
			t.Errorf("fp8 scales read back %g, %g", ks[0], vs[n*tHkv-1])
		}
		dk := dequantize(t, dt, kb, ks, k, tD)
		dv := dequantize(t, dt, vb, vs, v, tD)
		ref, _ := reference(q, dk, dv, []int32{0, n}, []int32{0, n}, tH, tHkv, tD, true, -1)
		if m := maxDiff(t, ref, must(out.ReadF32())); m > 1e-4 {
			t.Errorf("dtype %v: attention differs from the reference over the dequantized cache by %g", dt, m)
		}
	}
}

// rotate is RoPE on the host (no scaling): pairs of dims [off, off+rot)
// of each head row, NeoX halves or GPT-J interleaved, at pos[token].
func rotate(x []float32, heads, dim int, pos []int, gptj bool, rot, off int) []float32 {
	out := append([]float32(nil), x...)
	for tok, p := range pos {
		for h := 0; h < heads; h++ {
			base := (tok*heads + h) * dim
			for i := 0; i < rot/2; i++ {
				a := float64(p) * math.Pow(10000, -2*float64(i)/float64(rot))
				i1, i2 := off+i, off+i+rot/2
				if gptj {
					i1, i2 = off+2*i, off+2*i+1
				}
				x1, x2 := float64(x[base+i1]), float64(x[base+i2])
				out[base+i1] = float32(x1*math.Cos(a) - x2*math.Sin(a))
				out[base+i2] = float32(x2*math.Cos(a) + x1*math.Sin(a))
			}
		}
	}
	return out
}

// Rope rotates queries at their start positions (NeoX, and GPT-J over a
// part of the head at an offset); AppendRope stores keys rotated at
// positions len + i, which the cache reads back.
// Q4 caches: codes -8..7 and one scale per block of 32 (here d 8: one
// block a row, its largest magnitude coding to -8), every value within a
// step of what was appended; attention reads them (the C++ suite checks
// its answers).
func TestQ4CacheStoresCodesAndBlockScales(t *testing.T) {
	c := newContext(t)
	const n = 5
	r := rand.New(rand.NewSource(4))
	d := cacheDesc(1, 4)
	d.Dtype = Q4
	q4 := appendQ4(t, c, d, r, n, func(step *Step) {
		out := tensor(t, c, F32, n, tH, tD)
		desc := NewAttentionDesc(tH, tHkv, tD)
		if err := step.Attention(0, &desc, tensorF32(t, c, randoms(r, n*tH*tD), n, tH, tD), out); err != nil {
			t.Fatal(err)
		}
	})
	defer q4.kv.Close()
	k, v, kb, vb, ks, vs := q4.k, q4.v, q4.kb, q4.vb, q4.ks, q4.vs
	for _, side := range []struct {
		x     []float32
		codes []byte
		s     []float32
	}{{k, kb, ks}, {v, vb, vs}} {
		for i := 0; i < n*tHkv; i++ {
			m := float32(0)
			for e := 0; e < tD; e++ {
				if x := side.x[i*tD+e]; math.Abs(float64(x)) > math.Abs(float64(m)) {
					m = x
				}
			}
			if math.Abs(float64(side.s[i]-m/-8)) > 1e-3*math.Abs(float64(m/8)) {
				t.Errorf("row %d: scale %g, want %g (its largest magnitude / -8)", i, side.s[i], m/-8)
			}
			for e := 0; e < tD; e++ {
				code := int8(side.codes[i*tD+e])
				got := float64(code) * float64(side.s[i])
				if code < -8 || code > 7 || math.Abs(got-float64(side.x[i*tD+e])) > math.Abs(float64(side.s[i]))*1.001+1e-7 {
					t.Fatalf("row %d elem %d: code %d x %g, appended %g", i, e, code, side.s[i], side.x[i*tD+e])
				}
			}
		}
	}
	wantError(t, q4.kv.ReadBlockScales(0, 3, 0, n, ks[:1], vs), "vkattn_kv_cache_read_block_scales: ")
}

// q4Rows: n random rows appended to sequence 3 of a one-layer Q4 cache,
// and what the cache reads back (codes as bytes, block scales: d 8, one a
// row).
type q4Rows struct {
	kv     *KvCache
	k, v   []float32
	kb, vb []byte
	ks, vs []float32
}

// appendQ4 makes the cache of d, appends n rows of r's values in one step
// (calling during, if not nil, before the commit) and reads them back.
func appendQ4(t *testing.T, c *Context, d *KvCacheDesc, r *rand.Rand, n int, during func(*Step)) q4Rows {
	const row = tHkv * tD
	q := q4Rows{kv: must(c.NewKvCache(d))}
	q.k, q.v = randoms(r, n*row), randoms(r, n*row)
	step := must(q.kv.Begin([]int64{3}, []int32{int32(n)}))
	if err := step.Append(0, tensorF32(t, c, q.k, int64(n), tHkv, tD), tensorF32(t, c, q.v, int64(n), tHkv, tD)); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(step)
	}
	if err := step.Commit(); err != nil {
		t.Fatal(err)
	}
	step.Close()
	q.kb, q.vb = make([]byte, n*row), make([]byte, n*row)
	q.ks, q.vs = make([]float32, n*tHkv), make([]float32, n*tHkv)
	if err := q.kv.ReadBytes(0, 3, 0, n, q.kb, q.vb); err != nil {
		t.Fatal(err)
	}
	if err := q.kv.ReadBlockScales(0, 3, 0, n, q.ks, q.vs); err != nil {
		t.Fatal(err)
	}
	return q
}

// hadamard8 is x (8 elements) times the normalized Hadamard matrix of
// order 8: entry (i, j) = (-1)^popcount(i & j) / sqrt(8).
func hadamard8(x []float32) []float64 {
	y := make([]float64, 8)
	for i := range y {
		for j, xj := range x {
			if bits.OnesCount(uint(i&j))%2 == 1 {
				y[i] -= float64(xj)
			} else {
				y[i] += float64(xj)
			}
		}
		y[i] /= math.Sqrt(8)
	}
	return y
}

// A Q4 cache with RotateKeys stores the keys' Hadamard transform (d 8:
// the whole row), values as they are; other dtypes refuse the flag.
func TestQ4CacheWithRotatedKeys(t *testing.T) {
	c := newContext(t)
	const n = 3
	r := rand.New(rand.NewSource(6))
	d := cacheDesc(1, 4)
	d.Dtype, d.RotateKeys = Q4, true
	q4 := appendQ4(t, c, d, r, n, nil)
	defer q4.kv.Close()
	k, kb, ks := q4.k, q4.kb, q4.ks
	for i := 0; i < n*tHkv; i++ {
		want := hadamard8(k[i*tD : (i+1)*tD])
		for e := 0; e < tD; e++ {
			got := float64(int8(kb[i*tD+e])) * float64(ks[i])
			if math.Abs(got-want[e]) > math.Abs(float64(ks[i]))*1.001+1e-6 {
				t.Fatalf("row %d elem %d: %g, want the rotated key's %g", i, e, got, want[e])
			}
		}
	}
	bad := cacheDesc(1, 4)
	bad.Dtype, bad.RotateKeys = F16, true
	if _, err := c.NewKvCache(bad); err == nil || !strings.Contains(err.Error(), "VKATTN_Q4 caches only") {
		t.Fatalf("an f16 cache with RotateKeys: %v", err)
	}
}

func TestRopeRotatesQueriesAndAppendedKeys(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(9))
	q := randoms(r, 5*tH*tD)
	qt := tensorF32(t, c, q, 5, tH, tD)
	gptj := NewRopeDesc()
	gptj.Layout, gptj.RotaryDim, gptj.RotaryOffset = RopeGptj, 4, 2
	for _, tc := range []struct {
		d        RopeDesc
		gptj     bool
		rot, off int
	}{{NewRopeDesc(), false, tD, 0}, {gptj, true, 4, 2}} {
		out := tensor(t, c, F32, 5, tH, tD)
		if err := c.Rope(&tc.d, []int32{0, 2, 5}, []int32{7, 0}, qt, out); err != nil {
			t.Fatal(err)
		}
		want := rotate(q, tH, tD, []int{7, 8, 0, 1, 2}, tc.gptj, tc.rot, tc.off)
		if m := maxDiff(t, want, must(out.ReadF32())); m > 1e-5 {
			t.Errorf("gptj %v: rope differs from the host rotation by %g", tc.gptj, m)
		}
	}
	bad := NewRopeDesc()
	bad.RotaryDim = 3
	wantError(t, c.Rope(&bad, []int32{0, 5}, []int32{0}, qt, qt), "vkattn_rope: ")
	wantError(t, c.Rope(nil, []int32{0, 5}, []int32{0}, qt, qt), "vkattn_rope: ")

	kv := must(c.NewKvCache(cacheDesc(1, 4)))
	defer kv.Close()
	const row = tHkv * tD
	rd := NewRopeDesc()
	var keys []float32
	for _, n := range []int{3, 2} {
		k, v := randoms(r, n*row), randoms(r, n*row)
		keys = append(keys, k...)
		step := must(kv.Begin([]int64{4}, []int32{int32(n)}))
		if err := step.AppendRope(0, &rd, tensorF32(t, c, k, int64(n), tHkv, tD), tensorF32(t, c, v, int64(n), tHkv, tD)); err != nil {
			t.Fatal(err)
		}
		if err := step.Commit(); err != nil {
			t.Fatal(err)
		}
		step.Close()
	}
	got, gv := make([]float32, 5*row), make([]float32, 5*row)
	if err := kv.ReadF32(0, 4, 0, 5, got, gv); err != nil {
		t.Fatal(err)
	}
	if m := maxDiff(t, rotate(keys, tHkv, tD, []int{0, 1, 2, 3, 4}, false, tD, 0), got); m > 1e-5 {
		t.Errorf("appended keys differ from the host rotation by %g", m)
	}
}

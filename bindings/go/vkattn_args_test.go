package vkattn

import "testing"

// Go's int is 64 bits and the C fields 32: a value that does not fit is an
// *Error naming the field, before anything runs, never a value cut to 32
// bits (1<<32 + 4 heads used to run as 4 heads, WindowLeft 1<<32 - 1 as
// -1: no window, layer 1<<32 as layer 0).
func TestIntegersPastTheCTypesAreErrors(t *testing.T) {
	c := newContext(t)
	q := tensorF32(t, c, make([]float32, 3*tH*tD), 3, tH, tD)
	k := tensorF32(t, c, make([]float32, 3*tHkv*tD), 3, tHkv, tD)
	out := tensor(t, c, F32, 3, tH, tD)
	cu := []int32{0, 3}
	for _, tc := range []struct {
		edit func(d *AttentionDesc)
		want string
	}{
		{func(d *AttentionDesc) { d.NumHeads = 1<<32 + tH }, "vkattn: AttentionDesc.NumHeads = 4294967300 does not fit uint32"},
		{func(d *AttentionDesc) { d.NumKvHeads = -1 }, "vkattn: AttentionDesc.NumKvHeads = -1 does not fit uint32"},
		{func(d *AttentionDesc) { d.HeadDimV = 1 << 40 }, "vkattn: AttentionDesc.HeadDimV = "},
		{func(d *AttentionDesc) { d.WindowLeft = 1<<32 - 1 }, "vkattn: AttentionDesc.WindowLeft = 4294967295 does not fit int32"},
		{func(d *AttentionDesc) { d.WindowRight = -1 - 1<<32 }, "vkattn: AttentionDesc.WindowRight = "},
		{func(d *AttentionDesc) { d.ChunkSize = -1 }, "vkattn: AttentionDesc.ChunkSize = -1 does not fit uint32"},
		{func(d *AttentionDesc) { d.MaskType = MaskType(1<<32 + int(MaskNone)) }, "vkattn: AttentionDesc.MaskType = "},
	} {
		d := NewAttentionDesc(tH, tHkv, tD)
		tc.edit(&d)
		wantError(t, c.AttentionVarlen(&d, cu, cu, q, k, k, out), tc.want)
	}
	d := NewAttentionDesc(tH, tHkv, tD)
	if err := c.AttentionVarlen(&d, cu, cu, q, k, k, out); err != nil {
		t.Fatal(err) // the same call with fitting values runs
	}

	for _, tc := range []struct {
		edit func(d *KvCacheDesc)
		want string
	}{
		{func(d *KvCacheDesc) { d.NumPages = 1<<32 + 2 }, "vkattn: KvCacheDesc.NumPages = 4294967298 does not fit uint32"},
		{func(d *KvCacheDesc) { d.NumLayers = -1 }, "vkattn: KvCacheDesc.NumLayers = -1"},
		{func(d *KvCacheDesc) { d.PageSize = 1 << 33 }, "vkattn: KvCacheDesc.PageSize = "},
		{func(d *KvCacheDesc) { d.Dtype = Dtype(1<<32 + int(F32)) }, "vkattn: KvCacheDesc.Dtype = "},
	} {
		kd := cacheDesc(1, 4)
		tc.edit(kd)
		_, err := c.NewKvCache(kd)
		wantError(t, err, tc.want)
	}

	kv := must(c.NewKvCache(cacheDesc(1, 4)))
	defer kv.Close()
	s := must(kv.Begin([]int64{1}, []int32{3}))
	defer s.Close()
	wantError(t, s.Append(1<<32, k, k), "vkattn: layer = 4294967296 does not fit int32")
	rope := NewRopeDesc()
	rope.RotaryDim = -2
	wantError(t, s.AppendRope(0, &rope, k, k), "vkattn: RopeDesc.RotaryDim = -2 does not fit uint32")
	if err := s.Append(0, k, k); err != nil {
		t.Fatal(err)
	}
	ad := NewAttentionDesc(tH, tHkv, tD)
	wantError(t, s.Attention(-1<<31-1, &ad, q, out), "vkattn: layer = -2147483649 does not fit int32")
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	wantError(t, kv.Truncate(1, 1<<31), "vkattn: newLength = 2147483648 does not fit int32")
	buf := make([]float32, 3*tHkv*tD)
	wantError(t, kv.ReadF32(0, 1, 1<<32, 1, buf, buf), "vkattn: start = 4294967296 does not fit int32")
	wantError(t, kv.ReadBytes(0, 1, 0, 1<<32+1, nil, nil), "vkattn: count = ")
	if n := must(kv.Length(1)); n != 3 {
		t.Errorf("length %d after refused calls, want 3", n)
	}
	_, err := NewContextOn(1<<32, 0)
	wantError(t, err, "vkattn: deviceIndex = 4294967296 does not fit int32")
}

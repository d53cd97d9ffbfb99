package vkattn

import (
	"math/rand"
	"reflect"
	"testing"
)

func cacheDesc(layers, pages int) *KvCacheDesc {
	d := NewKvCacheDesc(layers, tHkv, tD, pages)
	d.PageSize, d.Dtype = 4, F32
	return &d
}

func TestKvCacheAppendCommitReadForkTruncate(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(5))
	const row = tHkv * tD
	kv := must(c.NewKvCache(cacheDesc(2, 8)))
	defer kv.Close()
	if n := must(kv.NumFreePages()); n != 8 {
		t.Fatalf("free pages %d", n)
	}
	k := [][]float32{randoms(r, 8*row), randoms(r, 8*row)}
	v := [][]float32{randoms(r, 8*row), randoms(r, 8*row)}
	step := must(kv.Begin([]int64{7, 9}, []int32{5, 3}))
	defer step.Close()
	for l := 0; l < 2; l++ {
		if err := step.Append(l, tensorF32(t, c, k[l], 8, tHkv, tD), tensorF32(t, c, v[l], 8, tHkv, tD)); err != nil {
			t.Fatal(err)
		}
	}
	if err := step.Commit(); err != nil {
		t.Fatal(err)
	}
	if step.Active() {
		t.Error("step still active after commit")
	}
	wantError(t, step.Commit(), "vkattn: this Step is already committed or aborted")
	for id, want := range map[int64]int{7: 5, 9: 3, 1: 0} {
		if n := must(kv.Length(id)); n != want {
			t.Errorf("length(%d) = %d, want %d", id, n, want)
		}
	}
	if n := must(kv.NumFreePages()); n != 8-2-1 {
		t.Errorf("free pages %d", n)
	}
	kOut, vOut := make([]float32, 3*row), make([]float32, 3*row)
	if err := kv.ReadF32(1, 9, 0, 3, kOut, vOut); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kOut, k[1][5*row:]) || !reflect.DeepEqual(vOut, v[1][5*row:]) {
		t.Error("read back differs from what was appended")
	}
	if err := kv.Fork(7, 8); err != nil {
		t.Fatal(err)
	}
	if err := kv.Truncate(8, 2); err != nil {
		t.Fatal(err)
	}
	if n := must(kv.Length(8)); n != 2 {
		t.Errorf("length after truncate %d", n)
	}
	if err := kv.Remove(8); err != nil {
		t.Fatal(err)
	}
	s := must(kv.Begin([]int64{7, 10}, []int32{1, 2}))
	s.Close() // aborts
	if n := must(kv.Length(7)); n != 5 {
		t.Errorf("length after abort %d", n)
	}
	if n := must(kv.NumFreePages()); n != 8-2-1 {
		t.Errorf("free pages after abort %d", n)
	}
}

func TestKvCacheErrorsAndMisuse(t *testing.T) {
	c := newContext(t)
	kv := must(c.NewKvCache(cacheDesc(1, 2)))
	defer kv.Close()
	wantError(t, kv.Remove(42), "vkattn_kv_cache_remove: ")
	_, err := kv.Begin([]int64{1}, []int32{100})
	if e := wantError(t, err, "vkattn_step_begin: "); e.Status != ErrorCacheFull {
		t.Errorf("status %v", e.Status)
	}
	_, err = kv.Begin([]int64{1, 2}, []int32{1})
	wantError(t, err, "vkattn: 2 sequence ids but 1 token counts")
	_, err = kv.Begin(nil, []int32{1})
	wantError(t, err, "vkattn: the seqIds array is null")
	wantError(t, kv.ReadU16(0, 1, 0, 0, []uint16{}, []uint16{}), "vkattn: a 16-bit array does not fit a f32 cache")
	s := must(kv.Begin([]int64{1}, []int32{1}))
	wantError(t, kv.Fork(1, 2), "vkattn_kv_cache_fork: ")
	wantError(t, s.Append(0, nil, nil), "vkattn_step_append: ")
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	wantError(t, s.Append(0, nil, nil), "vkattn: this Step is already committed or aborted")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != ErrClosed {
		t.Errorf("second close: %v", err)
	}
	wantError(t, s.Commit(), "vkattn: this Step is closed")
	_, err = c.NewKvCache(nil)
	wantError(t, err, "vkattn_kv_cache_create: ")

	closed := must(c.NewKvCache(cacheDesc(1, 1)))
	open := must(closed.Begin([]int64{3}, []int32{2}))
	closed.Close()
	if err := closed.Close(); err != ErrClosed {
		t.Errorf("second close: %v", err)
	}
	_, err = closed.Length(1)
	wantError(t, err, "vkattn: this KvCache is closed")
	open.Close() // a step keeps its cache alive until it ends
}

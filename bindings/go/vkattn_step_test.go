package vkattn

import (
	"math/rand"
	"testing"
)

// Step attention over the paged cache: chunked prefill and decode of two
// sequences, compared with plain attention over each sequence's history.
func TestStepChunkedPrefillAndDecodeMatchReference(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(6))
	const row = tHkv * tD
	ids := []int64{11, 22}
	steps := [][]int32{{3, 4}, {2, 1}, {1, 1}}
	var hk, hv [2][2][]float32 // [layer][seq] history
	d := cacheDesc(2, 8)
	kv := must(c.NewKvCache(d))
	defer kv.Close()
	desc := NewAttentionDesc(tH, tHkv, tD)
	desc.Causal = true
	for _, counts := range steps {
		total := int(counts[0] + counts[1])
		step := must(kv.Begin(ids, counts))
		for l := 0; l < 2; l++ {
			k, v, q := randoms(r, total*row), randoms(r, total*row), randoms(r, total*tH*tD)
			cuQ, cuK := make([]int32, 3), make([]int32, 3)
			var refK, refV []float32
			for s, off := 0, 0; s < 2; s++ {
				n := int(counts[s])
				hk[l][s] = append(hk[l][s], k[off*row:(off+n)*row]...)
				hv[l][s] = append(hv[l][s], v[off*row:(off+n)*row]...)
				off += n
				cuQ[s+1] = cuQ[s] + counts[s]
				cuK[s+1] = cuK[s] + int32(len(hk[l][s])/row)
				refK, refV = append(refK, hk[l][s]...), append(refV, hv[l][s]...)
			}
			ref, _ := reference(q, refK, refV, cuQ, cuK, tH, tHkv, tD, true, -1)
			out := tensor(t, c, F32, int64(total), tH, tD)
			if err := step.Append(l, tensorF32(t, c, k, int64(total), tHkv, tD), tensorF32(t, c, v, int64(total), tHkv, tD)); err != nil {
				t.Fatal(err)
			}
			if err := step.Attention(l, &desc, tensorF32(t, c, q, int64(total), tH, tD), out); err != nil {
				t.Fatal(err)
			}
			if m := maxDiff(t, ref, must(out.ReadF32())); m > 1e-5 {
				t.Errorf("counts %v layer %d: max diff %g", counts, l, m)
			}
		}
		if err := step.Commit(); err != nil {
			t.Fatal(err)
		}
		step.Close()
	}
	if n := must(kv.Length(11)); n != 6 {
		t.Errorf("length %d", n)
	}
	step := must(kv.Begin([]int64{11}, []int32{1}))
	defer step.Close()
	q := tensor(t, c, F32, 1, tH, tD)
	wantError(t, step.Attention(0, &desc, q, nil), "vkattn_step_attention: ")
	step.Abort()
	wantError(t, step.Attention(0, &desc, q, q), "vkattn: this Step is already committed or aborted")
}

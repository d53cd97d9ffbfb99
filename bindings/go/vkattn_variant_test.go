package vkattn

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
)

// Attention variants (user functions): documents packed in one sequence (an
// I32 id per position, slot 0) and a per-head slope on the distance (F32,
// slot 1), against the reference given the same functions; then the
// errors: a declared slot left empty, a closed variant, a source that does
// not compile.
func TestVariantDocumentMaskAndScoreFunctionMatchTheReference(t *testing.T) {
	c := newContext(t)
	r := rand.New(rand.NewSource(7))
	cuQ, cuK := []int32{0, 12, 15}, []int32{0, 12, 20} // (12, 12): three documents; (3, 8)
	const tq, tk = 15, 20
	doc := []int32{0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2}
	slopes := []float32{0.1, -0.2, 0.3, 0.05}
	const source = `bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + vkattn_param_f32(1, head) * float(k_pos - q_pos);
}
`
	q, k, v := randoms(r, tq*tH*tD), randoms(r, tk*tHkv*tD), randoms(r, tk*tHkv*tD)
	refOut, refLse := referenceWith(q, k, v, cuQ, cuK, tH, tHkv, tD, true, -1,
		func(b, h, qp, kp int) bool { return doc[qp] == doc[kp] },
		func(s float64, b, h, qp, kp int) float64 { return s + float64(slopes[h])*float64(float32(kp-qp)) })
	variant, err := c.NewVariant(source, I32, F32)
	var e *Error
	if errors.As(err, &e) && e.Status == ErrorUnsupported {
		// (Windows and aarch64 builds carry no GLSL compiler: tools/cross.sh.)
		t.Skipf("no GLSL compiler in this process: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer variant.Close()
	ids := tensor(t, c, I32, int64(len(doc)))
	if err := ids.WriteI32(doc); err != nil {
		t.Fatal(err)
	}
	d := NewAttentionDesc(tH, tHkv, tD)
	d.Causal, d.Variant = true, variant
	d.VariantParams[0], d.VariantParams[1] = ids, tensorF32(t, c, slopes, tH)
	checkVarlen(t, c, &d, cuQ, cuK, q, k, v, refOut, refLse)

	out := tensor(t, c, F32, tq, tH, tD)
	qt, kt, vt := tensorF32(t, c, q, tq, tH, tD), tensorF32(t, c, k, tk, tHkv, tD), tensorF32(t, c, v, tk, tHkv, tD)
	noSlopes := d
	noSlopes.VariantParams[1] = nil
	if e := wantError(t, c.AttentionVarlen(&noSlopes, cuQ, cuK, qt, kt, vt, out), ""); e.Status != ErrorInvalidArgument {
		t.Errorf("a declared slot left empty: %v", e)
	}
	variant.Close()
	wantError(t, c.AttentionVarlen(&d, cuQ, cuK, qt, kt, vt, out), "vkattn: AttentionDesc.Variant: this Variant is closed")

	_, err = c.NewVariant("bool vkattn_mask_mod(uint seq, uint head, int q, int k) {\n  return x;\n}\n")
	if e := wantError(t, err, ""); !strings.Contains(e.Message, "line 2") {
		t.Errorf("compile error without its line: %q", e.Message)
	}
}

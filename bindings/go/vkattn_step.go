package vkattn

import raw "vkattn/internal/vkattnraw"

// Attention runs the step's queries q [total_new, H, d] over each
// sequence's len + t tokens of this layer (append the layer first):
// out [total_new, H, dv].
func (s *Step) Attention(layer int, d *AttentionDesc, q, out *Tensor) (err error) {
	defer recoverErr(&err)
	d.withRaw(func(r raw.AttentionDesc) {
		s.handle().Attention(i32("layer", layer), r, q.handle(), out.handle())
	})
	return nil
}

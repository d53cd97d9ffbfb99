package vkattn

import raw "vkattn/internal/vkattnraw"

// RopeLayout pairs the rotated elements of a head row.
type RopeLayout int

// RopeScaling is Hugging Face's rope_type.
type RopeScaling int

var (
	RopeNeox RopeLayout = RopeLayout(raw.ROPE_NEOX) // halves: (i, i + RotaryDim/2)
	RopeGptj RopeLayout = RopeLayout(raw.ROPE_GPTJ) // interleaved: (2i, 2i+1)

	RopeScalingNone   RopeScaling = RopeScaling(raw.ROPE_SCALING_NONE)
	RopeScalingLinear RopeScaling = RopeScaling(raw.ROPE_SCALING_LINEAR)
	RopeScalingLlama3 RopeScaling = RopeScaling(raw.ROPE_SCALING_LLAMA3)
	RopeScalingYarn   RopeScaling = RopeScaling(raw.ROPE_SCALING_YARN)
)

// RopeDesc says what a rotation does; start from NewRopeDesc. See the C
// header (vkattn_rope_desc) for the formulas and which fields each scaling
// reads.
type RopeDesc struct {
	Layout              RopeLayout
	RotaryDim           int // even; 0 = head dim - RotaryOffset
	RotaryOffset        int // first rotated element of a head row
	Theta               float32
	Scaling             RopeScaling
	Factor              float32
	LowFreqFactor       float32
	HighFreqFactor      float32
	OriginalMaxPosition int
	BetaFast, BetaSlow  float32
	AttentionFactor     float32 // 0 = the scaling's default
	YarnTruncate        bool
}

// NewRopeDesc is the library's defaults: NeoX, full rotary dim, theta
// 10000, no scaling.
func NewRopeDesc() RopeDesc {
	r := raw.NewRopeDesc()
	defer raw.DeleteRopeDesc(r)
	return RopeDesc{Layout: RopeLayout(r.GetLayout()), RotaryDim: int(r.GetRotaryDim()),
		RotaryOffset: int(r.GetRotaryOffset()), Theta: r.GetTheta(),
		Scaling: RopeScaling(r.GetScaling()), Factor: r.GetFactor(),
		LowFreqFactor: r.GetLowFreqFactor(), HighFreqFactor: r.GetHighFreqFactor(),
		OriginalMaxPosition: int(r.GetOriginalMaxPosition()), BetaFast: r.GetBetaFast(),
		BetaSlow: r.GetBetaSlow(), AttentionFactor: r.GetAttentionFactor(),
		YarnTruncate: r.GetYarnTruncate() != 0}
}

// withRaw runs f with the native form of d (NULL for a nil d).
func (d *RopeDesc) withRaw(f func(raw.RopeDesc)) {
	if d == nil {
		f(raw.SwigcptrRopeDesc(0))
		return
	}
	r := raw.NewRopeDesc()
	defer raw.DeleteRopeDesc(r)
	r.SetLayout(u32("RopeDesc.Layout", int(d.Layout)))
	r.SetRotaryDim(u32("RopeDesc.RotaryDim", d.RotaryDim))
	r.SetRotaryOffset(u32("RopeDesc.RotaryOffset", d.RotaryOffset))
	r.SetTheta(d.Theta)
	r.SetScaling(u32("RopeDesc.Scaling", int(d.Scaling)))
	r.SetFactor(d.Factor)
	r.SetLowFreqFactor(d.LowFreqFactor)
	r.SetHighFreqFactor(d.HighFreqFactor)
	r.SetOriginalMaxPosition(u32("RopeDesc.OriginalMaxPosition", d.OriginalMaxPosition))
	r.SetBetaFast(d.BetaFast)
	r.SetBetaSlow(d.BetaSlow)
	r.SetAttentionFactor(d.AttentionFactor)
	truncate := uint(0)
	if d.YarnTruncate {
		truncate = 1
	}
	r.SetYarnTruncate(truncate)
	f(r)
}

// Rope rotates x [total, heads, head dim] into out (may be x): cuSeqlens
// packs the sequences (batch + 1 prefix sums), token i of sequence b sits
// at position startPositions[b] + i.
func (c *Context) Rope(d *RopeDesc, cuSeqlens, startPositions []int32, x, out *Tensor) (err error) {
	defer recoverErr(&err)
	d.withRaw(func(r raw.RopeDesc) {
		c.handle().Rope(r, cuSeqlens, startPositions, x.handle(), out.handle())
	})
	return nil
}

// AppendRope is Append with the keys rotated by d first (token i of a
// sequence at position len + i), before they are rounded or quantized.
func (s *Step) AppendRope(layer int, d *RopeDesc, k, v *Tensor) (err error) {
	defer recoverErr(&err)
	d.withRaw(func(r raw.RopeDesc) {
		s.handle().AppendRope(i32("layer", layer), r, k.handle(), v.handle())
	})
	return nil
}

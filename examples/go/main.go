// The same small program in Java, C# and Go: a context, a paged KV cache,
// a 40-token prompt prefilled in two chunks, 4 decoded tokens, then the
// norm of the last output and the device name. Inputs come from one LCG,
// so the three programs print the same numbers.
//
//	bash tools/run-binding-example.sh go
package main

import (
	"fmt"
	"log"
	"math"

	"vkattn"
)

const layers, heads, kvHeads, headDim = 2, 4, 2, 16

var state uint64 = 1

func next(n int) []float32 {
	a := make([]float32, n)
	for i := range a {
		state = state*6364136223846793005 + 1442695040888963407
		a[i] = float32(state>>40)/16777216 - 0.5
	}
	return a
}

// step runs `tokens` new tokens of sequence 1 through every layer and
// returns the last layer's output.
func step(ctx *vkattn.Context, cache *vkattn.KvCache, desc *vkattn.AttentionDesc, tokens int) ([]float32, error) {
	s, err := cache.Begin([]int64{1}, []int32{int32(tokens)})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []float32
	n := int64(tokens)
	for layer := 0; layer < layers; layer++ {
		k, err := ctx.TensorF32(next(tokens*kvHeads*headDim), n, kvHeads, headDim)
		if err != nil {
			return nil, err
		}
		defer k.Close()
		v, err := ctx.TensorF32(next(tokens*kvHeads*headDim), n, kvHeads, headDim)
		if err != nil {
			return nil, err
		}
		defer v.Close()
		q, err := ctx.TensorF32(next(tokens*heads*headDim), n, heads, headDim)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		o, err := ctx.NewTensor(vkattn.F32, n, heads, headDim)
		if err != nil {
			return nil, err
		}
		defer o.Close()
		if err := s.Append(layer, k, v); err != nil {
			return nil, err
		}
		if err := s.Attention(layer, desc, q, o); err != nil {
			return nil, err
		}
		if out, err = o.ReadF32(); err != nil {
			return nil, err
		}
	}
	return out, s.Commit()
}

func run() error {
	ctx, err := vkattn.NewContext()
	if err != nil {
		return err
	}
	defer ctx.Close()
	cd := vkattn.NewKvCacheDesc(layers, kvHeads, headDim, 8) // f16 pages of 16 tokens by default
	cache, err := ctx.NewKvCache(&cd)
	if err != nil {
		return err
	}
	defer cache.Close()
	desc := vkattn.NewAttentionDesc(heads, kvHeads, headDim)
	desc.Causal = true
	var out []float32
	for _, tokens := range []int{24, 16, 1, 1, 1, 1} { // prompt in two chunks, then 4 decodes
		if out, err = step(ctx, cache, &desc, tokens); err != nil {
			return err
		}
	}
	norm := 0.0
	for _, x := range out {
		norm += float64(x) * float64(x)
	}
	info, err := ctx.DeviceInfo()
	if err != nil {
		return err
	}
	length, _ := cache.Length(1)
	free, _ := cache.NumFreePages()
	fmt.Printf("device: %s\n", info.Name)
	fmt.Printf("sequence 1: %d tokens in the cache, %d free pages\n", length, free)
	fmt.Printf("last output norm: %.6f\n", math.Sqrt(norm))
	if !(norm > 0) || math.IsInf(norm, 0) {
		return fmt.Errorf("bad norm %g", norm)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

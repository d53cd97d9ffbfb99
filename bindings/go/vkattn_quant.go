package vkattn

// 8-bit caches (I8, FP8E4M3): their stored codes and the f32 scales that
// dequantize them (value = code x scale). 4-bit caches (Q4): one int8 code
// per element and a scale per block of 32 (ReadBlockScales).

// ReadBytes copies the codes of committed tokens [start, start+count) of
// one layer of an 8-bit or Q4 cache: k [count, Hkv, d], v [count, Hkv, dv]
// (Q4: int8 codes -8..7 as bytes).
func (kv *KvCache) ReadBytes(layer int, seq int64, start, count int, k, v []byte) (err error) {
	defer recoverErr(&err)
	kv.handle().ReadBytes(i32("layer", layer), seq, i32("start", start), i32("count", count), k, v)
	return nil
}

// ReadScales copies the scales of those tokens: k and v [count, Hkv]
// (I8: the append's per-token scales; FP8E4M3: the layer's, repeated).
func (kv *KvCache) ReadScales(layer int, seq int64, start, count int, k, v []float32) (err error) {
	defer recoverErr(&err)
	kv.handle().ReadScales(i32("layer", layer), seq, i32("start", start), i32("count", count), k, v)
	return nil
}

// ReadBlockScales copies the block scales of a Q4 cache's tokens: k
// [count, Hkv, ceil(d/32)], v [count, Hkv, ceil(dv/32)]; element e of a
// row is ReadBytes' code (an int8, -8..7) times the scale of block e/32.
func (kv *KvCache) ReadBlockScales(layer int, seq int64, start, count int, k, v []float32) (err error) {
	defer recoverErr(&err)
	kv.handle().ReadBlockScales(i32("layer", layer), seq, i32("start", start), i32("count", count), k, v)
	return nil
}

// SetScales sets the K and V scales of one layer of an FP8E4M3 cache, 1
// (per layer) or Hkv (per kv head) each, finite and > 0, before the
// layer's first append.
func (kv *KvCache) SetScales(layer int, k, v []float32) (err error) {
	defer recoverErr(&err)
	kv.handle().SetScales(i32("layer", layer), k, v)
	return nil
}

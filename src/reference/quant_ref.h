// Host quantizers of a KV cache row, written from their formats'
// definitions: the planned 4-bit cache (issue K4), ggml's q4_0 as the
// accuracy anchor, the int8 cache's per-row codes, and the normalized
// Walsh-Hadamard rotation that spreads outlier channels before a 4-bit
// quantizer sees them. The oracle of the K4 accuracy tests; it knows
// nothing of Vulkan and shares no code with the kernels (the library's
// self-check uses hadamard_rotate, as it uses attention_ref.h).
#pragma once

#include <cstdint>
#include <vector>

namespace vkattn::ref {

// Elements per 4-bit block, along the head dim.
constexpr int kQ4Block = 32;

// A row of d elements quantized to 4 bits: ceil(d / 32) blocks, each one
// scale and up to 32 codes in -8..7 (value = code x scale).
struct Q4Row {
  std::vector<float> scales;  // ceil(d / 32), each an f16 value widened
  std::vector<int8_t> codes;  // d
};

// vkattn's 4-bit format (the planned VKATTN_Q4): per block, m = the
// element of largest magnitude (the first on a tie), scale = f16(m / -8),
// rounded to nearest even and saturated at +-65504 (the largest f16), so
// m itself codes to -8; codes = x / scale rounded to nearest even (ties to
// even) from the stored f16 scale, clamped to -8..7. A block whose scale
// rounds to 0 (every element 0, or too small for an f16 subnormal) keeps
// codes 0. A block holding inf or NaN gets scale NaN and codes 0, so every
// value it gives, and the score of a key that has one, is NaN. The last
// block of a row whose d is not a multiple of 32 covers the d % 32
// elements left.
Q4Row q4_quantize(const float* x, int d);

// ggml's q4_0, from the format's definition (block_q4_0: an f16 d and 16
// bytes of nibbles): per block, max = the element of largest magnitude,
// d = max / -8 in f32, codes q = min(15, int(x / d + 8.5)) (x / d + 8.5
// truncated toward zero, so ties round up) from that f32 d, value =
// (q - 8) x f16(d). Returned as codes q - 8 and the f16 scale widened.
// The last block is padded with zeros (ggml requires d % 32 == 0).
Q4Row q4_0_quantize(const float* x, int d);

// The values a quantized row stands for (NaN where its block's scale is).
std::vector<float> q4_dequantize(const Q4Row& r);

// The int8 cache's row (vkattn.h: scale = max |x| / 127, codes rounded to
// nearest even, saturated at +-127), dequantized.
std::vector<float> i8_roundtrip(const float* x, int d);

// x (n a power of two) times the normalized Walsh-Hadamard matrix H / sqrt(n),
// in place: orthonormal and its own inverse, so (x H) . (y H) = x . y;
// computed in double and rounded once (finite wherever the result fits f32).
void hadamard_rotate(float* x, int n);

}  // namespace vkattn::ref

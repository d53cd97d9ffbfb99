// Element types as 32-bit words: f16 and bf16 travel in pairs, low half
// first, so no 16-bit storage feature is needed. Codes match vkattn_dtype.
#ifndef VKATTN_DTYPE_GLSL
#define VKATTN_DTYPE_GLSL

#define DT_F32 1u
#define DT_F16 2u
#define DT_BF16 3u
// 8-bit KV cache dtypes (vkattn_kv_cache_desc): codes, dequantized by a scale.
#define DT_I8 6u
#define DT_FP8 7u
// 4-bit KV cache (VKATTN_Q4): 8 codes a 32-bit word, an f16 scale per
// block of 32 elements beside the rows (ops/kv_cache.h).
#define DT_Q4 8u

// A quiet NaN.
#define NAN_F uintBitsToFloat(0x7fc00000u)

// VKATTN_SOFT_F16 (every shader's _soft_f16 variant, picked per device by
// core/device.cpp: Debian 12's arm64 lavapipe, Mesa 22.3 over LLVM 15,
// aborts the process selecting any f16 -> f32 conversion, "Cannot select:
// v4f32 = AArch64ISD::VLSHR" or "v4f32 = truncate"): unpackHalf2x16 by
// integer arithmetic, exactly (subnormals, signed zeros, inf, NaN with its
// payload). f32 -> f16 (packHalf2x16, f32_to_f16) compiles there.
#ifdef VKATTN_SOFT_F16
float vkattn_soft_f16(uint h) {
  uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
  if (e == 0u) {  // subnormal or zero: m x 2^-24 (no f32 subnormal on the way)
    float v = float(m) * 5.9604644775390625e-8;
    return s != 0u ? -v : v;
  }
  return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
vec2 vkattn_soft_unpack_half2x16(uint w) {
  return vec2(vkattn_soft_f16(w & 0xffffu), vkattn_soft_f16(w >> 16));
}
#define unpackHalf2x16 vkattn_soft_unpack_half2x16
#endif

float bf16_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }

// Round to nearest even; NaN stays a quiet NaN.
uint f32_to_bf16(float x) {
  uint b = floatBitsToUint(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// IEEE binary16, round to nearest even (subnormals, overflow to inf, NaN).
uint f32_to_f16(float x) {
  uint b = floatBitsToUint(x);
  uint sign = (b >> 16) & 0x8000u;
  uint a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                         // below 2^-14: subnormal or 0
    if (a < 0x33000000u) return sign;            // below half the smallest subnormal
    uint e = a >> 23;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;  // value = m * 2^(e-150), unit 2^-24
    uint q = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q += 1u;
    return sign | q;
  }
  uint r = a - 0x38000000u;  // rebias the exponent 127 -> 15
  r = r + 0xfffu + ((r >> 13) & 1u);
  return sign | (r >> 13);
}

float f16_to_f32(uint bits) { return unpackHalf2x16(bits).x; }

float decode16(uint dt, uint bits) { return dt == DT_F16 ? f16_to_f32(bits) : bf16_to_f32(bits); }
uint encode16(uint dt, float x) { return dt == DT_F16 ? f32_to_f16(x) : f32_to_bf16(x); }

// Four 8-bit codes packed in a word (lowest byte first) as floats: int8
// sign-extended, or OCP e4m3fn (bias 7, subnormals below 2^-6, 0x7f / 0xff
// NaN) through f16: a code's 7 low bits shifted left by 7 are the f16 with
// the same mantissa and an exponent short of f16's bias by 8, subnormals
// included (f16 has them), so the halves times 2^8 are the values; NaN
// codes are selected after. (A device that flushes f16 subnormals in the
// conversion would read the subnormal codes, below 2^-6 x scale, as 0.)
vec4 decode8x4(uint dt, uint w) {
  if (dt == DT_I8) return vec4(ivec4(w << 24, w << 16, w << 8, w) >> 24);
  uint a = w & 0x00ff00ffu, b = (w >> 8) & 0x00ff00ffu;  // codes 0, 2 and 1, 3
  vec2 va = unpackHalf2x16(((a & 0x007f007fu) << 7) | ((a & 0x00800080u) << 8)) * 256.0;
  vec2 vb = unpackHalf2x16(((b & 0x007f007fu) << 7) | ((b & 0x00800080u) << 8)) * 256.0;
  bvec4 nan = equal(uvec4(w, w >> 8, w >> 16, w >> 24) & 0x7fu, uvec4(0x7fu));
  return mix(vec4(va.x, vb.x, va.y, vb.y), vec4(uintBitsToFloat(0x7fc00000u)), nan);
}

// x as an e4m3fn code: round to nearest even, saturating at +-448, NaN
// stays NaN (0x7f with x's sign).
uint f32_to_e4m3(float x) {
  uint b = floatBitsToUint(x);
  uint sign = (b >> 24) & 0x80u;
  uint a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;
  float v = uintBitsToFloat(a);
  if (v >= 448.0) return sign | 0x7eu;
  if (v < 0.015625) return sign | uint(roundEven(v * 512.0));  // subnormals (8 -> 2^-6)
  uint r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;           // 3 mantissa bits, nearest even
  return sign | min(r - (120u << 3), 0x7eu);
}

// Sign of a - m * s, exactly (-1, 0, 1), for a >= 0, m >= 0 with at most
// 12 significant bits and s > 0 finite and normal: s splits into halves
// of 12 bits each, so both products are exact, and a - m * s_hi is exact
// wherever the comparison is close (Sterbenz). Quantizers use it to round
// x / scale to nearest even exactly: a shader's division is only accurate
// to 2.5 ulp, and x * (1 / scale) rounds twice.
int cmp_scaled(float a, float m, float s) {
  precise float s_hi = uintBitsToFloat(floatBitsToUint(s) & 0xfffff000u);
  precise float s_lo = s - s_hi;
  precise float d = a - m * s_hi;
  precise float p = m * s_lo;
  return d > p ? 1 : (d < p ? -1 : 0);
}

// |x| / scale rounded to an integer code 0..top, nearest even, from a
// candidate q within one of it: the half-way points next to q decide.
float round_quotient(float a, float scale, float q, float top) {
  if (q < top) {
    int k = cmp_scaled(a, q + 0.5, scale);
    if (k > 0 || (k == 0 && mod(q, 2.0) == 1.0)) q += 1.0;
  }
  if (q > 0.0) {
    int k = cmp_scaled(a, q - 0.5, scale);
    if (k < 0 || (k == 0 && mod(q, 2.0) == 1.0)) q -= 1.0;
  }
  return q;
}

// x / scale as an int8 code in a byte: nearest even, saturating at +-127;
// scale > 0 (else 0).
uint f32_div_to_i8(float x, float scale) {
  if (!(scale > 0.0) || isnan(x)) return 0u;
  float a = abs(x);
  float q = round_quotient(a, scale, min(roundEven(a / scale), 127.0), 127.0);
  int v = x < 0.0 ? -int(q) : int(q);
  return uint(v) & 0xffu;
}

// Magnitude of e4m3fn code c (0 .. 0x7e).
float e4m3_value(uint c) {
  uint e = c >> 3u, m = c & 7u;
  return e == 0u ? float(m) / 512.0 : float(8u + m) * exp2(float(e) - 10.0);
}

// x / scale as an e4m3fn code: nearest even, saturating at +-448, NaN
// stays NaN; scale > 0 finite. The codes' order is their values' order,
// so the midpoints next to the candidate decide as for integers.
uint f32_div_to_e4m3(float x, float scale) {
  uint sign = (floatBitsToUint(x) >> 24) & 0x80u;
  if (isnan(x)) return sign | 0x7fu;
  float a = abs(x);
  uint c = f32_to_e4m3(a / scale) & 0x7fu;  // within one code of the exact one
  if (c < 0x7eu) {
    int k = cmp_scaled(a, 0.5 * (e4m3_value(c) + e4m3_value(c + 1u)), scale);
    if (k > 0 || (k == 0 && (c & 1u) != 0u)) c += 1u;
  }
  if (c > 0u) {
    int k = cmp_scaled(a, 0.5 * (e4m3_value(c - 1u) + e4m3_value(c)), scale);
    if (k < 0 || (k == 0 && (c & 1u) != 0u)) c -= 1u;
  }
  return sign | c;
}

// Element bits of a 16-bit dtype into word array `buf` at element `idx`
// with atomics: the other half of the word may belong to another row, or
// to the caller's data next to a view (it keeps its bits).
#define STORE16_ATOMIC(buf, idx, bits)                              \
  {                                                                 \
    uint sh_ = ((idx)&1u) * 16u;                                    \
    atomicAnd(buf[(idx) >> 1], ~(0xffffu << sh_));                  \
    atomicOr(buf[(idx) >> 1], ((bits)&0xffffu) << sh_);             \
  }

// Element i of a word array that holds dtype dt.
#define LOAD_ELEM(buf, dt, i)                    \
  ((dt) == DT_F32 ? uintBitsToFloat(buf[(i)])    \
                  : decode16((dt), (buf[(i) >> 1] >> (((i)&1u) * 16u)) & 0xffffu))

#endif

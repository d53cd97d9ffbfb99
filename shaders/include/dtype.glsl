// Element types as 32-bit words: f16 and bf16 travel in pairs, low half
// first, so no 16-bit storage feature is needed. Codes match vkattn_dtype.
#ifndef VKATTN_DTYPE_GLSL
#define VKATTN_DTYPE_GLSL

#define DT_F32 1u
#define DT_F16 2u
#define DT_BF16 3u

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

// Element i of a word array that holds dtype dt.
#define LOAD_ELEM(buf, dt, i)                    \
  ((dt) == DT_F32 ? uintBitsToFloat(buf[(i)])    \
                  : decode16((dt), (buf[(i) >> 1] >> (((i)&1u) * 16u)) & 0xffffu))

#endif

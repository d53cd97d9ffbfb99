// Host conversions between f32 and the 16-bit float formats (round to
// nearest even, subnormals exact, overflow to inf, NaN stays NaN), and the
// spacing of each format's numbers, for building inputs and tolerances.
// dtype codes are vkattn_dtype's: 1 = f32, 2 = f16, 3 = bf16. Shared by the
// tests and vkattn-bench (both check against src/reference).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace vkattn_ref {

inline uint32_t f32_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

inline float f32_from_bits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  if (exp == 0xffu) {  // Inf, or NaN with its quiet bit set so it stays NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
  }
  const int e = static_cast<int>(exp) - 127 + 15;  // f16 biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  // Keep 11 significant bits (normal) or fewer (subnormal: unit 2^-24), round to nearest even.
  const int shift = e > 0 ? 13 : 14 - e;
  if (shift > 24) return static_cast<uint16_t>(sign);  // below half of 2^-24
  const uint32_t m = exp ? man | 0x800000u : man;
  uint32_t r = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  // A carry out of the significand bumps the exponent (up to inf), as in the bit layout.
  const uint32_t bits = e > 0 ? (static_cast<uint32_t>(e - 1) << 10) + r : r;
  return static_cast<uint16_t>(sign | bits);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float mag = std::ldexp(static_cast<float>(man), -24);
    return sign ? -mag : mag;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  // Round to nearest even on the low 16 bits; a carry runs into the exponent (up to inf).
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t b) {
  return f32_from_bits(static_cast<uint32_t>(b) << 16);
}

// x rounded to the dtype and back to float; f32 (and any other code) is the identity.
inline float round_to(int dtype, float x) {
  if (dtype == 2) return f16_to_f32(f32_to_f16(x));
  if (dtype == 3) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

// Spacing of the dtype's representable numbers at |magnitude| (at least the subnormal spacing).
inline double ulp_of(int dtype, double magnitude) {
  int mant_bits = 23;  // explicit significand bits
  double min_normal = std::ldexp(1.0, -126);
  if (dtype == 2) {
    mant_bits = 10;
    min_normal = std::ldexp(1.0, -14);
  } else if (dtype == 3) {
    mant_bits = 7;
  }
  int e = 0;
  std::frexp(std::fmax(std::fabs(magnitude), min_normal), &e);  // value in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - mant_bits);
}

// OCP float8 e4m3fn (dtype 7, the fp8 KV cache): bias 7, no infinities,
// 0x7f / 0xff NaN, largest finite 448.
inline float e4m3_to_f32(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float mag = e == 15 && m == 7 ? NAN
              : e == 0          ? std::ldexp(float(m), -9)
                                : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -mag : mag;
}

// An 8-bit cache's code `c` (dtype 6 = int8, 7 = e4m3fn) times its scale.
inline float dequantize(int dtype, uint8_t c, float scale) {
  return (dtype == 6 ? float(int8_t(c)) : e4m3_to_f32(c)) * scale;
}

// q as e4m3fn, q exact (a double holds the quotient x / scale of two
// floats closely enough to decide every rounding): round to nearest even,
// saturating at +-448, NaN -> 0x7f.
inline uint8_t e4m3_round(double q) {
  const uint8_t sign = std::signbit(q) ? 0x80 : 0;
  if (std::isnan(q)) return sign | 0x7f;
  const double a = std::fabs(q);
  if (a >= 448.0) return sign | 0x7e;
  // Nearest of the 127 finite magnitudes, ties to the even code.
  uint8_t best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double dc = std::fabs(double(e4m3_to_f32(uint8_t(c))) - a);
    const double db = std::fabs(double(e4m3_to_f32(best)) - a);
    if (dc < db || (dc == db && (c & 1) == 0)) best = uint8_t(c);
  }
  return sign | best;
}

// x as e4m3fn (e4m3_round of an already divided value).
inline uint8_t f32_to_e4m3(float x) {
  return e4m3_round(double(x));
}

// x / scale as an int8 code: nearest even, saturating at +-127.
inline int8_t i8_round(double x, double scale) {
  const double q = std::nearbyint(x / scale);  // the default mode: to nearest even
  return int8_t(std::fmax(-127.0, std::fmin(127.0, q)));
}

// Floats (already representable) as the bytes of dtype 1/2/3 (f32/f16/bf16), and back.
inline std::vector<uint8_t> encode_bytes(int dtype, const std::vector<float>& x) {
  const size_t es = dtype == 1 ? 4 : 2;
  std::vector<uint8_t> bytes(x.size() * es);
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == 1) {
      std::memcpy(&bytes[i * 4], &x[i], 4);
    } else {
      uint16_t h = dtype == 2 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

inline std::vector<float> decode_bytes(int dtype, const std::vector<uint8_t>& bytes) {
  const size_t es = dtype == 1 ? 4 : 2;
  std::vector<float> x(bytes.size() / es);
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == 1) {
      std::memcpy(&x[i], &bytes[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      x[i] = dtype == 2 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return x;
}

}  // namespace vkattn_ref

// The tests' namespace sees these names too.
namespace vkattn_test {
using namespace vkattn_ref;
}  // namespace vkattn_test

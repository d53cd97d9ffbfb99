#include "reference/quant_ref.h"

#include <algorithm>
#include <cmath>

#include "reference/dtype_util.h"

using namespace vkattn_ref;  // dtype_util.h: f16 and e4m3 rounding, i8_round

namespace vkattn::ref {

namespace {

// The element of largest magnitude in x[0, n) (the first on a tie), and
// whether every element is finite.
float signed_absmax(const float* x, int n, bool* finite) {
  float m = 0;
  *finite = true;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) *finite = false;
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  return m;
}

// f16 rounding (nearest even) of s, saturated at +-65504.
float f16_saturated(double s) {
  const double big = 65504.0;
  return f16_to_f32(f32_to_f16(float(std::clamp(s, -big, big))));
}

}  // namespace

Q4Row q4_quantize(const float* x, int d) {
  Q4Row r;
  r.codes.assign(d, 0);
  for (int b0 = 0; b0 < d; b0 += kQ4Block) {
    const int n = std::min(kQ4Block, d - b0);
    bool finite = true;
    const float m = signed_absmax(x + b0, n, &finite);
    if (!finite) {
      r.scales.push_back(NAN);
      continue;
    }
    const float scale = f16_saturated(double(m) / -8.0);
    r.scales.push_back(scale);
    if (scale == 0) continue;
    for (int i = 0; i < n; ++i) {
      const double q = std::nearbyint(double(x[b0 + i]) / double(scale));  // nearest even
      r.codes[b0 + i] = int8_t(std::clamp(q, -8.0, 7.0));
    }
  }
  return r;
}

Q4Row q4_0_quantize(const float* x, int d) {
  Q4Row r;
  r.codes.assign(d, 0);
  for (int b0 = 0; b0 < d; b0 += kQ4Block) {
    const int n = std::min(kQ4Block, d - b0);
    bool finite = true;
    const float m = signed_absmax(x + b0, n, &finite);
    const float s = m / -8.0f, inv = s != 0 ? 1.0f / s : 0.0f;
    r.scales.push_back(finite ? f16_to_f32(f32_to_f16(s)) : NAN);
    if (!finite) continue;  // (ggml's cast of a NaN quotient is undefined)
    for (int i = 0; i < n; ++i) {
      const int q = std::min(15, int(int8_t(x[b0 + i] * inv + 8.5f)));
      r.codes[b0 + i] = int8_t(q - 8);
    }
  }
  return r;
}

std::vector<float> q4_dequantize(const Q4Row& r) {
  std::vector<float> y(r.codes.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = float(r.codes[i]) * r.scales[i / kQ4Block];
  return y;
}

std::vector<float> i8_roundtrip(const float* x, int d) {
  float amax = 0;
  for (int i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
  const double scale = amax / 127.0;
  std::vector<float> y(d, 0.0f);
  if (scale == 0) return y;
  for (int i = 0; i < d; ++i) y[i] = float(i8_round(x[i], scale) * scale);
  return y;
}

void hadamard_rotate(float* x, int n) {
  // In double, rounded once: the exact transform to within f32's rounding,
  // finite wherever it fits f32 (plain f32 butterflies overflow past
  // FLT_MAX / n although the result may be finite).
  std::vector<double> y(x, x + n);
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = y[j], b = y[j + h];
        y[j] = a + b;
        y[j + h] = a - b;
      }
  const double norm = 1.0 / std::sqrt(double(n));
  for (int i = 0; i < n; ++i) x[i] = float(y[i] * norm);
}

}  // namespace vkattn::ref

#include "reference/rope_ref.h"

#include <algorithm>
#include <cmath>

namespace vkattn::ref {

namespace {
constexpr double kPi = 3.14159265358979323846;

// yarn: the dimension whose wavelength turns `rotations` times over the
// original context.
double correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * kPi)) / (2 * std::log(base));
}
}  // namespace

std::vector<double> rope_inv_freq(const RopeParams& p, double* attention_factor) {
  const int half = p.rotary_dim / 2;
  const double dim = p.rotary_dim;
  std::vector<double> f(half);
  for (int i = 0; i < half; ++i) f[i] = 1.0 / std::pow(p.theta, 2.0 * i / dim);
  double af = 1.0;
  if (p.scaling == 1) {
    for (double& x : f) x /= p.factor;
  } else if (p.scaling == 2) {
    const double old_ctx = p.original_max_position;
    const double low_wavelen = old_ctx / p.low_freq_factor;
    const double high_wavelen = old_ctx / p.high_freq_factor;
    for (double& x : f) {
      const double wavelen = 2 * kPi / x;
      if (wavelen > low_wavelen) {
        x /= p.factor;
      } else if (wavelen >= high_wavelen) {  // medium: smooth between the two
        const double smooth =
            (old_ctx / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        x = (1 - smooth) * x / p.factor + smooth * x;
      }
    }
  } else if (p.scaling == 3) {
    double low = correction_dim(p.beta_fast, dim, p.theta, p.original_max_position);
    double high = correction_dim(p.beta_slow, dim, p.theta, p.original_max_position);
    if (p.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1 - ramp;  // share of the unscaled frequency
      f[i] = f[i] / p.factor * (1 - extrapolation) + f[i] * extrapolation;
    }
    af = p.factor <= 1 ? 1.0 : 0.1 * std::log(p.factor) + 1.0;
  }
  if (p.attention_factor != 0) af = p.attention_factor;
  if (attention_factor) *attention_factor = af;
  return f;
}

void rope_apply(const RopeParams& p, int64_t n, int heads, int dim, const int64_t* pos, float* x) {
  double af = 1;
  const std::vector<double> f = rope_inv_freq(p, &af);
  const int half = p.rotary_dim / 2;
  for (int64_t r = 0; r < n; ++r)
    for (int h = 0; h < heads; ++h) {
      float* row = x + (r * heads + h) * dim + p.rotary_offset;
      for (int i = 0; i < half; ++i) {
        const double a = double(pos[r]) * f[i], c = std::cos(a) * af, s = std::sin(a) * af;
        float& x1 = row[p.interleaved ? 2 * i : i];
        float& x2 = row[p.interleaved ? 2 * i + 1 : i + half];
        const double y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
        x1 = float(y1), x2 = float(y2);
      }
    }
}

}  // namespace vkattn::ref

#include "reference/attention_ref.h"

#include <cmath>
#include <limits>
#include <vector>

namespace vkattn::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One query row of one head against the u keys of its sequence.
struct Row {
  const float* q;            // [d]
  const float* k;            // key j at k + j * k_stride
  const float* v;            // value j at v + j * v_stride
  const uint8_t* bool_mask;  // [u] or null
  const float* add_mask;     // [u] or null
  const int32_t* key_valid;  // [u] or null
  const uint32_t* tree;      // the row's tree words (keys from u - t on), or null
  long tree_first;           // u - t: the first key the tree's bits cover
  const int32_t* topk;       // the row's list of topk_k positions, or null
  long pos;                  // pos(i) = u - t + i
  long span_lo, span_hi;     // the span holding pos ([0, 0) when none)
  double slope;              // ALiBi slope, 0 = none
  const float* sink;         // the head's sink logit, or null
  int seq, head;             // attention variants' seq and head
};

void attend_row(const AttentionParams& p, int d, int dv, double scale, int u, long k_stride,
                long v_stride, const Row& r, float* out, float* lse) {
  std::vector<int> keys;    // visible keys
  std::vector<double> s;    // their scores
  std::vector<int> listed;  // top-k: how many times each key is listed
  if (r.topk) {
    listed.assign(u, 0);
    for (int n = 0; n < p.topk_k; ++n)
      if (r.topk[n] >= 0 && r.topk[n] < u) ++listed[r.topk[n]];
  }
  for (int j = 0; j < u; ++j) {
    if (r.topk && listed[j] == 0) continue;
    if (r.tree && j >= r.tree_first) {
      const long b = j - r.tree_first;
      if (((r.tree[b / 32] >> (b % 32)) & 1u) == 0) continue;
    }
    const bool in_span = j >= r.span_lo && j < r.span_hi;
    if (!in_span) {
      if (p.causal && j > r.pos) continue;
      if (p.window_left >= 0 && r.pos - j > p.window_left) continue;
      if (p.window_right >= 0 && j - r.pos > p.window_right) continue;
      if (p.chunk_size > 0 && floor_div(j, p.chunk_size) != floor_div(r.pos, p.chunk_size))
        continue;
    }
    if (r.bool_mask && r.bool_mask[j] == 0) continue;
    if (r.add_mask && r.add_mask[j] == -std::numeric_limits<float>::infinity()) continue;
    if (r.key_valid && r.key_valid[j] == 0) continue;
    if (p.user_mask && !p.user_mask(r.seq, r.head, r.pos, j)) continue;
    const float* kj = r.k + j * k_stride;
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += static_cast<double>(r.q[c]) * kj[c];
    double x = scale * dot;
    if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
    if (r.slope != 0) x -= r.slope * std::fabs(static_cast<double>(r.pos - j));
    if (r.add_mask) x += r.add_mask[j];
    if (p.user_score) x = p.user_score(x, r.seq, r.head, r.pos, j);
    for (int n = r.topk ? listed[j] : 1; n > 0; --n) {  // a repeat counts again
      keys.push_back(j);
      s.push_back(x);
    }
  }
  const double sink = r.sink ? static_cast<double>(*r.sink) : kNegInf;
  if (keys.empty()) {
    for (int c = 0; c < dv; ++c) out[c] = 0.0f;
    if (lse) *lse = static_cast<float>(sink);
    return;
  }
  // The sink joins the max and the denominator, not the values. A NaN
  // score makes m NaN (fmax alone would drop it: a row whose only scores
  // are NaN then read as empty).
  double m = sink;
  for (double x : s) m = std::isnan(x) || std::isnan(m) ? x + m : std::fmax(m, x);
  // Only -inf scores (and no sink): they add nothing, an empty row. A NaN
  // or +inf score (exp(NaN), exp(inf - inf)) makes the sum, out and lse NaN.
  if (m == kNegInf) {
    for (int c = 0; c < dv; ++c) out[c] = 0.0f;
    if (lse) *lse = static_cast<float>(sink);
    return;
  }
  double sum = std::exp(sink - m);
  std::vector<double> acc(dv, 0.0);
  for (size_t n = 0; n < keys.size(); ++n) {
    double w = std::exp(s[n] - m);
    sum += w;
    const float* vj = r.v + keys[n] * v_stride;
    for (int c = 0; c < dv; ++c) acc[c] += w * vj[c];
  }
  for (int c = 0; c < dv; ++c) out[c] = static_cast<float>(acc[c] / sum);
  if (lse) *lse = static_cast<float>(m + std::log(sum));
}

}  // namespace

void attention_varlen(const AttentionParams& p, int batch, const int32_t* cu_q, const int32_t* cu_k,
                      const float* q, const float* k, const float* v, float* out, float* lse) {
  const int H = p.num_heads, Hkv = p.num_kv_heads, d = p.head_dim;
  const int dv = p.head_dim_v > 0 ? p.head_dim_v : p.head_dim;
  const int group = H / Hkv;
  const double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const long k_stride = static_cast<long>(Hkv) * d, v_stride = static_cast<long>(Hkv) * dv;
  long mask_offset = 0;  // start of sequence b's t x u mask block
  for (int b = 0; b < batch; ++b) {
    const int t = cu_q[b + 1] - cu_q[b], u = cu_k[b + 1] - cu_k[b];
    for (int i = 0; i < t; ++i) {
      const long row = cu_q[b] + i;
      const long mask_row = mask_offset + static_cast<long>(i) * u;
      for (int h = 0; h < H; ++h) {
        const int hk = h / group;
        Row r;
        r.q = q + (row * H + h) * d;
        // (No keys: no pointers into them; an empty batch's arrays may be
        // null, and offsets from null are undefined.)
        r.k = u ? k + cu_k[b] * k_stride + static_cast<long>(hk) * d : nullptr;
        r.v = u ? v + cu_k[b] * v_stride + static_cast<long>(hk) * dv : nullptr;
        r.bool_mask = p.mask_type == 1 && u ? p.bool_mask + mask_row : nullptr;
        r.add_mask = p.mask_type == 2 && u ? p.add_mask + mask_row : nullptr;
        r.key_valid = p.key_valid && u ? p.key_valid + cu_k[b] : nullptr;
        const bool tree = p.tree_indptr && p.tree_indptr[b + 1] > p.tree_indptr[b];
        r.tree = tree ? p.tree_mask + p.tree_indptr[b] + static_cast<long>(i) * ((t + 31) / 32)
                      : nullptr;
        r.tree_first = static_cast<long>(u) - t;
        r.topk = p.topk ? p.topk + (p.topk_per_head ? row * Hkv + hk : row) * p.topk_k : nullptr;
        r.pos = static_cast<long>(u) - t + i;
        r.span_lo = r.span_hi = 0;
        for (int n = p.span_indptr ? p.span_indptr[b] : 0;
             p.span_indptr && n < p.span_indptr[b + 1]; ++n) {
          if (r.pos >= p.spans[2 * long(n)] && r.pos < p.spans[2 * long(n) + 1])
            r.span_lo = p.spans[2 * long(n)], r.span_hi = p.spans[2 * long(n) + 1];
        }
        r.slope = p.alibi_slopes ? p.alibi_slopes[h] : 0.0;
        r.sink = p.sinks ? p.sinks + h : nullptr;
        r.seq = b, r.head = h;
        attend_row(p, d, dv, scale, u, k_stride, v_stride, r, out + (row * H + h) * dv,
                   lse ? lse + row * H + h : nullptr);
      }
    }
    mask_offset += static_cast<long>(t) * u;
  }
}

long floor_div(long a, long b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

void attention_merge(int rows, int dv, const float* out_a, const float* lse_a, const float* out_b,
                     const float* lse_b, float* out, float* lse) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r) {
    const double la = lse_a[r], lb = lse_b[r];
    const long o = static_cast<long>(r) * dv;
    double result_lse;
    if (std::isnan(la) || std::isnan(lb)) {  // a NaN side: NaN out and lse
      for (int c = 0; c < dv; ++c) out[o + c] = std::numeric_limits<float>::quiet_NaN();
      result_lse = std::numeric_limits<double>::quiet_NaN();
    } else if (la == -inf && lb == -inf) {
      for (int c = 0; c < dv; ++c) out[o + c] = 0.0f;
      result_lse = -inf;
    } else if (la == -inf || lb == -inf) {
      const float* src = la == -inf ? out_b : out_a;
      for (int c = 0; c < dv; ++c) out[o + c] = src[o + c];
      result_lse = la == -inf ? lb : la;
    } else {
      const double m = std::fmax(la, lb);
      const double wa = std::exp(la - m), wb = std::exp(lb - m);
      for (int c = 0; c < dv; ++c) {
        out[o + c] = static_cast<float>((wa * out_a[o + c] + wb * out_b[o + c]) / (wa + wb));
      }
      result_lse = m + std::log(wa + wb);
    }
    if (lse) lse[r] = static_cast<float>(result_lse);
  }
}

}  // namespace vkattn::ref

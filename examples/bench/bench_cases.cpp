// The cases of vkattn-bench. Inputs are deterministic functions of their
// position (values k / 1024, exact in f16), so the reference can recompute
// any row without keeping the inputs. Each case is verified before it is
// timed: against src/reference on sampled query rows of the full-size run
// (the reference runs them as single-query sequences over the keys they
// see), every decode row included.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "api/handles.h"
#include "bench.h"
#include "common/kernel_choice.h"
#include "core/context.h"
#include "core/device.h"
#include "ops/attention/variant.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

namespace bench {

namespace {

// Value of input element `idx` of stream `kind` (0 q, 1 k, 2 v): k / 1024.
float value(uint64_t kind, uint64_t idx) {
  uint64_t x = idx * 0x9E3779B97F4A7C15ull + kind * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return float(int(x % 2049) - 1024) / 1024.0f;
}

vkattn_tensor* make(vkattn_context* ctx, std::vector<int64_t> shape) {
  vkattn_tensor* t = nullptr;
  check(vkattn_tensor_create(ctx, VKATTN_F16, uint32_t(shape.size()), shape.data(), &t),
        "tensor_create");
  return t;
}

// Writes stream `kind` elements [first, first + n) into an f16 tensor.
void fill(vkattn_tensor* t, uint64_t kind, uint64_t first, uint64_t n) {
  std::vector<uint16_t> h(n);
  for (uint64_t i = 0; i < n; ++i) h[i] = vkattn_ref::f32_to_f16(value(kind, first + i));
  check(vkattn_tensor_write(t, h.data(), h.size() * 2), "tensor_write");
}

// One sequence of a case: t queries at the end of u keys (bottom-right);
// its K/V rows are global rows [k_row0, k_row0 + u) of the k/v streams, its
// queries rows [q_row0, q_row0 + t).
struct Seq {
  int t, u;
  uint64_t q_row0, k_row0;
};

struct Shape {
  int H, Hkv, d;
  bool causal;
  int dv = 0;                          // 0 = d (MLA: 512 under d 576)
  bool sinks = false;                  // per-head sink logits (gpt-oss)
  vkattn_dtype cache_dt = VKATTN_F16;  // paged cases: the cache dtype (8-bit caches)
  uint32_t cache_flags = 0;            // ... and its flags (VKATTN_KV_ROTATE_KEYS)
  int chunk = 0;                       // desc->chunk_size (chunked local attention)
  int window = -1;                     // desc->window_left (-1: none)
  // Bidirectional spans of a one-sequence case (desc->spans; Gemma 3's
  // images), and whether the case passes them, with causal, as the
  // equivalent dense bool mask instead.
  std::vector<std::pair<int, int>> spans;
  bool spans_as_mask = false;
  // A speculative tree every sequence of tree_t queries verifies
  // (desc->tree_indptr / tree_mask): ceil(tree_t / 32) words a node.
  std::vector<uint32_t> tree;
  int tree_t = 0;
  // Top-k lists of topk_k positions per query row of the call (row r's at
  // topk[r * topk_k]; rows in the call's order), shared by every head.
  std::vector<int32_t> topk;
  int topk_k = 0;
  // Attention variants (user functions): the case's rule written as a
  // vkattn_mask_mod instead of the descriptor's (1: causal, desc.causal 0;
  // 2: the chunks, as documents with an I32 id per position, desc.chunk_size
  // 0; 3: causal and the window, desc.causal 0 and window_left -1), timed
  // interleaved with the same call using the built-in rule; or 4: a T5
  // bias (t5_bias below) as a vkattn_score_mod, timed interleaved with the
  // same call without it.
  int variant_rule = 0;
  // The score term the reference adds for variant_rule 4.
  double (*bias)(int head, int q_pos, int k_pos) = nullptr;
  // The keys query row `row` (i of a sequence of t over u keys) sees.
  std::vector<int> row_keys(int row, int i, int t, int u) const {
    const auto [lo, hi] = keys_of(u - t + i, u);
    std::vector<int> keys;
    if (!topk.empty()) {
      for (int x = 0; x < topk_k; ++x) {
        const int j = topk[size_t(row) * topk_k + x];
        if (j >= lo && j < hi) keys.push_back(j);
      }
      return keys;
    }
    for (int j = lo; j < hi; ++j)
      if (tree_sees(i, t, u, j)) keys.push_back(j);
    return keys;
  }
  int v_dim() const { return dv ? dv : d; }
  // Whether query i of a sequence of t queries over u keys sees key j
  // inside its own block (always, without a tree).
  bool tree_sees(int i, int t, int u, int j) const {
    if (tree.empty() || t != tree_t || j < u - t) return true;
    const int x = j - (u - t), w = (t + 31) / 32;
    return (tree[size_t(i) * w + x / 32] >> (x % 32) & 1u) != 0;
  }
  // The keys [lo, hi) query position pos of a sequence of u keys sees (a
  // span holding pos widens them to its own keys: still one range).
  std::pair<int, int> keys_of(int pos, int u) const {
    int lo = 0, hi = causal ? std::max(0, pos + 1) : u;
    if (chunk > 0) {
      const int c0 = int(vkattn::ref::floor_div(pos, chunk)) * chunk;
      lo = std::max(lo, c0), hi = std::min(hi, c0 + chunk);
    }
    if (window >= 0) lo = std::max(lo, pos - window);
    hi = std::max(lo, hi);
    for (auto [a, b] : spans)
      if (pos >= a && pos < b) lo = std::min(lo, a), hi = std::max(hi, b);
    return {lo, hi};
  }
  // Bytes one cached key takes per kv head (K and V rows; int8: + 2 scales;
  // q4: half a byte an element and an f16 scale per 32).
  double key_bytes() const {
    if (cache_dt == VKATTN_Q4) return (d + v_dim()) * (0.5 + 2.0 / 32);
    return (d + v_dim()) * double(vkattn_dtype_size(cache_dt)) +
           (cache_dt == VKATTN_I8 ? 8.0 : 0.0);
  }
};

// The sink logit of head h (stream 3), when the shape has sinks.
float sink_of(int h) {
  return 2.0f * value(3, uint64_t(h));
}

// A 1-D tensor of `dtype` holding x (its elements' size must match the dtype's).
template <typename T>
vkattn_tensor* vector_tensor(vkattn_context* ctx, vkattn_dtype dtype, const std::vector<T>& x) {
  vkattn_tensor* t = nullptr;
  const int64_t shape[1] = {int64_t(x.size())};
  check(vkattn_tensor_create(ctx, dtype, 1, shape, &t), "tensor_create");
  check(vkattn_tensor_write(t, x.data(), x.size() * sizeof(T)), "tensor_write");
  return t;
}

// desc->sinks for a shape with sinks (f32 [H]), else NULL; owned by the caller.
vkattn_tensor* make_sinks(vkattn_context* ctx, const Shape& s) {
  if (!s.sinks) return nullptr;
  std::vector<float> x(s.H);
  for (int h = 0; h < s.H; ++h) x[h] = sink_of(h);
  return vector_tensor(ctx, VKATTN_F32, x);
}

// Checks sampled (sequence, query) rows of `out` (f16 [total_q, H, d])
// against the reference; returns the largest error and the reference's
// milliseconds per visible-pair FLOP-equivalent (for the speedup figure).
double verify(const Shape& s, const std::vector<Seq>& seqs, const std::vector<uint16_t>& out,
              double* ref_ms_per_gflop) {
  if (g_build_only) {  // nothing ran: the output is whatever the memory held
    *ref_ms_per_gflop = 0;
    return 0;
  }
  std::vector<std::pair<int, int>> rows;  // (seq, query)
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int t = seqs[b].t;
    if (t <= 4) {
      for (int i = 0; i < t; ++i) rows.push_back({int(b), i});
    } else {
      for (int i : {0, 1, t / 3, t / 2, t - 2, t - 1}) rows.push_back({int(b), i});
    }
  }
  if (rows.size() > 48) {  // many sequences: a spread of them
    std::vector<std::pair<int, int>> some;
    for (size_t i = 0; i < rows.size(); i += rows.size() / 48 + 1) some.push_back(rows[i]);
    some.push_back(rows.back());
    rows = some;
  }
  const int H = s.H, Hkv = s.Hkv, d = s.d, dv = s.v_dim();
  std::vector<int32_t> cu_q = {0}, cu_k = {0};
  std::vector<float> q, k, v;
  double flops = 0;
  std::vector<int> row_pos;                // each row's query position ...
  std::vector<std::vector<int>> row_keys;  // ... and its keys' (s.bias)
  for (auto [b, i] : rows) {
    const Seq& sq = seqs[b];
    const int pos = sq.u - sq.t + i;
    const std::vector<int> keys = s.row_keys(int(sq.q_row0 + i - seqs[0].q_row0), i, sq.t, sq.u);
    row_pos.push_back(pos);
    row_keys.push_back(keys);
    const int u = int(keys.size());
    cu_q.push_back(cu_q.back() + 1);
    cu_k.push_back(cu_k.back() + u);
    const uint64_t qr = sq.q_row0 + i;
    for (int e = 0; e < H * d; ++e) q.push_back(value(0, qr * H * d + e));
    for (int j : keys) {
      for (int e = 0; e < Hkv * d; ++e) k.push_back(value(1, (sq.k_row0 + j) * Hkv * d + e));
      for (int e = 0; e < Hkv * dv; ++e) v.push_back(value(2, (sq.k_row0 + j) * Hkv * dv + e));
    }
    flops += 2.0 * u * H * (d + dv);
  }
  std::vector<float> sinks;
  for (int h = 0; s.sinks && h < H; ++h) sinks.push_back(sink_of(h));
  vkattn::ref::AttentionParams p;
  p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d, p.head_dim_v = dv, p.causal = false;
  p.sinks = s.sinks ? sinks.data() : nullptr;
  if (s.bias) {  // (each row is its own one-query sequence of its keys)
    p.user_score = [&](double score, int seq, int head, long, long k_pos) {
      return score + s.bias(head, row_pos[seq], row_keys[seq][k_pos]);
    };
  }
  std::vector<float> ref(rows.size() * H * dv);
  auto t0 = std::chrono::steady_clock::now();
  vkattn::ref::attention_varlen(p, int(rows.size()), cu_q.data(), cu_k.data(), q.data(), k.data(),
                                v.data(), ref.data(), nullptr);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  *ref_ms_per_gflop = ms / (flops * 1e-9);
  double err = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [b, i] = rows[r];
    const uint64_t row = seqs[b].q_row0 + i - seqs[0].q_row0;
    for (int e = 0; e < H * dv; ++e)
      err = std::max(err, double(std::fabs(vkattn_ref::f16_to_f32(out[row * H * dv + e]) -
                                           ref[r * H * dv + e])));
  }
  return err;
}

// FLOPs of the visible pairs and bytes of K/V of a batch.
void work(const Shape& s, const std::vector<Seq>& seqs, double* flops, double* kv_bytes) {
  double pairs = 0, keys = 0;
  if (!s.topk.empty()) {  // top-k: each row reads its own listed keys
    for (const Seq& q : seqs)
      for (int i = 0; i < q.t; ++i)
        pairs += double(s.row_keys(int(q.q_row0 + i - seqs[0].q_row0), i, q.t, q.u).size());
    *flops = pairs * s.H * 2.0 * (s.d + s.v_dim());
    *kv_bytes = pairs * s.Hkv * s.key_bytes();
    return;
  }
  for (const Seq& q : seqs) {
    int lo = q.u, hi = 0;  // the keys any query of the sequence sees
    for (int i = 0; i < q.t; ++i) {
      const auto [a, b] = s.keys_of(q.u - q.t + i, q.u);
      for (int j = std::max(a, q.u - q.t); j < b; ++j) pairs -= !s.tree_sees(i, q.t, q.u, j);
      pairs += b - a;
      if (b > a) lo = std::min(lo, a), hi = std::max(hi, b);
    }
    keys += s.chunk > 0 ? std::max(0, hi - lo) : q.u;
  }
  *flops = pairs * s.H * 2.0 * (s.d + s.v_dim());
  *kv_bytes = keys * s.Hkv * s.key_bytes();
}

constexpr double kTolF16 = 2e-3;
// 8-bit caches against the reference over the unquantized values: the
// quantization error (int8: half a code of the row's absmax / 127; fp8
// e4m3: 1/16 relative; q4: half a step of a block's absmax / 8) averaged
// by the softmax.
double tolerance(const Shape& s) {
  return s.cache_dt == VKATTN_I8         ? 1e-2
         : s.cache_dt == VKATTN_FP8_E4M3 ? 5e-2
         : s.cache_dt == VKATTN_Q4       ? 3e-2
                                         : kTolF16;
}

// Verifies a case's f16 output `o` (the rows of `seqs`, as record() wrote
// them) against the reference, times record(), and fills r's figures and
// kernel line (max_rows: the call's largest t x group).
template <typename F>
bool verify_and_time(vkattn_context* ctx, Result* r, const Shape& s, const std::vector<Seq>& seqs,
                     vkattn_tensor* o, uint32_t max_rows, F&& record) {
  progress("%s: verifying", r->name.c_str());
  record();
  uint64_t rows = 0;
  for (const Seq& q : seqs) rows += uint64_t(q.t);
  std::vector<uint16_t> out(rows * s.H * s.v_dim());
  check(vkattn_tensor_read(o, out.data(), out.size() * 2), "tensor_read");
  double ref_ms_per_gflop = 0;
  r->max_err = verify(s, seqs, out, &ref_ms_per_gflop);
  progress("%s: timing", r->name.c_str());
  r->median_ms = time_gpu(ctx, record);
  add_spread(*r);
  double flops, bytes;
  work(s, seqs, &flops, &bytes);
  r->flops = flops;
  r->bytes = bytes;
  r->ref_speedup = ref_ms_per_gflop * flops * 1e-9 / r->median_ms;
  r->variant = variant_name(ctx, s.d, s.v_dim(), max_rows, s.H / s.Hkv);
  return r->ok = r->max_err <= kTolF16;
}

// ---- packed attention (vkattn_attention_varlen) ----------------------------

double finish_beside(vkattn_context* ctx, Result* r, const Shape& s, const std::vector<Seq>& seqs,
                     const std::vector<double> (&ms)[2], double ref_ms_per_gflop,
                     const char* other_key, const char* ratio_key);

// Two calls timed interleaved, one run of each per round (the first round
// warms the device up): ms[0] gets a's runs, ms[1] b's. The machine's speed
// drifts between minutes, so cases that compare two calls time them so.
template <class A, class B>
void time_interleaved(vkattn_context* ctx, A&& a, B&& b, std::vector<double> (&ms)[2]) {
  for (int rep = 0; rep < g_reps; ++rep) {
    const double warm = rep == 0 ? kWarmupMs : 0;
    ms[0].push_back(time_gpu(ctx, a, 1, warm));
    ms[1].push_back(time_gpu(ctx, b, 1, warm));
  }
}

// The mask functions of Shape::variant_rule.
const char* const kCausalVariant =
    "bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) { return k_pos <= q_pos; }";
const char* const kDocumentVariant =
    "bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n"
    "  return q_pos >= 0 && vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));\n"
    "}\n";
const char* const kWindowVariant =
    "bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n"
    "  return k_pos <= q_pos && q_pos - k_pos <= 255;\n"
    "}\n";
// T5's relative position buckets (unidirectional, 32 buckets, max distance
// 128: distances 0-15 their own bucket, then logarithmic), a per-head table
// of f32 biases as parameter 0 (index head * 32 + bucket).
const char* const kT5Variant =
    "float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {\n"
    "  int n = max(q_pos - k_pos, 0);\n"
    "  int b = n < 16 ? n : min(31, 16 + int(log(float(n) / 16.0) / log(8.0) * 16.0));\n"
    "  return score + vkattn_param_f32(0, head * 32u + uint(b));\n"
    "}\n";
float t5_table(int head, int bucket) {
  return 0.5f * std::sin(float(head * 32 + bucket));
}
double t5_bias(int head, int q_pos, int k_pos) {
  const int n = std::max(q_pos - k_pos, 0);
  const int b =
      n < 16 ? n : std::min(31, 16 + int(std::log(float(n) / 16.f) / std::log(8.f) * 16.f));
  return t5_table(head, b);
}

// One sequence of t queries over u keys in dense K/V: a prefill (t = u) or
// a decode (t = 1).
bool varlen_case(vkattn_context* ctx, Result* r, int t, int u, Shape s) {
  const std::vector<Seq> seqs = {{t, u, 0, 0}};
  vkattn_tensor* q = make(ctx, {t, s.H, s.d});
  vkattn_tensor* k = make(ctx, {u, s.Hkv, s.d});
  vkattn_tensor* v = make(ctx, {u, s.Hkv, s.v_dim()});
  vkattn_tensor* o = make(ctx, {t, s.H, s.v_dim()});
  progress("%s: filling %d keys", r->name.c_str(), u);
  fill(q, 0, 0, uint64_t(t) * s.H * s.d);
  fill(k, 1, 0, uint64_t(u) * s.Hkv * s.d);
  fill(v, 2, 0, uint64_t(u) * s.Hkv * s.v_dim());
  vkattn_tensor* sinks = make_sinks(ctx, s);
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = s.H, desc.num_kv_heads = s.Hkv, desc.head_dim = s.d, desc.causal = s.causal;
  desc.head_dim_v = s.v_dim(), desc.sinks = sinks;
  int32_t cu_q[2] = {0, t}, cu_k[2] = {0, u};
  // Spans: as the descriptor's, or (with causal) as the dense bool mask.
  std::vector<int32_t> span_indptr = {0, int32_t(s.spans.size())}, span_pairs;
  for (auto [a, b] : s.spans) span_pairs.push_back(a), span_pairs.push_back(b);
  vkattn_tensor* mask = nullptr;
  if (!s.spans.empty() && !s.spans_as_mask) {
    desc.span_indptr = span_indptr.data(), desc.spans = span_pairs.data();
  } else if (!s.spans.empty()) {
    std::vector<uint8_t> m(uint64_t(t) * u);
    for (int i = 0; i < t; ++i) {
      const auto [lo, hi] = s.keys_of(u - t + i, u);
      std::fill(m.begin() + uint64_t(i) * u + lo, m.begin() + uint64_t(i) * u + hi, 1);
    }
    mask = vector_tensor(ctx, VKATTN_U8, m);
    desc.causal = 0, desc.mask_type = VKATTN_MASK_BOOL, desc.mask = mask;
  }
  desc.chunk_size = uint32_t(s.chunk);
  desc.window_left = s.window;
  if (s.variant_rule == 0) {
    const bool ok = verify_and_time(ctx, r, s, seqs, o, uint32_t(t * (s.H / s.Hkv)), [&] {
      check(vkattn_attention_varlen(ctx, &desc, 1, cu_q, cu_k, q, k, v, o), "attention_varlen");
    });
    for (vkattn_tensor* x : {q, k, v, o, sinks, mask}) vkattn_tensor_destroy(x);
    return ok;
  }
  // Attention variants: the rule as a mask function, beside the built-in.
  const vkattn_attention_desc builtin = desc;
  vkattn_variant_desc vd;
  vkattn_variant_desc_init(&vd);
  vkattn_tensor* ids = nullptr;
  if (s.variant_rule == 1) {
    vd.source = kCausalVariant;
    desc.causal = 0;
  } else if (s.variant_rule == 2) {
    vd.source = kDocumentVariant;
    vd.param_dtypes[0] = VKATTN_I32;
    std::vector<int32_t> doc(u);
    for (int j = 0; j < u; ++j) doc[j] = j / s.chunk;
    ids = vector_tensor(ctx, VKATTN_I32, doc);
    desc.chunk_size = 0, desc.variant_params[0] = ids;
  } else if (s.variant_rule == 3) {
    vd.source = kWindowVariant;
    desc.causal = 0, desc.window_left = -1;
  } else {
    vd.source = kT5Variant;
    vd.param_dtypes[0] = VKATTN_F32;
    std::vector<float> table(size_t(s.H) * 32);
    for (int h = 0; h < s.H; ++h)
      for (int b = 0; b < 32; ++b) table[size_t(h) * 32 + b] = t5_table(h, b);
    ids = vector_tensor(ctx, VKATTN_F32, table);
    desc.variant_params[0] = ids;
  }
  vkattn_variant* variant = nullptr;
  check(vkattn_variant_create(ctx, &vd, &variant), "variant_create");
  desc.variant = variant;
  auto record = [&] {
    check(vkattn_attention_varlen(ctx, &desc, 1, cu_q, cu_k, q, k, v, o), "attention_varlen");
  };
  auto record_builtin = [&] {
    check(vkattn_attention_varlen(ctx, &builtin, 1, cu_q, cu_k, q, k, v, o), "attention_varlen");
  };
  progress("%s: verifying", r->name.c_str());
  std::vector<uint16_t> out(uint64_t(t) * s.H * s.v_dim());
  double ref_ms_per_gflop = 0;
  auto error_of = [&](auto&& call, const Shape& rule) {  // (both calls' answers are checked)
    call();
    check(vkattn_tensor_read(o, out.data(), out.size() * 2), "tensor_read");
    return verify(rule, seqs, out, &ref_ms_per_gflop);
  };
  Shape plain = s;  // the built-in call's: no score function
  plain.bias = nullptr;
  const double builtin_err = error_of(record_builtin, plain);
  r->max_err = std::max(error_of(record, s), builtin_err);
  r->ok = r->max_err <= kTolF16;
  if (r->ok) {
    progress("%s: timing, interleaved with the built-in rule", r->name.c_str());
    std::vector<double> ms[2];
    time_interleaved(ctx, record, record_builtin, ms);
    const double ms_builtin =
        finish_beside(ctx, r, s, seqs, ms, ref_ms_per_gflop, "builtin_ms", "variant_over_builtin");
    r->variant = variant_name(ctx, s.d, s.v_dim(), uint32_t(t * (s.H / s.Hkv)), s.H / s.Hkv);
    char line[160];
    const char* const builtin_names[] = {"", "with the built-in causal", "with the built-in chunks",
                                         "with the built-in causal window",
                                         "without the score function"};
    std::snprintf(line, sizeof(line),
                  "the same call %s (interleaved): %.3f ms; variant / built-in %.2fx",
                  builtin_names[s.variant_rule], ms_builtin, r->median_ms / ms_builtin);
    r->lines.push_back(line);
  }
  vkattn_variant_destroy(variant);
  for (vkattn_tensor* x : {q, k, v, o, sinks, mask, ids}) vkattn_tensor_destroy(x);
  return r->ok;
}

bool prefill(vkattn_context* ctx, Result* r, int t, Shape s) {
  return varlen_case(ctx, r, t, t, s);
}

// ---- a step over a paged cache ---------------------------------------------

// A cache of `layers` layers whose sequences hold `cached[i]` tokens, and a
// step bringing `fresh[i]` more. Cached tokens of sequence i are K/V rows
// k_row0 + [0, cached), fresh ones follow; the step's queries are q rows.
struct PagedRun {
  vkattn_context* ctx;
  Shape s;
  int layers;
  std::vector<int32_t> cached, fresh;
  vkattn_kv_cache* cache = nullptr;
  vkattn_step* step = nullptr;
  std::vector<int64_t> ids;
  std::vector<Seq> seqs;  // per sequence: t = fresh, u = cached + fresh
  int64_t total_new = 0;
  std::vector<vkattn_tensor*> k_new, v_new;  // per layer
  vkattn_tensor *q = nullptr, *o = nullptr, *sinks = nullptr;
  std::vector<int32_t> tree_indptr;
  std::vector<uint32_t> tree_words;
  vkattn_attention_desc desc;

  // Rows of layer l live in the streams at l * kLayerRows + row.
  static constexpr uint64_t kLayerRows = 1ull << 24;

  PagedRun(vkattn_context* c, Shape sh, int nl, std::vector<int32_t> ca, std::vector<int32_t> fr)
      : ctx(c), s(sh), layers(nl), cached(std::move(ca)), fresh(std::move(fr)) {
    int64_t pages = 0;
    uint64_t row = 0;
    for (size_t i = 0; i < cached.size(); ++i) {
      ids.push_back(int64_t(i));
      pages += (cached[i] + fresh[i] + 15) / 16;
      seqs.push_back({fresh[i], cached[i] + fresh[i], uint64_t(total_new), row});
      row += cached[i] + fresh[i];
      total_new += fresh[i];
    }
    vkattn_kv_cache_desc kd;
    vkattn_kv_cache_desc_init(&kd);
    kd.num_layers = layers, kd.num_kv_heads = s.Hkv, kd.head_dim = s.d, kd.head_dim_v = s.v_dim();
    kd.num_pages = uint32_t(pages + 1);
    kd.dtype = s.cache_dt, kd.flags = s.cache_flags;
    check(vkattn_kv_cache_create(ctx, &kd, &cache), "kv_cache_create");
    if (s.cache_dt == VKATTN_FP8_E4M3) {
      // Values lie in [-1, 1]: 1 maps to 448, e4m3's largest.
      const float scale = 1.0f / 448.0f;
      for (int l = 0; l < layers; ++l)
        check(vkattn_kv_cache_set_scales(cache, uint32_t(l), 1, &scale, &scale), "set_scales");
    }
    // Fill: one step appending every cached token of every layer.
    append_step(cached, true);
    // The timed step's inputs.
    for (int l = 0; l < layers; ++l) {
      k_new.push_back(make(ctx, {total_new, s.Hkv, s.d}));
      v_new.push_back(make(ctx, {total_new, s.Hkv, s.v_dim()}));
      fill_rows(k_new.back(), 1, l, /*fresh=*/true);
      fill_rows(v_new.back(), 2, l, true);
    }
    q = make(ctx, {total_new, s.H, s.d});
    o = make(ctx, {total_new, s.H, s.v_dim()});
    fill(q, 0, 0, uint64_t(total_new) * s.H * s.d);
    sinks = make_sinks(ctx, s);
    vkattn_attention_desc_init(&desc);
    desc.num_heads = s.H, desc.num_kv_heads = s.Hkv, desc.head_dim = s.d, desc.causal = 1;
    desc.head_dim_v = s.v_dim(), desc.sinks = sinks;
    if (!s.tree.empty()) {  // the shape's tree on every sequence of tree_t queries
      tree_indptr.push_back(0);
      for (const Seq& q : seqs) {
        if (q.t == s.tree_t) tree_words.insert(tree_words.end(), s.tree.begin(), s.tree.end());
        tree_indptr.push_back(int32_t(tree_words.size()));
      }
      desc.tree_indptr = tree_indptr.data(), desc.tree_mask = tree_words.data();
    }
  }
  ~PagedRun() {
    if (step) vkattn_step_abort(step);
    for (auto* x : k_new) vkattn_tensor_destroy(x);
    for (auto* x : v_new) vkattn_tensor_destroy(x);
    vkattn_tensor_destroy(q);
    vkattn_tensor_destroy(o);
    vkattn_tensor_destroy(sinks);
    vkattn_kv_cache_destroy(cache);
  }

  // Rows of the cached (or fresh) tokens of every sequence, layer l.
  void fill_rows(vkattn_tensor* t, uint64_t kind, int l, bool fresh_rows) {
    std::vector<uint16_t> h;
    const uint64_t w = uint64_t(s.Hkv) * (kind == 2 ? s.v_dim() : s.d);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const uint64_t first = seqs[i].k_row0 + (fresh_rows ? cached[i] : 0);
      const uint64_t n = fresh_rows ? fresh[i] : cached[i];
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t e = 0; e < w; ++e)
          h.push_back(vkattn_ref::f32_to_f16(value(kind, (l * kLayerRows + first + r) * w + e)));
    }
    check(vkattn_tensor_write(t, h.data(), h.size() * 2), "tensor_write");
  }
  void append_step(const std::vector<int32_t>& t, bool fill_cached) {
    int64_t n = 0;
    for (int32_t x : t) n += x;
    vkattn_step* st = nullptr;
    check(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), t.data(), &st), "step_begin");
    if (n) {
      vkattn_tensor* k = make(ctx, {n, s.Hkv, s.d});
      vkattn_tensor* v = make(ctx, {n, s.Hkv, s.v_dim()});
      for (int l = 0; l < layers; ++l) {
        fill_rows(k, 1, l, !fill_cached);
        fill_rows(v, 2, l, !fill_cached);
        check(vkattn_step_append(st, l, k, v), "step_append");
        check(vkattn_context_flush(ctx), "flush");
      }
      vkattn_tensor_destroy(k);
      vkattn_tensor_destroy(v);
    }
    check(vkattn_step_commit(st), "step_commit");
  }
  void begin() {
    check(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), fresh.data(), &step),
          "step_begin");
  }
  void abort() {
    vkattn_step_abort(step);
    step = nullptr;
  }
  // The reference sees layer 0's streams (verify() reads kind/row ids).
  bool check_layer0(Result* r, double* ref_ms_per_gflop) {
    std::vector<uint16_t> out(uint64_t(total_new) * s.H * s.v_dim());
    check(vkattn_tensor_read(o, out.data(), out.size() * 2), "tensor_read");
    r->max_err = verify(s, seqs, out, ref_ms_per_gflop);
    return r->max_err <= tolerance(s);
  }
};

// One layer of a step over a paged cache, set up and verified: the step is
// open with layer 0's append recorded; record() records its attention.
struct LayerCase {
  PagedRun run;
  Result* r;
  double ref_ms_per_gflop = 0;

  LayerCase(vkattn_context* ctx, Result* res, Shape s, std::vector<int32_t> cached,
            std::vector<int32_t> fresh)
      : run(ctx, s, 1, std::move(cached), std::move(fresh)), r(res) {
    run.begin();
    check(vkattn_step_append(run.step, 0, run.k_new[0], run.v_new[0]), "step_append");
    progress("%s: cache filled; verifying", r->name.c_str());
    record();
    r->ok = run.check_layer0(r, &ref_ms_per_gflop);
  }
  void record() { check(vkattn_step_attention(run.step, 0, &run.desc, run.q, run.o), "attn"); }
  // Fills the result from the attention's median time; times the append.
  void finish(double median_ms) {
    r->median_ms = median_ms;
    const double append_ms = time_gpu(run.ctx, [&] {
      check(vkattn_step_append(run.step, 0, run.k_new[0], run.v_new[0]), "step_append");
    });
    r->extra.push_back({"append_ms", append_ms});
    double flops, bytes;
    work(run.s, run.seqs, &flops, &bytes);
    r->flops = flops;
    r->bytes = bytes;
    r->ref_speedup = ref_ms_per_gflop * flops * 1e-9 / r->median_ms;
    int max_t = 0;
    for (int32_t x : run.fresh) max_t = std::max(max_t, int(x));
    r->variant = variant_name(run.ctx, run.s.d, run.s.v_dim(), max_t * (run.s.H / run.s.Hkv),
                              run.s.H / run.s.Hkv);
  }
};

// One layer of a step: attention timed (append apart), verified first.
bool paged_layer(vkattn_context* ctx, Result* r, Shape s, std::vector<int32_t> cached,
                 std::vector<int32_t> fresh) {
  LayerCase c(ctx, r, s, std::move(cached), std::move(fresh));
  progress("%s: timing", r->name.c_str());
  const double ms = time_gpu(ctx, [&] { c.record(); });
  add_spread(*r);  // before finish times the append
  c.finish(ms);
  return r->ok;
}

const Shape kGqa{32, 8, 128, true};

bool prefill_1k_causal(vkattn_context* c, Result* r) {
  return prefill(c, r, 1024, {8, 8, 128, true});
}
bool prefill_1k(vkattn_context* c, Result* r) {
  return prefill(c, r, 1024, {8, 8, 128, false});
}
bool prefill_2k_gqa(vkattn_context* c, Result* r) {
  return prefill(c, r, 2048, kGqa);
}
bool prefill_1k_d64(vkattn_context* c, Result* r) {
  return prefill(c, r, 1024, {8, 8, 64, true});
}
bool prefill_1k_d256(vkattn_context* c, Result* r) {
  return prefill(c, r, 1024, {8, 8, 256, true});
}
// gpt-oss-120b: 64 query / 8 kv heads of d 64 with attention sinks.
const Shape kGptOss{64, 8, 64, true, 0, true};
// DeepSeek-V3 MLA (absorbed): 16 query heads over one latent kv head, d 576
// (512 latent + 64 rotary), dv 512.
const Shape kMla{16, 1, 576, true, 512};

bool gptoss_decode(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGptOss, std::vector<int32_t>(16, 2048), std::vector<int32_t>(16, 1));
}
bool mla_prefill(vkattn_context* c, Result* r) {
  return prefill(c, r, 512, kMla);
}
bool mla_decode(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kMla, std::vector<int32_t>(16, 1024), std::vector<int32_t>(16, 1));
}

// decode-16x2048 over 8-bit caches: half the bytes of f16 per key.
Shape with_cache(Shape s, vkattn_dtype dt) {
  s.cache_dt = dt;
  return s;
}
bool decode_16x2048_int8(vkattn_context* c, Result* r) {
  return paged_layer(c, r, with_cache(kGqa, VKATTN_I8), std::vector<int32_t>(16, 2048),
                     std::vector<int32_t>(16, 1));
}
bool decode_16x2048_fp8(vkattn_context* c, Result* r) {
  return paged_layer(c, r, with_cache(kGqa, VKATTN_FP8_E4M3), std::vector<int32_t>(16, 2048),
                     std::vector<int32_t>(16, 1));
}

// 4-bit caches: 4.5 bits an element (18 / 64 of f16's bytes).
bool decode_16x2048_q4(vkattn_context* c, Result* r) {
  return paged_layer(c, r, with_cache(kGqa, VKATTN_Q4), std::vector<int32_t>(16, 2048),
                     std::vector<int32_t>(16, 1));
}
// ... with VKATTN_KV_ROTATE_KEYS: the queries' rotation is the extra work.
bool decode_16x2048_q4_rot(vkattn_context* c, Result* r) {
  Shape s = with_cache(kGqa, VKATTN_Q4);
  s.cache_flags = VKATTN_KV_ROTATE_KEYS;
  return paged_layer(c, r, s, std::vector<int32_t>(16, 2048), std::vector<int32_t>(16, 1));
}
bool decode_8x32768_q4(vkattn_context* c, Result* r) {
  return paged_layer(c, r, with_cache(kGqa, VKATTN_Q4), std::vector<int32_t>(8, 32768),
                     std::vector<int32_t>(8, 1));
}

bool chunk_512_over_1536(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGqa, {1536}, {512});
}
bool decode_1x4096(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGqa, {4096}, {1});
}
bool decode_16x512(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGqa, std::vector<int32_t>(16, 512), std::vector<int32_t>(16, 1));
}
bool decode_16x2048(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGqa, std::vector<int32_t>(16, 2048), std::vector<int32_t>(16, 1));
}
// Llama-3-70B's shape: 64 query heads over 8 kv heads (GQA 8), d 128.
const Shape kGqa8{64, 8, 128, true};
bool decode_16x2048_gqa8(vkattn_context* c, Result* r) {
  return paged_layer(c, r, kGqa8, std::vector<int32_t>(16, 2048), std::vector<int32_t>(16, 1));
}

// n decodes over u keys each in caller page pools (vkattn_attention_paged)
// of 16-token pages, the pages of every sequence shuffled over the pool
// (a fixed permutation), as a serving engine's block tables are after a
// while.
bool pooled_decode(vkattn_context* ctx, Result* r, int n, int u, Shape s) {
  const int ps = 16, per_seq = (u + ps - 1) / ps, pages = n * per_seq;
  std::vector<Seq> seqs;
  for (int b = 0; b < n; ++b) seqs.push_back({1, u, uint64_t(b), uint64_t(b) * u});
  // page_indices: sequence b's page i is pool page perm[b * per_seq + i].
  std::vector<int32_t> perm(pages);
  for (int i = 0; i < pages; ++i) perm[i] = i;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = pages - 1; i > 0; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(perm[i], perm[int(x % uint64_t(i + 1))]);
  }
  std::vector<int32_t> indptr = {0}, lens(n, u), cu_q = {0};
  for (int b = 0; b < n; ++b) indptr.push_back(indptr.back() + per_seq), cu_q.push_back(b + 1);
  vkattn_tensor* q = make(ctx, {n, s.H, s.d});
  vkattn_tensor* kp = make(ctx, {pages, ps, s.Hkv, s.d});
  vkattn_tensor* vp = make(ctx, {pages, ps, s.Hkv, s.v_dim()});
  vkattn_tensor* o = make(ctx, {n, s.H, s.v_dim()});
  fill(q, 0, 0, uint64_t(n) * s.H * s.d);
  progress("%s: filling %d pages", r->name.c_str(), pages);
  for (int kind = 1; kind <= 2; ++kind) {
    const uint64_t w = uint64_t(s.Hkv) * (kind == 2 ? s.v_dim() : s.d);
    std::vector<uint16_t> h(uint64_t(pages) * ps * w, 0);
    for (int b = 0; b < n; ++b)
      for (int j = 0; j < u; ++j) {
        const uint64_t slot = uint64_t(perm[b * per_seq + j / ps]) * ps + j % ps;
        for (uint64_t e = 0; e < w; ++e)
          h[slot * w + e] = vkattn_ref::f32_to_f16(value(kind, (seqs[b].k_row0 + j) * w + e));
      }
    check(vkattn_tensor_write(kind == 1 ? kp : vp, h.data(), h.size() * 2), "tensor_write");
  }
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = s.H, desc.num_kv_heads = s.Hkv, desc.head_dim = s.d, desc.causal = s.causal;
  desc.head_dim_v = s.v_dim();
  desc.chunk_size = uint32_t(s.chunk);
  const bool ok = verify_and_time(ctx, r, s, seqs, o, uint32_t(s.H / s.Hkv), [&] {
    check(vkattn_attention_paged(ctx, &desc, uint32_t(n), cu_q.data(), lens.data(), indptr.data(),
                                 perm.data(), ps, q, kp, vp, o),
          "attention_paged");
  });
  for (vkattn_tensor* t : {q, kp, vp, o}) vkattn_tensor_destroy(t);
  return ok;
}

bool decode_1x32768(vkattn_context* c, Result* r) {
  return varlen_case(c, r, 1, 32768, kGqa);
}
bool decode_8x32768_paged(vkattn_context* c, Result* r) {
  return pooled_decode(c, r, 8, 32768, kGqa);
}
// Llama 4's local layers: chunked local attention (chunks of 8192
// positions) over a 128k context: the decode reads its own chunk only,
// so it should cost about what decode-1x8192-paged does.
bool chunked_decode_1x131072(vkattn_context* c, Result* r) {
  Shape s = kGqa;
  s.chunk = 8192;
  return pooled_decode(c, r, 1, 131072, s);
}
bool decode_1x8192_paged(vkattn_context* c, Result* r) {
  return pooled_decode(c, r, 1, 8192, kGqa);
}

// Gemma 3's image prompt: 2048 causal tokens, 8 / 4 heads, d 256, holding
// two images of 256 tokens that attend both ways inside themselves; beside
// the same prefill plain causal and with the images as a dense bool mask.
Shape gemma_image(bool spans, bool as_mask) {
  Shape s{8, 4, 256, true};
  if (spans) s.spans = {{256, 512}, {1024, 1280}};
  s.spans_as_mask = as_mask;
  return s;
}
bool gemma_image_prefill(vkattn_context* c, Result* r) {
  return prefill(c, r, 2048, gemma_image(true, false));
}
bool gemma_image_prefill_causal(vkattn_context* c, Result* r) {
  return prefill(c, r, 2048, gemma_image(false, false));
}
bool gemma_image_prefill_mask(vkattn_context* c, Result* r) {
  return prefill(c, r, 2048, gemma_image(true, true));
}

// Attention variants (user functions): t = u = 2048, 8 / 2 heads, d 64, a
// causal vkattn_mask_mod beside causal = 1; four documents of 2048 packed
// in one sequence of 8192 (an I32 document id per position) beside the
// same call with chunk_size 2048 (the built-in rule that equals it).
const Shape kVariantHeads{8, 2, 64, true};
bool variant_causal_2048(vkattn_context* c, Result* r) {
  Shape s = kVariantHeads;
  s.variant_rule = 1;
  return prefill(c, r, 2048, s);
}
bool variant_document_4x2048(vkattn_context* c, Result* r) {
  Shape s = kVariantHeads;
  s.chunk = 2048, s.variant_rule = 2;
  return prefill(c, r, 8192, s);
}
bool variant_window_8192(vkattn_context* c, Result* r) {
  Shape s = kVariantHeads;
  s.window = 255, s.variant_rule = 3;
  return varlen_case(c, r, 64, 8192, s);
}
bool variant_t5_bias_2048(vkattn_context* c, Result* r) {
  Shape s = kVariantHeads;
  s.variant_rule = 4, s.bias = t5_bias;
  return prefill(c, r, 2048, s);
}

// A step of decodes and one prefill chunk, timed interleaved with its two
// parts as separate steps (the target: the mixed step is no slower than
// the two). Where the device table gives the two classes different
// families (GPUs: decode and tiled or coopmat), the step runs each on its
// own.
bool step_and_parts(vkattn_context* c, Result* r, std::vector<int32_t> dec_cached,
                    int32_t chunk_cached, int32_t chunk_fresh) {
  std::vector<int32_t> cached = dec_cached, dec_fresh(dec_cached.size(), 1);
  std::vector<int32_t> fresh = dec_fresh;
  cached.push_back(chunk_cached), fresh.push_back(chunk_fresh);
  Result parts[2];
  parts[0].name = r->name + " (decodes alone)";
  parts[1].name = r->name + " (chunk alone)";
  LayerCase mixed(c, r, kGqa, cached, fresh);
  LayerCase decodes(c, &parts[0], kGqa, dec_cached, dec_fresh);
  LayerCase chunk(c, &parts[1], kGqa, {chunk_cached}, {chunk_fresh});
  if (!r->ok || !parts[0].ok || !parts[1].ok) return r->ok = false;
  // Interleaved, one run of each per round: the machine's speed drifts
  // between minutes, and the target compares these three.
  progress("%s: timing, interleaved with its parts", r->name.c_str());
  std::vector<double> ms[3];
  // The first round warms the device up; the rounds keep it busy after.
  for (int rep = 0; rep < g_reps; ++rep) {
    const double warm = rep == 0 ? kWarmupMs : 0;
    ms[0].push_back(time_gpu(
        c, [&] { mixed.record(); }, 1, warm));
    ms[1].push_back(time_gpu(
        c, [&] { decodes.record(); }, 1, warm));
    ms[2].push_back(time_gpu(
        c, [&] { chunk.record(); }, 1, warm));
  }
  const double ms_dec = median(ms[1]), ms_chunk = median(ms[2]);
  g_last_times = ms[0];
  add_spread(*r);
  mixed.finish(median(ms[0]));
  r->extra.push_back({"decodes_alone_ms", ms_dec});
  r->extra.push_back({"chunk_alone_ms", ms_chunk});
  char n[128];
  std::snprintf(n, sizeof(n), "parts as two steps (interleaved): %.2f + %.2f = %.2f ms", ms_dec,
                ms_chunk, ms_dec + ms_chunk);
  add_note(*r, n);
  return r->ok;
}

// Speculative decoding's verification (EAGLE, Medusa, SpecInfer): 8
// sequences over 4096 cached keys, each checking a 64-node draft tree
// (a binary tree: node i's parent (i - 1) / 2, depth 6) whose nodes see
// the prefix, their ancestors and themselves. Timed interleaved with the
// same step as causal 64-token chunks over the same keys (what an engine
// without trees runs: more visible pairs in the last 64 keys, the same
// reads); the second line gives the chunks and the ratio.
bool spec_tree_64x4096(vkattn_context* c, Result* r) {
  const int t = 64, w = (t + 31) / 32;
  Shape s = kGqa;
  s.tree.assign(size_t(t) * w, 0u), s.tree_t = t;
  for (int i = 0; i < t; ++i) {
    for (int a = i;; a = (a - 1) / 2) {  // i and its ancestors
      s.tree[size_t(i) * w + a / 32] |= 1u << (a % 32);
      if (a == 0) break;
    }
  }
  const std::vector<int32_t> cached(8, 4096), fresh(8, t);
  Result chunk_r;
  chunk_r.name = r->name + " (causal chunks)";
  LayerCase tree(c, r, s, cached, fresh);
  LayerCase chunk(c, &chunk_r, kGqa, cached, fresh);
  if (!r->ok || !chunk_r.ok) return r->ok = false;
  progress("%s: timing, interleaved with causal chunks", r->name.c_str());
  std::vector<double> ms[2];
  time_interleaved(
      c, [&] { tree.record(); }, [&] { chunk.record(); }, ms);
  g_last_times = ms[0];
  add_spread(*r);
  tree.finish(median(ms[0]));
  const double ms_chunk = median(ms[1]);
  r->extra.push_back({"causal_chunks_ms", ms_chunk});
  r->extra.push_back({"tree_over_chunks", r->median_ms / ms_chunk});
  char n[160];
  std::snprintf(n, sizeof(n),
                "causal 64-token chunks over the same keys (interleaved): %.3f ms; tree / chunks "
                "%.2fx",
                ms_chunk, r->median_ms / ms_chunk);
  r->lines.push_back(n);
  return r->ok;
}

// n sequences forked from one prompt of `shared` tokens (K/V rows 0 ..
// shared - 1, filled in steps of 16384; its full pages shared), each then
// given `own` tokens in pages of its own (rows shared .., the same rows in
// every fork), and a step left open over all of them appending one more
// token each (row shared + own). Pages of 16.
struct ForkedStep {
  vkattn_kv_cache* cache = nullptr;
  vkattn_step* step = nullptr;
  ForkedStep(vkattn_context* ctx, const Shape& s, const std::string& name, int n, int shared,
             int own) {
    vkattn_kv_cache_desc kd;
    vkattn_kv_cache_desc_init(&kd);
    kd.num_layers = 1, kd.num_kv_heads = s.Hkv, kd.head_dim = s.d, kd.head_dim_v = s.d;
    kd.page_size = 16;
    kd.num_pages = uint32_t(shared / 16 + n * ((own + 1) / 16 + 2) + 1);
    check(vkattn_kv_cache_create(ctx, &kd, &cache), "kv_cache_create");
    const uint64_t w = uint64_t(s.Hkv) * s.d;
    // Rows [first, first + count) of the K (kind 1) or V (2) stream, `copies` times.
    auto rows_of = [&](uint64_t kind, uint64_t first, uint64_t count, int copies) {
      vkattn_tensor* t = make(ctx, {int64_t(count) * copies, s.Hkv, s.d});
      std::vector<uint16_t> h(count * w * copies);
      for (uint64_t x = 0; x < h.size(); ++x)
        h[x] = vkattn_ref::f32_to_f16(value(kind, first * w + x % (count * w)));
      check(vkattn_tensor_write(t, h.data(), h.size() * 2), "tensor_write");
      return t;
    };
    // One step over `ids` appending rows [first, first + t) to each.
    auto append = [&](const std::vector<int64_t>& ids, int first, int t, vkattn_step** keep) {
      const std::vector<int32_t> ts(ids.size(), t);
      vkattn_step* st = nullptr;
      check(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), ts.data(), &st),
            "step_begin");
      vkattn_tensor *k = rows_of(1, first, t, int(ids.size())),
                    *v = rows_of(2, first, t, int(ids.size()));
      check(vkattn_step_append(st, 0, k, v), "step_append");
      vkattn_tensor_destroy(k);
      vkattn_tensor_destroy(v);
      if (keep)
        *keep = st;
      else
        check(vkattn_step_commit(st), "step_commit");
    };
    progress("%s: filling %d shared keys", name.c_str(), shared);
    for (int at = 0; at < shared; at += 16384)
      append({0}, at, std::min(16384, shared - at), nullptr);
    std::vector<int64_t> ids(n);
    for (int i = 0; i < n; ++i) {
      ids[i] = i;
      if (i) check(vkattn_kv_cache_fork(cache, 0, i), "kv_cache_fork");
    }
    if (own > 0) append(ids, shared, own, nullptr);
    append(ids, shared + own, 1, &step);
  }
  ~ForkedStep() {
    vkattn_step_abort(step);
    vkattn_kv_cache_destroy(cache);
  }
};

// A decode case timed beside another call in one process (ms[0]: its own
// runs, ms[1]: the other's, interleaved): fills r from its runs and the
// work of `seqs`, adds the other's median and the ratio to it as extras
// `other_key` and `ratio_key`, and returns the other's median.
double finish_beside(vkattn_context* ctx, Result* r, const Shape& s, const std::vector<Seq>& seqs,
                     const std::vector<double> (&ms)[2], double ref_ms_per_gflop,
                     const char* other_key, const char* ratio_key) {
  g_last_times = ms[0];
  add_spread(*r);
  r->median_ms = median(ms[0]);
  double flops, bytes;
  work(s, seqs, &flops, &bytes);
  r->flops = flops, r->bytes = bytes;
  r->ref_speedup = ref_ms_per_gflop * flops * 1e-9 / r->median_ms;
  r->variant = variant_name(ctx, s.d, s.d, s.H / s.Hkv, s.H / s.Hkv);
  const double other = median(ms[1]);
  r->extra.push_back({other_key, other});
  r->extra.push_back({ratio_key, r->median_ms / other});
  return other;
}

// Top-k sparse decoding (DeepSeek V3.2's DSA, NSA-style selection): 16
// decodes forked from one sequence of 131072 cached tokens (its pages
// shared, so the cache fits this machine), each row listing K = 2048
// positions spread over the whole sequence (an indexer's choice). Timed
// interleaved with decode-16x2048 (a dense decode reading as many keys);
// the second line gives it and the ratio.
bool topk_decode_2048_of_131072(vkattn_context* ctx, Result* r) {
  const int n = 16, K = 2048;
  // (Built only, on a fake GPU: the same pipelines over a shorter prompt.)
  const int32_t cached = g_build_only ? 4096 : g_topk_prompt;
  Shape s = kGqa;
  // The step: one new token each (the same K/V row, key `cached`).
  ForkedStep forked(ctx, s, r->name, n, cached, 0);
  vkattn_step* step = forked.step;
  vkattn_tensor* q = make(ctx, {n, s.H, s.d});
  vkattn_tensor* o = make(ctx, {n, s.H, s.d});
  fill(q, 0, 0, uint64_t(n) * s.H * s.d);
  // Lists: K positions spread over the sequence, per row (x * stride + 7 i
  // mod u: distinct for the default stride and prompt, u odd).
  const int32_t u = cached + 1;
  s.topk_k = K;
  s.topk.resize(size_t(n) * K);
  for (int i = 0; i < n; ++i)
    for (int x = 0; x < K; ++x)
      s.topk[size_t(i) * K + x] = int32_t((int64_t(x) * g_topk_stride + i * 7) % u);
  vkattn_tensor* lists = nullptr;
  const int64_t ls[2] = {n, K};
  check(vkattn_tensor_create(ctx, VKATTN_I32, 2, ls, &lists), "tensor_create");
  check(vkattn_tensor_write(lists, s.topk.data(), s.topk.size() * 4), "tensor_write");
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = s.H, desc.num_kv_heads = s.Hkv, desc.head_dim = s.d, desc.causal = 1;
  desc.topk_indices = lists;
  std::vector<Seq> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back({1, u, uint64_t(i), 0});
  auto record = [&] { check(vkattn_step_attention(step, 0, &desc, q, o), "step_attention"); };
  Result dense_r;
  dense_r.name = r->name + " (dense)";
  LayerCase dense(ctx, &dense_r, kGqa, std::vector<int32_t>(n, 2048), std::vector<int32_t>(n, 1));
  progress("%s: verifying", r->name.c_str());
  record();
  std::vector<uint16_t> out(uint64_t(n) * s.H * s.d);
  check(vkattn_tensor_read(o, out.data(), out.size() * 2), "tensor_read");
  double ref_ms_per_gflop = 0;
  r->max_err = verify(s, seqs, out, &ref_ms_per_gflop);
  r->ok = r->max_err <= kTolF16 && dense_r.ok;
  if (r->ok) {
    progress("%s: timing, interleaved with decode-16x2048", r->name.c_str());
    std::vector<double> ms[2];
    time_interleaved(
        ctx, record, [&] { dense.record(); }, ms);
    const double ms_dense =
        finish_beside(ctx, r, s, seqs, ms, ref_ms_per_gflop, "dense_decode_ms", "topk_over_dense");
    char line[160];
    std::snprintf(line, sizeof(line),
                  "decode-16x2048 (dense, interleaved): %.3f ms; top-k / dense %.2fx", ms_dense,
                  r->median_ms / ms_dense);
    r->lines.push_back(line);
    if (g_topk_stride != kTopkStride || g_topk_prompt != kTopkPrompt) {
      std::snprintf(line, sizeof(line), "diagnostic: --topk-stride %d --topk-prompt %d",
                    g_topk_stride, g_topk_prompt);
      r->lines.push_back(line);
    }
  }
  for (vkattn_tensor* t : {q, o, lists}) vkattn_tensor_destroy(t);
  return r->ok;
}

// Turns the context's cascade on (its default: VKATTN_CASCADE or, unset,
// the library's threshold) or off (VKATTN_CASCADE=0), for timing both in
// one process.
void set_cascade(vkattn_context* ctx, bool on, uint32_t default_value) {
  vkattn::Context& c = *ctx->impl;
  vkattn::KernelOptions o = c.options();
  o.cascade = on ? default_value : 0;
  c.set_options(o);
}

// Forks over one shared prompt (issue CS: parallel sampling, beams): n
// sequences forked from one prompt of `shared` tokens (its full pages
// shared), each then given `own` tokens in pages of its own (the same K/V
// rows in every fork, so one reference serves them all; their queries
// differ), decoding one token each. Verified before timing, with and
// without cascade attention (the shared pages read once for the group,
// then merged by lse), and timed both ways, interleaved; the second line
// gives the call without cascade and the ratio. bytes count what a
// cascade must read: the shared keys once, every sequence's own keys.
bool forked_decode(vkattn_context* ctx, Result* r, int n, int shared, int own) {
  const Shape s = kGqa;
  ForkedStep forked(ctx, s, r->name, n, shared, own);
  vkattn_step* step = forked.step;
  vkattn_tensor* q = make(ctx, {n, s.H, s.d});
  vkattn_tensor* o = make(ctx, {n, s.H, s.d});
  fill(q, 0, 0, uint64_t(n) * s.H * s.d);
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = s.H, desc.num_kv_heads = s.Hkv, desc.head_dim = s.d, desc.causal = 1;
  std::vector<Seq> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back({1, shared + own + 1, uint64_t(i), 0});
  auto record = [&] { check(vkattn_step_attention(step, 0, &desc, q, o), "step_attention"); };
  const uint32_t cascade = ctx->impl->options().cascade;
  double ref_ms_per_gflop = 0;
  r->max_err = 0;
  for (bool on : {false, true}) {
    progress("%s: verifying (cascade %s)", r->name.c_str(), on ? "on" : "off");
    set_cascade(ctx, on, cascade);
    record();
    std::vector<uint16_t> out(uint64_t(n) * s.H * s.d);
    check(vkattn_tensor_read(o, out.data(), out.size() * 2), "tensor_read");
    r->max_err = std::max(r->max_err, verify(s, seqs, out, &ref_ms_per_gflop));
  }
  r->ok = r->max_err <= kTolF16;
  if (r->ok) {
    progress("%s: timing with and without cascade, interleaved", r->name.c_str());
    std::vector<double> ms[2];
    for (int rep = 0; rep < g_reps; ++rep) {
      for (int off = 0; off < 2; ++off) {
        set_cascade(ctx, off == 0, cascade);
        ms[off].push_back(time_gpu(ctx, record, 1, rep == 0 ? kWarmupMs : 0));
      }
    }
    set_cascade(ctx, true, cascade);
    const double ms_off =
        finish_beside(ctx, r, s, seqs, ms, ref_ms_per_gflop, "no_cascade_ms", "cascade_over_none");
    // (work() counts every sequence's keys: the shared ones n times.)
    r->bytes *= (double(shared) + double(n) * (own + 1)) / (double(n) * (shared + own + 1));
    char line[200];
    std::snprintf(line, sizeof(line),
                  "without cascade (VKATTN_CASCADE=0, interleaved; each sequence reads the %d "
                  "shared keys): %.3f ms; cascade / without %.2fx",
                  shared, ms_off, r->median_ms / ms_off);
    r->lines.push_back(line);
  }
  vkattn_tensor_destroy(q);
  vkattn_tensor_destroy(o);
  return r->ok;
}

bool shared_prefix_16x4096(vkattn_context* ctx, Result* r) {
  return forked_decode(ctx, r, 16, 4096, 64);
}

bool beam_4x2048(vkattn_context* ctx, Result* r) {
  return forked_decode(ctx, r, 4, 2048, 16);
}

// 12 decodes over 512 + 325 i cached tokens and a 256-token chunk over 1024.
bool mixed_step(vkattn_context* c, Result* r) {
  std::vector<int32_t> cached;
  for (int i = 0; i < 12; ++i) cached.push_back(512 + 325 * i);
  return step_and_parts(c, r, cached, 1024, 256);
}

// What a serving loop runs (vLLM's and FlashInfer's continuous batching):
// 32 decodes over contexts of 512-8192 keys and one 512-token prefill chunk
// over 1536 cached keys.
bool serving_step(vkattn_context* c, Result* r) {
  std::vector<int32_t> cached;
  for (int i = 0; i < 32; ++i) cached.push_back(512 + 7680 * i / 31);
  return step_and_parts(c, r, cached, 1536, 512);
}

// A full 32-layer decode step of 16 sequences over 512 cached tokens:
// append + attention per layer, one submission. Reports tokens/s and the
// host's recording time per layer.
bool layers_32(vkattn_context* ctx, Result* r) {
  const int L = 32;
  progress("%s: filling 32 layers", r->name.c_str());
  PagedRun run(ctx, kGqa, L, std::vector<int32_t>(16, 512), std::vector<int32_t>(16, 1));
  vkattn_tensor_destroy(run.o);  // one output per layer instead
  run.o = nullptr;
  std::vector<vkattn_tensor*> outs;
  for (int l = 0; l < L; ++l) outs.push_back(make(ctx, {run.total_new, kGqa.H, kGqa.d}));
  std::vector<double> gpu_ms, record_us, append_us, attention_us;
  uint64_t submissions = 0;
  bool verified = false;
  double ref_ms_per_gflop = 0;
  for (int rep = 0; rep < g_reps + 1; ++rep) {
    run.begin();
    const uint64_t serial0 = ctx->impl->recorder().open_serial();
    auto t0 = std::chrono::steady_clock::now();
    double t_app = 0, t_att = 0;
    for (int l = 0; l < L; ++l) {
      auto a0 = std::chrono::steady_clock::now();
      check(vkattn_step_append(run.step, l, run.k_new[l], run.v_new[l]), "step_append");
      auto a1 = std::chrono::steady_clock::now();
      check(vkattn_step_attention(run.step, l, &run.desc, run.q, outs[l]), "step_attention");
      auto a2 = std::chrono::steady_clock::now();
      t_app += std::chrono::duration<double, std::micro>(a1 - a0).count();
      t_att += std::chrono::duration<double, std::micro>(a2 - a1).count();
    }

    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    check(vkattn_context_synchronize(ctx), "synchronize");
    submissions = ctx->impl->recorder().open_serial() - serial0;
    uint64_t ns = 0;
    check(vkattn_context_last_gpu_time(ctx, &ns), "last_gpu_time");
    if (!verified) {  // layer 0 against the reference (the first run compiles)
      progress("%s: verifying layer 0", r->name.c_str());
      run.o = outs[0];
      r->ok = run.check_layer0(r, &ref_ms_per_gflop);
      run.o = nullptr;
      verified = true;
    } else {
      gpu_ms.push_back(ns * 1e-6);
      record_us.push_back(us / L);
      append_us.push_back(t_app / L);
      attention_us.push_back(t_att / L);
    }
    run.abort();
  }
  run.o = outs[0];
  for (int l = 1; l < L; ++l) vkattn_tensor_destroy(outs[l]);
  r->median_ms = median(gpu_ms);
  double flops, bytes;
  work(kGqa, run.seqs, &flops, &bytes);
  r->flops = flops * L;
  r->bytes = bytes * L;
  r->ref_speedup = ref_ms_per_gflop * flops * L * 1e-9 / r->median_ms;
  r->extra.push_back({"tokens_per_s", 16.0 / (r->median_ms * 1e-3)});
  r->extra.push_back({"record_us_per_layer", median(record_us)});
  r->extra.push_back({"record_us_append", median(append_us)});
  r->extra.push_back({"record_us_attention", median(attention_us)});
  r->extra.push_back({"submissions", double(submissions)});
  char n[160];
  std::snprintf(n, sizeof(n),
                "%.0f tokens/s, recording %.1f us/layer (append %.1f, attention %.1f), "
                "%llu submission(s)",
                16.0 / (r->median_ms * 1e-3), median(record_us), median(append_us),
                median(attention_us), static_cast<unsigned long long>(submissions));
  add_note(*r, n);
  r->variant = variant_name(ctx, kGqa.d, kGqa.d, kGqa.H / kGqa.Hkv, kGqa.H / kGqa.Hkv);
  return r->ok;
}

// How the last attention call was cut: key splits per query-row tile and
// the combine pass that merges them.
std::string splits_of_last_call(vkattn_context* ctx) {
  const auto& st = ctx->impl->last_attention;
  if (!st.tiles) return "";
  char s[200];
  std::snprintf(s, sizeof(s),
                "; last call: %llu row tiles x %.1f key splits = %llu workgroups in %llu pass(es), "
                "%llu combine items",
                static_cast<unsigned long long>(st.tiles), double(st.items) / double(st.tiles),
                static_cast<unsigned long long>(st.items),
                static_cast<unsigned long long>(st.passes),
                static_cast<unsigned long long>(st.combine_items));
  return s;
}

}  // namespace

// The kernel a shape gets on this context, and how its last call was cut
// (bench.h).
std::string variant_name(vkattn_context* ctx, uint32_t d, uint32_t dv, uint32_t max_rows,
                         uint32_t group) {
  return vkattn_tools::kernel_choice(ctx, d, dv, max_rows, group) + splits_of_last_call(ctx);
}

std::vector<std::string> take_pipeline_stats(vkattn_context* ctx) {
  std::vector<std::string> out;
  for (const vkattn::Pipeline* p : ctx->impl->pipelines().take_dispatched()) {
    std::string spec;
    for (uint32_t v : p->spec) spec += (spec.empty() ? "" : ", ") + std::to_string(v);
    for (const vkattn::ExecutableStats& es : p->stats) {
      std::string o = "{\"shader\": " + json_str(p->layout->shader) + ", \"spec\": [" + spec +
                      "], \"executable\": " + json_str(es.executable) + ", \"stats\": {";
      for (size_t i = 0; i < es.values.size(); ++i) {
        const std::string& v = es.values[i].second;
        char* tail = nullptr;
        const double x = std::strtod(v.c_str(), &tail);
        const bool number = !v.empty() && *tail == '\0' && std::isfinite(x);
        o += (i ? ", " : "") + json_str(es.values[i].first) + ": " + (number ? v : json_str(v));
      }
      out.push_back(o + "}}");
    }
  }
  return out;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = {
      {"prefill-1k-8h-causal", "causal 1024 x 1024, 8 heads, d 128, f16", prefill_1k_causal},
      {"prefill-1k-8h", "non-causal 1024 x 1024, 8 heads, d 128, f16", prefill_1k},
      {"prefill-2k-gqa", "causal 2048, 32 q / 8 kv heads, d 128, f16", prefill_2k_gqa},
      {"prefill-1k-d64", "causal 1024, 8 heads, d 64, f16", prefill_1k_d64},
      {"prefill-1k-d256", "causal 1024, 8 heads, d 256, f16", prefill_1k_d256},
      {"chunk-512-over-1536", "paged: a 512-token chunk over 1536 cached, 32/8 heads, d 128",
       chunk_512_over_1536},
      {"decode-1x4096", "paged: 1 decode over 4096 cached, 32/8 heads, d 128", decode_1x4096},
      {"decode-16x2048", "paged: 16 decodes over 2048 cached, 32/8 heads, d 128", decode_16x2048},
      {"decode-16x2048-gqa8", "paged: 16 decodes over 2048 cached, 64/8 heads (GQA 8), d 128",
       decode_16x2048_gqa8},
      {"decode-1x32768", "dense K/V: 1 decode over 32768 keys, 32/8 heads, d 128, f16",
       decode_1x32768},
      {"decode-8x32768-paged",
       "caller pools: 8 decodes over 32768 keys in shuffled 16-token pages, 32/8 heads, d 128",
       decode_8x32768_paged},
      {"decode-1x8192-paged",
       "caller pools: 1 decode over 8192 keys in shuffled 16-token pages, 32/8 heads, d 128",
       decode_1x8192_paged},
      {"chunked-decode-1x131072",
       "caller pools: 1 decode over 131072 keys, chunked local attention (chunks of 8192), "
       "32/8 heads, d 128",
       chunked_decode_1x131072},
      {"gemma-image-prefill",
       "causal 2048, 8/4 heads, d 256, two 256-token image spans seen both ways (Gemma 3)",
       gemma_image_prefill},
      {"gemma-image-prefill-causal", "gemma-image-prefill without its spans (plain causal)",
       gemma_image_prefill_causal},
      {"gemma-image-prefill-mask",
       "gemma-image-prefill with causal and the spans as one dense bool mask",
       gemma_image_prefill_mask},
      {"variant-causal-2048",
       "causal 2048, 8/2 heads, d 64, the causal rule as a user mask function (attention "
       "variant), interleaved with causal = 1",
       variant_causal_2048},
      {"variant-document-4x2048",
       "four documents of 2048 packed in one causal sequence, 8/2 heads, d 64, a user mask "
       "function over I32 document ids, interleaved with chunk_size 2048",
       variant_document_4x2048},
      {"variant-window-8192",
       "64 queries over 8192 keys, 8/2 heads, d 64, causal with a 255-key window as a user mask "
       "function, interleaved with causal = 1 and window_left = 255",
       variant_window_8192},
      {"variant-t5-bias-2048",
       "causal 2048, 8/2 heads, d 64, T5 relative position buckets (32, a per-head f32 table) "
       "as a user score function, interleaved with the same call without it",
       variant_t5_bias_2048},
      {"decode-16x2048-int8", "decode-16x2048 over an int8 cache (per-token scales)",
       decode_16x2048_int8},
      {"decode-16x2048-fp8", "decode-16x2048 over an fp8 e4m3 cache (per-layer scales)",
       decode_16x2048_fp8},
      {"decode-16x2048-q4", "decode-16x2048 over a 4-bit cache (an f16 scale per 32)",
       decode_16x2048_q4},
      {"decode-16x2048-q4-rot", "decode-16x2048-q4 with rotated keys (VKATTN_KV_ROTATE_KEYS)",
       decode_16x2048_q4_rot},
      {"decode-8x32768-q4", "8 decodes over 32768 keys of a 4-bit cache, 32/8 heads, d 128",
       decode_8x32768_q4},
      {"decode-16x512", "paged: one layer of layers-32 (16 decodes over 512)", decode_16x512},
      {"spec-tree-64x4096",
       "paged: 8 sequences verifying a 64-node draft tree over 4096 cached, 32/8 heads, d 128",
       spec_tree_64x4096},
      {"topk-decode-2048-of-131072",
       "paged: 16 decodes forked from 131072 cached, each reading its own 2048 listed keys, "
       "32/8 heads, d 128",
       topk_decode_2048_of_131072},
      {"shared-prefix-16x4096",
       "paged: 16 decodes forked from one 4096-token prompt, 64 tokens of their own each, "
       "32/8 heads, d 128",
       shared_prefix_16x4096},
      {"beam-4x2048",
       "paged: 4 beams over 2048 shared tokens, 16 of their own each, 32/8 heads, d 128",
       beam_4x2048},
      {"mixed-step", "paged: 12 decodes over 512 + 325 i, a 256 chunk over 1024, one step",
       mixed_step},
      {"serving-step",
       "paged: 32 decodes over 512-8192 keys, a 512 chunk over 1536, one step (and its parts)",
       serving_step},
      {"layers-32", "paged: a 32-layer decode step of 16 x 512, append + attention, one submit",
       layers_32},
      {"gptoss-decode", "paged: 16 decodes over 2048, 64/8 heads, d 64, attention sinks (gpt-oss)",
       gptoss_decode},
      {"mla-prefill", "causal 512, 16 heads over 1 kv head, d 576 / dv 512 (DeepSeek MLA)",
       mla_prefill},
      {"mla-decode", "paged: 16 decodes over 1024, 16 heads / 1 kv head, d 576 / dv 512 (MLA)",
       mla_decode},
  };
  return cases;
}

}  // namespace bench

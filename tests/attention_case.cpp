#include "attention_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

namespace vkattn_test {

namespace {

const char* dt_name(vkattn_dtype d) {
  switch (d) {
    case VKATTN_F32:
      return "f32";
    case VKATTN_F16:
      return "f16";
    case VKATTN_BF16:
      return "bf16";
    case VKATTN_U8:
      return "u8";
    default:
      return "?";
  }
}

using TensorPtr = std::unique_ptr<vkattn_tensor, void (*)(vkattn_tensor*)>;

TensorPtr make_tensor(vkattn_context* ctx, vkattn_dtype dt, std::vector<int64_t> shape) {
  vkattn_tensor* t = nullptr;
  vkattn_status s =
      vkattn_tensor_create(ctx, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t);
  EXPECT_EQ(s, VKATTN_SUCCESS) << vkattn_last_error();
  return TensorPtr(t, &vkattn_tensor_destroy);
}

void upload(vkattn_tensor* t, vkattn_dtype dt, const std::vector<float>& x) {
  auto bytes = encode_bytes(dt, x);
  ASSERT_EQ(vkattn_tensor_write(t, bytes.data(), bytes.size()), VKATTN_SUCCESS)
      << vkattn_last_error();
}

std::vector<float> download(vkattn_tensor* t, vkattn_dtype dt) {
  std::vector<uint8_t> bytes(vkattn_tensor_nbytes(t));
  EXPECT_EQ(vkattn_tensor_read(t, bytes.data(), bytes.size()), VKATTN_SUCCESS)
      << vkattn_last_error();
  return decode_bytes(dt, bytes);
}

}  // namespace

std::string AttnCase::name() const {
  std::ostringstream os;
  os << "H" << H << "/" << Hkv << " d" << d << " dv" << (dv ? dv : d) << " q" << dt_name(qdt)
     << " kv" << dt_name(kdt) << (causal ? " causal" : "") << " win" << window
     << (window_right >= 0 ? " right " + std::to_string(window_right) : "")
     << (chunk > 0 ? " chunk " + std::to_string(chunk) : "") << (rules_as_mask ? " as-mask" : "")
     << (spans.empty() ? "" : " spans")
     << (trees.empty()  ? ""
         : tree_as_mask ? " tree-as-mask"
                        : " trees")
     << (topk < 0 ? ""
                  : " topk " + std::to_string(topk) + (topk_per_head ? " per-head" : "") +
                        (topk_as_mask ? " as-mask" : ""))
     << (softcap > 0 ? " softcap " + std::to_string(softcap) : "") << (alibi ? " alibi" : "")
     << (sinks ? " sinks" : "") << " mask" << mask_type
     << (padded ? (left_pad ? " padded-left" : " padded-right") : "") << " seqs";
  for (auto [t, u] : seqs) os << " " << t << "x" << u;
  return os.str();
}

CaseStats run_attention_case(vkattn_context* ctx, const AttnCase& case_in) {
  AttnCase c = case_in;
  c.kdt = test_kv_dtype(c.kdt);
  SCOPED_TRACE(c.name());
  CaseStats st;
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int dv = c.dv ? c.dv : c.d;
  const int B = static_cast<int>(c.seqs.size());
  std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
  int64_t mask_elems = 0;
  for (int b = 0; b < B; ++b) {
    cu_q[b + 1] = cu_q[b] + c.seqs[b].first;
    cu_k[b + 1] = cu_k[b] + c.seqs[b].second;
    mask_elems += static_cast<int64_t>(c.seqs[b].first) * c.seqs[b].second;
  }
  const int64_t tq = cu_q[B], tk = cu_k[B];

  auto random_vec = [&](size_t n, vkattn_dtype dt) {
    std::vector<float> x(n);
    for (auto& e : x) e = round_to(dt, uni(rng));
    return x;
  };
  std::vector<float> q = random_vec(tq * c.H * c.d, c.qdt);
  std::vector<float> k = random_vec(tk * c.Hkv * c.d, c.kdt);
  std::vector<float> v = random_vec(tk * c.Hkv * dv, c.kdt);

  // Masks: some entries hidden, and every 5th query row of a sequence fully hidden.
  std::vector<uint8_t> bmask;
  std::vector<float> amask;
  const float inf = std::numeric_limits<float>::infinity();
  if (c.mask_type == VKATTN_MASK_BOOL) bmask.resize(mask_elems);
  if (c.mask_type == VKATTN_MASK_ADDITIVE) amask.resize(mask_elems);
  {
    int64_t off = 0;
    for (auto [t, u] : c.seqs) {
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < u; ++j) {
          int64_t x = off + static_cast<int64_t>(i) * u + j;
          bool hide = (i % 5 == 3) || (rng() % 4 == 0);
          if (!bmask.empty()) bmask[x] = hide ? 0 : static_cast<uint8_t>(1 + rng() % 255);
          if (!amask.empty()) amask[x] = hide ? -inf : round_to(c.mask_dt, 2.0f * uni(rng) - 0.5f);
        }
      off += static_cast<int64_t>(t) * u;
    }
  }
  // The right window and the chunks (floor division: a negative position
  // lies in a negative chunk), as the header states them.
  auto in_rules = [&](int64_t pos, int64_t j) {
    using vkattn::ref::floor_div;
    return (c.window_right < 0 || j - pos <= c.window_right) &&
           (c.chunk <= 0 || floor_div(j, c.chunk) == floor_div(pos, c.chunk));
  };
  // Spans: prefix sums and pairs as the descriptor takes them.
  std::vector<int32_t> span_indptr, span_pairs;
  if (!c.spans.empty()) {
    EXPECT_EQ(c.spans.size(), c.seqs.size()) << "spans: one list per sequence";
    span_indptr.push_back(0);
    for (const auto& list : c.spans) {
      for (auto [lo, hi] : list) span_pairs.push_back(lo), span_pairs.push_back(hi);
      span_indptr.push_back(int32_t(span_pairs.size() / 2));
    }
  }
  auto in_span = [&](int b, int64_t pos, int64_t j) {
    if (c.spans.empty()) return false;
    for (auto [lo, hi] : c.spans[b])
      if (pos >= lo && pos < hi && j >= lo && j < hi) return true;
    return false;
  };
  // Every positional rule of sequence b.
  auto visible = [&](int b, int64_t pos, int64_t j) {
    return (!(c.causal && j > pos) && !(c.window >= 0 && pos - j > c.window) && in_rules(pos, j)) ||
           in_span(b, pos, j);
  };
  // Trees: random parents, each row's bits its ancestors and itself
  // (bits past t in a row's last word set too: they must be ignored).
  std::vector<int32_t> tree_indptr;
  std::vector<uint32_t> tree_words;
  if (!c.trees.empty()) {
    EXPECT_EQ(c.trees.size(), c.seqs.size()) << "trees: one flag per sequence";
    tree_indptr.push_back(0);
    for (int b = 0; b < B; ++b) {
      const int t = c.seqs[b].first, W = (t + 31) / 32;
      if (c.trees[b]) {
        const size_t base = tree_words.size();
        tree_words.resize(base + size_t(t) * W, 0u);
        for (int i = 0; i < t; ++i) {
          uint32_t* row = &tree_words[base + size_t(i) * W];
          if (i > 0) {
            const int parent = int(rng() % uint32_t(i));
            for (int w = 0; w < W; ++w) row[w] = tree_words[base + size_t(parent) * W + w];
          }
          row[i / 32] |= 1u << (i % 32);
          if (t % 32) row[W - 1] |= ~0u << (t % 32);
        }
      }
      tree_indptr.push_back(int32_t(tree_words.size()));
    }
  }
  auto tree_sees = [&](int b, int i, int64_t j) {
    if (c.trees.empty() || !c.trees[b]) return true;
    const int t = c.seqs[b].first, u = c.seqs[b].second, W = (t + 31) / 32;
    const int64_t first = int64_t(u) - t;
    if (j < first) return true;
    const int64_t x = j - first;
    return ((tree_words[tree_indptr[b] + size_t(i) * W + x / 32] >> (x % 32)) & 1u) != 0;
  };
  // Top-k lists: [tq, K] or [tq, Hkv, K].
  const int lists = c.topk_per_head ? c.Hkv : 1;
  std::vector<int32_t> topk;
  if (c.topk >= 0) {
    EXPECT_FALSE(c.topk_as_mask && c.topk_per_head) << "per-head lists have no bool-mask form";
    topk.assign(size_t(tq) * lists * c.topk, -1);
    for (int b = 0; b < B; ++b) {
      const int u = c.seqs[b].second;
      for (int i = 0; i < c.seqs[b].first; ++i)
        for (int h = 0; h < lists; ++h) {
          int32_t* l = &topk[(size_t(cu_q[b] + i) * lists + h) * c.topk];
          std::vector<int32_t> keys(u);
          for (int j = 0; j < u; ++j) keys[j] = j;
          std::shuffle(keys.begin(), keys.end(), rng);
          int n = std::min(u, c.topk);
          if (i % 3 == 1) n = n * 2 / 3;  // a short list: -1 pads
          for (int x = 0; x < n; ++x) l[x] = keys[x];
          if (!c.topk_as_mask && c.topk >= 4 && i % 2 == 0) {
            l[c.topk - 1] = u + int32_t(rng() % 3);   // past u: skipped
            l[c.topk - 2] = -2 - int32_t(rng() % 9);  // below -1: skipped
            if (n >= 2) l[c.topk - 3] = l[0];         // a repeat: counts twice
          }
        }
    }
  }
  auto listed = [&](int b, int i, int64_t j) {
    if (c.topk < 0) return true;
    for (int h = 0; h < lists; ++h)
      for (int x = 0; x < c.topk; ++x)
        if (topk[(size_t(cu_q[b] + i) * lists + h) * c.topk + x] == j) return true;
    return false;
  };
  const bool whole_rule_as_mask = c.rules_as_mask && !c.spans.empty();
  const bool tree_mask = (c.tree_as_mask && !c.trees.empty()) || (c.topk_as_mask && c.topk >= 0);
  if (c.rules_as_mask || tree_mask) {
    EXPECT_EQ(c.mask_type, VKATTN_MASK_NONE) << "rules_as_mask / tree_as_mask make the mask";
    c.mask_type = VKATTN_MASK_BOOL;
    bmask.resize(mask_elems);
    int64_t off = 0;
    for (int b = 0; b < B; ++b) {
      const auto [t, u] = c.seqs[b];
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < u; ++j) {
          const int64_t pos = int64_t(u) - t + i;
          bool m = !c.rules_as_mask     ? true
                   : whole_rule_as_mask ? visible(b, pos, j)
                                        : in_rules(pos, j);
          if (c.tree_as_mask) m = m && tree_sees(b, i, j);
          if (c.topk_as_mask) m = m && listed(b, i, j);
          bmask[off + int64_t(i) * u + j] = m;
        }
      off += static_cast<int64_t>(t) * u;
    }
  }
  std::vector<int32_t> key_valid;
  if (c.padded && c.pad_keys > 0) {
    key_valid.assign(tk, 1);
    for (int b = 0; b < B; ++b) {
      int u = c.seqs[b].second;
      int pad = (b * c.pad_keys) % (u + 1);  // sequence 0 unpadded, others padded
      for (int j = 0; j < pad; ++j) key_valid[cu_k[b] + (c.left_pad ? j : u - 1 - j)] = 0;
    }
  }
  std::vector<float> sinks;
  if (c.sinks)
    for (int h = 0; h < c.H; ++h)
      sinks.push_back(h == 0 ? -INFINITY : h == 1 ? 6.0f : 0.7f * float((h * 5) % 7) - 2.0f);
  std::vector<float> slopes;
  if (c.alibi)
    for (int h = 0; h < c.H; ++h) slopes.push_back(std::exp2(-8.0f * (h + 1) / c.H));

  // NaN into every key position no query of its sequence may see.
  {
    int64_t moff = 0;
    for (int b = 0; b < B; ++b) {
      int t = c.seqs[b].first, u = c.seqs[b].second;
      for (int j = 0; j < u; ++j) {
        bool seen = false;
        for (int i = 0; i < t && !seen; ++i) {
          int64_t pos = static_cast<int64_t>(u) - t + i;
          int64_t x = moff + static_cast<int64_t>(i) * u + j;
          bool vis = visible(b, pos, j) && tree_sees(b, i, j) && listed(b, i, j);
          if (!bmask.empty()) vis = vis && bmask[x] != 0;
          if (!amask.empty()) vis = vis && amask[x] != -inf;
          if (!key_valid.empty()) vis = vis && key_valid[cu_k[b] + j] != 0;
          if (vis && c.host_mask) {  // (some query head of the sequence)
            bool any = false;
            for (int h = 0; h < c.H && !any; ++h) any = c.host_mask(b, h, pos, j);
            vis = any;
          }
          seen = vis;
        }
        if (seen) continue;
        ++st.nan_keys;
        int64_t row = cu_k[b] + j;
        for (int h = 0; h < c.Hkv; ++h) {
          for (int e = 0; e < c.d; ++e) k[(row * c.Hkv + h) * c.d + e] = NAN;
          for (int e = 0; e < dv; ++e) v[(row * c.Hkv + h) * dv + e] = NAN;
        }
      }
      moff += static_cast<int64_t>(t) * u;
    }
  }

  // Device tensors.
  std::vector<int64_t> qs, ks, vs, os, ls, ms;
  if (c.padded) {
    int Sq = B ? c.seqs[0].first : 0, Sk = B ? c.seqs[0].second : 0;
    qs = {B, Sq, c.H, c.d}, ks = {B, Sk, c.Hkv, c.d}, vs = {B, Sk, c.Hkv, dv};
    os = {B, Sq, c.H, dv}, ls = {B, Sq, c.H}, ms = {B, Sq, Sk};
  } else {
    qs = {tq, c.H, c.d}, ks = {tk, c.Hkv, c.d}, vs = {tk, c.Hkv, dv};
    os = {tq, c.H, dv}, ls = {tq, c.H}, ms = {mask_elems};
  }
  auto tq_t = make_tensor(ctx, c.qdt, qs), tk_t = make_tensor(ctx, c.kdt, ks);
  auto tv_t = make_tensor(ctx, c.kdt, vs), to_t = make_tensor(ctx, c.qdt, os);
  auto tl_t = make_tensor(ctx, VKATTN_F32, ls);
  upload(tq_t.get(), c.qdt, q);
  upload(tk_t.get(), c.kdt, k);
  upload(tv_t.get(), c.kdt, v);
  upload(to_t.get(), c.qdt, std::vector<float>(tq * c.H * dv, NAN));
  upload(tl_t.get(), VKATTN_F32, std::vector<float>(tq * c.H, NAN));

  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = c.H;
  desc.num_kv_heads = c.Hkv;
  desc.head_dim = c.d;
  desc.head_dim_v = c.dv;
  desc.scale = c.scale;
  desc.causal = whole_rule_as_mask ? 0 : c.causal;
  desc.window_left = whole_rule_as_mask ? -1 : c.window;
  if (!c.rules_as_mask) desc.window_right = c.window_right, desc.chunk_size = c.chunk;
  if (!c.rules_as_mask && !span_indptr.empty())
    desc.span_indptr = span_indptr.data(), desc.spans = span_pairs.data();
  if (!c.tree_as_mask && !tree_indptr.empty())
    desc.tree_indptr = tree_indptr.data(), desc.tree_mask = tree_words.data();
  TensorPtr topk_t(nullptr, &vkattn_tensor_destroy);
  if (!c.topk_as_mask && c.topk >= 0) {
    std::vector<int64_t> ts = {tq, int64_t(c.topk)};
    if (c.topk_per_head) ts = {tq, int64_t(c.Hkv), int64_t(c.topk)};
    topk_t = make_tensor(ctx, VKATTN_I32, ts);
    EXPECT_EQ(vkattn_tensor_write(topk_t.get(), topk.data(), topk.size() * 4), VKATTN_SUCCESS);
    desc.topk_indices = topk_t.get();
  }
  desc.softcap = c.softcap;
  desc.mask_type = c.mask_type;
  if (c.with_lse) desc.lse = tl_t.get();
  TensorPtr mask_t(nullptr, &vkattn_tensor_destroy), alibi_t(nullptr, &vkattn_tensor_destroy),
      sinks_t(nullptr, &vkattn_tensor_destroy);
  if (!bmask.empty() || (c.mask_type == VKATTN_MASK_BOOL)) {
    mask_t = make_tensor(ctx, VKATTN_U8, ms);
    if (!bmask.empty())
      EXPECT_EQ(vkattn_tensor_write(mask_t.get(), bmask.data(), bmask.size()), VKATTN_SUCCESS);
    desc.mask = mask_t.get();
  } else if (c.mask_type == VKATTN_MASK_ADDITIVE) {
    mask_t = make_tensor(ctx, c.mask_dt, ms);
    upload(mask_t.get(), c.mask_dt, amask);
    desc.mask = mask_t.get();
  }
  if (c.alibi) {
    alibi_t = make_tensor(ctx, VKATTN_F32, {c.H});
    upload(alibi_t.get(), VKATTN_F32, slopes);
    desc.alibi_slopes = alibi_t.get();
  }
  if (c.sinks) {
    sinks_t = make_tensor(ctx, VKATTN_F32, {c.H});
    upload(sinks_t.get(), VKATTN_F32, sinks);
    desc.sinks = sinks_t.get();
  }
  // Attention variant: its object and parameter tensors.
  std::unique_ptr<vkattn_variant, void (*)(vkattn_variant*)> variant(nullptr,
                                                                     &vkattn_variant_destroy);
  std::vector<TensorPtr> params;
  if (!c.variant_source.empty()) {
    vkattn_variant_desc vd;
    vkattn_variant_desc_init(&vd);
    vd.source = c.variant_source.c_str();
    for (int sl = 0; sl < 4; ++sl) vd.param_dtypes[sl] = c.variant_dtypes[sl];
    vkattn_variant* made = nullptr;
    EXPECT_EQ(vkattn_variant_create(ctx, &vd, &made), VKATTN_SUCCESS) << vkattn_last_error();
    variant.reset(made);
    desc.variant = made;
    for (int sl = 0; sl < 4; ++sl) {
      if (!c.variant_dtypes[sl]) continue;
      const auto dt = static_cast<vkattn_dtype>(c.variant_dtypes[sl]);
      const std::vector<double>& x = c.variant_params[sl];
      params.push_back(make_tensor(ctx, dt, {static_cast<int64_t>(x.size())}));
      std::vector<uint32_t> words(x.size());
      for (size_t n = 0; n < x.size(); ++n) {
        if (dt == VKATTN_F32) {
          const float f = static_cast<float>(x[n]);
          std::memcpy(&words[n], &f, 4);
        } else {
          const int32_t i = static_cast<int32_t>(x[n]);
          std::memcpy(&words[n], &i, 4);
        }
      }
      if (!words.empty())
        EXPECT_EQ(vkattn_tensor_write(params.back().get(), words.data(), words.size() * 4),
                  VKATTN_SUCCESS)
            << vkattn_last_error();
      desc.variant_params[sl] = params.back().get();
    }
  }
  vkattn_status s;
  if (c.padded)
    s = vkattn_attention_padded(ctx, &desc, tq_t.get(), tk_t.get(), tv_t.get(),
                                key_valid.empty() ? nullptr : key_valid.data(), to_t.get());
  else
    s = vkattn_attention_varlen(ctx, &desc, B, cu_q.data(), cu_k.data(), tq_t.get(), tk_t.get(),
                                tv_t.get(), to_t.get());
  EXPECT_EQ(s, VKATTN_SUCCESS) << vkattn_last_error();
  std::vector<float> out = download(to_t.get(), c.qdt);
  std::vector<float> lse = download(tl_t.get(), VKATTN_F32);

  // Reference.
  vkattn::ref::AttentionParams p;
  p.num_heads = c.H, p.num_kv_heads = c.Hkv, p.head_dim = c.d, p.head_dim_v = dv;
  p.scale = c.scale, p.causal = c.causal, p.window_left = c.window, p.softcap = c.softcap;
  p.window_right = c.window_right, p.chunk_size = c.chunk;
  if (!span_indptr.empty()) p.span_indptr = span_indptr.data(), p.spans = span_pairs.data();
  if (!c.tree_as_mask && !tree_indptr.empty())
    p.tree_indptr = tree_indptr.data(), p.tree_mask = tree_words.data();
  // (K = 0: lists of no entry, every row empty; the reference reads a
  // null list pointer as no lists at all.)
  static const int32_t kNoEntry = -1;
  if (!c.topk_as_mask && c.topk >= 0)
    p.topk = topk.empty() ? &kNoEntry : topk.data(), p.topk_k = c.topk,
    p.topk_per_head = c.topk_per_head;
  p.alibi_slopes = c.alibi ? slopes.data() : nullptr;
  p.sinks = c.sinks ? sinks.data() : nullptr;
  p.mask_type = c.mask_type;
  p.bool_mask = bmask.empty() ? nullptr : bmask.data();
  p.add_mask = amask.empty() ? nullptr : amask.data();
  p.key_valid = key_valid.empty() ? nullptr : key_valid.data();
  p.user_mask = c.host_mask, p.user_score = c.host_score;
  std::vector<float> ref_out(tq * c.H * dv), ref_lse(tq * c.H);
  vkattn::ref::attention_varlen(p, B, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(),
                                ref_out.data(), ref_lse.data());

  double vmax = 1.0;
  const double slack = f16_math_slack();
  for (float x : v)
    if (std::isfinite(x)) vmax = std::max<double>(vmax, std::fabs(x));
  int reported = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double r = ref_out[i], g = out[i];
    double tol =
        (c.qdt == VKATTN_F32 ? 0.0 : 0.5 * ulp_of(c.qdt, std::fabs(r))) + (3e-5 + slack) * vmax;
    double err = std::fabs(r - g);
    if (!(err <= tol)) {
      if (reported++ < 5)
        ADD_FAILURE() << "out[" << i << "] (row " << i / dv << ", col " << i % dv << ") = " << g
                      << ", reference " << r << ", tolerance " << tol;
      err = std::isnan(err) ? INFINITY : err;
    }
    st.max_err = std::max(st.max_err, err);
  }
  if (c.with_lse) {
    for (size_t i = 0; i < lse.size(); ++i) {
      double r = ref_lse[i], g = lse[i];
      if (r == -INFINITY) {
        ++st.hidden_rows;
        if (g != -INFINITY && reported++ < 10)
          ADD_FAILURE() << "lse[" << i << "] = " << g << ", expected -inf";
        continue;
      }
      const int h = static_cast<int>(i % c.H);
      if (c.sinks && std::isfinite(sinks[h]) && r == sinks[h]) ++st.sink_only_rows;
      double err = std::fabs(r - g);
      if (!(err <= (5e-5 + slack) * (1.0 + std::fabs(r)))) {
        if (reported++ < 10) ADD_FAILURE() << "lse[" << i << "] = " << g << ", reference " << r;
        err = INFINITY;
      }
      st.max_lse_err = std::max(st.max_lse_err, err);
    }
  }
  st.checked = static_cast<int64_t>(out.size());
  return st;
}

}  // namespace vkattn_test

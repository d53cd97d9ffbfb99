// Attention over the paged KV cache (B2): every step's output is checked
// against src/reference over the same tokens (cached + new), for mixed
// prefill/decode batches, chunked prefill, scrambled page orders, page sizes
// 1/5/16/64, GQA decode over long contexts, NaN in unused slots, per-layer
// windows and pools split over several buffers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "kv_model.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

using namespace vkattn_test;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// What one layer of a step computes.
struct LayerCfg {
  uint32_t H = 4;
  bool causal = true;
  int window = -1;
  int window_right = -1;
  uint32_t chunk = 0;
  float softcap = 0.0f;
  bool alibi = false;
  bool sinks = false;  // desc->sinks: head h's sink -1.5 + h (head 0's -inf: none)
  int mask_type = VKATTN_MASK_NONE;
  bool spans = false;  // pass the fixture's seq_spans (desc->span_indptr/spans)
  // Random speculative trees (desc->tree_indptr/tree_mask) on every
  // sequence of the step but its second (which runs without one).
  bool trees = false;
  // Top-k lists (desc->topk_indices) of this many entries a row (-1:
  // none; per kv head with topk_per_head): distinct random positions of
  // the row's sequence, a short list, a pad past u and a repeat.
  int topk = -1;
  bool topk_per_head = false;
};

// Caller pools of `num_pages` pages (pages no sequence lists hold NaN):
// sequence b has lens[b] keys in pages[b] and ts[b] query tokens.
struct PoolLayout {
  uint32_t ps, num_pages;
  std::vector<std::vector<int32_t>> pages;
  std::vector<int32_t> lens, ts;
};

class StepAttentionTest : public ContextTest {
 protected:
  void TearDown() override {
    if (cache) vkattn_kv_cache_destroy(cache);
    ContextTest::TearDown();
  }

  void create(const KvShape& s) {
    shape = s;
    vkattn_kv_cache_desc d = kv_cache_desc(s);
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    k_model.clear();
    v_model.clear();
    if (s.dtype == VKATTN_FP8_E4M3) {
      // Per kv head on even layers, per layer on odd ones: |values| <= 1
      // then use much of e4m3's range (and some saturate: 1 / 0.002 > 448).
      for (uint32_t l = 0; l < s.layers; ++l) {
        std::vector<float> ks(s.hkv), vs(s.hkv);
        for (uint32_t h = 0; h < s.hkv; ++h)
          ks[h] = 0.0022f + 0.001f * h, vs[h] = 0.004f + 0.003f * h;
        // (check_quantized knows these)
        const uint32_t n = l % 2 ? 1 : s.hkv;
        ASSERT_EQ(vkattn_kv_cache_set_scales(cache, l, n, ks.data(), vs.data()), VKATTN_SUCCESS)
            << vkattn_last_error();
      }
    }
  }

  bool cache8() const { return shape.dtype == VKATTN_I8 || shape.dtype == VKATTN_FP8_E4M3; }

  // Committed tokens [0, n) of one layer of an 8-bit cache, dequantized
  // from what vkattn_kv_cache_read and _read_scales return: [n, Hkv, d|dv].
  void read_dequantized(int64_t id, uint32_t layer, int32_t n, std::vector<float>* k,
                        std::vector<float>* v) {
    const uint32_t hkv = shape.hkv, d = shape.d, dv = shape.dv;
    std::vector<uint8_t> kb(size_t(n) * hkv * d), vb(size_t(n) * hkv * dv);
    std::vector<float> ks(size_t(n) * hkv), vs(size_t(n) * hkv);
    ASSERT_EQ(
        vkattn_kv_cache_read(cache, layer, id, 0, n, kb.data(), kb.size(), vb.data(), vb.size()),
        VKATTN_SUCCESS)
        << vkattn_last_error();
    ASSERT_EQ(vkattn_kv_cache_read_scales(cache, layer, id, 0, n, ks.data(), vs.data()),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    k->resize(kb.size());
    v->resize(vb.size());
    for (size_t i = 0; i < kb.size(); ++i) (*k)[i] = dequantize(shape.dtype, kb[i], ks[i / d]);
    for (size_t i = 0; i < vb.size(); ++i) (*v)[i] = dequantize(shape.dtype, vb[i], vs[i / dv]);
  }

  // An 8-bit cache's dequantized rows `got` against the f32 values `want`
  // that were appended ([rows, dim], rows of one (token, kv head)): int8
  // within half a code of the row's scale absmax / 127; fp8 within half an
  // e4m3 step (saturated at 448 x scale).
  void check_quantized(const std::vector<float>& got, const std::vector<float>& want, uint32_t dim,
                       uint32_t layer, bool is_v) {
    int bad = 0;
    for (size_t r = 0; r * dim < want.size() && bad < 3; ++r) {
      float amax = 0.0f;
      for (uint32_t e = 0; e < dim; ++e) amax = std::max(amax, std::fabs(want[r * dim + e]));
      for (uint32_t e = 0; e < dim; ++e) {
        const double x = want[r * dim + e], g = got[r * dim + e];
        const uint32_t h = static_cast<uint32_t>(r % shape.hkv), hs = layer % 2 ? 0 : h;
        const float sc = is_v ? 0.004f + 0.003f * hs : 0.0022f + 0.001f * hs;  // create()'s
        double w = x;
        const double tol = quantized_tolerance(shape.dtype, x, amax, sc, &w);
        if (!(std::fabs(g - w) <= tol)) {
          ++bad;
          ADD_FAILURE() << (is_v ? "V" : "K") << " row " << r << " elem " << e << " layer " << layer
                        << ": dequantized " << g << ", appended " << x << " (tol " << tol << ")";
          break;
        }
      }
    }
  }

  std::vector<float> random_vec(size_t n, vkattn_dtype dt) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (float& e : x) e = round_to(dt, u(rng));
    return x;
  }

  // Values of the new tokens depend only on (sequence, position, layer,
  // kind), so chunked and one-shot prefill see the same data.
  std::vector<float> token_rows(int kind, const std::vector<int64_t>& ids,
                                const std::vector<int32_t>& len, const std::vector<int32_t>& t,
                                uint32_t layer, size_t width, vkattn_dtype dt) {
    std::vector<float> x;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t b = 0; b < ids.size(); ++b)
      for (int32_t i = 0; i < t[b]; ++i) {
        std::mt19937 g(
            static_cast<uint32_t>(ids[b] * 1000003 + (len[b] + i) * 131 + layer * 7 + kind));
        for (size_t e = 0; e < width; ++e) x.push_back(round_to(dt, u(g)));
      }
    return x;
  }

  void upload(vkattn_tensor* t, vkattn_dtype dt, const std::vector<float>& x) {
    auto b = encode_bytes(dt, x);
    ASSERT_EQ(vkattn_tensor_write(t, b.data(), b.size()), VKATTN_SUCCESS);
  }

  // Commits t NaN tokens to every layer of sequence `id`.
  void append_nan(int64_t id, int32_t t) {
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &t, &st), VKATTN_SUCCESS) << vkattn_last_error();
    vkattn_tensor* k = tensor(VKATTN_F32, {t, shape.hkv, shape.d});
    vkattn_tensor* v = tensor(VKATTN_F32, {t, shape.hkv, shape.dv});
    upload(k, VKATTN_F32, std::vector<float>(size_t(t) * shape.hkv * shape.d, kNaN));
    upload(v, VKATTN_F32, std::vector<float>(size_t(t) * shape.hkv * shape.dv, kNaN));
    for (uint32_t l = 0; l < shape.layers; ++l) ASSERT_EQ(vkattn_step_append(st, l, k, v), 0);
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  }

  // Fills every page with NaN (a sequence that takes the whole pool, removed again).
  void poison_pool() {
    uint32_t free = 0;
    ASSERT_EQ(vkattn_kv_cache_num_free_pages(cache, &free), VKATTN_SUCCESS);
    append_nan(-999, static_cast<int32_t>(free * shape.page_size));
    ASSERT_EQ(vkattn_kv_cache_remove(cache, -999), VKATTN_SUCCESS);
  }

  // One step over `ids` with t new tokens each: appends and attends every
  // layer (cfg[l % cfg.size()]), checks each layer against the reference,
  // then commits (or aborts). Returns the outputs of the last layer.
  std::vector<float> run_step(const std::vector<int64_t>& ids, const std::vector<int32_t>& t,
                              const std::vector<LayerCfg>& cfg, vkattn_dtype qdt,
                              bool commit = true, bool attend = true) {
    const size_t B = ids.size();
    vkattn_step* st = nullptr;
    EXPECT_EQ(vkattn_step_begin(cache, static_cast<uint32_t>(B), ids.data(), t.data(), &st),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    if (!st) return {};
    std::vector<int32_t> len(B), cu_q(B + 1, 0), cu_k(B + 1, 0);
    for (size_t b = 0; b < B; ++b) {
      EXPECT_EQ(vkattn_kv_cache_length(cache, ids[b], &len[b]), VKATTN_SUCCESS);
      cu_q[b + 1] = cu_q[b] + t[b];
      cu_k[b + 1] = cu_k[b] + len[b] + t[b];
    }
    const int64_t n = cu_q[B];
    const uint32_t hkv = shape.hkv, d = shape.d, dv = shape.dv;
    std::vector<std::vector<float>> new_k(shape.layers), new_v(shape.layers);
    vkattn_tensor* kt = tensor(VKATTN_F32, {n, hkv, d});
    vkattn_tensor* vt = tensor(VKATTN_F32, {n, hkv, dv});
    std::vector<float> last_out;
    std::vector<std::function<void(const std::vector<float>&, const std::vector<float>&)>> deferred;
    EXPECT_TRUE(commit || !cache8()) << "8-bit caches are checked after the commit";
    for (uint32_t l = 0; l < shape.layers; ++l) {
      const LayerCfg& c = cfg[l % cfg.size()];
      // New K/V as f32 values; the cache holds them rounded to its dtype.
      new_k[l] = token_rows(0, ids, len, t, l, hkv * d, VKATTN_F32);
      new_v[l] = token_rows(1, ids, len, t, l, hkv * dv, VKATTN_F32);
      upload(kt, VKATTN_F32, new_k[l]);
      upload(vt, VKATTN_F32, new_v[l]);
      for (float& x : new_k[l]) x = round_to(shape.dtype, x);
      for (float& x : new_v[l]) x = round_to(shape.dtype, x);
      EXPECT_EQ(vkattn_step_append(st, l, kt, vt), VKATTN_SUCCESS) << vkattn_last_error();
      if (!attend) continue;

      // Keys of the reference: cached + new, per sequence.
      std::vector<float> rk, rv;
      for (size_t b = 0; b < B; ++b) {
        auto& mk = k_model[ids[b]];
        auto& mv = v_model[ids[b]];
        if (mk.empty()) mk.resize(shape.layers), mv.resize(shape.layers);
        rk.insert(rk.end(), mk[l].begin(), mk[l].begin() + size_t(len[b]) * hkv * d);
        rv.insert(rv.end(), mv[l].begin(), mv[l].begin() + size_t(len[b]) * hkv * dv);
        rk.insert(rk.end(), new_k[l].begin() + size_t(cu_q[b]) * hkv * d,
                  new_k[l].begin() + size_t(cu_q[b + 1]) * hkv * d);
        rv.insert(rv.end(), new_v[l].begin() + size_t(cu_q[b]) * hkv * dv,
                  new_v[l].begin() + size_t(cu_q[b + 1]) * hkv * dv);
      }
      std::vector<float> q = token_rows(2, ids, len, t, l, c.H * d, qdt);
      vkattn_tensor* qt = tensor(qdt, {n, c.H, d});
      vkattn_tensor* ot = tensor(qdt, {n, c.H, dv});
      vkattn_tensor* lt = tensor(VKATTN_F32, {n, c.H});
      upload(qt, qdt, q);
      upload(ot, qdt, std::vector<float>(n * c.H * dv, kNaN));
      upload(lt, VKATTN_F32, std::vector<float>(n * c.H, kNaN));
      vkattn_attention_desc desc;
      vkattn_attention_desc_init(&desc);
      desc.num_heads = c.H;
      desc.num_kv_heads = hkv;
      desc.head_dim = d;
      desc.head_dim_v = dv;
      desc.causal = c.causal;
      desc.window_left = c.window;
      desc.window_right = c.window_right;
      desc.chunk_size = c.chunk;
      desc.softcap = c.softcap;
      desc.lse = lt;
      std::vector<int32_t> span_indptr, span_pairs;
      if (c.spans) {
        span_indptr.push_back(0);
        for (size_t b = 0; b < B; ++b) {
          for (auto [lo, hi] : seq_spans[ids[b]])
            if (hi <= len[b] + t[b]) span_pairs.push_back(lo), span_pairs.push_back(hi);
          span_indptr.push_back(int32_t(span_pairs.size() / 2));
        }
        desc.span_indptr = span_indptr.data(), desc.spans = span_pairs.data();
      }
      std::vector<int32_t> tree_indptr;
      std::vector<uint32_t> tree_words;
      if (c.trees) {
        tree_indptr.push_back(0);
        for (size_t b = 0; b < B; ++b) {
          const int32_t tb = t[b], w = (tb + 31) / 32;
          const size_t base = tree_words.size();
          if (b != 1) {
            tree_words.resize(base + size_t(tb) * w, 0u);
            for (int32_t i = 0; i < tb; ++i) {
              uint32_t* row = &tree_words[base + size_t(i) * w];
              if (i > 0)
                for (int32_t x = 0, par = int32_t(rng() % uint32_t(i)); x < w; ++x)
                  row[x] = tree_words[base + size_t(par) * w + x];
              row[i / 32] |= 1u << (i % 32);
            }
          }
          tree_indptr.push_back(int32_t(tree_words.size()));
        }
        desc.tree_indptr = tree_indptr.data(), desc.tree_mask = tree_words.data();
      }
      std::vector<int32_t> topk;
      if (c.topk >= 0) {
        const int lists = c.topk_per_head ? int(hkv) : 1;
        topk.assign(size_t(n) * lists * c.topk, -1);
        for (size_t b = 0; b < B; ++b) {
          const int32_t u = len[b] + t[b];
          for (int32_t i = 0; i < t[b]; ++i)
            for (int h = 0; h < lists; ++h) {
              int32_t* row = &topk[(size_t(cu_q[b] + i) * lists + h) * c.topk];
              const int32_t m = std::min<int32_t>(c.topk, u) - (i % 3 == 1 ? 1 : 0);
              for (int32_t x = 0; x < m; ++x)  // distinct: a stride prime to u
                row[x] = int32_t((uint64_t(x) * 7919 + uint64_t(i) + h) % u);
              if (c.topk >= 3 && i % 2 == 0) row[c.topk - 1] = u, row[c.topk - 2] = row[0];
            }
        }
        std::vector<int64_t> ts = {n, int64_t(c.topk)};
        if (c.topk_per_head) ts = {n, int64_t(hkv), int64_t(c.topk)};
        vkattn_tensor* tt = tensor(VKATTN_I32, ts);
        EXPECT_EQ(vkattn_tensor_write(tt, topk.data(), topk.size() * 4), VKATTN_SUCCESS);
        desc.topk_indices = tt;
      }
      vkattn::ref::AttentionParams p;
      p.num_heads = c.H;
      p.num_kv_heads = hkv;
      p.head_dim = d;
      p.head_dim_v = dv;
      p.causal = c.causal;
      p.window_left = c.window;
      p.window_right = c.window_right;
      p.chunk_size = c.chunk;
      p.softcap = c.softcap;
      std::vector<float> slopes;
      if (c.alibi) {
        for (uint32_t h = 0; h < c.H; ++h) slopes.push_back(std::exp2(-8.0f * (h + 1) / c.H));
        vkattn_tensor* at = tensor(VKATTN_F32, {c.H});
        upload(at, VKATTN_F32, slopes);
        desc.alibi_slopes = at;
        p.alibi_slopes = slopes.data();
      }
      std::vector<float> sinks;
      if (c.sinks) {
        for (uint32_t h = 0; h < c.H; ++h) sinks.push_back(h == 0 ? -kInf : -1.5f + h);
        vkattn_tensor* sk = tensor(VKATTN_F32, {c.H});
        upload(sk, VKATTN_F32, sinks);
        desc.sinks = sk;
        p.sinks = sinks.data();
      }
      std::vector<float> amask;
      if (c.mask_type == VKATTN_MASK_ADDITIVE) {
        int64_t elems = 0;
        for (size_t b = 0; b < B; ++b) elems += int64_t(t[b]) * (len[b] + t[b]);
        amask.resize(elems);
        for (float& x : amask)
          x = rng() % 4 == 0 ? -kInf : round_to(VKATTN_F32, float(rng() % 7) / 4 - 1);
        vkattn_tensor* mt = tensor(VKATTN_F32, {elems});
        upload(mt, VKATTN_F32, amask);
        desc.mask_type = VKATTN_MASK_ADDITIVE;
        desc.mask = mt;
        p.mask_type = VKATTN_MASK_ADDITIVE;
        p.add_mask = amask.data();
      }
      EXPECT_EQ(vkattn_step_attention(st, l, &desc, qt, ot), VKATTN_SUCCESS) << vkattn_last_error();
      std::vector<uint8_t> ob(vkattn_tensor_nbytes(ot)), lb(vkattn_tensor_nbytes(lt));
      EXPECT_EQ(vkattn_tensor_read(ot, ob.data(), ob.size()), VKATTN_SUCCESS);
      EXPECT_EQ(vkattn_tensor_read(lt, lb.data(), lb.size()), VKATTN_SUCCESS);
      std::vector<float> out = decode_bytes(qdt, ob), lse = decode_bytes(VKATTN_F32, lb);
      last_out = out;
      // The reference over keys rk / rv (the vectors p points into are
      // copied with the check: an 8-bit cache's run after the commit).
      auto check = [=, this](const std::vector<float>& keys, const std::vector<float>& vals) {
        vkattn::ref::AttentionParams pp = p;
        pp.alibi_slopes = slopes.empty() ? nullptr : slopes.data();
        pp.sinks = sinks.empty() ? nullptr : sinks.data();
        pp.add_mask = amask.empty() ? nullptr : amask.data();
        pp.span_indptr = span_indptr.empty() ? nullptr : span_indptr.data();
        pp.spans = span_indptr.empty() ? nullptr : span_pairs.data();
        pp.tree_indptr = tree_indptr.empty() ? nullptr : tree_indptr.data();
        pp.tree_mask = tree_indptr.empty() ? nullptr : tree_words.data();
        // (K = 0: lists of no entry; a null pointer would mean no lists.)
        static const int32_t kNoEntry = -1;
        pp.topk = c.topk < 0 ? nullptr : topk.empty() ? &kNoEntry : topk.data();
        pp.topk_k = c.topk, pp.topk_per_head = c.topk_per_head;
        std::vector<float> ref_out(n * c.H * dv), ref_lse(n * c.H);
        vkattn::ref::attention_varlen(pp, static_cast<int>(B), cu_q.data(), cu_k.data(), q.data(),
                                      keys.data(), vals.data(), ref_out.data(), ref_lse.data());
        compare(out, lse, ref_out, ref_lse, qdt, l);
      };
      if (cache8())
        deferred.push_back(check);  // keys are known once the cache can be read
      else
        check(rk, rv);
    }
    if (commit) {
      EXPECT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
      if (cache8()) {
        // What the cache holds, dequantized: the new tokens against what was
        // appended, then the deferred checks' reference over all of it.
        for (uint32_t l = 0; l < shape.layers; ++l) {
          std::vector<float> rk, rv;
          for (size_t b = 0; b < B; ++b) {
            std::vector<float> k, v;
            read_dequantized(ids[b], l, len[b] + t[b], &k, &v);
            const size_t k0 = size_t(len[b]) * hkv * d, v0 = size_t(len[b]) * hkv * dv;
            check_quantized(std::vector<float>(k.begin() + k0, k.end()),
                            std::vector<float>(new_k[l].begin() + size_t(cu_q[b]) * hkv * d,
                                               new_k[l].begin() + size_t(cu_q[b + 1]) * hkv * d),
                            d, l, false);
            check_quantized(std::vector<float>(v.begin() + v0, v.end()),
                            std::vector<float>(new_v[l].begin() + size_t(cu_q[b]) * hkv * dv,
                                               new_v[l].begin() + size_t(cu_q[b + 1]) * hkv * dv),
                            dv, l, true);
            rk.insert(rk.end(), k.begin(), k.end());
            rv.insert(rv.end(), v.begin(), v.end());
          }
          if (attend) deferred[l](rk, rv);
        }
      }
      for (size_t b = 0; b < B; ++b) {
        auto& mk = k_model[ids[b]];
        auto& mv = v_model[ids[b]];
        if (mk.empty()) mk.resize(shape.layers), mv.resize(shape.layers);
        for (uint32_t l = 0; l < shape.layers; ++l) {
          mk[l].resize(size_t(len[b]) * hkv * d);
          mv[l].resize(size_t(len[b]) * hkv * dv);
          mk[l].insert(mk[l].end(), new_k[l].begin() + size_t(cu_q[b]) * hkv * d,
                       new_k[l].begin() + size_t(cu_q[b + 1]) * hkv * d);
          mv[l].insert(mv[l].end(), new_v[l].begin() + size_t(cu_q[b]) * hkv * dv,
                       new_v[l].begin() + size_t(cu_q[b + 1]) * hkv * dv);
        }
      }
    } else {
      vkattn_step_abort(st);
    }
    return last_out;
  }

  // Tolerances of tests/attention_case.h.
  void compare(const std::vector<float>& out, const std::vector<float>& lse,
               const std::vector<float>& ref_out, const std::vector<float>& ref_lse,
               vkattn_dtype qdt, uint32_t layer) {
    const size_t rows = ref_lse.size(), dv = rows ? ref_out.size() / rows : 0;
    const double slack = f16_math_slack();
    int bad = 0;
    for (size_t r = 0; r < rows && bad < 5; ++r) {
      if (std::isinf(ref_lse[r])) {
        if (!(std::isinf(lse[r]) && lse[r] < 0))
          ++bad, ADD_FAILURE() << "row " << r << " layer " << layer << ": lse " << lse[r]
                               << ", want -inf";
      } else if (!(std::fabs(lse[r] - ref_lse[r]) <=
                   (5e-5 + slack) * (1 + std::fabs(ref_lse[r])))) {
        ++bad, ADD_FAILURE() << "row " << r << " layer " << layer << ": lse " << lse[r] << ", want "
                             << ref_lse[r];
      }
      double vmax = 1.0;  // the row's largest |output|, standing for its |v|
      for (size_t e = 0; e < dv; ++e) vmax = std::max<double>(vmax, std::fabs(ref_out[r * dv + e]));
      for (size_t e = 0; e < dv; ++e) {
        double want = ref_out[r * dv + e], got = out[r * dv + e];
        double tol = 0.5 * ulp_of(qdt, want) + 3e-5 + slack * vmax;
        if (!(std::fabs(got - want) <= tol)) {
          ++bad;
          ADD_FAILURE() << "row " << r << " elem " << e << " layer " << layer << ": " << got
                        << ", want " << want;
          break;
        }
      }
    }
  }

  void fork(int64_t src, int64_t dst) {
    ASSERT_EQ(vkattn_kv_cache_fork(cache, src, dst), VKATTN_SUCCESS);
    k_model[dst] = k_model[src];
    v_model[dst] = v_model[src];
  }
  void remove(int64_t id) {
    ASSERT_EQ(vkattn_kv_cache_remove(cache, id), VKATTN_SUCCESS);
    k_model.erase(id);
    v_model.erase(id);
  }

  // Replaces the cache and the context (its tensors first) with a fresh
  // context under VKATTN_CASCADE=`cascade` ("": unset), its kernel log on;
  // the old one must have stayed quiet.
  void restart_context(const char* cascade) {
    if (cache) vkattn_kv_cache_destroy(cache), cache = nullptr;
    owned.clear();
    ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
    EXPECT_EQ(validation_messages(ctx), 0u);
    vkattn_context_destroy(ctx);
    {
      ScopedEnv env({{"VKATTN_CASCADE", cascade}, {"VKATTN_LOG", "kernels"}});
      ctx = make_context();
    }
    ASSERT_NE(ctx, nullptr);
  }
  // restart_context, then a cache of shape s with NaN in every slot that
  // holds no token, and empty models.
  void fresh_cache(const char* cascade, const KvShape& s) {
    ASSERT_NO_FATAL_FAILURE(restart_context(cascade));
    create(s);
    poison_pool();
    k_model.clear(), v_model.clear();
  }
  // run_step and what the step's calls printed (their kernel log).
  std::vector<float> logged_step(const std::vector<int64_t>& ids, const std::vector<int32_t>& t,
                                 const std::vector<LayerCfg>& cfg, std::string* log) {
    testing::internal::CaptureStderr();
    std::vector<float> out = run_step(ids, t, cfg, VKATTN_F32);
    *log = testing::internal::GetCapturedStderr();
    return out;
  }
  // How many times `text` occurs in log.
  static size_t occurrences(const std::string& log, const std::string& text) {
    size_t n = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  }

  struct Config {
    uint32_t H;
    vkattn_dtype dt;
  };
  // CascadeOverForks (below) with H query heads over a cache of dtype
  // dt: every step for f16, the decode step for the others.
  void cascade_over_forks(Config cf) {
    SCOPED_TRACE(testing::Message() << "H " << cf.H << " dtype " << cf.dt);
    KvShape s;
    s.layers = 2;
    s.hkv = 2;
    s.d = 24;
    s.dv = 20;
    s.page_size = 16;
    s.pages = 160;
    s.dtype = cf.dt;
    std::vector<LayerCfg> cfg(2);
    cfg[0].H = cfg[1].H = cf.H;
    cfg[1].softcap = 30.0f, cfg[1].sinks = true;
    const std::vector<int64_t> decodes = {1,  2,  3,  4,  5,  6,  7,   8,  9, 10,
                                          11, 12, 13, 14, 15, 16, 100, 50, 51};
    struct Run {
      std::vector<std::vector<float>> outs;  // per step: the last layer's
      std::vector<std::string> logs;         // per step
    };
    auto scenario = [&](const char* cascade, Run* r) {
      ASSERT_NO_FATAL_FAILURE(fresh_cache(cascade, s));
      run_step({1, 50, 100}, {300, 290, 270}, cfg, VKATTN_F32);
      for (int64_t id = 2; id <= 16; ++id) fork(1, id);
      fork(50, 51);
      auto step = [&](const std::vector<int64_t>& ids, const std::vector<int32_t>& t) {
        r->logs.emplace_back();
        r->outs.push_back(logged_step(ids, t, cfg, &r->logs.back()));
      };
      step(decodes, std::vector<int32_t>(decodes.size(), 1));
      if (cf.dt != VKATTN_F16) return;  // (the other dtypes: the decode step)
      step({2, 3, 50, 51, 100}, {5, 1, 9, 1, 1});
      step({1, 100, 2}, {1, 1, 1});
      // Fork 3 truncated to 100 tokens: 6 pages still shared with 1 and 2.
      ASSERT_EQ(vkattn_kv_cache_truncate(cache, 3, 100), VKATTN_SUCCESS) << vkattn_last_error();
      for (uint32_t l = 0; l < s.layers; ++l) {
        k_model[3][l].resize(size_t(100) * s.hkv * s.d);
        v_model[3][l].resize(size_t(100) * s.hkv * s.dv);
      }
      step({1, 2, 3}, {1, 1, 1});
    };
    Run off, on;
    {
      SCOPED_TRACE("VKATTN_CASCADE=0");
      scenario("0", &off);
    }
    {
      SCOPED_TRACE("VKATTN_CASCADE unset");
      scenario("", &on);
    }
    const size_t steps = cf.dt == VKATTN_F16 ? 4 : 1;
    ASSERT_EQ(off.outs.size(), steps);
    ASSERT_EQ(on.outs.size(), steps);
    auto sum = [](const std::vector<uint64_t>& x) {
      uint64_t n = 0;
      for (uint64_t v : x) n += v;
      return n;
    };
    const std::string kLine = "vkattn: attention cascade groups=";
    for (size_t i = 0; i < steps; ++i) {
      SCOPED_TRACE(testing::Message() << "step " << i);
      // Results: the two runs within f32 rounding (f16 math: its slack).
      ASSERT_EQ(on.outs[i].size(), off.outs[i].size());
      const double tol = 2e-5 + f16_math_slack();
      for (size_t e = 0; e < on.outs[i].size(); ++e)
        ASSERT_NEAR(on.outs[i][e], off.outs[i][e], tol) << "element " << e;
      EXPECT_EQ(off.logs[i].find(kLine), std::string::npos) << off.logs[i];
    }
    // Counts the cascade lines of a log that announce `what`.
    auto lines = [&](const std::string& log, const std::string& what) {
      return occurrences(log, kLine + what);
    };
    // Step 0: two groups (18 pages of 16 keys each), a loner between them;
    // step 1: the same groups with prefill chunks on members. Each layer
    // logs its cascade.
    for (size_t i = 0; i < std::min<size_t>(steps, 2); ++i)
      EXPECT_EQ(lines(on.logs[i], "2 shared_keys=576\n"), s.layers) << on.logs[i];
    // Step 0 reads the shared pages once per prefix tile instead of once
    // per sequence: without cascade, each of the 19 sequences reads its own
    // keys (301, 291 or 271) for each kv head and layer. (Forced families
    // read it once per tile of theirs: tiled's and decode's tiles on
    // lavapipe hold 8 and 4 rows, the default lanes' 32 or more.)
    const uint64_t reads_off = sum(kernel_log_field(off.logs[0], "kv_reads"));
    EXPECT_EQ(reads_off, uint64_t(16 * 301 + 271 + 2 * 291) * s.hkv * s.layers) << off.logs[0];
    const uint64_t reads_on = sum(kernel_log_field(on.logs[0], "kv_reads"));
    const char* forced = std::getenv("VKATTN_ATTN_KERNEL");
    EXPECT_LT(reads_on * (forced && *forced ? 1 : 4), reads_off) << on.logs[0];
    if (steps < 4) return;
    // Step 2: sharers 1 and 2 with a loner between them form no group.
    EXPECT_EQ(on.logs[2].find(kLine), std::string::npos) << on.logs[2];
    // Step 3: 1 and 2 share 18 pages, 3 only 6 (96 keys, below the default
    // threshold): one group of two.
    EXPECT_EQ(lines(on.logs[3], "1 shared_keys=288\n"), s.layers) << on.logs[3];
  }

  KvShape shape;
  vkattn_kv_cache* cache = nullptr;
  std::map<int64_t, std::vector<std::vector<float>>> k_model, v_model;  // per seq, per layer
  // Bidirectional spans per sequence id, positions over the whole sequence;
  // a step passes those that end within its keys (len + t).
  std::map<int64_t, std::vector<std::pair<int32_t, int32_t>>> seq_spans;
  // vkattn_attention_paged over `L` (H 4 over 2 kv heads, d 16 / dv 12,
  // f32) under VKATTN_CASCADE=`cascade` (nullptr: unset), against the
  // reference over each sequence's keys gathered from its pages; returns
  // the kernel log.
  std::string pool_call_vs_reference(const PoolLayout& L, bool causal, const char* cascade) {
    const uint32_t ps = L.ps, hkv = 2, H = 4, d = 16, dv = 12, num_pages = L.num_pages;
    const size_t B = L.lens.size();
    std::vector<int32_t> indptr(1, 0), indices, cu_q(1, 0), cu_k(1, 0);
    for (size_t b = 0; b < B; ++b) {
      indices.insert(indices.end(), L.pages[b].begin(), L.pages[b].end());
      indptr.push_back(int32_t(indices.size()));
      cu_q.push_back(cu_q.back() + L.ts[b]);
      cu_k.push_back(cu_k.back() + L.lens[b]);
    }
    std::vector<bool> used(num_pages, false);
    for (int32_t p : indices) used[p] = true;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> kp(size_t(num_pages) * ps * hkv * d), vp(size_t(num_pages) * ps * hkv * dv);
    for (size_t i = 0; i < kp.size(); ++i) kp[i] = used[i / (ps * hkv * d)] ? u(rng) : kNaN;
    for (size_t i = 0; i < vp.size(); ++i) vp[i] = used[i / (ps * hkv * dv)] ? u(rng) : kNaN;
    const int64_t n = cu_q.back();
    std::vector<float> q(size_t(n) * H * d);
    for (float& x : q) x = u(rng);
    std::vector<float> rk, rv;
    for (size_t b = 0; b < B; ++b)
      for (int32_t j = 0; j < L.lens[b]; ++j) {
        const size_t row = size_t(L.pages[b][j / ps]) * ps + j % ps;
        rk.insert(rk.end(), kp.begin() + row * hkv * d, kp.begin() + (row + 1) * hkv * d);
        rv.insert(rv.end(), vp.begin() + row * hkv * dv, vp.begin() + (row + 1) * hkv * dv);
      }
    vkattn::ref::AttentionParams p;
    p.num_heads = H, p.num_kv_heads = hkv, p.head_dim = d, p.head_dim_v = dv, p.causal = causal;
    std::vector<float> ref_out(size_t(n) * H * dv), ref_lse(size_t(n) * H);
    vkattn::ref::attention_varlen(p, int(B), cu_q.data(), cu_k.data(), q.data(), rk.data(),
                                  rv.data(), ref_out.data(), ref_lse.data());
    ScopedEnv env({{"VKATTN_CASCADE", cascade ? cascade : ""}, {"VKATTN_LOG", "kernels"}});
    ForcedContext fc;
    EXPECT_NE(fc.ctx, nullptr);
    if (!fc.ctx) return "";
    auto make = [&](std::vector<int64_t> shape) {
      vkattn_tensor* t = nullptr;
      EXPECT_EQ(vkattn_tensor_create(fc.ctx, VKATTN_F32, uint32_t(shape.size()), shape.data(), &t),
                VKATTN_SUCCESS);
      return std::unique_ptr<vkattn_tensor, void (*)(vkattn_tensor*)>(t, &vkattn_tensor_destroy);
    };
    auto kt = make({num_pages, ps, hkv, d});
    auto vt = make({num_pages, ps, hkv, dv});
    auto qt = make({n, H, d});
    auto ot = make({n, H, dv});
    auto lt = make({n, H});
    EXPECT_EQ(vkattn_tensor_write(kt.get(), kp.data(), kp.size() * 4), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(vt.get(), vp.data(), vp.size() * 4), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_write(qt.get(), q.data(), q.size() * 4), VKATTN_SUCCESS);
    vkattn_attention_desc desc;
    vkattn_attention_desc_init(&desc);
    desc.num_heads = H, desc.num_kv_heads = hkv, desc.head_dim = d, desc.head_dim_v = dv;
    desc.causal = causal ? 1 : 0;
    desc.lse = lt.get();
    testing::internal::CaptureStderr();
    const vkattn_status st = vkattn_attention_paged(fc.ctx, &desc, uint32_t(B), cu_q.data(),
                                                    L.lens.data(), indptr.data(), indices.data(),
                                                    ps, qt.get(), kt.get(), vt.get(), ot.get());
    std::vector<float> out(size_t(n) * H * dv), lse(size_t(n) * H);
    if (st == VKATTN_SUCCESS && n > 0) {
      EXPECT_EQ(vkattn_tensor_read(ot.get(), out.data(), out.size() * 4), VKATTN_SUCCESS);
      EXPECT_EQ(vkattn_tensor_read(lt.get(), lse.data(), lse.size() * 4), VKATTN_SUCCESS);
    }
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(st, VKATTN_SUCCESS) << vkattn_last_error();
    if (st == VKATTN_SUCCESS) compare(out, lse, ref_out, ref_lse, VKATTN_F32, 0);
    return log;
  }

  std::mt19937 rng{42};
};

}  // namespace

// A mixed batch (prefill chunks and decodes) over page sizes 1, 5, 16, 64,
// after fork/remove have scrambled the page order, with NaN in every slot
// that holds no token.
TEST_F(StepAttentionTest, MixedBatchesOverPageSizes) {
  for (uint32_t ps : {1u, 5u, 16u, 64u}) {
    SCOPED_TRACE(testing::Message() << "page_size " << ps);
    if (cache) vkattn_kv_cache_destroy(cache);
    KvShape s;
    s.layers = 2;
    s.hkv = 2;
    s.d = 16;
    s.dv = 16;
    s.page_size = ps;
    s.pages = 600 / ps + 24;
    s.dtype = ps == 5 ? VKATTN_BF16 : VKATTN_F16;
    create(s);
    poison_pool();
    std::vector<LayerCfg> cfg(1);
    run_step({1, 2, 3}, {37, 5, 64}, cfg, VKATTN_F32);
    fork(2, 4);
    remove(1);  // frees pages in the middle of the pool
    run_step({5, 2, 4, 3}, {20, 1, 1, 1}, cfg, VKATTN_F32);  // new prompt + decodes
    run_step({4, 6, 2}, {9, 3, 2}, cfg, VKATTN_F16);
    run_step({3, 5}, {1, 1}, cfg, VKATTN_BF16);
  }
}

// MLA-sized heads (DeepSeek: d 576, dv 512, one kv head for all query
// heads) and d 320 / dv 256 in the cache: prefill chunks and decodes.
TEST_F(StepAttentionTest, LargeHeadDims) {
  for (auto [d, dv] : {std::pair<uint32_t, uint32_t>{576, 512}, {320, 256}}) {
    SCOPED_TRACE(testing::Message() << "d " << d << " dv " << dv);
    if (cache) vkattn_kv_cache_destroy(cache);
    KvShape s;
    s.layers = 1;
    s.hkv = 1;
    s.d = d;
    s.dv = dv;
    s.page_size = 16;
    s.pages = 24;
    s.dtype = d == 576 ? VKATTN_F16 : VKATTN_BF16;
    create(s);
    poison_pool();
    std::vector<LayerCfg> cfg(1);
    cfg[0].H = 8;
    cfg[0].sinks = d == 576;
    run_step({1, 2}, {37, 5}, cfg, VKATTN_F16);
    if (d == 576) run_step({2, 1, 3}, {1, 1, 19}, cfg, VKATTN_F16);
  }
}

// A mixed batch gives each sequence what it gets when run alone (device
// against device, same tokens: values depend only on sequence and position).
TEST_F(StepAttentionTest, MixedBatchEqualsEachAlone) {
  KvShape s;
  s.layers = 1;
  s.hkv = 2;
  s.d = 32;
  s.dv = 32;
  s.page_size = 16;
  s.pages = 64;
  std::vector<LayerCfg> cfg(1);
  cfg[0].H = 8;
  const std::vector<int64_t> ids = {1, 2, 3};
  const std::vector<int32_t> prefill = {300, 50, 7}, step = {1, 20, 1};
  create(s);
  run_step(ids, prefill, cfg, VKATTN_F32);
  std::vector<float> mixed = run_step(ids, step, cfg, VKATTN_F32);
  size_t row = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    vkattn_kv_cache_destroy(cache);
    create(s);
    run_step({ids[i]}, {prefill[i]}, cfg, VKATTN_F32);
    std::vector<float> alone = run_step({ids[i]}, {step[i]}, cfg, VKATTN_F32);
    ASSERT_EQ(alone.size(), size_t(step[i]) * cfg[0].H * s.dv);
    double worst = 0;
    for (size_t e = 0; e < alone.size(); ++e)
      worst = std::max(worst, double(std::fabs(alone[e] - mixed[row + e])));
    EXPECT_LT(worst, 2e-5) << "sequence " << ids[i];
    row += alone.size();
  }
}

// Chunked prefill of one prompt equals one-shot prefill (both are checked
// against the reference, and against each other), for chunk sizes that do
// and do not divide the prompt and the page size.
TEST_F(StepAttentionTest, ChunkedPrefillEqualsOneShot) {
  KvShape s;
  s.layers = 1;
  s.hkv = 2;
  s.d = 32;
  s.dv = 32;
  s.page_size = 16;
  s.pages = 64;
  s.dtype = VKATTN_F16;
  const int prompt = 300;
  std::vector<float> one_shot;
  for (int chunk : {300, 64, 73, 128, 37}) {
    SCOPED_TRACE(testing::Message() << "chunk " << chunk);
    if (cache) vkattn_kv_cache_destroy(cache);
    create(s);
    std::vector<LayerCfg> cfg(1);
    cfg[0].H = 8;  // GQA 4:1
    std::vector<float> out;
    for (int done = 0; done < prompt; done += chunk) {
      auto o = run_step({1}, {std::min(chunk, prompt - done)}, cfg, VKATTN_F32);
      out.insert(out.end(), o.begin(), o.end());
    }
    int32_t len = 0;
    ASSERT_EQ(vkattn_kv_cache_length(cache, 1, &len), VKATTN_SUCCESS);
    EXPECT_EQ(len, prompt);
    if (chunk == prompt) {
      one_shot = out;
      continue;
    }
    ASSERT_EQ(out.size(), one_shot.size());
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i)
      worst = std::max(worst, double(std::fabs(out[i] - one_shot[i])));
    EXPECT_LT(worst, 2e-5 + f16_math_slack()) << "largest difference to one-shot prefill";
  }
}

// GQA 8:1 decode of 16 sequences with lengths from 1 to 4096 in one step
// (split-KV with a combine pass), f16 cache, d = 128.
TEST_F(StepAttentionTest, GqaDecodeOverLongContexts) {
  KvShape s;
  s.layers = 1;
  s.hkv = 2;
  s.d = 128;
  s.dv = 128;
  s.page_size = 16;
  s.dtype = VKATTN_F16;
  const std::vector<int32_t> lens = {1,   2,   7,    16,   17,   100,  255,  256,
                                     511, 777, 1000, 1024, 2047, 2500, 3333, 4095};
  int64_t pages = 0;
  for (int32_t l : lens) pages += (l + 1 + 15) / 16;
  s.pages = static_cast<uint32_t>(pages + 8);
  create(s);
  std::vector<int64_t> ids;
  for (size_t i = 0; i < lens.size(); ++i) ids.push_back(100 + i);
  std::vector<LayerCfg> cfg(1);
  cfg[0].H = 16;
  run_step(ids, lens, cfg, VKATTN_F32, true, /*attend=*/false);  // fill the cache only
  run_step(ids, std::vector<int32_t>(ids.size(), 1), cfg, VKATTN_F32);
  run_step(ids, std::vector<int32_t>(ids.size(), 1), cfg, VKATTN_F16);
}

// Decode over more than 100000 cached tokens is exact (lavapipe's loop cap).
TEST_F(StepAttentionTest, DecodeOverHundredThousandTokens) {
  KvShape s;
  s.layers = 1;
  s.hkv = 1;
  s.d = 8;
  s.dv = 8;
  s.page_size = 64;
  s.pages = 100100 / 64 + 4;
  s.dtype = VKATTN_BF16;
  create(s);
  std::vector<LayerCfg> cfg(1);
  cfg[0].H = 2;
  run_step({9}, {100050}, cfg, VKATTN_F32, true, /*attend=*/false);
  run_step({9}, {1}, cfg, VKATTN_F32);
  cfg[0].window = 70000;
  run_step({9}, {2}, cfg, VKATTN_F32);
}

// Layers with different windows, softcap, ALiBi and an additive mask in one
// step; truncation leaves NaN-free garbage and NaN beyond the length.
TEST_F(StepAttentionTest, PerLayerOptionsAndTruncate) {
  KvShape s;
  s.layers = 4;
  s.hkv = 2;
  s.d = 24;
  s.dv = 8;
  s.page_size = 8;
  s.pages = 80;
  s.dtype = VKATTN_F32;
  create(s);
  poison_pool();
  std::vector<LayerCfg> cfg(4);
  cfg[0].window = 4;
  cfg[1].window = -1;
  cfg[1].softcap = 5.0f;
  cfg[2].alibi = true;
  cfg[2].window = 20;
  cfg[3].mask_type = VKATTN_MASK_ADDITIVE;
  cfg[3].causal = false;
  cfg[1].sinks = cfg[3].sinks = true;  // hidden rows (additive -inf) give lse = sink
  run_step({1, 2}, {30, 11}, cfg, VKATTN_F32);
  // Tokens appended then truncated away hold NaN: nothing may read them.
  append_nan(1, 6);
  ASSERT_EQ(vkattn_kv_cache_truncate(cache, 1, 27), VKATTN_SUCCESS);  // inside a page
  run_step({2, 1}, {1, 1}, cfg, VKATTN_F32);
  run_step({1}, {5}, cfg, VKATTN_F32);
}

// Chunked local layers (Llama 4: chunks of positions, causal inside them)
// beside a full causal layer and a two-sided window, over chunked prefill
// and decodes whose contexts cross chunk boundaries, in f16 and int8
// caches; the steps' plans are shared by layers only where their rules
// agree.
TEST_F(StepAttentionTest, ChunkedLocalLayers) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16" : "i8");
    if (cache) vkattn_kv_cache_destroy(cache);
    KvShape s;
    s.layers = 3;
    s.hkv = 2;
    s.d = 16;
    s.dv = 16;
    s.page_size = 4;
    s.pages = 160;
    s.dtype = dt;
    create(s);
    poison_pool();
    std::vector<LayerCfg> cfg(3);
    cfg[0].chunk = 12;
    cfg[0].H = 8;
    cfg[1].sinks = true;
    cfg[2].causal = false, cfg[2].window = 5, cfg[2].window_right = 2, cfg[2].chunk = 20;
    run_step({1, 2}, {30, 9}, cfg, VKATTN_F32);
    run_step({1, 2, 3}, {1, 14, 25}, cfg, VKATTN_F16);  // chunks cut by the step's own tokens
    run_step({1, 2, 3}, {1, 1, 1}, cfg, VKATTN_F32);
  }
}

// Bidirectional spans (Gemma 3's images) over the cache: positions count
// cached tokens; chunked prefill whose chunk edges cut no span equals one
// shot; decodes after the spans (passed again, they change nothing) in a
// batch with another sequence's prefill; spans beside chunks and a plain
// layer; f16 and int8 caches over several pages.
TEST_F(StepAttentionTest, BidirectionalSpans) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16" : "i8");
    KvShape s;
    s.layers = 3, s.hkv = 2, s.d = 32, s.dv = 32, s.page_size = 16, s.pages = 96, s.dtype = dt;
    std::vector<LayerCfg> cfg(3);
    cfg[0].H = 8, cfg[0].spans = true;
    cfg[1].spans = true, cfg[1].chunk = 48, cfg[1].sinks = true;
    std::vector<float> one_shot;
    for (std::vector<int32_t> chunks :
         {std::vector<int32_t>{300}, {104, 96, 100}, {40, 64, 96, 1, 99}}) {
      SCOPED_TRACE(testing::Message() << chunks.size() << " chunks");
      if (cache) vkattn_kv_cache_destroy(cache);
      create(s);
      seq_spans = {{1, {{40, 104}, {200, 264}}}, {2, {{5, 9}}}};
      std::vector<float> out;
      for (int32_t n : chunks) {
        auto o = run_step({1}, {n}, cfg, VKATTN_F32);
        out.insert(out.end(), o.begin(), o.end());
      }
      if (chunks.size() == 1) {
        one_shot = out;
      } else {
        ASSERT_EQ(out.size(), one_shot.size());
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i)
          worst = std::max(worst, double(std::fabs(out[i] - one_shot[i])));
        EXPECT_LT(worst, 2e-5 + f16_math_slack()) << "largest difference to one-shot prefill";
      }
      // Decodes of sequence 1 beside sequence 2's prefill holding a span.
      run_step({1, 2}, {1, 12}, cfg, VKATTN_F16);
      run_step({2, 1}, {3, 1}, cfg, VKATTN_F32);
    }
  }
}

// Speculative trees over the cache (issue T): trees of 1 (a decode), 9,
// 33 and 64 nodes over cached prefixes of several pages, beside a
// sequence without one; with sinks and chunks on a second layer and a
// window on a third; f16, int8 and fp8 caches (q4: test_kv_cache_q4).
TEST_F(StepAttentionTest, SpeculativeTrees) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8, VKATTN_FP8_E4M3}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16" : dt == VKATTN_I8 ? "i8" : "fp8");
    KvShape s;
    s.layers = 3, s.hkv = 2, s.d = 32, s.dv = 32, s.page_size = 16, s.pages = 96, s.dtype = dt;
    std::vector<LayerCfg> cfg(3);
    cfg[0].H = 8, cfg[0].trees = true;
    cfg[1].trees = true, cfg[1].chunk = 48, cfg[1].sinks = true;
    cfg[2].trees = true, cfg[2].window = 20;
    if (cache) vkattn_kv_cache_destroy(cache);
    create(s);
    run_step({1, 2, 3}, {100, 37, 20}, cfg, VKATTN_F32);
    run_step({1, 2, 3}, {9, 5, 1}, cfg, VKATTN_F32);
    run_step({3, 1, 2}, {64, 33, 1}, cfg, VKATTN_F16);
  }
}

// Top-k lists over the cache (issue T): decodes, a verification chunk
// and a prefill chunk whose rows each list keys anywhere in their
// sequence (out of order, short lists, a pad past u, repeats), one list a
// row or one per kv head, beside causal, sinks, a window and a tree; f16,
// int8 and fp8 caches.
TEST_F(StepAttentionTest, TopKLists) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_I8, VKATTN_FP8_E4M3}) {
    SCOPED_TRACE(dt == VKATTN_F16 ? "f16" : dt == VKATTN_I8 ? "i8" : "fp8");
    KvShape s;
    s.layers = 3, s.hkv = 2, s.d = 32, s.dv = 32, s.page_size = 16, s.pages = 96, s.dtype = dt;
    std::vector<LayerCfg> cfg(3);
    cfg[0].H = 8, cfg[0].topk = 24;
    cfg[1].topk = 7, cfg[1].topk_per_head = true, cfg[1].sinks = true, cfg[1].causal = false;
    cfg[2].topk = 64, cfg[2].window = 40, cfg[2].trees = true;
    if (cache) vkattn_kv_cache_destroy(cache);
    create(s);
    run_step({1, 2, 3}, {100, 37, 20}, cfg, VKATTN_F32);
    run_step({1, 2, 3}, {1, 5, 1}, cfg, VKATTN_F32);
    run_step({3, 1, 2}, {64, 1, 33}, cfg, VKATTN_F16);
  }
}

// A pool split over several buffers: sequences span buffers, attention runs
// one dispatch per buffer and merges the pieces.
TEST_F(StepAttentionTest, PoolOverSeveralBuffers) {
  set_env("VKATTN_KV_BUFFER_BYTES", "8192");
  KvShape s;
  s.layers = 2;
  s.hkv = 2;
  s.d = 16;
  s.dv = 16;
  s.page_size = 4;  // 2 x 2 x (2 x 4 x 16 x 2) = 1 KiB per page, 8 per buffer
  s.pages = 96;
  s.dtype = VKATTN_F16;
  create(s);
  unset_env("VKATTN_KV_BUFFER_BYTES");
  poison_pool();
  std::vector<LayerCfg> cfg(2);
  cfg[1].sinks = true;  // joined once over the pieces of several buffers
  cfg[1].spans = true;  // span records read the pieces as their sequence's do
  seq_spans = {{1, {{10, 45}}}, {2, {{30, 66}}}, {3, {{50, 52}}}};
  run_step({1, 2}, {50, 70}, cfg, VKATTN_F32);
  fork(1, 3);
  run_step({1, 2, 3}, {1, 33, 2}, cfg, VKATTN_F32);
  remove(2);
  run_step({4, 1, 3}, {100, 1, 1}, cfg, VKATTN_F32);
  // Top-k lists over pages in several buffers: each buffer's pass reads
  // the listed keys of its own pages (the others' table entries are NO_SLOT
  // in its copy), the splits merge.
  std::vector<LayerCfg> topk(2);
  topk[0].topk = 40;
  topk[1].topk = 9, topk[1].topk_per_head = true, topk[1].sinks = true;
  run_step({4, 1, 3}, {1, 3, 1}, topk, VKATTN_F32);
  run_step({1, 4}, {20, 1}, topk, VKATTN_F32);
}

// A pool whose layers do not all fit one buffer, while every page of one
// layer does: layers 0-1, 2-3 and 4 in three buffers (a slab is 512 bytes,
// one layer of the pool 12 KiB). Copies on write cross every buffer.
TEST_F(StepAttentionTest, PoolSplitByLayers) {
  KvShape s;
  s.layers = 5;
  s.hkv = 2;
  s.d = 16;
  s.dv = 16;
  s.page_size = 4;
  s.pages = 24;
  s.dtype = VKATTN_F16;
  {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "26000"}});
    create(s);
  }
  poison_pool();
  std::vector<LayerCfg> cfg(2);
  cfg[1].H = 4;
  run_step({1, 2}, {13, 7}, cfg, VKATTN_F32);
  fork(1, 3);
  run_step({1, 3}, {2, 5}, cfg, VKATTN_F16);  // both copy the shared partial page
  remove(2);
  run_step({3, 1, 4}, {1, 1, 30}, cfg, VKATTN_F32);
}

// 8-bit caches (int8 with per-token scales, fp8 e4m3 with per-layer and
// per-head scales): every step's attention against the reference over
// what the cache holds, dequantized (read back after the commit), and the
// stored codes against what was appended (half a code). Texel kinds of
// every width (d 24: 8 codes, dv 12: 4, d 7 / dv 5: one, byte atomics in
// the append; small dims keep lavapipe's compile time low), GQA, sinks, a window, softcap + ALiBi,
// additive masks that hide whole rows, NaN rows beyond the lengths (int8: a NaN scale), a fork
// whose shared partial page is copied (scales with it), a truncation over
// NaN tokens and a split-KV decode over 600 keys.
TEST_F(StepAttentionTest, EightBitCaches) {
  for (vkattn_dtype dt : {VKATTN_I8, VKATTN_FP8_E4M3})
    for (auto [d, dv] : {std::pair<uint32_t, uint32_t>{24, 12}, {7, 5}}) {
      if (d == 7 && dt == VKATTN_I8) continue;  // one dtype per width (compile time)
      SCOPED_TRACE(testing::Message()
                   << (dt == VKATTN_I8 ? "i8" : "fp8") << " d " << d << " dv " << dv);

      if (cache) vkattn_kv_cache_destroy(cache);
      KvShape s;
      s.layers = 2;
      s.hkv = 2;
      s.d = d;
      s.dv = dv;
      s.page_size = d == 24 ? 5 : 16;
      s.pages = 200;
      s.dtype = dt;
      create(s);
      poison_pool();
      std::vector<LayerCfg> cfg(2);
      cfg[0].sinks = true;
      cfg[0].window = 9;
      cfg[1].H = 2;
      cfg[1].softcap = 5.0f;
      cfg[1].alibi = true;
      cfg[1].mask_type = VKATTN_MASK_ADDITIVE;
      cfg[1].causal = false;
      run_step({1, 2, 3}, {37, 5, 16}, cfg, VKATTN_F32);
      fork(2, 4);
      run_step({2, 4, 3}, {2, 1, 1}, cfg, VKATTN_F16);  // both copy the shared partial page
      if (d != 24) continue;                            // odd dims: the steps above (compile time)
      append_nan(1, 4);
      ASSERT_EQ(vkattn_kv_cache_truncate(cache, 1, 35), VKATTN_SUCCESS);  // NaN tokens past it
      run_step({1, 4}, {1, 1}, cfg, VKATTN_F32);
      run_step({5}, {600}, cfg, VKATTN_F32, true, /*attend=*/false);
      run_step({5, 1}, {1, 1}, cfg, VKATTN_F32);  // split-KV decode
      // A visible NaN token (int8: NaN scale; fp8: NaN codes) makes every
      // output NaN, in the 8-code texel path of d 24 and the 4-code of dv 12.
      append_nan(7, 1);
      int64_t id = 7;
      int32_t one = 1;
      vkattn_step* st = nullptr;
      ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &one, &st), VKATTN_SUCCESS);
      vkattn_tensor* k = tensor(VKATTN_F32, {1, s.hkv, d});
      vkattn_tensor* v = tensor(VKATTN_F32, {1, s.hkv, dv});
      vkattn_tensor* q = tensor(VKATTN_F32, {1, s.hkv, d});
      vkattn_tensor* o = tensor(VKATTN_F32, {1, s.hkv, dv});
      upload(k, VKATTN_F32, std::vector<float>(size_t(s.hkv) * d, 0.5f));
      upload(v, VKATTN_F32, std::vector<float>(size_t(s.hkv) * dv, 0.5f));
      upload(q, VKATTN_F32, std::vector<float>(size_t(s.hkv) * d, 0.25f));
      vkattn_attention_desc ad;
      vkattn_attention_desc_init(&ad);
      ad.num_heads = ad.num_kv_heads = s.hkv, ad.head_dim = d, ad.head_dim_v = dv;
      ad.causal = 1;
      ASSERT_EQ(vkattn_step_append(st, 0, k, v), VKATTN_SUCCESS);
      ASSERT_EQ(vkattn_step_attention(st, 0, &ad, q, o), VKATTN_SUCCESS) << vkattn_last_error();
      std::vector<float> got(size_t(s.hkv) * dv);
      ASSERT_EQ(vkattn_tensor_read(o, got.data(), got.size() * 4), VKATTN_SUCCESS);
      vkattn_step_abort(st);
      for (float x : got) EXPECT_TRUE(std::isnan(x)) << x;
    }
}

// 8-bit caches over several pool buffers (a layer's pages in several):
// the int8 scales travel with their slabs.
TEST_F(StepAttentionTest, EightBitPoolOverSeveralBuffers) {
  for (vkattn_dtype dt : {VKATTN_I8, VKATTN_FP8_E4M3}) {
    SCOPED_TRACE(dt == VKATTN_I8 ? "i8" : "fp8");
    if (cache) vkattn_kv_cache_destroy(cache);
    KvShape s;  // EightBitCaches' shape and layer 0 (its pipelines)
    s.layers = 1;
    s.hkv = 2;
    s.d = 24;
    s.dv = 12;
    s.page_size = 4;
    s.pages = 60;
    s.dtype = dt;
    {
      ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "2048"}});
      create(s);
    }
    poison_pool();
    std::vector<LayerCfg> cfg(1);
    cfg[0].sinks = true;
    cfg[0].window = 9;
    run_step({1, 2}, {50, 30}, cfg, VKATTN_F32);
    fork(1, 3);
    run_step({1, 2, 3}, {1, 2, 1}, cfg, VKATTN_F32);
  }
}

// Bad input: a status with a message, nothing recorded.
TEST_F(StepAttentionTest, BadInputIsRejected) {
  KvShape s;
  s.layers = 2;
  s.d = 8;
  s.dv = 8;
  s.dtype = VKATTN_F32;
  create(s);
  int64_t ids[2] = {1, 2};
  int32_t t[2] = {3, 1};
  vkattn_step* st = nullptr;
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &st), VKATTN_SUCCESS);
  vkattn_tensor* k = tensor(VKATTN_F32, {4, s.hkv, s.d});
  vkattn_tensor* v = tensor(VKATTN_F32, {4, s.hkv, s.dv});
  ASSERT_EQ(vkattn_step_append(st, 0, k, v), VKATTN_SUCCESS);
  vkattn_tensor* q = tensor(VKATTN_F32, {4, 4, s.d});
  vkattn_tensor* out = tensor(VKATTN_F32, {4, 4, s.dv});
  vkattn_tensor* q16 = tensor(VKATTN_F16, {4, 4, s.d});
  vkattn_tensor* out16 = tensor(VKATTN_F16, {4, 4, s.dv});
  vkattn_tensor* q_short = tensor(VKATTN_F32, {3, 4, s.d});
  vkattn_tensor* mask = tensor(VKATTN_F32, {5});
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = 4;
  desc.num_kv_heads = s.hkv;
  desc.head_dim = s.d;
  EXPECT_INVALID(vkattn_step_attention(st, 1, &desc, q, out), "not been appended");
  EXPECT_INVALID(vkattn_step_attention(st, 2, &desc, q, out), "layer");
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q_short, out), "q has shape");
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q16, out16), "cache dtype");
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q, nullptr), "NULL");
  EXPECT_INVALID(vkattn_step_attention(st, 0, nullptr, q, out), "desc");
  desc.mask_type = VKATTN_MASK_ADDITIVE;
  desc.mask = mask;
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q, out), "mask");
  desc.mask_type = VKATTN_MASK_NONE;
  desc.mask = nullptr;
  desc.head_dim = 16;
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q, out), "does not match the cache");
  desc.head_dim = s.d;
  desc.num_kv_heads = 1;
  EXPECT_INVALID(vkattn_step_attention(st, 0, &desc, q, out), "does not match the cache");
  desc.num_kv_heads = s.hkv;
  EXPECT_EQ(vkattn_step_attention(st, 0, &desc, q, out), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_step_abort(st);
}

// E defect 5: a decode whose keys span more than 8 pool buffers (288 keys
// in 16-token pages, two pages per buffer) was refused ("72 key splits"):
// decode mode multiplied lanes by buffer pieces against a fixed split cap.
// Any number of splits is merged now (a combine tree).
TEST_F(StepAttentionTest, DecodeAcrossManyPoolBuffers) {
  KvShape s;
  s.layers = 1;
  s.hkv = 1;
  s.d = 16;
  s.dv = 16;
  s.page_size = 16;
  s.pages = 64;
  s.dtype = VKATTN_F16;
  {
    // 1 x 16 x (16 + 16) x 2 = 1 KiB per page, two pages per buffer.
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "2048"}});
    create(s);
  }
  poison_pool();
  std::vector<LayerCfg> cfg(1);
  cfg[0].H = 4;
  run_step({1, 2}, {288, 700}, cfg, VKATTN_F32, true, /*attend=*/false);
  run_step({1}, {1}, cfg, VKATTN_F32);        // 289 keys over 10 buffers
  run_step({1, 2}, {1, 1}, cfg, VKATTN_F16);  // and 702 keys over 22
}

// Pool buffers bound in windows (ops/kv_cache.h): the f16 cache below is
// one buffer, bound in windows of 4 pages (VKATTN_KV_WINDOW_BYTES, a slab
// is 2816 bytes) for appends and attention, so a step's attention takes a
// dispatch per window its pages touch and merges them. Each step against
// the reference (run_step), top-k lists and a left window included; the
// kernel log counts the dispatches: one a layer without windows, one per
// window touched with them (the decode's 7 + 3 pages lie in windows 0-2).
// A fork and a removal move pages across windows.
TEST_F(StepAttentionTest, CacheBuffersBoundInWindows) {
  KvShape s;
  s.layers = 2, s.hkv = 2, s.d = 24, s.dv = 20, s.page_size = 16, s.pages = 64;
  s.dtype = VKATTN_F16;
  std::vector<LayerCfg> cfg(2);
  cfg[1].window = 40, cfg[1].sinks = true;
  std::vector<LayerCfg> topk(2);
  topk[0].topk = 30;
  topk[1].topk = 9, topk[1].topk_per_head = true;
  const std::string kLine = "vkattn: attention family=";
  for (const char* bytes : {"", "11264"}) {
    SCOPED_TRACE(testing::Message() << "VKATTN_KV_WINDOW_BYTES=" << bytes);
    {
      ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_WINDOW_BYTES", bytes}});
      ASSERT_NO_FATAL_FAILURE(fresh_cache("0", s));
    }
    run_step({1, 2}, {100, 37}, cfg, VKATTN_F32);
    std::string log;
    logged_step({1, 2}, {1, 1}, cfg, &log);
    EXPECT_EQ(occurrences(log, kLine), *bytes ? 6u : 2u) << log;
    logged_step({1, 2}, {1, 1}, topk, &log);
    EXPECT_EQ(occurrences(log, kLine), *bytes ? 6u : 2u) << log;
    fork(1, 3);
    remove(2);
    run_step({3, 1, 4}, {20, 1, 70}, cfg, VKATTN_F16);
    run_step({1, 3, 4}, {1, 1, 1}, topk, VKATTN_F32);
  }
}

// Cascade attention (issue CS): forks of one parent decoding together read
// their shared full pages once, as a group, and merge by lse with their own
// keys. The same steps on a context under VKATTN_CASCADE=0 (each sequence
// reads its own keys) and under the default: both against the reference
// (run_step; 8-bit caches over what they hold), then against each other
// (f32 math: within 2e-5), and their kernel logs' kv_reads= against each
// other. A group of 16 (a prompt of 300 tokens: its 19th page, 12 tokens,
// is copied by each fork, so 18 pages are shared), a group of 2, a loner
// between them, softcap and sinks (joined once, by the main pass),
// prefill chunks on members, sharers that are not consecutive (not
// grouped), and a fork truncated below the shared pages (it leaves the
// group). NaN fills every slot no token holds. GQA 2, f16 cache (the
// test below: other groups and dtypes).
TEST_F(StepAttentionTest, CascadeOverForks) {
  cascade_over_forks({4, VKATTN_F16});
}
// The same decode step with GQA groups of 1, 8 and 4 over f32, bf16, int8
// and fp8 caches (Slow: the main suite only, each dtype compiles its own
// pipelines).
TEST_F(StepAttentionTest, SlowCascadeOverCacheDtypes) {
  for (Config cf : {Config{2, VKATTN_F32}, Config{16, VKATTN_BF16}, Config{8, VKATTN_I8},
                    Config{8, VKATTN_FP8_E4M3}})
    cascade_over_forks(cf);
}

// Cascade under the positional rules: 6 forks of a 600-token prompt (37
// shared pages: 592 keys) and a loner decode, then one member takes a
// chunk of 9 tokens under a tree and a span [400, 607) that re-opens
// shared keys its rows' window hides. Layers: a left window of 400 (the
// group's rows all see its shared keys from 200 or 209 on: 392 or 383
// read once), chunks of 256 with sinks (80 shared keys in the rows'
// chunk), a window of 150 left and 0 right with the spans (142 or 133),
// and trees with softcap (all 592). The keys below the
// first one the group's furthest row sees are the main call's. Each step
// against the reference, and VKATTN_CASCADE unset and =1 against =0; the
// default groups only where 256 or more shared keys stay visible.
TEST_F(StepAttentionTest, CascadeUnderWindowsChunksSpansAndTrees) {
  KvShape s;
  s.layers = 4;
  s.hkv = 2;
  s.d = 24;
  s.dv = 20;
  s.page_size = 16;
  s.pages = 128;
  s.dtype = VKATTN_F16;
  std::vector<LayerCfg> cfg(4);
  for (LayerCfg& c : cfg) c.H = 4;
  cfg[0].window = 400;
  cfg[1].chunk = 256, cfg[1].sinks = true;
  cfg[2].window = 150, cfg[2].window_right = 0, cfg[2].spans = true;
  cfg[3].trees = true, cfg[3].softcap = 20.0f;
  seq_spans = {{2, {{400, 607}}}};
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6, 100};
  struct Run {
    std::vector<std::vector<float>> outs;
    std::vector<std::string> logs;
  };
  auto scenario = [&](const char* cascade, Run* r) {
    ASSERT_NO_FATAL_FAILURE(fresh_cache(cascade, s));
    run_step({1, 100}, {600, 300}, cfg, VKATTN_F32);
    for (int64_t id = 2; id <= 6; ++id) fork(1, id);
    auto step = [&](const std::vector<int32_t>& t) {
      r->logs.emplace_back();
      r->outs.push_back(logged_step(ids, t, cfg, &r->logs.back()));
    };
    step({1, 1, 1, 1, 1, 1, 1});
    step({1, 9, 1, 1, 1, 1, 1});
  };
  Run off, on, forced;
  {
    SCOPED_TRACE("VKATTN_CASCADE=0");
    scenario("0", &off);
  }
  {
    SCOPED_TRACE("VKATTN_CASCADE unset");
    scenario("", &on);
  }
  {
    SCOPED_TRACE("VKATTN_CASCADE=1");
    scenario("1", &forced);
  }
  const std::string kLine = "vkattn: attention cascade groups=1 shared_keys=";
  auto lines = [&](const std::string& log) { return occurrences(log, kLine); };
  ASSERT_EQ(off.outs.size(), 2u);
  for (const Run* r : {&on, &forced}) {
    ASSERT_EQ(r->outs.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      SCOPED_TRACE(testing::Message() << (r == &on ? "default" : "forced") << " step " << i);
      ASSERT_EQ(r->outs[i].size(), off.outs[i].size());
      for (size_t e = 0; e < off.outs[i].size(); ++e)
        ASSERT_NEAR(r->outs[i][e], off.outs[i][e], 2e-5 + f16_math_slack()) << "element " << e;
      EXPECT_EQ(lines(off.logs[i]), 0u) << off.logs[i];
      EXPECT_EQ(lines(r->logs[i]), r == &on ? 2u : 4u) << r->logs[i];
    }
  }
  // The decode step (rows at 600): the window of 400 reads the shared keys
  // from 200 on once, the trees all 592.
  EXPECT_NE(on.logs[0].find(kLine + "392\n"), std::string::npos) << on.logs[0];
  EXPECT_NE(on.logs[0].find(kLine + "592\n"), std::string::npos) << on.logs[0];
}

// A group of 64 rows over 1040 shared keys at d 128: on lavapipe the
// prefix call takes 4 rows a lane (prepare.cpp: a large group is
// compute-bound there), its log says so; against the reference and the
// step without cascade (Slow: one cold compile of that variant).
TEST_F(StepAttentionTest, SlowCascadeOverALongPrefixAtHeadDim128) {
  KvShape s;
  s.layers = 1;
  s.hkv = 2;
  s.d = s.dv = 128;
  s.page_size = 16;
  s.pages = 96;
  s.dtype = VKATTN_F16;
  const std::vector<LayerCfg> cfg(1, LayerCfg{8});
  std::vector<int64_t> ids;
  for (int64_t id = 1; id <= 16; ++id) ids.push_back(id);
  std::vector<float> outs[2];
  std::string log;
  for (int on = 0; on < 2; ++on) {
    SCOPED_TRACE(on ? "VKATTN_CASCADE unset" : "VKATTN_CASCADE=0");
    ASSERT_NO_FATAL_FAILURE(fresh_cache(on ? "" : "0", s));
    run_step({1}, {1040}, cfg, VKATTN_F32);
    for (int64_t id = 2; id <= 16; ++id) fork(1, id);
    outs[on] = logged_step(ids, std::vector<int32_t>(16, 1), cfg, &log);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t e = 0; e < outs[0].size(); ++e)
    ASSERT_NEAR(outs[1][e], outs[0][e], 2e-5 + f16_math_slack()) << "element " << e;
  EXPECT_NE(log.find("vkattn: attention cascade groups=1 shared_keys=1040\n"), std::string::npos)
      << log;
  // The prefix call's line (lavapipe, its family unforced): 64 rows over
  // the 1040 shared keys at 4 rows a lane.
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  ASSERT_EQ(vkattn_context_get_device_info(ctx, &info), VKATTN_SUCCESS);
  const char* forced = std::getenv("VKATTN_ATTN_KERNEL");
  if (info.device_type == VKATTN_DEVICE_CPU && !(forced && *forced)) {
    const size_t at = log.find("family=lanes rows=64 keys=1040 read=1040 ");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string line = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(line.find(" R=4 "), std::string::npos) << line;
  }
}

// Cascade over 4-bit caches, their keys rotated or not: 8 forks of a
// 300-token prompt decoding, against the same step with VKATTN_CASCADE=0
// (both read the same codes; f32 math: within 2e-5). The reference over
// what a Q4 cache holds is Q4Attention's (tests/test_kv_cache_q4.cpp).
TEST_F(StepAttentionTest, CascadeOverQ4Caches) {
  KvShape s;
  s.layers = 1;
  s.hkv = 2;
  s.d = 64;
  s.dv = 64;
  s.page_size = 16;
  s.pages = 64;
  s.dtype = VKATTN_Q4;
  const uint32_t H = 8;
  std::vector<int64_t> ids;
  for (int64_t id = 1; id <= 8; ++id) ids.push_back(id);
  for (bool rotate : {false, true}) {
    SCOPED_TRACE(rotate ? "rotated keys" : "plain keys");
    std::vector<float> outs[2];
    for (int on = 0; on < 2; ++on) {
      ASSERT_NO_FATAL_FAILURE(restart_context(on ? "" : "0"));
      vkattn_kv_cache_desc d = kv_cache_desc(s);
      if (rotate) d.flags |= VKATTN_KV_ROTATE_KEYS;
      ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
      shape = s;
      // One step: t tokens each of `seqs` appended (values by sequence and
      // position), then, when `attend`, the step's attention into out.
      auto step = [&](const std::vector<int64_t>& seqs, int32_t t, bool attend,
                      std::vector<float>* out) {
        const std::vector<int32_t> ts(seqs.size(), t);
        std::vector<int32_t> len(seqs.size());
        for (size_t b = 0; b < seqs.size(); ++b)
          ASSERT_EQ(vkattn_kv_cache_length(cache, seqs[b], &len[b]), VKATTN_SUCCESS);
        vkattn_step* st = nullptr;
        ASSERT_EQ(vkattn_step_begin(cache, uint32_t(seqs.size()), seqs.data(), ts.data(), &st),
                  VKATTN_SUCCESS)
            << vkattn_last_error();
        const int64_t n = int64_t(seqs.size()) * t;
        vkattn_tensor* kt = tensor(VKATTN_F32, {n, s.hkv, s.d});
        vkattn_tensor* vt = tensor(VKATTN_F32, {n, s.hkv, s.dv});
        upload(kt, VKATTN_F32, token_rows(0, seqs, len, ts, 0, s.hkv * s.d, VKATTN_F32));
        upload(vt, VKATTN_F32, token_rows(1, seqs, len, ts, 0, s.hkv * s.dv, VKATTN_F32));
        ASSERT_EQ(vkattn_step_append(st, 0, kt, vt), VKATTN_SUCCESS) << vkattn_last_error();
        if (attend) {
          vkattn_tensor* qt = tensor(VKATTN_F32, {n, H, s.d});
          vkattn_tensor* ot = tensor(VKATTN_F32, {n, H, s.dv});
          upload(qt, VKATTN_F32, token_rows(2, seqs, len, ts, 0, H * s.d, VKATTN_F32));
          vkattn_attention_desc desc;
          vkattn_attention_desc_init(&desc);
          desc.num_heads = H, desc.num_kv_heads = s.hkv, desc.head_dim = s.d;
          desc.head_dim_v = s.dv, desc.causal = 1;
          testing::internal::CaptureStderr();
          EXPECT_EQ(vkattn_step_attention(st, 0, &desc, qt, ot), VKATTN_SUCCESS)
              << vkattn_last_error();
          out->resize(size_t(n) * H * s.dv);
          EXPECT_EQ(vkattn_tensor_read(ot, out->data(), out->size() * 4), VKATTN_SUCCESS);
          const std::string log = testing::internal::GetCapturedStderr();
          const bool grouped =
              log.find("vkattn: attention cascade groups=1 shared_keys=288\n") != std::string::npos;
          EXPECT_EQ(grouped, on == 1) << log;
        }
        ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
      };
      step({1}, 300, false, nullptr);
      for (int64_t id = 2; id <= 8; ++id)
        ASSERT_EQ(vkattn_kv_cache_fork(cache, 1, id), VKATTN_SUCCESS) << vkattn_last_error();
      step(ids, 1, true, &outs[on]);
    }
    ASSERT_EQ(outs[0].size(), outs[1].size());
    ASSERT_FALSE(outs[0].empty());
    for (size_t e = 0; e < outs[0].size(); ++e) {
      ASSERT_TRUE(std::isfinite(outs[0][e])) << "element " << e;
      ASSERT_NEAR(outs[1][e], outs[0][e], 2e-5 + f16_math_slack()) << "element " << e;
    }
  }
}

// Cascade over caller pools (vkattn_attention_paged): sequences whose
// page_indices begin with the same pages form a group. Sequences 0 and 1
// share 6 pages (48 keys), 3 and 4 share 4 (32; they share them with 0 and
// 1 too, but a loner stands between), 2 is a loner; member 1 holds a
// prefill chunk of 3 tokens. Pages no sequence uses hold NaN. Under
// VKATTN_CASCADE=1 (groups from one shared page) and =0: both against
// the reference, and the groups in the kernel log.
TEST_F(StepAttentionTest, CascadeOverCallerPools) {
  const PoolLayout L{8,
                     24,
                     {{0, 1, 2, 3, 4, 5, 10},
                      {0, 1, 2, 3, 4, 5, 11},
                      {20, 21},
                      {0, 1, 2, 3, 12},
                      {0, 1, 2, 3, 13, 14}},
                     {50, 53, 12, 36, 45},
                     {1, 3, 1, 1, 2}};
  for (const char* cascade : {"0", "1"}) {
    SCOPED_TRACE(testing::Message() << "VKATTN_CASCADE=" << cascade);
    const std::string log = pool_call_vs_reference(L, true, cascade);
    const bool grouped =
        log.find("vkattn: attention cascade groups=2 shared_keys=80\n") != std::string::npos;
    EXPECT_EQ(grouped, std::strcmp(cascade, "1") == 0) << log;
  }
}

// E6 defect 1: over caller pools a sequence may hold more queries than
// keys (cross attention, a prompt over a short cached prefix). The
// cascade's detection took the keys before the first query, u - t, as
// unsigned: with u = 0 two sequences of no pages compared one page
// forever (a segfault); with u = 64 in 16 shared pages and t = 70 the
// comparison read past both tables and the prefix pass gave rows at
// negative positions every key (max error 0.87). Such sequences hold no
// keys before their queries, so they join no group. t > u, t = u, u = 0
// and t = 0 beside grouped sequences, causal and not, with VKATTN_CASCADE
// unset, 1 and 0, all equal the reference; only the pair that does share
// keys before its queries (sequences 5 and 6) forms a group.
TEST_F(StepAttentionTest, CascadeOverPoolsWithMoreQueriesThanKeys) {
  std::vector<int32_t> shared(16);
  for (int32_t i = 0; i < 16; ++i) shared[i] = i;
  auto with = [&](std::vector<int32_t> tail) {
    std::vector<int32_t> p = shared;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  const PoolLayout L{4,
                     40,
                     {{},              // u = 0, t = 3
                      {},              // u = 0, t = 2: the pair that crashed
                      shared,          // u = 64, t = 70
                      shared,          // u = 64, t = 70
                      with({20}),      // u = 66, t = 66 (t = u)
                      with({21, 22}),  // u = 72, t = 1: shares 16 pages
                      with({23, 24}),  // u = 70, t = 2
                      with({25}),      // u = 65, t = 0
                      {26, 27}},       // u = 5, t = 9
                     {0, 0, 64, 64, 66, 72, 70, 65, 5},
                     {3, 2, 70, 70, 66, 1, 2, 0, 9}};
  for (const bool causal : {true, false})
    for (const char* cascade : {static_cast<const char*>(nullptr), "1", "0"}) {
      SCOPED_TRACE(testing::Message() << (causal ? "causal" : "not causal")
                                      << " VKATTN_CASCADE=" << (cascade ? cascade : "(unset)"));
      const std::string log = pool_call_vs_reference(L, causal, cascade);
      const bool off = cascade && std::strcmp(cascade, "0") == 0;
      const bool grouped =
          log.find("vkattn: attention cascade groups=1 shared_keys=64\n") != std::string::npos;
      EXPECT_EQ(grouped, !off) << log;
    }
}

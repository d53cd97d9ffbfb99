#include "ops/attention/self_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/tensor.h"
#include "ops/attention/devices.h"
#include "ops/attention/prepare.h"
#include "ops/attention/tune.h"
#include "ops/attention/user_functions.h"
#include "ops/attention/variant_table.h"
#include "ops/kv_cache.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "reference/quant_ref.h"

namespace vkattn {

namespace {

// Uniform in [-1, 1), deterministic.
struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  float next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return static_cast<float>((s >> 40) * (1.0 / (1ull << 23))) - 1.0f;
  }
};

std::shared_ptr<Tensor> new_tensor(const std::shared_ptr<Context>& ctx, vkattn_dtype dt,
                                   std::initializer_list<int64_t> shape) {
  return std::make_shared<Tensor>(ctx, dt, static_cast<uint32_t>(shape.size()), shape.begin());
}

// Random values rounded to `dt`, written to a new tensor; the rounded
// values are returned in *host.
std::shared_ptr<Tensor> random_tensor(const std::shared_ptr<Context>& ctx, vkattn_dtype dt,
                                      std::initializer_list<int64_t> shape, Rng& rng,
                                      std::vector<float>* host) {
  auto t = new_tensor(ctx, dt, shape);
  host->resize(static_cast<size_t>(t->numel()));
  for (float& x : *host) x = vkattn_ref::round_to(dt, rng.next());
  const std::vector<uint8_t> bytes = vkattn_ref::encode_bytes(dt, *host);
  t->write(bytes.data());
  return t;
}

std::vector<float> read_floats(Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  t.read(bytes.data());
  return vkattn_ref::decode_bytes(t.dtype(), bytes);
}

// The largest error of `got` against `want`, in units of the tolerance of
// the kernel's arithmetic (so 1 is the limit): an infinity must be met
// exactly, and NaN where the reference has NaN (a variant's score
// function may give NaN: its rows are NaN) and nowhere else.
double scaled_error(const std::vector<float>& got, const std::vector<double>& want, double abs_tol,
                    double rel_tol) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i], g = got[i];
    if (std::isinf(w) && g == w) continue;
    if (std::isnan(w) && std::isnan(g)) continue;
    const double e = std::fabs(g - w);
    if (!(e == e)) return INFINITY;
    worst = std::max(worst, e / (abs_tol + rel_tol * std::fabs(w)));
  }
  return worst;
}

}  // namespace

void read_dequantized(KvCache& cache, int64_t id, uint32_t u, float* k, float* v) {
  const auto& cd = cache.desc();
  const size_t rows = size_t(u) * cd.num_kv_heads, d = cd.head_dim, dv = cd.head_dim_v;
  if (cache.q4()) {  // one code per element, a scale per block of 32
    std::vector<int8_t> kc(rows * d), vc(rows * dv);
    const size_t nbk = (d + 31) / 32, nbv = (dv + 31) / 32;
    std::vector<float> ks(rows * nbk), vs(rows * nbv);
    cache.read(0, id, 0, int32_t(u), kc.data(), kc.size(), vc.data(), vc.size());
    cache.read_block_scales(0, id, 0, int32_t(u), ks.data(), ks.size(), vs.data(), vs.size());
    for (size_t r = 0; r < rows; ++r) {
      for (size_t e = 0; e < d; ++e) k[r * d + e] = float(kc[r * d + e]) * ks[r * nbk + e / 32];
      for (size_t e = 0; e < dv; ++e) v[r * dv + e] = float(vc[r * dv + e]) * vs[r * nbv + e / 32];
    }
    return;
  }
  std::vector<uint8_t> kc(rows * d), vc(rows * dv);
  std::vector<float> ks(rows), vs(rows);
  cache.read(0, id, 0, int32_t(u), kc.data(), kc.size(), vc.data(), vc.size());
  cache.read_scales(0, id, 0, int32_t(u), ks.data(), vs.data());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t e = 0; e < d; ++e)
      k[r * d + e] = vkattn_ref::dequantize(cd.dtype, kc[r * d + e], ks[r]);
    for (size_t e = 0; e < dv; ++e)
      v[r * dv + e] = vkattn_ref::dequantize(cd.dtype, vc[r * dv + e], vs[r]);
  }
}

namespace {

// The check's GQA group: the call's, at most 4, and a multiple of the
// pipeline's rows per mask evaluation (FwdConfig::user_rows: each run of
// them must be one token's heads).
uint32_t check_group(const AttentionCall& c, const FwdConfig& cfg) {
  const uint32_t g =
      std::clamp<uint32_t>(c.desc.num_heads / std::max(c.desc.num_kv_heads, 1u), 1, 4);
  return g % cfg.user_rows == 0 ? g : cfg.user_rows;
}

// The check's call and everything it keeps alive: two sequences (three
// queries over two tiles and a ragged tail of keys, one query over half a
// tile) of the pipeline's dtypes and head dims, two kv heads and a GQA
// group like the call's, the transforms the pipeline compiles in, K/V
// placed as the pipeline reads them; and the reference's view of it all.
struct CheckCall {
  CheckCall(const std::shared_ptr<Context>& context, const AttentionCall& c,
            const FwdConfig& config, bool rotate_keys)
      : rotate(rotate_keys),
        ctx(context),
        cfg(config),
        var(config.var),
        d(config.head_dim),
        dv(config.head_dim_v),
        group(check_group(c, config)),
        H(hkv * group),
        tile(std::max<uint32_t>(
            1, var.family == AttentionFamily::kLanes ? var.block_keys : var.tile_keys)),
        u{static_cast<int32_t>(2 * tile + 5), static_cast<int32_t>(tile / 2 + 3)},
        cu_q{0, t[0], t[0] + t[1]},
        cu_k{0, u[0], u[0] + u[1]},
        tq(cu_q[2]),
        tk(cu_k[2]) {}

  // The call's shape, q, out, lse and sinks; causal and the left window.
  void setup(const AttentionCall& c) {
    k.pinned = &cfg;
    k.batch = 2;
    k.cu_q.assign(cu_q, cu_q + 3);
    k.cu_k.assign(cu_k, cu_k + 3);
    vkattn_attention_desc_init(&desc);
    desc.num_heads = H, desc.num_kv_heads = hkv, desc.head_dim = d, desc.head_dim_v = dv;
    desc.scale = static_cast<float>(1.0 / std::sqrt(double(d)));
    desc.causal = c.desc.causal;
    desc.window_left =
        c.desc.window_left >= 0 ? std::min<int32_t>(c.desc.window_left, tile + 1) : -1;
    p.num_heads = static_cast<int>(H), p.num_kv_heads = static_cast<int>(hkv);
    p.head_dim = static_cast<int>(d), p.head_dim_v = static_cast<int>(dv);
    p.scale = desc.scale, p.causal = desc.causal != 0, p.window_left = desc.window_left;
    q = random_tensor(ctx, cfg.q_dtype, {tq, H, d}, rng, &hq);
    // (A cascade's part writes f32 rows from 16-bit q: kFlagOutF32.)
    out = new_tensor(ctx, (cfg.features & kFlagOutF32) ? VKATTN_F32 : cfg.q_dtype, {tq, H, dv});
    k.q = q.get(), k.out = out.get();
    if (c.lse) {
      lse = new_tensor(ctx, VKATTN_F32, {tq, H});
      k.lse = lse.get();
    }
    if (c.sinks) {
      sinks = random_tensor(ctx, VKATTN_F32, {H}, rng, &hsinks);
      k.sinks = sinks.get(), p.sinks = hsinks.data();
    }
  }

  // The optional transforms the pipeline compiles in (cfg.features).
  void add_transforms(const AttentionCall& c) {
    // The transforms compiled in run in the check.
    const uint32_t f = cfg.features;
    // The right window and the chunks, by their presence: narrow enough to
    // cut the check's rows (a chunk boundary inside its first sequence's
    // keys and rows).
    if (f & kFlagWindowRight) {
      desc.window_right = std::min<int32_t>(std::max(c.desc.window_right, 0), int32_t(tile) + 1);
      p.window_right = desc.window_right;
    }
    if (f & kFlagChunk) {
      desc.chunk_size = std::clamp<uint32_t>(c.desc.chunk_size, 1, tile + 2);
      p.chunk_size = desc.chunk_size;
    }
    // Spans by their presence: one holding the first sequence's first two
    // rows (not its last) and a tile of keys before them plus one after, so
    // it cuts the check's rows and reaches past causal; one in the second
    // sequence that holds no row.
    int32_t span_pairs[4] = {std::max<int32_t>(0, u[0] - 2 - int32_t(tile)), u[0] - 1, 1, 2};
    if (f & kFlagSpan) {
      k.span_indptr = {0, 1, 2};
      k.spans.assign(span_pairs, span_pairs + 4);
      p.span_indptr = k.span_indptr.data(), p.spans = k.spans.data();
    }
    // A tree by its presence: on the first sequence (3 queries; row 0
    // sees only itself, row 1 its parent 0, row 2 neither of them nor
    // itself: an empty tree block), none on the second.
    if (f & kFlagTree) {
      k.tree_indptr = {0, 3, 3};
      k.tree_words = {0x1u, 0x3u | 0xf0u /* bits past t: ignored */, 0x0u};
      p.tree_indptr = k.tree_indptr.data(), p.tree_mask = k.tree_words.data();
    }
    // Top-k lists by their presence (a list per kv head, as the call's
    // shape says, or one per row): each row lists some of its sequence's
    // keys out of order, a repeat, a -1 pad and a position at u.
    if (f & kFlagTopk) {
      const bool per_head = c.topk && c.topk->ndim() == 3;
      const int64_t K = 6, lists = per_head ? hkv : 1;
      htopk.resize(size_t(tq * lists * K));
      for (int64_t r = 0; r < tq; ++r) {
        const int32_t uu = r < t[0] ? u[0] : u[1];
        for (int64_t h = 0; h < lists; ++h) {
          int32_t* l = &htopk[size_t((r * lists + h) * K)];
          l[0] = uu - 1 - int32_t(r + h) % uu, l[1] = int32_t(r * 5 + h) % uu, l[2] = -1;
          l[3] = l[0], l[4] = uu, l[5] = int32_t(tile + r) % uu;
        }
      }
      topk_t = per_head ? new_tensor(ctx, VKATTN_I32, {tq, int64_t(hkv), K})
                        : new_tensor(ctx, VKATTN_I32, {tq, K});
      topk_t->write(htopk.data());
      k.topk = topk_t.get();
      p.topk = htopk.data(), p.topk_k = int(K), p.topk_per_head = per_head;
    }
    if (f & kFlagSoftcap) {
      desc.softcap = c.desc.softcap > 0 ? c.desc.softcap : 30.0f;
      p.softcap = desc.softcap;
    }
    if (f & kFlagAlibi) {
      alibi = random_tensor(ctx, VKATTN_F32, {H}, rng, &halibi);
      for (float& s : halibi) s = 0.25f + 0.125f * s;  // positive slopes
      alibi->write(halibi.data());
      k.alibi = alibi.get(), p.alibi_slopes = halibi.data();
    }
    const int64_t mask_elems = int64_t(t[0]) * u[0] + int64_t(t[1]) * u[1];
    if (f & kFlagMaskBool) {
      desc.mask_type = VKATTN_MASK_BOOL;
      hbool.resize(mask_elems);
      for (uint8_t& m : hbool) m = rng.next() > -0.6f ? 1 : 0;
      mask = new_tensor(ctx, VKATTN_U8, {mask_elems});
      mask->write(hbool.data());
      k.mask = mask.get(), p.mask_type = 1, p.bool_mask = hbool.data();
    } else if (f & kFlagMaskAdd) {
      desc.mask_type = VKATTN_MASK_ADDITIVE;
      hmask.resize(mask_elems);
      for (float& m : hmask) m = rng.next() > 0.7f ? -INFINITY : 0.5f * rng.next();
      mask = new_tensor(ctx, VKATTN_F32, {mask_elems});
      mask->write(hmask.data());
      k.mask = mask.get(), p.mask_type = 2, p.add_mask = hmask.data();
    }
    if (f & kFlagKeyValid) {
      k.key_valid.resize(tk);
      hvalid.resize(tk);
      for (int64_t i = 0; i < tk; ++i) hvalid[i] = k.key_valid[i] = rng.next() > -0.7f ? 1 : 0;
      p.key_valid = hvalid.data();
    }
  }

  // An attention variant's pipeline (cfg.user): the call's variant with
  // parameters of the check's own (a call's may be any size and not yet
  // written on this queue): 1024 elements a declared slot, I32 small ids
  // in runs of three (document ids, buckets, indices all read in range),
  // F32 in [-1, 1). verdict() evaluates the functions on the device
  // (variant_table.h) and gives the reference that table.
  void add_user(const AttentionCall& c) {
    if (!cfg.user || !c.user) return;
    user = c.user;
    k.user = user;
    const int64_t n = 1024;
    for (uint32_t s = 0; s < 4; ++s) {
      const uint32_t dt = user->slot_dtype(s);
      if (dt == 0) continue;
      std::vector<uint32_t> words(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const float f = rng.next();
        const int32_t id = int32_t(i / 3 % 4);
        std::memcpy(&words[size_t(i)],
                    dt == VKATTN_F32 ? static_cast<const void*>(&f) : static_cast<const void*>(&id),
                    4);
      }
      user_t[s] = new_tensor(ctx, static_cast<vkattn_dtype>(dt), {n});
      user_t[s]->write(words.data());
      k.user_params[s] = user_t[s].get();
    }
  }

  // The user functions as the device computes them over every pair of the
  // check's grid, given to the reference: the scores the reference hands
  // vkattn_score_mod (found by a first pass) go through the table kernel.
  void user_reference() {
    if (!user) return;
    const int64_t base[2] = {0, int64_t(H) * t[0] * u[0]};
    auto index = [this, base](int seq, int head, long q_pos, long k_pos) {
      const long i = q_pos - (u[seq] - t[seq]);
      return size_t(base[seq] + (int64_t(head) * t[seq] + i) * u[seq] + k_pos);
    };
    std::vector<UserPair> pairs(size_t(base[1] + int64_t(H) * t[1] * u[1]));
    for (int b = 0; b < 2; ++b)
      for (uint32_t h = 0; h < H; ++h)
        for (int32_t i = 0; i < t[b]; ++i)
          for (int32_t j = 0; j < u[b]; ++j) {
            const int32_t pos = u[b] - t[b] + i;
            pairs[index(b, int(h), pos, j)] = {uint32_t(b), h, pos, j, 0.0f};
          }
    if (user->has_score()) {
      ref::AttentionParams first = p;
      first.user_mask = nullptr;
      first.user_score = [&](double sc, int seq, int head, long q_pos, long k_pos) {
        pairs[index(seq, head, q_pos, k_pos)].score = float(sc);
        return sc;
      };
      std::vector<float> o(size_t(tq) * H * dv), l(size_t(tq) * H);
      ref::attention_varlen(first, 2, cu_q, cu_k, hq.data(), hk.data(), hv.data(), o.data(),
                            l.data());
    }
    table = evaluate_user_functions(ctx, *user, k.user_params, pairs);
    if (user->has_mask())
      p.user_mask = [this, index](int seq, int head, long q_pos, long k_pos) {
        return table.shown[index(seq, head, q_pos, k_pos)] != 0;
      };
    if (user->has_score())
      p.user_score = [this, index](double, int seq, int head, long q_pos, long k_pos) {
        return double(table.score[index(seq, head, q_pos, k_pos)]);
      };
  }

  void place_kv() {
    // K and V: dense, in caller pools (paged 16/32-bit caches), or in a
    // cache of the call's 8-bit dtype (appended, then read back, so the
    // reference sees exactly the codes and scales the kernel reads).
    if (!cfg.paged) {
      kt = random_tensor(ctx, cfg.kv_dtype, {tk, hkv, d}, rng, &hk);
      vt = random_tensor(ctx, cfg.kv_dtype, {tk, hkv, dv}, rng, &hv);
      k.k = kt.get(), k.v = vt.get();
    } else if (!is_quantized(cfg.kv_dtype)) {
      // Pages of 4 tokens in a shuffled order.
      const uint32_t ps = 4;
      const uint32_t n0 = (u[0] + ps - 1) / ps, n1 = (u[1] + ps - 1) / ps, np = n0 + n1;
      auto pools = std::make_shared<AttentionCall::Pools>();
      pools->page_size = ps;
      for (uint32_t i = 0; i < np; ++i) pools->pages.push_back((i * 7 + 3) % np);
      if (std::gcd(7u, np) != 1)
        for (uint32_t i = 0; i < np; ++i) pools->pages[i] = np - 1 - i;
      pools->first = {0, n0};
      std::vector<float> pk, pv;
      kt = random_tensor(ctx, cfg.kv_dtype, {np, ps, hkv, d}, rng, &pk);
      vt = random_tensor(ctx, cfg.kv_dtype, {np, ps, hkv, dv}, rng, &pv);
      hk.resize(size_t(tk) * hkv * d), hv.resize(size_t(tk) * hkv * dv);
      for (uint32_t b = 0; b < 2; ++b)
        for (int32_t j = 0; j < u[b]; ++j) {
          const uint64_t page = pools->pages[pools->first[b] + j / ps], slot = j % ps;
          const uint64_t row = cu_k[b] + j;
          std::copy_n(&pk[(page * ps + slot) * hkv * d], hkv * d, &hk[row * hkv * d]);
          std::copy_n(&pv[(page * ps + slot) * hkv * dv], hkv * dv, &hv[row * hkv * dv]);
        }
      k.pools = pools;
      k.k = kt.get(), k.v = vt.get();
    } else {
      vkattn_kv_cache_desc cd;
      vkattn_kv_cache_desc_init(&cd);
      cd.num_layers = 1, cd.num_kv_heads = hkv, cd.head_dim = d, cd.head_dim_v = dv;
      cd.page_size = 4, cd.dtype = cfg.kv_dtype;
      cd.flags = rotate ? VKATTN_KV_ROTATE_KEYS : 0;
      cd.num_pages = static_cast<uint32_t>((u[0] + 3) / 4 + (u[1] + 3) / 4 + 2);
      cache = std::make_shared<KvCache>(ctx, cd);
      if (cache->fp8()) {
        const float ks[2] = {1.0f / 64, 1.0f / 32}, vs[2] = {1.0f / 32, 1.0f / 64};
        cache->set_scales(0, hkv, ks, vs);
      }
      const int64_t ids[2] = {1, 2};
      auto append = [&](const int32_t* n) {
        auto s = std::make_unique<Step>(cache, 2, ids, n);
        std::vector<float> tmp;
        const int64_t rows = n[0] + n[1];
        auto kn = random_tensor(ctx, VKATTN_F32, {rows, hkv, d}, rng, &tmp);
        auto vn = random_tensor(ctx, VKATTN_F32, {rows, hkv, dv}, rng, &tmp);
        s->append(0, kn.get(), vn.get());
        return s;
      };
      const int32_t before[2] = {u[0] - t[0], u[1] - t[1]};
      append(before)->commit();
      step = append(t);
      k.step = step.get(), k.layer = 0;
    }
  }

  // The call, and for 16-bit outputs the same call again into a view whose
  // rows start in the middle of a 32-bit word.
  void record() {
    record_attention(*ctx, k);
    // 16-bit outputs: the same call again into a view whose rows start in
    // the middle of a 32-bit word, so the odd-row store path (atomics on
    // shared words: a runtime flag of the same pipeline, kFlagOutOdd) is
    // checked with the pipeline.
    if (out->dtype() != VKATTN_F32) {
      odd_base = new_tensor(ctx, cfg.q_dtype, {tq * H * dv + 2});
      const int64_t shape[3] = {tq, H, dv}, strides[3] = {int64_t(H) * dv, dv, 1};
      odd_out = std::make_shared<Tensor>(ctx, odd_base->buffer(), dtype_size(cfg.q_dtype),
                                         cfg.q_dtype, 3, shape, strides);
      AttentionCall odd = k;
      odd.out = odd_out.get(), odd.lse = nullptr;
      record_attention(*ctx, odd);
    }
  }

  // Passed or failed, and the largest error against the reference.
  CheckRecords::Entry verdict() {
    if (cache) {
      // The keys as the cache holds them, once the step is committed.
      step->commit();
      const int64_t ids[2] = {1, 2};
      hk.resize(size_t(tk) * hkv * d), hv.resize(size_t(tk) * hkv * dv);
      for (uint32_t b = 0; b < 2; ++b)
        read_dequantized(*cache, ids[b], uint32_t(u[b]), &hk[size_t(cu_k[b]) * hkv * d],
                         &hv[size_t(cu_k[b]) * hkv * dv]);
      // Rotated keys: the reference attends over the keys they stand for
      // with the caller's queries (the kernel: rotated queries); the
      // transform is its own inverse.
      const uint32_t h = cache->key_rotation();
      if (h > 1)
        for (size_t g = 0; g < hk.size(); g += h) ref::hadamard_rotate(&hk[g], int(h));
    }
    user_reference();
    const std::vector<float> got = read_floats(*out);
    std::vector<float> want_f(size_t(tq) * H * dv), lse_f(size_t(tq) * H);
    ref::attention_varlen(p, 2, cu_q, cu_k, hq.data(), hk.data(), hv.data(), want_f.data(),
                          lse_f.data());
    // Tolerance: f32 end to end, or 16-bit inputs, f16 arithmetic or an
    // output rounded to 16 bits (errors of a few ulp of f16 at |x| <= 1).
    const bool narrow = cfg.q_dtype != VKATTN_F32 || cfg.kv_dtype != VKATTN_F32 || var.f16_math ||
                        var.family == AttentionFamily::kCoopmat;
    const double abs_tol = narrow ? 2e-2 : 1e-3, rel_tol = narrow ? 2e-2 : 1e-3;
    const std::vector<double> want(want_f.begin(), want_f.end());
    double err = scaled_error(got, want, abs_tol, rel_tol);
    if (odd_out) {
      std::vector<uint8_t> bytes(odd_base->nbytes());
      odd_base->read(bytes.data());
      const std::vector<float> all = vkattn_ref::decode_bytes(cfg.q_dtype, bytes);
      err = std::max(err, scaled_error(std::vector<float>(all.begin() + 1, all.end() - 1), want,
                                       abs_tol, rel_tol));
    }
    if (lse) {
      const std::vector<float> got_lse = read_floats(*lse);
      err = std::max(err, scaled_error(got_lse, std::vector<double>(lse_f.begin(), lse_f.end()),
                                       abs_tol, rel_tol));
    }
    return {err <= 1.0 ? CheckRecords::kPassed : CheckRecords::kFailed, err * abs_tol};
  }

  const bool rotate;  // a VKATTN_Q4 cache with VKATTN_KV_ROTATE_KEYS
  std::shared_ptr<Context> ctx;
  const FwdConfig& cfg;
  const AttentionVariant& var;
  const uint32_t d, dv;
  const uint32_t hkv = 2;  // two kv heads, a GQA group like the call's (at most 4)
  const uint32_t group, H;
  const uint32_t tile;  // keys: two tiles and a ragged tail, and a short sequence
  const int32_t t[2] = {3, 1};
  const int32_t u[2];
  const int32_t cu_q[3], cu_k[3];
  const int64_t tq, tk;
  Rng rng;
  AttentionCall k;  // the check's call
  vkattn_attention_desc& desc = k.desc;
  ref::AttentionParams p;
  std::vector<float> hq, hk, hv, hmask, halibi, hsinks;
  std::vector<uint8_t> hbool;
  std::vector<int32_t> hvalid, htopk;
  std::shared_ptr<Tensor> q, out, lse, mask, alibi, sinks, kt, vt, odd_base, odd_out, topk_t;
  std::shared_ptr<KvCache> cache;
  std::unique_ptr<Step> step;
  std::shared_ptr<UserFunctions> user;  // a variant pipeline's functions (add_user)
  std::shared_ptr<Tensor> user_t[4];
  UserTable table;
};

}  // namespace

CheckRecords::Entry run_self_check(Context& parent, const AttentionCall& c, const FwdConfig& cfg) {
  auto run = [&](bool rotate) {
    CheckCall check(parent.checker(), c, cfg, rotate);
    check.setup(c);
    check.add_transforms(c);
    check.add_user(c);
    check.place_kv();
    check.record();
    return check.verdict();
  };
  CheckRecords::Entry e = run(false);
  // A pipeline that reads VKATTN_Q4 is checked over a cache with rotated
  // keys too (its queries rotated first): both must pass. (An odd head
  // dim has nothing to rotate.)
  if (cfg.paged && cfg.kv_dtype == VKATTN_Q4 && (cfg.head_dim & 1) == 0) {
    const CheckRecords::Entry r = run(true);
    if (r.status != CheckRecords::kPassed) e.status = r.status;
    e.max_err = std::max(e.max_err, r.max_err);
  }
  return e;
}

CheckRecords::Entry self_check(Context& ctx, const AttentionCall& c, const FwdConfig& cfg) {
  if (!ctx.options().self_check || ctx.is_checker()) return {CheckRecords::kPassed, 0};
  const AttentionFamilyDesc& family = attention_family(cfg.var.family);
  const Pipeline& pipe = family.pipeline(ctx.pipelines(), cfg);
  auto known = [&](const CheckRecords::Entry& e) {
    pipe.check_status = e.status, pipe.check_max_err = e.max_err;
    return e;
  };
  if (pipe.check_status != CheckRecords::kUnchecked)
    return {static_cast<CheckRecords::Status>(pipe.check_status), pipe.check_max_err};
  const std::string key =
      CheckRecords::key(pipe.module, pipe.spec, pipe.full_subgroups, pipe.required_subgroup_size);
  CheckRecords& records = ctx.check_records();
  CheckRecords::Entry e = records.find(key);
  if (e.status != CheckRecords::kUnchecked) return known(e);
  if (ctx.recorder().external()) {
    if (first_time(records.path() + " external " + key))
      logf(VKATTN_LOG_WARNING,
           "attention family=%s runs unchecked in external mode (its self-check needs vkattn's own "
           "queue: run one call outside external mode first)",
           family.name);
    return {CheckRecords::kPassed, 0};
  }
  const auto t0 = std::chrono::steady_clock::now();
  // The check's own problem (two tiles of keys and a ragged tail) may not
  // fit a device's bindings where the call does (only under test limits,
  // VKATTN_BINDING_LIMIT, far below any real device's): the call is
  // refused with that reason, never run unchecked.
  try {
    e = known(run_self_check(ctx, c, cfg));
  } catch (const Error& err) {
    if (err.status() != VKATTN_ERROR_UNSUPPORTED) throw;
    fail(VKATTN_ERROR_UNSUPPORTED, "the self-check of attention family ", family.name,
         " cannot run on this device: ", err.what());
  }
  records.put(key, e);
  if (ctx.options().log_kernels)
    logf(VKATTN_LOG_DEBUG, "self-check family=%s %s (max err %.3g) in %.1f ms: %s", family.name,
         e.status == CheckRecords::kPassed ? "passed" : "FAILED", e.max_err,
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
         key.c_str());
  return e;
}

void settle_checked_variant(Context& ctx, const AttentionCall& c, PreparedPlan& pp,
                            const KernelOptions& base,
                            const std::function<void(const KernelOptions&)>& rechoose) {
  if (!ctx.options().self_check || ctx.is_checker()) return;
  using F = AttentionFamily;
  const AttentionDefaults dev = attention_defaults(ctx.device());
  KernelOptions opts = base;
  uint32_t failed = 0;    // bit per family: its check failed
  uint32_t excluded = 0;  // ... or it was asked for and declined the call
  std::string failures, fallback = pp.var.fallback;
  std::string err_of[4];  // per family: "max err e" of its failed check
  const uint32_t flags = call_flags(c);
  for (;;) {
    const F fam = pp.var.family;
    const uint32_t f = static_cast<uint32_t>(fam);
    if (!(failed >> f & 1)) {
      const CheckRecords::Entry e = self_check(ctx, c, fwd_config(ctx, c, pp, flags));
      if (e.status == CheckRecords::kPassed) {
        pp.var.fallback = fallback;
        return;
      }
      failed |= 1u << f;
      char err[64];
      std::snprintf(err, sizeof(err), "max err %.3g", e.max_err);
      err_of[f] = err;
      failures += (failures.empty() ? "" : "; ") + std::string(attention_family(fam).name) + " (" +
                  err + ")";
    }
    // The next family in the table's order of preference.
    std::vector<F> order;
    if (fam == F::kDecode && (dev.family == F::kLanes || dev.family == F::kTiled))
      order.push_back(dev.family);
    order.push_back(F::kTiled);
    order.push_back(F::kLanes);
    F next = fam;
    for (F o : order)
      if (!((failed | excluded) >> static_cast<uint32_t>(o) & 1)) {
        next = o;
        break;
      }
    if (next == fam)
      fail(VKATTN_ERROR_UNSUPPORTED,
           "no attention kernel family passed its self-check on this device for this call "
           "(head dims ",
           c.desc.head_dim, "/", c.desc.head_dim_v, ", q ", dtype_name(c.q->dtype()), ", K/V ",
           dtype_name(c.kv_dtype()), "): ", failures);
    const std::string why = std::string(attention_family(fam).name) + " to " +
                            attention_family(next).name + ": self-check failed (" + err_of[f] + ")";
    if (!ctx.options().log_kernels && first_time(ctx.check_records().path() + " " + why))
      logf(VKATTN_LOG_WARNING,
           "self-check failed: family=%s head dims %u/%u q %s K/V %s %s; using %s",
           attention_family(fam).name, c.desc.head_dim, c.desc.head_dim_v, dtype_name(c.q->dtype()),
           dtype_name(c.kv_dtype()), err_of[f].c_str(), attention_family(next).name);
    fallback += (fallback.empty() ? "" : "; ") + why;
    opts.attn_kernel = static_cast<uint32_t>(next);
    rechoose(opts);
    if (pp.var.family != next) excluded |= 1u << static_cast<uint32_t>(next);
    if (!pp.var.fallback.empty()) fallback += "; " + pp.var.fallback;
  }
}

void self_check_up_front(Context& ctx, const vkattn_attention_desc* desc, vkattn_dtype q_dt,
                         vkattn_dtype kv_dt, uint32_t paged, uint32_t query_tokens) {
  AttentionCall c;
  c.desc = check_attention_desc(desc);
  const auto& d = c.desc;
  auto require = [](bool ok, const char* what) {
    if (!ok) fail(VKATTN_ERROR_INVALID_ARGUMENT, what);
  };
  require(q_dt == VKATTN_F32 || q_dt == VKATTN_F16 || q_dt == VKATTN_BF16,
          "q_dtype must be f32, f16 or bf16");
  require(kv_dt == VKATTN_F32 || kv_dt == VKATTN_F16 || kv_dt == VKATTN_BF16 ||
              (paged && is_quantized(kv_dt)),
          "kv_dtype must be f32, f16 or bf16, or (paged) i8, fp8_e4m3 or q4");
  require(paged <= 1, "paged must be 0 or 1");
  require(query_tokens >= 1 && query_tokens <= (1u << 24), "query_tokens must be 1 .. 2^24");
  require(!ctx.recorder().external(),
          "self-checks run on vkattn's own queue: call this before vkattn_context_begin_external");
  ctx.recorder().check_alive();
  // The call's shape: one sequence of query_tokens tokens; tensors as the
  // call's dtypes (dense: their widest texels), the transforms its desc names.
  const int64_t t = query_tokens;
  std::vector<std::shared_ptr<Tensor>> keep;
  auto tensor = [&](vkattn_dtype dt, std::initializer_list<int64_t> shape) {
    keep.push_back(std::make_shared<Tensor>(ctx.checker(), dt, static_cast<uint32_t>(shape.size()),
                                            shape.begin()));
    return keep.back().get();
  };
  c.batch = 1;
  c.cu_q = {0, t};
  c.cu_k = {0, t};
  // (One head each: the texel widths and flags a call gets depend on the
  // head dims and dtypes, not on the head counts, which stay the desc's.)
  c.q = tensor(q_dt, {1, 1, d.head_dim});
  c.out = tensor(q_dt, {1, 1, d.head_dim_v});
  if (paged) {
    c.pools = std::make_shared<AttentionCall::Pools>();
    c.pools->page_size = 16;
    // (q4 pools cannot be tensors: int8 stand-ins, the call says q4.)
    c.q4_stand_in = kv_dt == VKATTN_Q4;
    const vkattn_dtype pool_dt = c.q4_stand_in ? VKATTN_I8 : kv_dt;
    c.k = tensor(pool_dt, {1, 16, 1, d.head_dim});
    c.v = tensor(pool_dt, {1, 16, 1, d.head_dim_v});
  } else {
    c.k = tensor(kv_dt, {1, 1, d.head_dim});
    c.v = tensor(kv_dt, {1, 1, d.head_dim_v});
  }
  // The desc's optional tensors, checked as a call checks them (their
  // presence decides the transforms; they are not read). A mask_type
  // without a mask tensor is fine here: the mask's shape depends on the
  // call's lengths, which this has not; a stand-in carries the type.
  take_optional_tensors(c);
  // Spans by their presence (not read: their lengths are a call's).
  if (d.span_indptr) c.span_indptr = {0, 0};
  c.desc.span_indptr = nullptr, c.desc.spans = nullptr;
  if (d.tree_indptr) c.tree_indptr = {0, 0};  // trees, by their presence
  c.desc.tree_indptr = nullptr, c.desc.tree_mask = nullptr;
  if (d.topk_indices)  // top-k lists by their presence (a stand-in of the desc's rank)
    c.topk = vkattn_tensor_ndim(d.topk_indices) == 3
                 ? tensor(VKATTN_I32, {t, int64_t(1), int64_t(1)})
                 : tensor(VKATTN_I32, {t, int64_t(1)});
  c.desc.topk_indices = nullptr;
  if (!c.mask && d.mask_type != VKATTN_MASK_NONE) {
    AttentionCall probe = c;
    probe.desc.mask_type = VKATTN_MASK_NONE;
    check_optional_tensors(ctx, probe);
    c.mask = tensor(d.mask_type == VKATTN_MASK_BOOL ? VKATTN_U8 : VKATTN_F32, {1});
  } else {
    check_optional_tensors(ctx, c);
  }
  PreparedPlan pp;
  const PlanPart part = ctx.options().batch_invariant ? part_of(t) : PlanPart::kAll;
  choose_variant(ctx, c, part, pp);
  // The tuning file's entries for this shape at every key count: a call's
  // longest sequence picks its class (k64, k128, ...; ops/attention/tune.h),
  // and the entry of that class decides its pipeline. A batch-invariant
  // context's class has no key count (one class: checked above); a kernel
  // forced through the environment wins over the file.
  if (part != PlanPart::kAll || !ctx.tuning().enabled() || ctx.tuning().empty() ||
      ctx.options().forces_attention())
    return;
  const std::string cls = tune_class(c, part, false);
  const std::string prefix = cls.substr(0, cls.rfind("/k") + 2);
  for (const auto& kv : ctx.tuning().all()) {
    if (kv.first.size() <= prefix.size() || kv.first.compare(0, prefix.size(), prefix) != 0)
      continue;
    const std::string count = kv.first.substr(prefix.size());
    if (count.size() > 10 || count.find_first_not_of("0123456789") != std::string::npos) continue;
    const uint64_t keys = std::stoull(count);
    // A class below the query tokens' (u >= t) no call of this shape meets.
    if (keys < 64 || keys > (1ull << 31) - 1 || keys * 2 <= uint64_t(t)) continue;
    AttentionCall at = c;
    at.cu_k = {0, std::max<int64_t>(int64_t(keys), t)};
    PreparedPlan tuned;
    choose_variant(ctx, at, part, tuned);
  }
}

void self_check_counts(Context& ctx, uint32_t family, uint32_t* passed, uint32_t* failed) {
  if (family > static_cast<uint32_t>(AttentionFamily::kDecode))
    fail(VKATTN_ERROR_INVALID_ARGUMENT, "family ", family,
         " is not an attention family (0 lanes, 1 tiled, 2 coopmat, 3 decode)");
  // Each family's shaders, by name.
  const char* prefix[] = {"attention_fwd:", "attention_tiled",
                          "attention_coopmat:", "attention_decode"};
  *passed = *failed = 0;
  for (const auto& kv : ctx.check_records().all())
    if (kv.first.rfind(prefix[family], 0) == 0)
      ++*(kv.second.status == CheckRecords::kPassed ? passed : failed);
}

}  // namespace vkattn

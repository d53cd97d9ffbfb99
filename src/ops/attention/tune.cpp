#include "ops/attention/tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "core/error.h"
#include "core/glob.h"
#include "core/tensor.h"
#include "core/tuning_file.h"
#include "ops/attention/devices.h"
#include "ops/attention/family.h"
#include "ops/attention/self_check.h"
#include "ops/kv_cache.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

namespace vkattn {

namespace {

// One default case: vkattn-bench's shapes (examples/bench/bench_cases.cpp),
// K/V dense or in caller pools of 16-token pages ("paged").
struct TuneCase {
  const char* name;
  uint32_t H, Hkv, d, dv;
  bool paged, causal;
  uint32_t batch, t, u;          // batch sequences of t query tokens over u keys
  vkattn_dtype kv = VKATTN_F16;  // 8-bit: a cache of that dtype (paged)
};
constexpr TuneCase kCases[] = {
    {"prefill-1k-8h-causal", 8, 8, 128, 128, false, true, 1, 1024, 1024},
    {"prefill-1k-8h", 8, 8, 128, 128, false, false, 1, 1024, 1024},
    {"prefill-2k-gqa", 32, 8, 128, 128, false, true, 1, 2048, 2048},
    {"prefill-1k-d64", 8, 8, 64, 64, false, true, 1, 1024, 1024},
    {"prefill-1k-d256", 8, 8, 256, 256, false, true, 1, 1024, 1024},
    {"chunk-512-over-1536", 32, 8, 128, 128, true, true, 1, 512, 2048},
    {"decode-1x4096", 32, 8, 128, 128, true, false, 1, 1, 4096},
    {"decode-16x2048", 32, 8, 128, 128, true, false, 16, 1, 2048},
    {"decode-16x2048-int8", 32, 8, 128, 128, true, false, 16, 1, 2048, VKATTN_I8},
    {"decode-16x2048-fp8", 32, 8, 128, 128, true, false, 16, 1, 2048, VKATTN_FP8_E4M3},
    {"decode-16x512", 32, 8, 128, 128, true, false, 16, 1, 512},
    {"decode-1x32768", 32, 8, 128, 128, false, false, 1, 1, 32768},
    {"gptoss-decode", 64, 8, 64, 64, true, false, 16, 1, 2048},
    {"mla-prefill", 16, 1, 576, 512, false, true, 1, 512, 512},
    {"mla-decode", 16, 1, 576, 512, true, false, 16, 1, 1024},
};
// A case's cache holds its u - t cached keys before its step (unsigned
// arithmetic below): every case has u >= t.
constexpr bool keys_cover_queries() {
  for (const TuneCase& c : kCases)
    if (c.u < c.t) return false;
  return true;
}
static_assert(keys_cover_queries(), "a tuning case needs u >= t");

// The candidates of a family: the options each forces (the tuning file's
// text, core/tuning_file.h), and a rough compile cost (lavapipe compiles
// long unrolled bodies slowly) that orders them cheapest first.
struct Candidate {
  std::string options;
  double cost = 0;
};

std::vector<Candidate> candidates(const DeviceCaps& caps, const TuneCase& tc, bool decode) {
  std::vector<Candidate> out;
  auto add = [&](double cost, const std::string& options) { out.push_back({options, cost}); };
  auto num = [](uint32_t v) { return std::to_string(v); };
  const double dv4 = (tc.d + tc.dv) / 4.0;
  // lanes: rows per lane and keys per block (decode: rows follow the tile).
  for (uint32_t rows : decode ? std::vector<uint32_t>{0} : std::vector<uint32_t>{1, 2, 4, 8})
    for (uint32_t bk : {4u, 8u})
      add(10 + (rows ? rows : 2) * dv4 * bk / 8,
          "kernel=lanes" + (rows ? ",rows=" + num(rows) : "") + ",block_keys=" + num(bk));
  // tiled: lanes per row and keys per tile; f16 arithmetic where offered.
  for (uint32_t L : {4u, 8u, 16u})
    for (uint32_t tk : {16u, 32u})
      for (bool f16 : {false, true})
        if (!f16 || caps.shader_float16)
          add(40 + dv4 / L * tk / 4, "kernel=tiled,lanes_per_row=" + num(L) +
                                         ",tile_keys=" + num(tk) + (f16 ? ",f16_math=1" : ""));
  // decode: lanes per key row and the shortest split.
  if (decode)
    for (uint32_t L : {4u, 8u, 16u})
      for (uint32_t split : {64u, 128u, 256u})
        add(30 + dv4 / L,
            "kernel=decode,lanes_per_row=" + num(L) + ",min_split_keys=" + num(split));
  // decode over pages: the block-table window off and on.
  if (decode && tc.paged)
    for (uint32_t pw : {0u, 64u}) add(31 + dv4 / 16, "kernel=decode,page_window=" + num(pw));
  // coopmat: subgroups and keys per tile (f16 K/V only; the family
  // declines the rest).
  if (!decode && caps.coopmat.usable() && coopmat_built())
    for (uint32_t sgs : {1u, 2u, 4u})
      for (uint32_t tk : {16u, 32u, 64u})
        add(200 + sgs * tk, "kernel=coopmat,subgroups=" + num(sgs) + ",tile_keys=" + num(tk));
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
  return out;
}

// What decides a variant's speed, for dropping candidates that come out
// the same.
std::string signature(const AttentionVariant& v) {
  char s[256];
  std::snprintf(s, sizeof(s), "%u/%u/%u/%u/%u/%u/%u/%u/%d%d%d%d%d/%u/%u/%u/%u/%u/%u/%u/%u",
                unsigned(v.family), v.wg, v.rows, v.block_keys, v.lanes_per_row, v.tile_keys,
                v.subgroups, v.head_chunk, v.f16_math, v.double_buffer, v.unroll_d, v.subgroup_ops,
                v.decode_merge, v.min_split_keys, v.target_items, v.max_keys, v.decode_min_keys,
                v.row_splits, v.page_window, v.balance_items, v.touch_ahead);
  return s;
}

// A case's problem on the tuner's context: tensors with random values
// (rounded to f16), the call, and host copies for the reference.
struct Problem {
  std::vector<std::shared_ptr<Tensor>> keep;
  std::shared_ptr<KvCache> cache;  // 8-bit cases
  std::unique_ptr<Step> step;      // open while the candidates run
  AttentionCall call;
  std::vector<float> hq, hk, hv;  // packed [T, H, d], [U, Hkv, d|dv]
  std::vector<int32_t> cu_q, cu_k;
};

void build_problem(const std::shared_ptr<Context>& ctx, const TuneCase& tc, Problem* p) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = vkattn_ref::round_to(VKATTN_F16, uni(rng));
    return v;
  };
  auto tensor = [&](std::initializer_list<int64_t> shape, const std::vector<float>& data) {
    p->keep.push_back(std::make_shared<Tensor>(ctx, VKATTN_F16, static_cast<uint32_t>(shape.size()),
                                               shape.begin()));
    if (!data.empty()) {
      const std::vector<uint8_t> b = vkattn_ref::encode_bytes(VKATTN_F16, data);
      p->keep.back()->write(b.data());
    }
    return p->keep.back().get();
  };
  const int64_t T = int64_t(tc.batch) * tc.t, U = int64_t(tc.batch) * tc.u;
  p->cu_q.assign(1, 0);
  p->cu_k.assign(1, 0);
  for (uint32_t b = 0; b < tc.batch; ++b) {
    p->cu_q.push_back(p->cu_q.back() + int32_t(tc.t));
    p->cu_k.push_back(p->cu_k.back() + int32_t(tc.u));
  }
  AttentionCall& c = p->call;
  vkattn_attention_desc_init(&c.desc);
  c.desc.num_heads = tc.H, c.desc.num_kv_heads = tc.Hkv;
  c.desc.head_dim = tc.d, c.desc.head_dim_v = tc.dv, c.desc.causal = tc.causal;
  c.desc.scale = static_cast<float>(1.0 / std::sqrt(double(tc.d)));
  c.batch = tc.batch;
  c.cu_q.assign(p->cu_q.begin(), p->cu_q.end());
  c.cu_k.assign(p->cu_k.begin(), p->cu_k.end());
  p->hq = fill(size_t(T) * tc.H * tc.d);
  c.q = tensor({T, tc.H, tc.d}, p->hq);
  c.out = tensor({T, tc.H, tc.dv}, {});
  p->hk = fill(size_t(U) * tc.Hkv * tc.d);
  p->hv = fill(size_t(U) * tc.Hkv * tc.dv);
  if (!tc.paged) {
    c.k = tensor({U, tc.Hkv, tc.d}, p->hk);
    c.v = tensor({U, tc.Hkv, tc.dv}, p->hv);
    return;
  }
  if (is_quantized(tc.kv)) {
    // A cache of that dtype: each sequence's first u - t keys appended and
    // committed, then its t new ones in a step; committed and read back
    // (the reference sees the codes and scales the kernels read); then cut
    // back and the same rows appended again in the step the candidates
    // run on.
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 1, cd.num_kv_heads = tc.Hkv, cd.head_dim = tc.d, cd.head_dim_v = tc.dv;
    cd.page_size = 16, cd.dtype = tc.kv;
    cd.num_pages = tc.batch * ((tc.u + 15) / 16 + 1);
    p->cache = std::make_shared<KvCache>(ctx, cd);
    if (p->cache->fp8()) {
      const std::vector<float> scales(tc.Hkv, 1.0f / 128);
      p->cache->set_scales(0, tc.Hkv, scales.data(), scales.data());
    }
    std::vector<int64_t> ids(tc.batch);
    for (uint32_t b = 0; b < tc.batch; ++b) ids[b] = b + 1;
    auto rows = [&](uint32_t n, uint32_t dim) {
      const std::vector<float> x = fill(size_t(n) * tc.batch * tc.Hkv * dim);
      std::vector<float> f32(x.begin(), x.end());
      auto t = std::make_shared<Tensor>(
          ctx, VKATTN_F32, 3,
          std::initializer_list<int64_t>{int64_t(n) * tc.batch, tc.Hkv, dim}.begin());
      t->write(f32.data());
      p->keep.push_back(t);
      return t.get();
    };
    auto step = [&](uint32_t n, Tensor* k, Tensor* v) {
      const std::vector<int32_t> t(tc.batch, int32_t(n));
      auto s = std::make_unique<Step>(p->cache, tc.batch, ids.data(), t.data());
      s->append(0, k, v);
      return s;
    };
    step(tc.u - tc.t, rows(tc.u - tc.t, tc.d), rows(tc.u - tc.t, tc.dv))->commit();
    Tensor* kn = rows(tc.t, tc.d);
    Tensor* vn = rows(tc.t, tc.dv);
    step(tc.t, kn, vn)->commit();
    for (uint32_t b = 0; b < tc.batch; ++b) {
      read_dequantized(*p->cache, ids[b], tc.u, &p->hk[size_t(p->cu_k[b]) * tc.Hkv * tc.d],
                       &p->hv[size_t(p->cu_k[b]) * tc.Hkv * tc.dv]);
      p->cache->truncate(ids[b], int32_t(tc.u - tc.t));
    }
    p->step = step(tc.t, kn, vn);
    c.step = p->step.get();
    c.layer = 0;
    return;
  }
  // Caller pools of 16-token pages, every sequence's pages in a shuffled
  // order: the packed rows moved to their pages.
  const uint32_t ps = 16, per = (tc.u + ps - 1) / ps, np = per * tc.batch;
  auto pools = std::make_shared<AttentionCall::Pools>();
  pools->page_size = ps;
  for (uint32_t i = 0; i < np; ++i) pools->pages.push_back(i);
  std::shuffle(pools->pages.begin(), pools->pages.end(), rng);
  for (uint32_t b = 0; b < tc.batch; ++b) pools->first.push_back(uint64_t(b) * per);
  std::vector<float> pk(size_t(np) * ps * tc.Hkv * tc.d, 0.0f),
      pv(size_t(np) * ps * tc.Hkv * tc.dv, 0.0f);
  for (uint32_t b = 0; b < tc.batch; ++b)
    for (uint32_t j = 0; j < tc.u; ++j) {
      const size_t page = pools->pages[pools->first[b] + j / ps], slot = j % ps;
      const size_t row = size_t(p->cu_k[b]) + j;
      std::copy_n(&p->hk[row * tc.Hkv * tc.d], tc.Hkv * tc.d,
                  &pk[(page * ps + slot) * tc.Hkv * tc.d]);
      std::copy_n(&p->hv[row * tc.Hkv * tc.dv], tc.Hkv * tc.dv,
                  &pv[(page * ps + slot) * tc.Hkv * tc.dv]);
    }
  c.pools = pools;
  c.k = tensor({int64_t(np), int64_t(ps), tc.Hkv, tc.d}, pk);
  c.v = tensor({int64_t(np), int64_t(ps), tc.Hkv, tc.dv}, pv);
}

// The device's answers on sampled query rows against the reference (each
// row as a one-token sequence over the keys it sees): the largest error.
double sampled_error(const TuneCase& tc, const Problem& p, const std::vector<float>& got) {
  double worst = 0;
  const uint32_t rows = tc.batch * tc.t;
  for (uint32_t s = 0; s < 8; ++s) {
    const uint32_t r = s == 7 ? rows - 1 : uint32_t((uint64_t(rows) * s) / 7);
    const uint32_t b = r / tc.t, i = r % tc.t;
    const int32_t pos = int32_t(tc.u - tc.t + i);
    const int32_t keys = tc.causal ? pos + 1 : int32_t(tc.u);
    ref::AttentionParams prm;
    prm.num_heads = int(tc.H), prm.num_kv_heads = int(tc.Hkv);
    prm.head_dim = int(tc.d), prm.head_dim_v = int(tc.dv);
    prm.scale = p.call.desc.scale;
    const int32_t cq[2] = {0, 1}, ck[2] = {0, keys};
    std::vector<float> want(size_t(tc.H) * tc.dv), lse(tc.H);
    ref::attention_varlen(prm, 1, cq, ck, &p.hq[size_t(r) * tc.H * tc.d],
                          &p.hk[size_t(p.cu_k[b]) * tc.Hkv * tc.d],
                          &p.hv[size_t(p.cu_k[b]) * tc.Hkv * tc.dv], want.data(), lse.data());
    for (size_t e = 0; e < want.size(); ++e) {
      const double err = std::fabs(double(got[size_t(r) * tc.H * tc.dv + e]) - want[e]);
      if (!(err == err)) return INFINITY;
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace

const char* tune_case_name(uint32_t index) {
  return index < sizeof(kCases) / sizeof(kCases[0]) ? kCases[index].name : nullptr;
}

std::string tune_class(const AttentionCall& c, PlanPart part, bool invariant) {
  const auto& d = c.desc;
  int64_t max_t = 0, max_u = 0;
  for (uint32_t b = 0; b < c.batch; ++b) {
    if (part != PlanPart::kAll && part_of(c.cu_q[b + 1] - c.cu_q[b]) != part) continue;
    max_t = std::max<int64_t>(max_t, c.cu_q[b + 1] - c.cu_q[b]);
    max_u = std::max<int64_t>(max_u, c.cu_k[b + 1] - c.cu_k[b]);
  }
  const bool decode =
      part == PlanPart::kAll ? max_t <= int64_t(kDecodeMaxTokens) : part == PlanPart::kDecode;
  char s[160];
  std::snprintf(s, sizeof(s), "%s/d%u/dv%u/g%u/q=%s/kv=%s/%s", decode ? "decode" : "prefill",
                d.head_dim, d.head_dim_v, d.num_heads / d.num_kv_heads, dtype_name(c.q->dtype()),
                dtype_name(c.kv_dtype()), c.paged() ? "paged" : "dense");
  std::string key = s;
  if (invariant && part != PlanPart::kAll) return key + "/inv";
  uint64_t k = 64;  // the largest power of two <= the keys, at least 64
  while (k * 2 <= uint64_t(max_u)) k *= 2;
  return key + "/k" + std::to_string(k);
}

void run_tuning(Context& parent, const vkattn_tune_desc& desc) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // The cases the patterns name.
  std::vector<const TuneCase*> cases;
  for (const TuneCase& tc : kCases) {
    bool take = desc.num_cases == 0;
    for (uint32_t i = 0; i < desc.num_cases && !take; ++i)
      take = vkattn_glob_match(desc.cases[i], tc.name);
    if (take) cases.push_back(&tc);
  }
  for (uint32_t i = 0; i < desc.num_cases; ++i) {
    bool any = false;
    for (const TuneCase& tc : kCases) any = any || vkattn_glob_match(desc.cases[i], tc.name);
    if (!any)
      fail(VKATTN_ERROR_INVALID_ARGUMENT, "tuning case pattern \"", desc.cases[i],
           "\" matches no case (vkattn_tune_case_name lists them)");
  }
  auto progress = [&](const char* name, const std::string& cand, double ms) {
    if (desc.progress) desc.progress(desc.user, name, cand.c_str(), ms);
  };
  auto ctx = std::make_shared<Context>(parent, Context::Role::kTuner);
  const KernelOptions base = parent.options();
  const DeviceCaps& caps = parent.device().caps();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const TuneCase& tc = *cases[ci];
    // This case's share of what is left.
    const double deadline = elapsed() + (desc.seconds - elapsed()) / double(cases.size() - ci);
    if (elapsed() >= desc.seconds) break;
    Problem p;
    build_problem(ctx, tc, &p);
    const bool decode = tc.t <= kDecodeMaxTokens;
    const PlanPart part =
        base.batch_invariant ? (decode ? PlanPart::kDecode : PlanPart::kPrefill) : PlanPart::kAll;
    const std::string key = tune_class(p.call, part, base.batch_invariant);
    const uint32_t group = tc.H / tc.Hkv;
    const uint32_t max_rows = part == PlanPart::kDecode    ? group
                              : part == PlanPart::kPrefill ? kInvariantPrefillRows
                                                           : tc.t * group;
    // The device table's choice first (always measured), then the others.
    std::vector<Candidate> list{Candidate{"-", 0}};
    for (const Candidate& c : candidates(caps, tc, decode)) list.push_back(c);
    std::set<std::string> seen;
    double best_ms = 0, table_ms = 0;
    std::string best = "";
    for (size_t k = 0; k < list.size(); ++k) {
      // A case started before the deadline always measures the table's
      // choice; no other candidate starts past its share.
      if (k > 0 && elapsed() >= std::min(deadline, desc.seconds)) break;
      // Only the knobs a candidate sets; the rest as the context has them.
      const std::string& name = list[k].options;
      KernelOptions opts = base;
      TuningFile::apply(name, &opts);
      // Candidates that come out as one already measured, or that this
      // device cannot run, are skipped.
      AttentionFamily family;
      try {
        const AttentionVariant v =
            choose_attention_variant(parent.device(), opts, tc.d, tc.dv, max_rows, tc.kv, group);
        if (!v.fallback.empty() && k > 0) {
          progress(tc.name, name, -2);
          continue;
        }
        if (!seen.insert(signature(v)).second) continue;
        family = v.family;
      } catch (const Error&) {
        progress(tc.name, name, -2);
        continue;
      }
      ctx->set_options(opts);
      if (p.call.step) p.call.step->plans.clear();  // a step keeps its plans: not across candidates
      double ms = -1;
      try {
        // The first run compiles, self-checks (a failed family moves the
        // call elsewhere: then this candidate is not what ran) and is
        // checked on sampled rows.
        AttentionCall call = p.call;
        PreparedPlan probe;
        choose_variant(*ctx, call, part, probe);
        if (probe.var.family != family) throw Error(VKATTN_ERROR_UNSUPPORTED, "self-check failed");
        record_attention(*ctx, call);
        std::vector<uint8_t> bytes(p.call.out->nbytes());
        p.call.out->read(bytes.data());
        const std::vector<float> got = vkattn_ref::decode_bytes(VKATTN_F16, bytes);
        if (!(sampled_error(tc, p, got) <= 2e-2)) throw Error(VKATTN_ERROR_INTERNAL, "wrong");
        std::vector<double> times;
        for (int rep = 0; rep < 5; ++rep) {
          record_attention(*ctx, call);
          ctx->recorder().synchronize();
          times.push_back(double(ctx->recorder().last_gpu_ns()) * 1e-6);
        }
        std::sort(times.begin(), times.end());
        ms = times[times.size() / 2];
      } catch (const Error& e) {
        if (e.status() == VKATTN_ERROR_DEVICE_LOST || e.status() == VKATTN_ERROR_OUT_OF_HOST_MEMORY)
          throw;
        ms = -1;
      }
      progress(tc.name, name, ms);
      if (ms < 0) continue;
      if (k == 0) table_ms = ms;
      if (best.empty() || ms < best_ms) best_ms = ms, best = name;
    }
    if (best.empty()) continue;
    // The file is what vkattn_tune is for: a write that fails fails the call.
    std::string why;
    if (!parent.tuning().put(key, TuningFile::Entry{best, best_ms, table_ms}, &why))
      fail(VKATTN_ERROR_UNSUPPORTED, "cannot write the tuning file: ", why);
    progress(tc.name, "winner: " + best, best_ms);
  }
}

}  // namespace vkattn

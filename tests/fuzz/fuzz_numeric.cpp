// The fuzzer's issue-E4 operations (fuzz_numeric.h).
#include "fuzz/fuzz_numeric.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/handles.h"
#include "core/tuning_file.h"
#include "fuzz/fuzz_util.h"
#include "ops/attention/tune.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"

namespace vkattn_fuzz {

namespace {

struct Owned {
  std::vector<vkattn_tensor*> t;
  ~Owned() {
    for (vkattn_tensor* x : t) vkattn_tensor_destroy(x);
  }
  vkattn_tensor* make(vkattn_context* ctx, vkattn_dtype dt, std::vector<int64_t> shape,
                      const std::vector<float>& x) {
    vkattn_tensor* r = nullptr;
    ok(vkattn_tensor_create(ctx, dt, uint32_t(shape.size()), shape.data(), &r), "tensor_create");
    t.push_back(r);
    const std::vector<uint8_t> b = vkattn_ref::encode_bytes(int(dt), x);
    ok(vkattn_tensor_write(r, b.data(), b.size()), "tensor_write");
    return r;
  }
};

std::vector<float> read(vkattn_tensor* t) {
  std::vector<uint8_t> b(vkattn_tensor_nbytes(t));
  ok(vkattn_tensor_read(t, b.data(), b.size()), "tensor_read");
  return vkattn_ref::decode_bytes(int(vkattn_tensor_dtype(t)), b);
}

// A small dense call drawn from the input: shapes, flags and values.
struct Call {
  uint32_t hkv = 1, group = 1, d = 8, batch = 1;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  vkattn_dtype kdt = VKATTN_F32;
  bool causal = false;
  int32_t window = -1;
  float scale = 0, softcap = 0;
  std::vector<float> q, k, v, sinks;
  uint32_t H() const { return hkv * group; }
};

Call draw_call(FuzzedDataProvider& in, float qmag, float vmag) {
  Call c;
  c.hkv = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  c.group = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  c.d = in.PickValueInArray({3u, 8u});
  c.batch = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  for (uint32_t b = 0; b < c.batch; ++b) {
    c.cu_q.push_back(c.cu_q.back() + in.ConsumeIntegralInRange<int32_t>(0, 9));
    c.cu_k.push_back(c.cu_k.back() + in.ConsumeIntegralInRange<int32_t>(0, 40));
  }
  c.kdt = in.PickValueInArray({VKATTN_F32, VKATTN_F16, VKATTN_BF16});
  c.causal = in.ConsumeBool();
  c.window = in.ConsumeIntegralInRange<int32_t>(-1, 12);
  c.softcap = in.PickValueInArray({0.0f, 0.0f, 5.0f, 1e30f});
  auto values = [&](size_t n, float m) {
    std::vector<float> x(n);
    for (float& e : x) e = float(in.ConsumeIntegral<int8_t>()) / 16.0f * m;
    return x;
  };
  const size_t T = size_t(c.cu_q.back()), U = size_t(c.cu_k.back());
  c.q = values(T * c.H() * c.d, qmag);
  c.k = values(U * c.hkv * c.d, 1.0f);
  c.v = values(U * c.hkv * c.d, vmag);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) c.sinks = values(c.H(), 1.0f);
  return c;
}

struct Result {
  vkattn_status status = VKATTN_SUCCESS;
  std::vector<float> out, lse, want, want_lse;
};

// An attention variant for run(): the object, its I32 parameter in slot 0
// (or none), and the same functions on the host.
struct VariantUse {
  vkattn_variant* variant = nullptr;
  std::vector<int32_t> ids;  // slot 0 (empty: the variant declares no slot)
  std::function<bool(int, int, long, long)> mask;
  std::function<double(double, int, int, long, long)> score;
};

// Runs c on ctx (dense f32 q/out, K/V of c.kdt, lse) and the reference.
Result run(vkattn_context* ctx, const Call& c, const VariantUse* vu = nullptr) {
  Owned o;
  const int64_t T = c.cu_q.back(), U = c.cu_k.back(), H = c.H(), d = c.d;
  vkattn_tensor* q = o.make(ctx, VKATTN_F32, {T, H, d}, c.q);
  vkattn_tensor* k = o.make(ctx, c.kdt, {U, c.hkv, d}, c.k);
  vkattn_tensor* v = o.make(ctx, c.kdt, {U, c.hkv, d}, c.v);
  vkattn_tensor* out = o.make(ctx, VKATTN_F32, {T, H, d}, std::vector<float>(T * H * d, NAN));
  vkattn_tensor* lse = o.make(ctx, VKATTN_F32, {T, H}, std::vector<float>(T * H, NAN));
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = uint32_t(H), desc.num_kv_heads = c.hkv, desc.head_dim = c.d;
  desc.causal = c.causal, desc.window_left = c.window, desc.scale = c.scale;
  desc.softcap = c.softcap, desc.lse = lse;
  if (!c.sinks.empty()) desc.sinks = o.make(ctx, VKATTN_F32, {H}, c.sinks);
  if (vu) {
    desc.variant = vu->variant;
    if (!vu->ids.empty()) {  // (I32: written as they are, not through make's float codes)
      const int64_t n = int64_t(vu->ids.size());
      vkattn_tensor* ids = nullptr;
      ok(vkattn_tensor_create(ctx, VKATTN_I32, 1, &n, &ids), "tensor_create");
      o.t.push_back(ids);
      ok(vkattn_tensor_write(ids, vu->ids.data(), vu->ids.size() * 4), "tensor_write");
      desc.variant_params[0] = ids;
    }
  }
  Result r;
  r.status =
      vkattn_attention_varlen(ctx, &desc, c.batch, c.cu_q.data(), c.cu_k.data(), q, k, v, out);
  if (r.status != VKATTN_SUCCESS) return r;
  r.out = read(out), r.lse = read(lse);
  vkattn::ref::AttentionParams p;
  p.num_heads = int(H), p.num_kv_heads = int(c.hkv), p.head_dim = int(d), p.head_dim_v = int(d);
  p.scale = c.scale, p.causal = c.causal, p.window_left = c.window, p.softcap = c.softcap;
  p.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
  if (vu) p.user_mask = vu->mask, p.user_score = vu->score;
  r.want.resize(r.out.size()), r.want_lse.resize(r.lse.size());
  vkattn::ref::attention_varlen(p, int(c.batch), c.cu_q.data(), c.cu_k.data(), c.q.data(),
                                c.k.data(), c.v.data(), r.want.data(), r.want_lse.data());
  return r;
}

// Kinds of a value: NaN, -inf, +inf, finite.
int kind(float x) {
  return std::isnan(x) ? 0 : x == -INFINITY ? 1 : x == INFINITY ? 2 : 3;
}

// The variants variant_call draws from: sources and their host functions
// (ids: slot 0's I32 values; an index past them reads 0).
struct VariantSource {
  const char* glsl;
  bool has_ids;
};
const VariantSource kVariantSources[] = {
    // Documents: an id per position (negative q_pos: rows of t > u see none).
    {"bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n"
     "  return q_pos >= 0 && vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, "
     "uint(k_pos));\n"
     "}\n",
     true},
    // A stride pattern and a score per head.
    {"bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n"
     "  return ((q_pos - k_pos) & 3) != 1;\n}\n"
     "float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {\n"
     "  return score * 0.5 + float(head) * 0.25 - float(seq);\n}\n",
     false},
    // -inf hides key 0; NaN makes head 1's rows that see key 2 NaN.
    {"float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {\n"
     "  if (k_pos == 0) return uintBitsToFloat(0xff800000u);\n"
     "  return head == 1u && k_pos == 2 ? uintBitsToFloat(0x7fc00000u) : score;\n}\n",
     false},
};

VariantUse variant_use(int which, const std::vector<int32_t>& ids) {
  VariantUse u;
  auto id = [ids](long i) { return i >= 0 && size_t(i) < ids.size() ? ids[size_t(i)] : 0; };
  switch (which) {
    case 0:
      u.ids = ids;
      u.mask = [id](int, int, long q, long k) { return q >= 0 && id(q) == id(k); };
      break;
    case 1:
      u.mask = [](int, int, long q, long k) { return ((q - k) & 3) != 1; };
      u.score = [](double s, int b, int h, long, long) { return s * 0.5 + h * 0.25 - b; };
      break;
    default:
      u.score = [](double s, int, int h, long, long k) {
        return k == 0 ? -INFINITY : h == 1 && k == 2 ? NAN : s;
      };
      break;
  }
  return u;
}

}  // namespace

// One variant per source and context, made at first use (compiling is
// the slow part) and destroyed by release_variants (a variant keeps its
// context alive: one never destroyed leaks the device). On the heap: the
// exit handler that calls release_variants runs after static destructors
// of objects made later than it was registered.
std::map<std::pair<vkattn_context*, int>, vkattn_variant*>& made_variants() {
  static auto* made = new std::map<std::pair<vkattn_context*, int>, vkattn_variant*>;
  return *made;
}

void release_variants() {
  for (auto& [key, var] : made_variants()) vkattn_variant_destroy(var);
  made_variants().clear();
}

void variant_call(FuzzedDataProvider& in, vkattn_context* ctx) {
  const int which = in.ConsumeIntegralInRange<int>(0, 2);
  vkattn_variant*& var = made_variants()[{ctx, which}];
  if (!var) {
    vkattn_variant_desc vd;
    vkattn_variant_desc_init(&vd);
    vd.source = kVariantSources[which].glsl;
    if (kVariantSources[which].has_ids) vd.param_dtypes[0] = VKATTN_I32;
    const vkattn_status s = vkattn_variant_create(ctx, &vd, &var);
    if (s == VKATTN_ERROR_UNSUPPORTED) return;  // (no GLSL compiler in this process: said so)
    ok(s, "variant_create");
  }
  Call c = draw_call(in, 1.0f / 8, 1.0f / 8);
  c.scale = 0;
  std::vector<int32_t> ids(in.ConsumeIntegralInRange<size_t>(1, 48));
  for (int32_t& x : ids) x = in.ConsumeIntegralInRange<int32_t>(0, 2);
  VariantUse u = variant_use(which, ids);
  u.variant = var;
  const Result r = run(ctx, c, &u);
  ok(r.status, "attention_varlen (variant)");
  auto same = [](float got, float want) {
    return kind(got) == kind(want) && (kind(got) != 3 || std::fabs(double(got) - want) <= 2e-2);
  };
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!same(r.out[i], r.want[i]))
      die("variant " + std::to_string(which) + ": out " + std::to_string(i) + " is " +
          std::to_string(r.out[i]) + ", the reference's " + std::to_string(r.want[i]));
  for (size_t i = 0; i < r.lse.size(); ++i)
    if (!same(r.lse[i], r.want_lse[i]))
      die("variant " + std::to_string(which) + ": lse " + std::to_string(i) + " is " +
          std::to_string(r.lse[i]) + ", the reference's " + std::to_string(r.want_lse[i]));
}

void numeric_edges(FuzzedDataProvider& in, vkattn_context* ctx) {
  // q = values x 2^eq, k = values x 2^ek, scale 2^es (|values| in
  // [1/16, 8] or 0): every product q_c k_c normal or 0, |scale dot(q, k)|
  // below 2^110, k inside its dtype's normal range (f16: 2^-14 .. 65504),
  // while scale x q alone may pass f32's range.
  const int eq = in.ConsumeIntegralInRange<int>(-60, 60);
  Call c = draw_call(in, std::ldexp(1.0f, eq), 1.0f);
  const bool f16 = c.kdt == VKATTN_F16;
  const int ek_lo = std::max(f16 ? -10 : -60, -100 - eq), ek_hi = std::min(f16 ? 12 : 60, 100 - eq);
  const int ek = ek_lo <= ek_hi ? in.ConsumeIntegralInRange<int>(ek_lo, ek_hi) : 0;
  const int es = in.ConsumeIntegralInRange<int>(-100, std::min(120, 100 - eq - ek));
  for (float& x : c.k) x = std::ldexp(x, ek);
  c.scale = std::ldexp(1.0f, es);
  // Non-finite K elements (NaN, +inf, -inf) and NaN V elements at a few
  // keys; queries see them or not as causal, the window and the lengths say.
  const int n_bad = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < n_bad && !c.k.empty(); ++i) {
    const size_t at = in.ConsumeIntegralInRange<size_t>(0, c.k.size() - 1);
    const float x = in.PickValueInArray({NAN, INFINITY, -INFINITY});
    if (in.ConsumeBool())
      c.k[at] = x;
    else
      c.v[at] = NAN;
  }
  const Result r = run(ctx, c);
  ok(r.status, "attention_varlen (numeric edges)");
  for (size_t i = 0; i < r.lse.size(); ++i)
    if (kind(r.lse[i]) != kind(r.want_lse[i]))
      die("numeric edges: lse " + std::to_string(i) + " is " + std::to_string(r.lse[i]) +
          ", the reference's " + std::to_string(r.want_lse[i]) + " (scale 2^" + std::to_string(es) +
          ", q 2^" + std::to_string(eq) + ", k 2^" + std::to_string(ek) + ")");
  for (size_t i = 0; i < r.out.size(); ++i)
    if (kind(r.out[i]) != kind(r.want[i]))
      die("numeric edges: out " + std::to_string(i) + " is " + std::to_string(r.out[i]) +
          ", the reference's " + std::to_string(r.want[i]) + " (scale 2^" + std::to_string(es) +
          ")");
}

void tuning_entry(FuzzedDataProvider& in, vkattn_context* ctx) {
  // The entry's options: "-" or 1-4 knobs, values at the edges and inside.
  static const char* const kKnob[] = {
      "kernel",        "wg",        "rows",          "block_keys", "unroll_d",
      "lanes_per_row", "tile_keys", "double_buffer", "subgroups",  "min_split_keys",
      "target_items",  "f16_math",  "subgroup_ops"};
  static const char* const kValue[] = {"0",  "1",  "2",  "3",   "4",    "7",    "8",        "16",
                                       "32", "64", "65", "128", "1024", "4096", "999999999"};
  std::string options;
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    options = "-";
  } else {
    const int n = in.ConsumeIntegralInRange<int>(1, 4);
    for (int i = 0; i < n; ++i) {
      const std::string knob = in.PickValueInArray(kKnob);
      std::string value = in.PickValueInArray(kValue);
      if (knob == "kernel")
        value = in.PickValueInArray({"lanes", "tiled", "coopmat", "decode", "banana"});
      options += (i ? "," : "") + knob + "=" + value;
    }
  }
  Call c = draw_call(in, 1.0f / 8, 1.0f / 8);  // |values| <= 1: f16 arithmetic stays close
  for (float& x : c.k) x /= 8;
  c.scale = 0;
  c.softcap = 0;  // (its accuracy is not what this op checks)
  // The file, written through vkattn's own writer (this device's header),
  // holding just this entry for the call's class.
  vkattn_vulkan_desc vd;
  vkattn_vulkan_desc_init(&vd);
  ok(vkattn_context_synchronize(ctx), "synchronize");
  ok(vkattn_context_get_vulkan(ctx, &vd), "context_get_vulkan");
  const bool invariant = ctx->impl->options().batch_invariant;
  vd.flags = invariant ? VKATTN_CONTEXT_BATCH_INVARIANT : 0;
  const std::string path = "/tmp/vkattn-fuzz-tuning-" + std::to_string(getpid()) + ".txt";
  std::remove(path.c_str());
  const char* old = std::getenv("VKATTN_TUNING_FILE");
  const std::string saved = old ? old : "";
  setenv("VKATTN_TUNING_FILE", path.c_str(), 1);
  {
    vkattn::AttentionCall probe;
    vkattn_attention_desc_init(&probe.desc);
    probe.desc.num_heads = c.H(), probe.desc.num_kv_heads = c.hkv;
    probe.desc.head_dim = probe.desc.head_dim_v = c.d;
    probe.batch = c.batch;
    probe.cu_q.assign(c.cu_q.begin(), c.cu_q.end());
    probe.cu_k.assign(c.cu_k.begin(), c.cu_k.end());
    const int64_t one[3] = {1, 1, int64_t(c.d)};
    vkattn::Tensor q(ctx->impl, VKATTN_F32, 3, one), k(ctx->impl, c.kdt, 3, one);
    probe.q = &q, probe.k = &k, probe.v = &k;
    const int32_t t0 = c.cu_q[1] - c.cu_q[0];
    const vkattn::PlanPart part = invariant ? vkattn::part_of(t0) : vkattn::PlanPart::kAll;
    vkattn::TuningFile file(ctx->impl->device());
    std::string why;
    if (!file.put(vkattn::tune_class(probe, part, invariant), {options, 1.0, 2.0}, &why))
      die("fuzz: cannot write " + path + ": " + why);
  }
  vkattn_context* tuned = nullptr;
  ok(vkattn_context_create_from_vulkan(&vd, &tuned), "context_create_from_vulkan");
  if (saved.empty())
    unsetenv("VKATTN_TUNING_FILE");
  else
    setenv("VKATTN_TUNING_FILE", saved.c_str(), 1);
  const Result r = run(tuned, c);
  std::remove(path.c_str());
  if (r.status != VKATTN_SUCCESS)
    die("a valid call failed under the tuning entry \"" + options +
        "\": " + vkattn_status_string(r.status));
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!(std::fabs(double(r.out[i]) - r.want[i]) <= 2e-2))
      die("the call under the tuning entry \"" + options + "\" is wrong: out " + std::to_string(i) +
          " " + std::to_string(r.out[i]) + ", want " + std::to_string(r.want[i]));
  ok(vkattn_context_synchronize(tuned), "synchronize");
  vkattn_context_destroy(tuned);
}

}  // namespace vkattn_fuzz

// A cold compile of the pipelines the device table picks for common shapes
// (issue E3): run with an empty Mesa shader cache and no vkattn pipeline
// cache (ctest cold_compile sets MESA_SHADER_CACHE_DISABLE=true and
// VKATTN_PIPELINE_CACHE_DIR=""), every shape's first calls compile what
// they need. Each shape must finish within a bound (180 s by default,
// VKATTN_COLD_SHAPE_SECONDS), and the run prints every shape's time and the
// longest, so the closing note of a change that grows a kernel can say
// what a user's first call costs. lavapipe compiles a pipeline's LLVM code
// at its first dispatch, so the time of a shape's first calls is the
// compile time.
//
// Shapes: head dims 64 and 128; GQA 1 and 4; f16 q/K/V; varlen prefill
// (causal) and paged steps over f16, bf16, int8 and fp8 caches of 16-token
// pages (two per head dim and GQA ratio, each twice in all): prefill steps
// of 15, 16, 17, 63, 64 and 300 tokens (q buffers of every size class),
// then decode steps of all of them, whose key counts sit around page and
// tile boundaries and, at 301, split the keys; each output checked finite.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "reference/dtype_util.h"
#include "vkattn/vkattn.h"

namespace {

vkattn_context* g_ctx = nullptr;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cold_compile: %s: %s\n", what.c_str(), vkattn_last_error());
  std::exit(1);
}
void ok(vkattn_status s, const char* what) {
  if (s != VKATTN_SUCCESS) die(what);
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

vkattn_tensor* f16_tensor(std::vector<int64_t> shape, uint32_t seed) {
  vkattn_tensor* t = nullptr;
  ok(vkattn_tensor_create(g_ctx, VKATTN_F16, uint32_t(shape.size()), shape.data(), &t),
     "tensor_create");
  std::vector<uint16_t> h(vkattn_tensor_nbytes(t) / 2);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = vkattn_ref::f32_to_f16(float(int((i * 2654435761u + seed) % 17) - 8) / 16.0f);
  ok(vkattn_tensor_write(t, h.data(), h.size() * 2), "tensor_write");
  return t;
}

void check_finite(vkattn_tensor* t, const char* what) {
  std::vector<uint16_t> h(vkattn_tensor_nbytes(t) / 2);
  ok(vkattn_tensor_read(t, h.data(), h.size() * 2), "tensor_read");
  for (uint16_t x : h)
    if (!std::isfinite(vkattn_ref::f16_to_f32(x))) die(std::string(what) + ": a non-finite output");
}

struct Shape {
  int d, H, Hkv;
};

// Varlen causal prefill: two sequences of 37 and 64 tokens.
void varlen(const Shape& s) {
  const int32_t cu[3] = {0, 37, 101};
  vkattn_tensor* q = f16_tensor({101, s.H, s.d}, 1);
  vkattn_tensor* k = f16_tensor({101, s.Hkv, s.d}, 2);
  vkattn_tensor* out = f16_tensor({101, s.H, s.d}, 3);
  vkattn_attention_desc a;
  vkattn_attention_desc_init(&a);
  a.num_heads = s.H, a.num_kv_heads = s.Hkv, a.head_dim = s.d, a.causal = 1;
  ok(vkattn_attention_varlen(g_ctx, &a, 2, cu, cu, q, k, k, out), "attention_varlen");
  check_finite(out, "varlen");
  for (vkattn_tensor* t : {q, k, out}) vkattn_tensor_destroy(t);
}

// One step over `ids` with `t` new tokens each, in layer 0.
void step(vkattn_kv_cache* cache, const Shape& s, const std::vector<int64_t>& ids,
          const std::vector<int32_t>& t) {
  int64_t n = 0;
  for (int32_t x : t) n += x;
  vkattn_step* st = nullptr;
  ok(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), t.data(), &st), "step_begin");
  vkattn_tensor* k = f16_tensor({n, s.Hkv, s.d}, 4);
  vkattn_tensor* q = f16_tensor({n, s.H, s.d}, 5);
  vkattn_tensor* out = f16_tensor({n, s.H, s.d}, 6);
  ok(vkattn_step_append(st, 0, k, k), "step_append");
  vkattn_attention_desc a;
  vkattn_attention_desc_init(&a);
  a.num_heads = s.H, a.num_kv_heads = s.Hkv, a.head_dim = s.d, a.causal = 1;
  ok(vkattn_step_attention(st, 0, &a, q, out), "step_attention");
  ok(vkattn_step_commit(st), "step_commit");
  check_finite(out, "step");
  for (vkattn_tensor* x : {q, k, out}) vkattn_tensor_destroy(x);
}

// A cache of `dt`: prefill 6 sequences (15, 16, 17, 63, 64, 300 tokens),
// then two decode steps of all of them (keys 16..301).
void paged(const Shape& s, vkattn_dtype dt) {
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = 1, cd.num_kv_heads = uint32_t(s.Hkv), cd.head_dim = uint32_t(s.d);
  cd.num_pages = 64, cd.dtype = dt;
  vkattn_kv_cache* cache = nullptr;
  ok(vkattn_kv_cache_create(g_ctx, &cd, &cache), "kv_cache_create");
  if (dt == VKATTN_FP8_E4M3) {
    const float sc = 1.0f / 64;
    ok(vkattn_kv_cache_set_scales(cache, 0, 1, &sc, &sc), "kv_cache_set_scales");
  }
  const std::vector<int32_t> lens = {15, 16, 17, 63, 64, 300};
  std::vector<int64_t> ids;
  for (size_t i = 0; i < lens.size(); ++i) {
    ids.push_back(int64_t(i));
    step(cache, s, {int64_t(i)}, {lens[i]});
  }
  for (int r = 0; r < 2; ++r) step(cache, s, ids, std::vector<int32_t>(ids.size(), 1));
  vkattn_kv_cache_destroy(cache);
}

const char* dtype_name(vkattn_dtype dt) {
  return dt == VKATTN_F16 ? "f16" : dt == VKATTN_BF16 ? "bf16" : dt == VKATTN_I8 ? "int8" : "fp8";
}

}  // namespace

int main() {
  const char* limit_env = std::getenv("VKATTN_COLD_SHAPE_SECONDS");
  const double limit = limit_env && *limit_env ? std::atof(limit_env) : 180.0;
  ok(vkattn_context_create(nullptr, &g_ctx), "context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  ok(vkattn_context_get_device_info(g_ctx, &info), "device_info");
  std::printf("cold_compile on %s (shape bound %.0f s)\n", info.name, limit);
  double longest = 0, total = 0;
  std::string longest_name;
  auto timed = [&](const std::string& name, auto&& f) {
    const double t0 = now();
    f();
    const double dt = now() - t0;
    total += dt;
    std::printf("  %-34s %7.2f s\n", name.c_str(), dt);
    std::fflush(stdout);
    if (dt > longest) longest = dt, longest_name = name;
    if (dt > limit) die(name + " took " + std::to_string(dt) + " s, above the bound");
  };
  // Every cache dtype twice, each head dim and GQA ratio with two of them
  // (the dtype is a specialization constant of its own: all four per
  // shape would double the run for little more coverage).
  struct Row {
    int d, g;
    vkattn_dtype a, b;
  };
  for (const Row& r :
       {Row{64, 1, VKATTN_F16, VKATTN_I8}, Row{64, 4, VKATTN_BF16, VKATTN_FP8_E4M3},
        Row{128, 1, VKATTN_F16, VKATTN_FP8_E4M3}, Row{128, 4, VKATTN_BF16, VKATTN_I8}}) {
    const Shape s{r.d, 8, 8 / r.g};
    const std::string tag = "d " + std::to_string(r.d) + ", GQA " + std::to_string(r.g);
    timed("varlen prefill, " + tag, [&] { varlen(s); });
    for (vkattn_dtype dt : {r.a, r.b})
      timed(std::string("paged ") + dtype_name(dt) + ", " + tag, [&] { paged(s, dt); });
  }
  std::printf("cold_compile: longest %s, %.1f s; all %.1f s\n", longest_name.c_str(), longest,
              total);
  vkattn_context_destroy(g_ctx);
  return 0;
}

// libFuzzer target: drives the public C API with arbitrary descriptors,
// shapes, prefix sums, masks, sequence ids, page counts and random step
// sequences (begin / append / attention / commit / abort / fork / fork
// trees stepped together, cascaded / truncate / remove / read / 8-bit
// scales), the edges of fuzz_edges.h (views at
// per-layer offsets, odd 16-bit tails, external mode) and of fuzz_numeric.h
// (extreme scales and non-finite keys against the reference, tuning-file
// entries applied to real calls), and checks the paged cache against a host
// model after every operation: lengths, every committed token's bytes
// (8-bit caches: the values its codes and scales dequantize to, within the
// rounding bound), free pages, and CACHE_FULL exactly when the model runs
// out of pages. Any crash, hang, leak, sanitizer report, validation message
// or model mismatch aborts.
//
// One context per fuzz process (creating a Vulkan instance per input is
// too slow); everything else is created and destroyed per input. Head dims
// come from a small set so that the pipelines compiled stay few.
//
//   build-asan/tests/fuzz/fuzz_api tests/fuzz/corpus -max_total_time=300
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_edges.h"
#include "fuzz/fuzz_numeric.h"
#include "reference/dtype_util.h"
#include "reference/quant_ref.h"
#include "vkattn/vkattn.h"

using namespace vkattn_test;

namespace {

vkattn_context* g_ctx = nullptr;
// The three contexts inputs run on: plain, with
// VKATTN_CONTEXT_BATCH_INVARIANT (odd-sized inputs) and with
// VKATTN_CASCADE=1 (sizes 2 mod 4: cascades from one shared page); chosen
// by size so that every corpus input keeps the meaning of its bytes.
vkattn_context* g_plain = nullptr;
vkattn_context* g_invariant = nullptr;
vkattn_context* g_cascade = nullptr;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s (last error: %s)\n", what.c_str(), vkattn_last_error());
  std::abort();
}

void expect(bool ok, const std::string& what) {
  if (!ok) die(what);
}

// Statuses a call may return for arguments the model holds valid / invalid.
void expect_ok(vkattn_status s, const char* call) {
  if (s != VKATTN_SUCCESS)
    die(std::string(call) + " failed on valid input: " + vkattn_status_string(s));
}
void expect_rejected(vkattn_status s, const char* call) {
  if (s != VKATTN_ERROR_INVALID_ARGUMENT)
    die(std::string(call) + " on invalid input returned " + vkattn_status_string(s));
}
// Arbitrary input: anything but a crash, an internal error or a lost device.
void expect_sane(vkattn_status s, const char* call) {
  if (s == VKATTN_ERROR_INTERNAL || s == VKATTN_ERROR_DEVICE_LOST)
    die(std::string(call) + " returned " + vkattn_status_string(s));
}

size_t es(vkattn_dtype dt) {
  return vkattn_dtype_size(dt);
}

// The host model of the paged cache: per sequence its length, its block
// table of model page ids (forks share them) and per layer the bytes of
// every token (known = written by a committed append of that layer).
struct SeqModel {
  int32_t len = 0;
  std::vector<int> pages;
  std::vector<std::vector<uint8_t>> k, v;  // per layer, len rows
  std::vector<std::vector<bool>> known;    // per layer, per token
};

class Fuzz {
 public:
  explicit Fuzz(FuzzedDataProvider& in) : in_(in) {}
  ~Fuzz() {
    if (step_) vkattn_step_abort(step_);
    vkattn_kv_cache_destroy(cache_);
    for (vkattn_tensor* t : tensors_) vkattn_tensor_destroy(t);
  }

  void run() {
    if (!make_cache()) return;
    for (int ops = 0; ops < 24 && in_.remaining_bytes() > 0; ++ops) {
      switch (in_.ConsumeIntegralInRange<int>(0, 21)) {
        case 0:
        case 1:
          begin();
          break;
        case 2:
        case 3:
          append();
          break;
        case 4:
          step_attention();
          break;
        case 5:
          commit();
          break;
        case 6:
          abort_step();
          break;
        case 7:
          fork();
          break;
        case 8:
          truncate();
          break;
        case 9:
          remove();
          break;
        case 10:
          varlen();
          break;
        case 11:
          caller_pools();
          break;
        case 12:
          rope();
          break;
        case 13:
          vkattn_fuzz::step_view_layers(in_, g_ctx);
          break;
        case 14:
          vkattn_fuzz::odd_16bit_tails(in_, g_ctx);
          break;
        case 15:
          vkattn_fuzz::external_sequence(in_, g_ctx);
          break;
        case 16:
          self_check();
          break;
        case 17:
          vkattn_fuzz::numeric_edges(in_, g_ctx);
          break;
        case 18:
          vkattn_fuzz::tuning_entry(in_, g_ctx);
          break;
        case 19:
          fork_tree();
          break;
        case 20:
          vkattn_fuzz::variant_call(in_, g_ctx);
          break;
        default:
          bad_calls();
          break;
      }
      verify();
    }
    // Everything removed: every page is free again.
    if (step_) abort_step();
    std::vector<int64_t> ids;
    for (auto& [id, s] : seqs_) ids.push_back(id);
    for (int64_t id : ids) {
      expect_ok(vkattn_kv_cache_remove(cache_, id), "kv_cache_remove");
      seqs_.erase(id);
    }
    verify();
    uint32_t free = 0;
    expect_ok(vkattn_kv_cache_num_free_pages(cache_, &free), "num_free_pages");
    expect(free == pages_,
           "pages leaked: " + std::to_string(free) + " free of " + std::to_string(pages_));
  }

 private:
  vkattn_tensor* tensor(vkattn_dtype dt, std::vector<int64_t> shape) {
    vkattn_tensor* t = nullptr;
    expect_ok(vkattn_tensor_create(g_ctx, dt, uint32_t(shape.size()), shape.data(), &t),
              "tensor_create");
    tensors_.push_back(t);
    return t;
  }
  // Finite values exact in every dtype: k / 16, |k| <= 128.
  std::vector<float> values(size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = float(in_.ConsumeIntegral<int8_t>()) / 16.0f;
    return x;
  }

  bool make_cache() {
    // Two head-dim pairs: 8-wide rows (vector fetches, word-aligned
    // appends) and odd ones (scalar fetches, 16-bit rows sharing words).
    static const uint32_t kDims[2][2] = {{8, 8}, {3, 5}};
    static const vkattn_dtype kDt[] = {VKATTN_F32, VKATTN_F16,      VKATTN_BF16,
                                       VKATTN_I8,  VKATTN_FP8_E4M3, VKATTN_Q4};
    layers_ = in_.ConsumeIntegralInRange<uint32_t>(1, 3);
    hkv_ = in_.ConsumeIntegralInRange<uint32_t>(1, 3);
    const int dims = in_.ConsumeIntegralInRange<int>(0, 1);
    d_ = kDims[dims][0];
    dv_ = kDims[dims][1];
    ps_ = in_.ConsumeIntegralInRange<uint32_t>(1, 8);
    pages_ = in_.ConsumeIntegralInRange<uint32_t>(1, 40);
    dt_ = kDt[in_.ConsumeIntegralInRange<int>(0, 5)];
    q4_ = dt_ == VKATTN_Q4;
    q8_ = dt_ == VKATTN_I8 || dt_ == VKATTN_FP8_E4M3 || q4_;
    // Q4: keys rotated (VKATTN_KV_ROTATE_KEYS) or not; d 8 rotates whole,
    // d 3 (odd) has nothing to rotate.
    rot_ = q4_ && in_.ConsumeBool();
    mes_ = q8_ ? 4 : es(dt_);
    fixed_.assign(layers_, false);
    scales_.assign(layers_, {});
    vkattn_kv_cache_desc d;
    vkattn_kv_cache_desc_init(&d);
    d.num_layers = layers_;
    d.num_kv_heads = hkv_;
    d.head_dim = d_;
    d.head_dim_v = dv_;
    d.page_size = ps_;
    d.num_pages = pages_;
    d.dtype = dt_;
    d.flags = rot_ ? VKATTN_KV_ROTATE_KEYS : 0;
    if (in_.ConsumeBool()) {
      // A mangled descriptor first: rejected, nothing created.
      vkattn_kv_cache_desc bad = d;
      switch (in_.ConsumeIntegralInRange<int>(0, 6)) {
        case 0:
          bad.struct_size = in_.ConsumeIntegral<uint32_t>() | 1u;
          break;
        case 5:  // a flag bit vkattn does not know, or rotation of a non-Q4 cache
          bad.flags = q4_ ? 2u << in_.ConsumeIntegralInRange<int>(0, 30) : VKATTN_KV_ROTATE_KEYS;
          break;
        case 1:
          bad.num_layers = 0;
          break;
        case 2:
          bad.head_dim = VKATTN_MAX_HEAD_DIM + 1 + in_.ConsumeIntegral<uint16_t>();
          break;
        case 3: {  // not a cache dtype: 0, U8, I32, or past the last (Q4, 8)
          const int pick = in_.ConsumeIntegralInRange<int>(0, 3);
          bad.dtype = vkattn_dtype(pick == 0   ? 0
                                   : pick == 1 ? VKATTN_U8
                                   : pick == 2 ? VKATTN_I32
                                               : in_.ConsumeIntegralInRange<int>(9, 99));
          break;
        }
        case 4:
          bad.reserved[in_.ConsumeIntegralInRange<int>(0, 3)] = 1;
          break;
        default:
          bad.page_size = 0;
          break;
      }
      vkattn_kv_cache* c = nullptr;
      expect_rejected(vkattn_kv_cache_create(g_ctx, &bad, &c), "kv_cache_create(bad)");
      expect(c == nullptr, "output written on failure");
    }
    // Pool buffers bound in windows of one page (VKATTN_KV_WINDOW_BYTES,
    // read at creation; int8 and q4 ignore it) for a third of the caches,
    // chosen from what was drawn (no input consumed: the corpus keeps its
    // meaning).
    const bool windows = (pages_ + ps_) % 3 == 0;
    if (windows) setenv("VKATTN_KV_WINDOW_BYTES", "1", 1);
    expect_ok(vkattn_kv_cache_create(g_ctx, &d, &cache_), "kv_cache_create");
    if (windows) unsetenv("VKATTN_KV_WINDOW_BYTES");
    // fp8: scales for some layers now (the others get them later, or never:
    // their appends are refused).
    if (dt_ == VKATTN_FP8_E4M3)
      for (uint32_t l = 0; l < layers_; ++l)
        if (in_.ConsumeBool()) set_scales(l);
    return true;
  }

  // vkattn_kv_cache_set_scales with a layer, count and values from the
  // input: accepted exactly when the cache is fp8, the layer exists and was
  // never appended to, the count is 1 or Hkv and every scale is finite > 0.
  void set_scales(uint32_t layer) {
    const uint32_t n = in_.ConsumeBool() ? 1 : in_.ConsumeIntegralInRange<uint32_t>(0, hkv_ + 1);
    // Powers of two (exact codes) and others, sometimes hostile.
    static const float kScale[] = {1.0f / 64, 1.0f / 16, 0.25f, 1.0f, 0.3f, 3.0f};
    std::vector<float> k(std::max<uint32_t>(n, 1)), v(k.size());
    bool finite = true;
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = kScale[in_.ConsumeIntegralInRange<int>(0, 5)];
      v[i] = kScale[in_.ConsumeIntegralInRange<int>(0, 5)];
      if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) {
        k[i] = in_.PickValueInArray({0.0f, -1.0f, std::nanf(""), INFINITY});
        finite = false;
      }
    }
    const vkattn_status s = vkattn_kv_cache_set_scales(cache_, layer, n, k.data(), v.data());
    const bool valid = dt_ == VKATTN_FP8_E4M3 && layer < layers_ && !fixed_[layer] &&
                       (n == 1 || n == hkv_) && finite;
    if (!valid) return expect_rejected(s, "kv_cache_set_scales(bad)");
    expect_ok(s, "kv_cache_set_scales");
    auto& sc = scales_[layer];
    sc.assign(2 * hkv_, 0.0f);
    for (uint32_t h = 0; h < hkv_; ++h) {
      sc[h] = k[n == 1 ? 0 : h];
      sc[hkv_ + h] = v[n == 1 ? 0 : h];
    }
  }

  int64_t pick_id() { return in_.ConsumeIntegralInRange<int64_t>(0, 7); }

  // Pages in use by committed sequences, and the model's next step need.
  uint32_t used_pages() const {
    std::set<int> used;
    for (auto& [id, s] : seqs_) used.insert(s.pages.begin(), s.pages.end());
    return uint32_t(used.size());
  }
  int refcount(int page) const {
    int n = 0;
    for (auto& [id, s] : seqs_)
      for (int p : s.pages) n += p == page;
    return n;
  }

  void begin() {
    if (step_) {
      int64_t id = 1;
      int32_t t = 1;
      vkattn_step* other = nullptr;
      expect_rejected(vkattn_step_begin(cache_, 1, &id, &t, &other), "second step_begin");
      return;
    }
    const uint32_t n = in_.ConsumeIntegralInRange<uint32_t>(0, 4);
    std::vector<int64_t> ids;
    std::vector<int32_t> t;
    bool valid = true;
    std::set<int64_t> seen;
    for (uint32_t i = 0; i < n; ++i) {
      ids.push_back(pick_id());
      t.push_back(in_.ConsumeIntegralInRange<int32_t>(in_.ConsumeBool() ? 0 : -1, 20));
      valid = valid && t.back() >= 0 && seen.insert(ids.back()).second;
    }
    start(ids, t, valid);
  }

  // A fork tree: a sequence forked into one to three others (forks of its
  // forks now and then), then, with no step open, a step over the family
  // in fork order, a token or three each, appended to every layer, and an
  // attention call: what a cascade groups (its context's VKATTN_CASCADE=1
  // groups from one shared page).
  void fork_tree() {
    if (step_) return;
    if (seqs_.empty()) {  // a prompt of one to four full pages and a part first
      int64_t id = pick_id();
      const int32_t pages = in_.ConsumeIntegralInRange<int32_t>(1, 4);
      start({id}, {pages * int32_t(ps_) + in_.ConsumeIntegralInRange<int32_t>(0, ps_ - 1)}, true);
      if (!step_) return;  // CACHE_FULL
      for (uint32_t l = 0; l < layers_; ++l) append_rows(l, false);
      commit();
    }
    auto root = seqs_.begin();
    std::advance(root, in_.ConsumeIntegralInRange<size_t>(0, seqs_.size() - 1));
    std::vector<int64_t> family = {root->first};
    for (int i = in_.ConsumeIntegralInRange<int>(1, 3); i > 0; --i) {
      int64_t dst = 0;
      while (dst <= 7 && seqs_.count(dst)) ++dst;
      if (dst > 7) break;
      const int64_t src = family[in_.ConsumeIntegralInRange<size_t>(0, family.size() - 1)];
      expect_ok(vkattn_kv_cache_fork(cache_, src, dst), "fork");
      seqs_[dst] = seqs_[src];
      family.push_back(dst);
    }
    std::vector<int32_t> t;
    for (size_t i = 0; i < family.size(); ++i)
      t.push_back(in_.ConsumeIntegralInRange<int32_t>(1, 3));
    start(family, t, true);
    if (!step_) return;  // CACHE_FULL
    for (uint32_t l = 0; l < layers_; ++l) append_rows(l, false);
    step_attention(true);
  }

  // step_begin over ids with t tokens each (valid: as the model expects).
  void start(const std::vector<int64_t>& ids, const std::vector<int32_t>& t, bool valid) {
    const uint32_t n = static_cast<uint32_t>(ids.size());
    // The model's page need: fresh pages plus copies of shared partial pages.
    uint64_t need = 0;
    if (valid)
      for (uint32_t i = 0; i < n; ++i) {
        auto it = seqs_.find(ids[i]);
        const int32_t len = it == seqs_.end() ? 0 : it->second.len;
        const size_t have = it == seqs_.end() ? 0 : it->second.pages.size();
        need += (len + t[i] + ps_ - 1) / ps_ - have;
        if (t[i] > 0 && len % ps_ && refcount(it->second.pages.back()) > 1) ++need;
      }
    vkattn_status s = vkattn_step_begin(cache_, n, ids.data(), t.data(), &step_);
    if (!valid) return expect_rejected(s, "step_begin(bad)");
    if (need > pages_ - used_pages()) {
      expect(s == VKATTN_ERROR_CACHE_FULL,
             std::string("step_begin: CACHE_FULL expected, got ") + vkattn_status_string(s));
      expect(step_ == nullptr, "output written on failure");
      return;
    }
    expect_ok(s, "step_begin");
    st_ids_ = ids;
    st_t_ = t;
    st_cow_.clear();
    for (uint32_t i = 0; i < n; ++i) {
      auto it = seqs_.find(ids[i]);
      const int32_t len = it == seqs_.end() ? 0 : it->second.len;
      st_cow_.push_back(t[i] > 0 && len % ps_ && refcount(it->second.pages.back()) > 1);
    }
    st_k_.assign(layers_, {});
    st_v_.assign(layers_, {});
  }

  int64_t step_tokens() const {
    int64_t n = 0;
    for (int32_t x : st_t_) n += x;
    return n;
  }

  void append() {
    if (!step_) return;
    const uint32_t layer = in_.ConsumeIntegralInRange<uint32_t>(0, layers_);  // layers_: invalid
    append_rows(layer, in_.ConsumeIntegralInRange<int>(0, 7) == 0);
  }
  // step_append of the step's tokens to `layer` (bad_shape: one K row too
  // many).
  void append_rows(uint32_t layer, bool bad_shape) {
    const int64_t n = step_tokens();
    const vkattn_dtype in_dt = in_.PickValueInArray({VKATTN_F32, VKATTN_F16, VKATTN_BF16});
    vkattn_tensor* k = tensor(in_dt, {n + (bad_shape ? 1 : 0), hkv_, d_});
    vkattn_tensor* v = tensor(in_dt, {n, hkv_, dv_});
    std::vector<float> kx = values(size_t(n + (bad_shape ? 1 : 0)) * hkv_ * d_);
    std::vector<float> vx = values(size_t(n) * hkv_ * dv_);
    auto kb = encode_bytes(in_dt, kx), vb = encode_bytes(in_dt, vx);
    expect_ok(vkattn_tensor_write(k, kb.data(), kb.size()), "tensor_write");
    expect_ok(vkattn_tensor_write(v, vb.data(), vb.size()), "tensor_write");
    vkattn_status s = vkattn_step_append(step_, layer, k, v);
    const bool no_scales = dt_ == VKATTN_FP8_E4M3 && layer < layers_ && scales_[layer].empty();
    if (bad_shape || layer >= layers_ || no_scales) return expect_rejected(s, "step_append(bad)");
    expect_ok(s, "step_append");
    fixed_[layer] = true;
    kx.resize(size_t(n) * hkv_ * d_);
    // 8-bit caches: the model keeps the f32 values (verify() dequantizes).
    st_k_[layer] = encode_bytes(q8_ ? VKATTN_F32 : dt_, kx);
    st_v_[layer] = encode_bytes(q8_ ? VKATTN_F32 : dt_, vx);
  }

  // A descriptor from the input: valid for the cache, or anything at all.
  vkattn_attention_desc desc(bool* valid) {
    vkattn_attention_desc d;
    vkattn_attention_desc_init(&d);
    const uint32_t group = in_.ConsumeIntegralInRange<uint32_t>(1, 3);
    d.num_heads = hkv_ * group;
    d.num_kv_heads = hkv_;
    d.head_dim = d_;
    d.head_dim_v = dv_;
    d.causal = in_.ConsumeBool();
    d.window_left = in_.ConsumeIntegralInRange<int32_t>(-1, 12);
    d.window_right = in_.ConsumeIntegralInRange<int32_t>(-1, 6);
    d.chunk_size = in_.ConsumeBool() ? 0u : in_.ConsumeIntegralInRange<uint32_t>(1, 20);
    d.softcap = in_.ConsumeBool() ? 0.0f : 5.0f;
    *valid = true;
    if (in_.ConsumeIntegralInRange<int>(0, 4) == 0) {
      *valid = false;
      switch (in_.ConsumeIntegralInRange<int>(0, 10)) {
        case 0:
          d.struct_size = in_.ConsumeIntegral<uint32_t>();
          break;
        case 1:
          d.num_heads = in_.ConsumeIntegral<uint32_t>();
          break;
        case 2:
          d.num_kv_heads = in_.ConsumeIntegral<uint32_t>();
          break;
        case 3:
          d.head_dim = in_.ConsumeIntegral<uint32_t>();
          break;
        case 4:
          d.window_left = in_.ConsumeIntegral<int32_t>();
          break;
        case 5:
          d.scale = std::nanf("");
          break;
        case 6:
          d.softcap = -in_.ConsumeFloatingPoint<float>();
          break;
        case 7:
          d.mask_type = in_.ConsumeIntegral<uint32_t>();
          break;
        case 8:
          d.causal = in_.ConsumeIntegral<uint32_t>();
          break;
        case 9:
          d.window_right = -2 - in_.ConsumeIntegralInRange<int32_t>(0, 1 << 30);
          break;
        default:
          d.reserved[0] = in_.ConsumeIntegral<uint32_t>();
          break;
      }
    }
    // Sinks: none, [H] f32 of arbitrary values (any finite or not: rows
    // may be undefined, nothing may crash), or a wrong dtype or shape.
    const int64_t H = int64_t(hkv_) * group;
    switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: {
        d.sinks = tensor(VKATTN_F32, {H});
        std::vector<float> x = values(size_t(H));
        expect_ok(vkattn_tensor_write(d.sinks, x.data(), x.size() * 4), "tensor_write");
        break;
      }
      case 1:
        d.sinks = tensor(VKATTN_F16, {H});
        *valid = false;
        break;
      case 2:
        d.sinks = tensor(VKATTN_F32, {H + 1});
        *valid = false;
        break;
      default:
        break;
    }
    return d;
  }

  // A valid descriptor a cascade takes: GQA 1-3, causal or not, a left
  // window of 0..63 keys or none, no chunks.
  vkattn_attention_desc cascadable_desc() {
    vkattn_attention_desc d;
    vkattn_attention_desc_init(&d);
    d.num_heads = hkv_ * in_.ConsumeIntegralInRange<uint32_t>(1, 3);
    d.num_kv_heads = hkv_, d.head_dim = d_, d.head_dim_v = dv_;
    d.causal = in_.ConsumeBool();
    d.window_left = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<int32_t>(0, 63) : -1;
    return d;
  }

  // cascadable: fork_tree's call (cascadable_desc, no top-k lists).
  void step_attention(bool cascadable = false) {
    if (!step_) return;
    bool valid = true;
    vkattn_attention_desc d = cascadable ? cascadable_desc() : desc(&valid);
    const uint32_t layer = in_.ConsumeIntegralInRange<uint32_t>(0, layers_ - 1);
    const int64_t n = step_tokens();
    // Bidirectional spans now and then: sorted and disjoint within each
    // sequence's keys (len + t), or one value of them made arbitrary.
    std::vector<int32_t> span_indptr, span_pairs;
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      std::vector<int32_t> keys;
      for (size_t i = 0; i < st_ids_.size(); ++i) {
        const auto it = seqs_.find(st_ids_[i]);
        keys.push_back((it == seqs_.end() ? 0 : it->second.len) + st_t_[i]);
      }
      valid = spans_for(keys, &span_indptr, &span_pairs) && valid;
      d.span_indptr = span_indptr.data();
      d.spans = span_pairs.empty() ? nullptr : span_pairs.data();
    }
    // Speculative trees now and then: random bits on some sequences (t <=
    // len + t always holds in a step), or a hostile count.
    std::vector<int32_t> tree_indptr;
    std::vector<uint32_t> tree_words;
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      std::vector<int32_t> keys;
      for (size_t i = 0; i < st_ids_.size(); ++i) {
        const auto it = seqs_.find(st_ids_[i]);
        keys.push_back((it == seqs_.end() ? 0 : it->second.len) + st_t_[i]);
      }
      valid = trees_for(st_t_, keys, &tree_indptr, &tree_words) && valid;
      d.tree_indptr = tree_indptr.data();
      d.tree_mask = tree_words.empty() ? nullptr : tree_words.data();
    }
    // Top-k lists now and then: any int32 values (pads, entries past u or
    // below 0, repeats: all legal), a row or a kv head a list; or a wrong
    // dtype or shape.
    if (!cascadable && in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      const int64_t K = in_.ConsumeIntegralInRange<int64_t>(0, 12);
      const bool per_head = in_.ConsumeBool();
      switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
          d.topk_indices = tensor(VKATTN_F32, {n, K});
          valid = false;
          break;
        case 1:
          d.topk_indices = tensor(VKATTN_I32, {n + 1, K});
          valid = false;
          break;
        default: {
          d.topk_indices =
              per_head ? tensor(VKATTN_I32, {n, int64_t(hkv_), K}) : tensor(VKATTN_I32, {n, K});
          std::vector<int32_t> x(size_t(n) * (per_head ? hkv_ : 1) * K);
          for (int32_t& e : x)
            e = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<int32_t>(-2, 300)
                                  : in_.ConsumeIntegral<int32_t>();
          expect_ok(vkattn_tensor_write(d.topk_indices, x.data(), x.size() * 4), "tensor_write");
          break;
        }
      }
    }
    const uint32_t H = d.num_heads > 0 && d.num_heads < 64 ? d.num_heads : 1;
    vkattn_tensor* q = tensor(VKATTN_F32, {n, H, d_});
    vkattn_tensor* out = tensor(VKATTN_F32, {n, H, dv_});
    std::vector<float> qx = values(size_t(n) * H * d_);
    expect_ok(vkattn_tensor_write(q, qx.data(), qx.size() * 4), "tensor_write");
    vkattn_status s = vkattn_step_attention(step_, layer, &d, q, out);
    const bool appended = n == 0 || !st_k_[layer].empty();
    if (valid && appended && H == d.num_heads) {  // f32 q suits every cache dtype
      expect_ok(s, "step_attention");
      std::vector<float> o(size_t(n) * H * dv_);
      expect_ok(vkattn_tensor_read(out, o.data(), o.size() * 4), "tensor_read");
    } else {
      expect_sane(s, "step_attention(arbitrary)");
    }
  }

  void commit() {
    if (!step_) {
      expect_rejected(vkattn_step_commit(nullptr), "step_commit(NULL)");
      return;
    }
    expect_ok(vkattn_step_commit(step_), "step_commit");
    step_ = nullptr;
    int64_t off = 0;
    const size_t krow = size_t(hkv_) * d_ * mes_, vrow = size_t(hkv_) * dv_ * mes_;
    for (size_t i = 0; i < st_ids_.size(); ++i) {
      SeqModel& m = seqs_[st_ids_[i]];
      if (m.k.empty()) m.k.resize(layers_), m.v.resize(layers_), m.known.resize(layers_);
      const int32_t t = st_t_[i];
      // Pages: copy a shared partial last page, then fresh ones.
      if (st_cow_[i]) m.pages.back() = next_page_++;  // decided at begin
      while (int64_t(m.pages.size()) * ps_ < int64_t(m.len) + t) m.pages.push_back(next_page_++);
      for (uint32_t l = 0; l < layers_; ++l) {
        const bool have = !st_k_[l].empty();
        m.k[l].resize(size_t(m.len) * krow);
        m.v[l].resize(size_t(m.len) * vrow);
        m.known[l].resize(m.len);
        if (have) {
          m.k[l].insert(m.k[l].end(), st_k_[l].begin() + off * krow,
                        st_k_[l].begin() + (off + t) * krow);
          m.v[l].insert(m.v[l].end(), st_v_[l].begin() + off * vrow,
                        st_v_[l].begin() + (off + t) * vrow);
        } else {
          m.k[l].resize(m.k[l].size() + size_t(t) * krow);
          m.v[l].resize(m.v[l].size() + size_t(t) * vrow);
        }
        m.known[l].resize(m.len + t, have);
      }
      m.len += t;
      off += t;
    }
  }

  void abort_step() {
    vkattn_step_abort(step_);  // NULL is fine too
    step_ = nullptr;
  }

  void fork() {
    const int64_t src = pick_id(), dst = pick_id();
    vkattn_status s = vkattn_kv_cache_fork(cache_, src, dst);
    if (step_ || !seqs_.count(src) || seqs_.count(dst)) return expect_rejected(s, "fork(bad)");
    expect_ok(s, "fork");
    seqs_[dst] = seqs_[src];
  }

  void truncate() {
    const int64_t id = pick_id();
    const int32_t len = in_.ConsumeIntegralInRange<int32_t>(-1, 40);
    vkattn_status s = vkattn_kv_cache_truncate(cache_, id, len);
    auto it = seqs_.find(id);
    if (step_ || it == seqs_.end() || len < 0 || len > it->second.len)
      return expect_rejected(s, "truncate(bad)");
    expect_ok(s, "truncate");
    SeqModel& m = it->second;
    m.pages.resize((len + ps_ - 1) / ps_);
    for (uint32_t l = 0; l < m.k.size(); ++l) {
      m.k[l].resize(m.k[l].size() / std::max<int32_t>(m.len, 1) * len);
      m.v[l].resize(m.v[l].size() / std::max<int32_t>(m.len, 1) * len);
      m.known[l].resize(len);
    }
    m.len = len;
  }

  void remove() {
    const int64_t id = pick_id();
    vkattn_status s = vkattn_kv_cache_remove(cache_, id);
    if (step_ || !seqs_.count(id)) return expect_rejected(s, "remove(bad)");
    expect_ok(s, "remove");
    seqs_.erase(id);
  }

  // vkattn_rope with arbitrary descriptors, positions, shapes and dtypes,
  // in place or not: a status and a message, never a crash.
  void rope() {
    vkattn_rope_desc d;
    vkattn_rope_desc_init(&d);
    d.layout = in_.ConsumeIntegralInRange<uint32_t>(0, 2);
    d.rotary_dim = in_.ConsumeIntegralInRange<uint32_t>(0, 13);
    d.rotary_offset = in_.ConsumeIntegralInRange<uint32_t>(0, 9);
    d.scaling = in_.ConsumeIntegralInRange<uint32_t>(0, 4);
    d.factor = in_.ConsumeFloatingPoint<float>();
    d.original_max_position = in_.ConsumeIntegralInRange<uint32_t>(0, 9000);
    d.attention_factor = in_.ConsumeBool() ? 0.0f : in_.ConsumeFloatingPoint<float>();
    if (in_.ConsumeIntegralInRange<int>(0, 7) == 0) d.struct_size = in_.ConsumeIntegral<uint32_t>();
    const uint32_t batch = in_.ConsumeIntegralInRange<uint32_t>(0, 3);
    std::vector<int32_t> cu(batch + 1, 0), start(batch);
    for (uint32_t b = 0; b < batch; ++b) {
      cu[b + 1] = cu[b] + in_.ConsumeIntegralInRange<int32_t>(0, 5);
      start[b] = in_.ConsumeIntegralInRange<int32_t>(-2, INT32_MAX);
    }
    const int64_t dim = in_.ConsumeIntegralInRange<int64_t>(1, 12);
    const int64_t heads = in_.ConsumeIntegralInRange<int64_t>(1, 3);
    const vkattn_dtype dt = in_.PickValueInArray({VKATTN_F32, VKATTN_F16, VKATTN_BF16});
    vkattn_tensor* x = tensor(dt, {cu[batch], heads, dim});
    auto bytes = encode_bytes(dt, values(size_t(cu[batch] * heads * dim)));
    expect_ok(vkattn_tensor_write(x, bytes.data(), bytes.size()), "tensor_write");
    vkattn_tensor* out = in_.ConsumeBool() ? x : tensor(dt, {cu[batch], heads, dim});
    expect_sane(vkattn_rope(g_ctx, &d, batch, cu.data(), start.data(), x, out), "rope");
  }

  // Packed attention with arbitrary prefix sums (valid ones must succeed).
  void varlen() {
    bool valid = false;
    vkattn_attention_desc d = desc(&valid);
    const uint32_t batch = in_.ConsumeIntegralInRange<uint32_t>(0, 4);
    std::vector<int32_t> cq(batch + 1, 0), ck(batch + 1, 0);
    for (uint32_t b = 0; b < batch; ++b) {
      cq[b + 1] = cq[b] + in_.ConsumeIntegralInRange<int32_t>(0, 9);
      ck[b + 1] = ck[b] + in_.ConsumeIntegralInRange<int32_t>(0, 30);
    }
    const bool bad_sums = in_.ConsumeIntegralInRange<int>(0, 5) == 0;
    if (bad_sums && batch > 0) cq[in_.ConsumeIntegralInRange<uint32_t>(0, batch)] += 3;
    const int64_t tq = cq[batch] - (bad_sums && batch ? 3 : 0), tk = ck[batch];
    const uint32_t H = d.num_heads > 0 && d.num_heads < 64 ? d.num_heads : 1;
    const uint32_t hk = d.num_kv_heads > 0 && d.num_kv_heads < 64 ? d.num_kv_heads : 1;
    const vkattn_dtype kdt = in_.PickValueInArray({VKATTN_F32, VKATTN_F16, VKATTN_BF16});
    vkattn_tensor* q = tensor(VKATTN_F32, {std::max<int64_t>(tq, 0), H, d_});
    vkattn_tensor* k = tensor(kdt, {tk, hk, d_});
    vkattn_tensor* v = tensor(kdt, {tk, hk, dv_});
    vkattn_tensor* out = tensor(VKATTN_F32, {std::max<int64_t>(tq, 0), H, dv_});
    vkattn_tensor* lse = tensor(VKATTN_F32, {std::max<int64_t>(tq, 0), H});
    for (vkattn_tensor* t : {q, k, v}) {
      auto x = values(vkattn_tensor_nbytes(t) / es(vkattn_tensor_dtype(t)));
      auto b = encode_bytes(vkattn_tensor_dtype(t), x);
      expect_ok(vkattn_tensor_write(t, b.data(), b.size()), "tensor_write");
    }
    vkattn_tensor* mask = nullptr;
    if (in_.ConsumeBool()) {
      int64_t elems = 0;
      for (uint32_t b = 0; b < batch; ++b)
        elems += int64_t(cq[b + 1] - cq[b]) * (ck[b + 1] - ck[b]);
      elems += in_.ConsumeIntegralInRange<int>(0, 8) == 0 ? 1 : 0;  // sometimes the wrong size
      // Bad prefix sums can make a sequence's t negative: the mask is then
      // empty (the call is refused for the sums, not the tensor).
      elems = std::max<int64_t>(elems, 0);
      mask = tensor(VKATTN_U8, {elems});
      std::vector<uint8_t> m = in_.ConsumeBytes<uint8_t>(size_t(elems));
      m.resize(size_t(elems), 1);
      expect_ok(vkattn_tensor_write(mask, m.data(), m.size()), "tensor_write");
      d.mask = mask;
      if (d.mask_type == VKATTN_MASK_NONE) d.mask_type = VKATTN_MASK_BOOL;
    }
    d.lse = in_.ConsumeBool() ? lse : nullptr;
    vkattn_status s = vkattn_attention_varlen(g_ctx, &d, batch, cq.data(), ck.data(), q, k, v, out);
    expect_sane(s, "attention_varlen");
    if (s == VKATTN_SUCCESS) {
      std::vector<float> o(vkattn_tensor_nbytes(out) / 4);
      expect_ok(vkattn_tensor_read(out, o.data(), o.size() * 4), "tensor_read");
    }
  }

  // Caller pools (vkattn_paged_append, vkattn_attention_paged) under
  // arbitrary page tables, lengths and strided (HND, offset) pool views:
  // accepted exactly when the host's own checks pass, and then the pools'
  // every byte equals the model (new rows at their slots, nothing else).
  void caller_pools() {
    const uint32_t np = pages_, ps = ps_, hkv = hkv_, d = d_, dv = dv_;
    const bool hnd = in_.ConsumeBool();
    const int64_t off = in_.ConsumeIntegralInRange<int64_t>(0, 3);
    // Caller pools are 16/32-bit: with an 8-bit cache dtype drawn, an 8-bit
    // pool is refused as unsupported, and the run goes on with f16 pools.
    if (q8_ && !q4_) {  // (Q4 is no tensor dtype at all)
      vkattn_tensor* kp8 = tensor(dt_, {1, ps, hkv, d});
      vkattn_tensor* vp8 = tensor(dt_, {1, ps, hkv, dv});
      vkattn_tensor* kn8 = tensor(VKATTN_F32, {1, hkv, d});
      vkattn_tensor* vn8 = tensor(VKATTN_F32, {1, hkv, dv});
      const int32_t cu8[2] = {0, 1}, before8[1] = {0}, indptr8[2] = {0, 1}, idx8[1] = {0};
      const vkattn_status s8 =
          vkattn_paged_append(g_ctx, 1, cu8, before8, indptr8, idx8, ps, kn8, vn8, kp8, vp8);
      expect(s8 == VKATTN_ERROR_UNSUPPORTED,
             std::string("paged_append(8-bit pools) returned ") + vkattn_status_string(s8));
    }
    const vkattn_dtype pd = q8_ ? VKATTN_F16 : dt_;
    const size_t e = es(pd);
    auto at = [&](uint32_t page, uint32_t slot, uint32_t h, uint32_t dim, uint32_t x) {
      return size_t(off) + (hnd ? ((size_t(page) * hkv + h) * ps + slot) * dim + x
                                : ((size_t(page) * ps + slot) * hkv + h) * dim + x);
    };
    const int64_t nk = off + int64_t(np) * ps * hkv * d, nv = off + int64_t(np) * ps * hkv * dv;
    vkattn_tensor* kb = tensor(pd, {nk});
    vkattn_tensor* vb = tensor(pd, {nv});
    std::vector<uint8_t> km(size_t(nk) * e, 0), vm(size_t(nv) * e, 0);
    expect_ok(vkattn_tensor_write(kb, km.data(), km.size()), "tensor_write");
    expect_ok(vkattn_tensor_write(vb, vm.data(), vm.size()), "tensor_write");
    auto pool = [&](vkattn_tensor* b, uint32_t dim) {
      const int64_t shape[4] = {np, ps, hkv, dim};
      const int64_t nhd[4] = {int64_t(ps) * hkv * dim, int64_t(hkv) * dim, dim, 1};
      const int64_t hm[4] = {int64_t(ps) * hkv * dim, dim, int64_t(ps) * dim, 1};
      vkattn_tensor* t = nullptr;
      expect_ok(vkattn_tensor_view(b, off, 4, shape, hnd ? hm : nhd, &t), "tensor_view");
      tensors_.push_back(t);
      return t;
    };
    vkattn_tensor *kp = pool(kb, d), *vp = pool(vb, dv);
    // A table: usually valid, sometimes hostile.
    const uint32_t batch = in_.ConsumeIntegralInRange<uint32_t>(0, 4);
    std::vector<int32_t> cu{0}, before(batch), indptr{0}, indices;
    for (uint32_t b = 0; b < batch; ++b) {
      cu.push_back(cu.back() + in_.ConsumeIntegralInRange<int32_t>(0, 5));
      before[b] = in_.ConsumeIntegralInRange<int32_t>(in_.ConsumeBool() ? -2 : 0, 2 * ps);
      const int32_t want = (std::max(before[b], 0) + cu[b + 1] - cu[b] + ps - 1) / ps;
      const int32_t n = std::max(0, want + in_.ConsumeIntegralInRange<int32_t>(-1, 1));
      for (int32_t i = 0; i < n; ++i)
        indices.push_back(in_.ConsumeIntegralInRange<int32_t>(
            in_.ConsumeBool() ? -1 : 0, int32_t(np) - (in_.ConsumeBool() ? 0 : 1)));
      indptr.push_back(int32_t(indices.size()));
    }
    // The host's verdict, as the header states it.
    bool valid = true;
    std::set<uint64_t> slots;
    for (uint32_t b = 0; b < batch && valid; ++b) {
      if (before[b] < 0) {
        valid = false;
        break;
      }
      const int32_t t = cu[b + 1] - cu[b], len = before[b] + t;
      const int32_t need = (len + int32_t(ps) - 1) / int32_t(ps);
      if (indptr[b + 1] - indptr[b] < need) valid = false;
      for (int32_t i = 0; i < need && valid; ++i) {
        const int32_t page = indices[indptr[b] + i];
        if (page < 0 || page >= int32_t(np)) valid = false;
      }
      for (int32_t i = 0; i < t && valid; ++i) {
        const int32_t pos = before[b] + i;
        const uint64_t slot = uint64_t(indices[indptr[b] + pos / ps]) * ps + pos % ps;
        if (!slots.insert(slot).second) valid = false;
      }
    }
    const int64_t total = cu.back();
    std::vector<float> kx = values(size_t(total) * hkv * d), vx = values(size_t(total) * hkv * dv);
    vkattn_tensor* kn = tensor(VKATTN_F32, {total, hkv, d});
    vkattn_tensor* vn = tensor(VKATTN_F32, {total, hkv, dv});
    expect_ok(vkattn_tensor_write(kn, kx.data(), kx.size() * 4), "tensor_write");
    expect_ok(vkattn_tensor_write(vn, vx.data(), vx.size() * 4), "tensor_write");
    vkattn_status s =
        vkattn_paged_append(g_ctx, batch, cu.data(), before.data(), indptr.data(),
                            indices.empty() ? nullptr : indices.data(), ps, kn, vn, kp, vp);
    if (!valid) {
      expect_rejected(s, "paged_append(hostile table)");
    } else {
      expect_ok(s, "paged_append");
      const auto kbytes = encode_bytes(pd, kx), vbytes = encode_bytes(pd, vx);
      for (uint32_t b = 0; b < batch; ++b)
        for (int32_t i = cu[b]; i < cu[b + 1]; ++i) {
          const int32_t pos = before[b] + i - cu[b];
          const uint32_t page = uint32_t(indices[indptr[b] + pos / ps]), slot = pos % ps;
          for (uint32_t h = 0; h < hkv; ++h) {
            std::memcpy(&km[at(page, slot, h, d, 0) * e], &kbytes[(size_t(i) * hkv + h) * d * e],
                        d * e);
            std::memcpy(&vm[at(page, slot, h, dv, 0) * e], &vbytes[(size_t(i) * hkv + h) * dv * e],
                        dv * e);
          }
        }
    }
    std::vector<uint8_t> kg(km.size()), vg(vm.size());
    expect_ok(vkattn_tensor_read(kb, kg.data(), kg.size()), "tensor_read");
    expect_ok(vkattn_tensor_read(vb, vg.data(), vg.size()), "tensor_read");
    expect(kg == km && vg == vm, "caller pools differ from the model after paged_append");
    if (!valid || batch == 0) return;
    // Attention over the same table: one query per sequence.
    std::vector<int32_t> cq{0}, lens(batch);
    for (uint32_t b = 0; b < batch; ++b) {
      cq.push_back(cq.back() + 1);
      lens[b] = before[b] + cu[b + 1] - cu[b];
    }
    // The descriptor as the other entry points draw it (GQA, both windows,
    // chunks, softcap, sinks; sometimes hostile), and spans now and then.
    bool desc_valid = false;
    vkattn_attention_desc ad = desc(&desc_valid);
    std::vector<int32_t> span_indptr, span_pairs;
    if (in_.ConsumeIntegralInRange<int>(0, 2) == 0) {
      desc_valid = desc_valid && spans_for(lens, &span_indptr, &span_pairs);
      ad.span_indptr = span_indptr.data();
      ad.spans = span_pairs.empty() ? nullptr : span_pairs.data();
    }
    const uint32_t H = ad.num_heads > 0 && ad.num_heads < 64 ? ad.num_heads : 1;
    vkattn_tensor* q = tensor(pd, {int64_t(batch), H, d});
    vkattn_tensor* out = tensor(pd, {int64_t(batch), H, dv});
    expect_ok(vkattn_tensor_write(q, std::vector<uint8_t>(vkattn_tensor_nbytes(q), 0).data(),
                                  vkattn_tensor_nbytes(q)),
              "tensor_write");
    s = vkattn_attention_paged(g_ctx, &ad, batch, cq.data(), lens.data(), indptr.data(),
                               indices.empty() ? nullptr : indices.data(), ps, q, kp, vp, out);
    if (!desc_valid || H != ad.num_heads) return expect_sane(s, "attention_paged(arbitrary)");
    expect_ok(s, "attention_paged");
    std::vector<uint8_t> o(vkattn_tensor_nbytes(out));
    expect_ok(vkattn_tensor_read(out, o.data(), o.size()), "tensor_read");
  }

  // Trees over sequences of t[b] queries and u[b] >= t[b] keys: random
  // words on some sequences (t * ceil(t / 32) each, short trees only), or
  // (returns false) the last count one word short.
  bool trees_for(const std::vector<int32_t>& t, const std::vector<int32_t>& u,
                 std::vector<int32_t>* indptr, std::vector<uint32_t>* words) {
    indptr->push_back(0);
    for (size_t b = 0; b < t.size(); ++b) {
      const int64_t n = int64_t(t[b]) * ((t[b] + 31) / 32);
      if (t[b] <= u[b] && n <= 4096 && in_.ConsumeBool())
        for (int64_t i = 0; i < n; ++i) words->push_back(in_.ConsumeIntegral<uint32_t>());
      indptr->push_back(int32_t(words->size()));
    }
    if (words->empty() || in_.ConsumeIntegralInRange<int>(0, 5) != 0) return true;
    words->pop_back();
    indptr->back() -= 1;  // a word short (or, after an untreed last sequence, decreasing)
    return false;
  }

  // Bidirectional spans over sequences of `lens` keys: sorted and disjoint
  // within each, or (returns false) one value made arbitrary.
  bool spans_for(const std::vector<int32_t>& lens, std::vector<int32_t>* indptr,
                 std::vector<int32_t>* pairs) {
    indptr->push_back(0);
    for (const int32_t u : lens) {
      for (int32_t at = 0; at < u && in_.ConsumeBool();) {
        const int32_t lo = in_.ConsumeIntegralInRange<int32_t>(at, u - 1);
        const int32_t hi = in_.ConsumeIntegralInRange<int32_t>(lo + 1, u);
        pairs->push_back(lo), pairs->push_back(hi);
        at = hi;
      }
      indptr->push_back(int32_t(pairs->size() / 2));
    }
    if (pairs->empty() || in_.ConsumeIntegralInRange<int>(0, 3) != 0) return true;
    (*pairs)[in_.ConsumeIntegralInRange<size_t>(0, pairs->size() - 1)] =
        in_.ConsumeIntegral<int32_t>();
    return false;  // (may still be legal: judged as arbitrary)
  }

  // NULL handles and pointers, wrong sizes, zero-sized and absurd shapes.
  // vkattn_context_self_check with a descriptor, dtypes, paged flag and
  // query tokens from the input: valid ones pass (no family is faulted
  // here), anything else is refused with INVALID_ARGUMENT.
  void self_check() {
    bool unused = true;
    vkattn_attention_desc d = desc(&unused);
    // desc() judges a descriptor for this cache's calls; the up-front check
    // takes any descriptor the header allows (any head counts and dims),
    // so its validity is the header's rules alone, and the optional
    // tensors' checks that need no call shapes.
    // Every release's size (0.1, 0.3, 0.4, 0.6, 0.7): desc() leaves a 0.7
    // struct's variant and parameters NULL, so 176 is as valid as the rest.
    bool valid = (d.struct_size == 80 || d.struct_size == 88 || d.struct_size == 112 ||
                  d.struct_size == 136 || d.struct_size == 176) &&
                 (d.struct_size < 112 || d.window_right >= -1) && d.num_heads >= 1 &&
                 d.num_kv_heads >= 1 && d.num_heads % std::max(d.num_kv_heads, 1u) == 0 &&
                 d.head_dim >= 1 && d.head_dim <= VKATTN_MAX_HEAD_DIM &&
                 d.head_dim_v <= VKATTN_MAX_HEAD_DIM && std::isfinite(d.scale) && d.causal <= 1 &&
                 d.window_left >= -1 && std::isfinite(d.softcap) && d.softcap >= 0.0f &&
                 d.mask_type <= VKATTN_MASK_ADDITIVE &&
                 !(d.mask && d.mask_type == VKATTN_MASK_NONE);  // a mask_type needs no tensor
    for (uint32_t r : d.reserved) valid = valid && r == 0;
    if (d.struct_size >= 88 && d.sinks)  // a 0.1 struct (80 bytes) has no sinks
      valid = valid && vkattn_tensor_dtype(d.sinks) == VKATTN_F32 &&
              vkattn_tensor_ndim(d.sinks) == 1 && vkattn_tensor_shape(d.sinks, 0) == d.num_heads;
    // Every value of the enum's range (0, U8 and I32 are not attention dtypes).
    const vkattn_dtype q_dt = static_cast<vkattn_dtype>(in_.ConsumeIntegralInRange<int>(0, 8));
    const vkattn_dtype kv_dt = static_cast<vkattn_dtype>(in_.ConsumeIntegralInRange<int>(0, 8));
    const uint32_t paged = in_.ConsumeIntegralInRange<uint32_t>(0, 2);
    const uint32_t t = in_.ConsumeBool() ? in_.ConsumeIntegral<uint32_t>()
                                         : in_.ConsumeIntegralInRange<uint32_t>(0, 12);
    auto is_float = [](vkattn_dtype x) {
      return x == VKATTN_F32 || x == VKATTN_F16 || x == VKATTN_BF16;
    };
    valid =
        valid && is_float(q_dt) && paged <= 1 && t >= 1 && t <= (1u << 24) &&
        (is_float(kv_dt) ||
         (paged == 1 && (kv_dt == VKATTN_I8 || kv_dt == VKATTN_FP8_E4M3 || kv_dt == VKATTN_Q4)));
    const vkattn_status s = vkattn_context_self_check(g_ctx, &d, q_dt, kv_dt, paged, t);
    if (valid) return expect_ok(s, "context_self_check");
    expect_rejected(s, "context_self_check(bad)");
  }

  void bad_calls() {
    int64_t shape[4] = {in_.ConsumeBool() ? in_.ConsumeIntegral<int64_t>()
                                          : in_.ConsumeIntegralInRange<int64_t>(-2, 1 << 16),
                        2, 2, 2};
    vkattn_tensor* t = nullptr;
    vkattn_status s = vkattn_tensor_create(g_ctx, VKATTN_F32,
                                           in_.ConsumeIntegralInRange<uint32_t>(0, 6), shape, &t);
    expect_sane(s, "tensor_create(arbitrary)");
    if (s == VKATTN_SUCCESS) {
      tensors_.push_back(t);
      std::vector<uint8_t> buf(std::min<size_t>(vkattn_tensor_nbytes(t), 4096));
      expect_sane(vkattn_tensor_read(t, buf.data(), buf.size()), "tensor_read(size)");
    }
    std::vector<uint8_t> b(16);
    expect_rejected(vkattn_kv_cache_read(cache_, layers_, 0, 0, 1, b.data(), 16, b.data(), 16),
                    "kv_cache_read(layer)");
    expect_rejected(vkattn_kv_cache_read(nullptr, 0, 0, 0, 1, b.data(), 16, b.data(), 16),
                    "kv_cache_read(NULL)");
    expect_rejected(vkattn_step_append(nullptr, 0, nullptr, nullptr), "step_append(NULL)");
    // Scales: set (any cache, any layer, any time) and read where the
    // cache has none.
    set_scales(in_.ConsumeIntegralInRange<uint32_t>(0, layers_));
    if (!q8_ && !seqs_.empty()) {
      const auto& [id, m] = *seqs_.begin();
      float ks[4], vs[4];
      expect_rejected(vkattn_kv_cache_read_scales(cache_, 0, id, 0, m.len > 0 ? 1 : 0, ks, vs),
                      "kv_cache_read_scales(16/32-bit cache)");
    }
    int32_t len = 0;
    expect_rejected(vkattn_kv_cache_length(cache_, 0, nullptr), "length(NULL)");
    expect_ok(vkattn_kv_cache_length(cache_, in_.ConsumeIntegral<int64_t>(), &len), "length");
  }

  // Lengths, every known byte of every layer, free pages.
  void verify() {
    // (Q4 reads back one int8 code per element.)
    const size_t ces = q4_ ? 1 : es(dt_);
    const size_t krow = size_t(hkv_) * d_ * ces, vrow = size_t(hkv_) * dv_ * ces;
    const size_t mkrow = size_t(hkv_) * d_ * mes_, mvrow = size_t(hkv_) * dv_ * mes_;
    for (int64_t id = 0; id < 8; ++id) {
      int32_t len = -1;
      expect_ok(vkattn_kv_cache_length(cache_, id, &len), "kv_cache_length");
      auto it = seqs_.find(id);
      const int32_t want = it == seqs_.end() ? 0 : it->second.len;
      expect(len == want, "length of " + std::to_string(id) + " is " + std::to_string(len) +
                              ", model " + std::to_string(want));
      if (it == seqs_.end() || want == 0) continue;
      const SeqModel& m = it->second;
      for (uint32_t l = 0; l < layers_; ++l) {
        std::vector<uint8_t> k(want * krow), v(want * vrow);
        expect_ok(
            vkattn_kv_cache_read(cache_, l, id, 0, want, k.data(), k.size(), v.data(), v.size()),
            "kv_cache_read");
        std::vector<float> ks, vs;
        if (q4_) {  // d and dv <= 32: one block scale per row
          ks.resize(size_t(want) * hkv_), vs.resize(size_t(want) * hkv_);
          expect_ok(vkattn_kv_cache_read_block_scales(cache_, l, id, 0, want, ks.data(), ks.size(),
                                                      vs.data(), vs.size()),
                    "kv_cache_read_block_scales");
        } else if (q8_) {
          ks.resize(size_t(want) * hkv_), vs.resize(size_t(want) * hkv_);
          expect_ok(vkattn_kv_cache_read_scales(cache_, l, id, 0, want, ks.data(), vs.data()),
                    "kv_cache_read_scales");
        }
        for (int32_t i = 0; i < want; ++i) {
          if (!m.known[l][i]) continue;
          const bool same =
              q8_ ? dequantizes_to(k.data() + i * krow, ks.data() + size_t(i) * hkv_, d_,
                                   m.k[l].data() + i * mkrow, l, false) &&
                        dequantizes_to(v.data() + i * vrow, vs.data() + size_t(i) * hkv_, dv_,
                                       m.v[l].data() + i * mvrow, l, true)
                  : std::memcmp(k.data() + i * krow, m.k[l].data() + i * krow, krow) == 0 &&
                        std::memcmp(v.data() + i * vrow, m.v[l].data() + i * vrow, vrow) == 0;
          expect(same, "token " + std::to_string(i) + " of sequence " + std::to_string(id) +
                           " layer " + std::to_string(l) + " differs from the model");
        }
      }
    }
    if (!step_) {
      uint32_t free = 0;
      expect_ok(vkattn_kv_cache_num_free_pages(cache_, &free), "num_free_pages");
      expect(free == pages_ - used_pages(), "free pages " + std::to_string(free) + ", model " +
                                                std::to_string(pages_ - used_pages()));
    }
  }

  // One token's 8-bit rows (Hkv x dim codes, Hkv scales) against the
  // model's f32 values: int8 scales are absmax / 127 of the row and codes
  // within half a step; fp8 scales are the layer's and codes within half
  // an e4m3 ulp of the value saturated at 448 x scale.
  bool dequantizes_to(const uint8_t* codes, const float* scales, uint32_t dim, const uint8_t* model,
                      uint32_t layer, bool is_v) const {
    if (q4_) return q4_dequantizes_to(codes, scales, dim, model, is_v);
    for (uint32_t h = 0; h < hkv_; ++h) {
      const float* x = reinterpret_cast<const float*>(model) + size_t(h) * dim;
      const float s = scales[h];
      float amax = 0.0f;
      for (uint32_t e = 0; e < dim; ++e) amax = std::max(amax, std::fabs(x[e]));
      if (dt_ == VKATTN_I8) {
        if (std::fabs(s - amax / 127.0f) > 1e-6f * amax) return false;
      } else if (s != scales_[layer][(is_v ? hkv_ : 0) + h]) {
        return false;
      }
      for (uint32_t e = 0; e < dim; ++e) {
        const uint8_t c = codes[size_t(h) * dim + e];
        const float got = dequantize(dt_, c, s);
        float want = x[e], bound;
        if (dt_ == VKATTN_I8) {
          bound = 0.5f * s;
        } else {
          want = std::clamp(want, -448.0f * s, 448.0f * s);
          bound = std::max(std::fabs(want) / 16.0f, s / 1024.0f);
        }
        if (!(std::fabs(got - want) <= bound * 1.0001f + 1e-7f)) return false;
      }
    }
    return true;
  }

  // Q4 (one block a row here): the scale is the row's element of largest
  // magnitude / -8 (f16), every code within a step of its value; keys of
  // a rotated cache against the model's keys times the normalized
  // Hadamard matrix (d 8; d 3 is not rotated).
  bool q4_dequantizes_to(const uint8_t* codes, const float* scales, uint32_t dim,
                         const uint8_t* model, bool is_v) const {
    for (uint32_t h = 0; h < hkv_; ++h) {
      const float* in = reinterpret_cast<const float*>(model) + size_t(h) * dim;
      std::vector<float> x(in, in + dim);
      if (rot_ && !is_v && dim == 8) vkattn::ref::hadamard_rotate(x.data(), 8);
      double m = 0;
      for (double e : x) m = std::max(m, std::fabs(e));
      const float s = scales[h];
      if (!(std::fabs(std::fabs(double(s)) - m / 8) <= 1e-3 * m / 8 + 1e-7)) return false;
      for (uint32_t e = 0; e < dim; ++e) {
        const int c = int8_t(codes[size_t(h) * dim + e]);
        // (Within a step, s rounded to f16 included: a row whose largest
        // magnitude comes with both signs clamps the opposite one's code
        // +8 to 7, one step of the exact scale, up to 8 f16 roundings of
        // |s| more than one of s: |x| - 7|s| <= |s| (1 + 8 x 2^-11).)
        if (c < -8 || c > 7 || !(std::fabs(c * double(s) - x[e]) <= std::fabs(s) * 1.004 + 1e-7))
          return false;
      }
    }
    return true;
  }

  FuzzedDataProvider& in_;
  vkattn_kv_cache* cache_ = nullptr;
  vkattn_step* step_ = nullptr;
  std::vector<vkattn_tensor*> tensors_;
  uint32_t layers_ = 1, hkv_ = 1, d_ = 4, dv_ = 4, ps_ = 1, pages_ = 1;
  vkattn_dtype dt_ = VKATTN_F32;
  bool q8_ = false;          // a quantized cache (8-bit or Q4): the model holds f32 values
  bool q4_ = false;          // VKATTN_Q4
  bool rot_ = false;         // ... with VKATTN_KV_ROTATE_KEYS
  size_t mes_ = 4;           // bytes per element of the model's rows
  std::vector<bool> fixed_;  // per layer: appended to (fp8 scales fixed)
  std::vector<std::vector<float>> scales_;  // per layer: fp8 [K Hkv, V Hkv], empty = unset
  std::map<int64_t, SeqModel> seqs_;
  int next_page_ = 0;
  std::vector<int64_t> st_ids_;
  std::vector<int32_t> st_t_;
  std::vector<bool> st_cow_;  // copy-on-write of the last page, decided at begin
  std::vector<std::vector<uint8_t>> st_k_, st_v_;  // per layer, appended rows (cache dtype)
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  d.flags = VKATTN_CONTEXT_VALIDATION;
  if (vkattn_context_create(&d, &g_plain) != VKATTN_SUCCESS) die("vkattn_context_create");
  d.flags = VKATTN_CONTEXT_VALIDATION | VKATTN_CONTEXT_BATCH_INVARIANT;
  if (vkattn_context_create(&d, &g_invariant) != VKATTN_SUCCESS) die("vkattn_context_create");
  d.flags = VKATTN_CONTEXT_VALIDATION;
  setenv("VKATTN_CASCADE", "1", 1);  // read at context creation
  if (vkattn_context_create(&d, &g_cascade) != VKATTN_SUCCESS) die("vkattn_context_create");
  unsetenv("VKATTN_CASCADE");
  std::atexit([] {
    vkattn_fuzz::release_variants();
    vkattn_context_destroy(g_plain);
    vkattn_context_destroy(g_invariant);
    vkattn_context_destroy(g_cascade);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  g_ctx = size % 2 ? g_invariant : size % 4 == 2 ? g_cascade : g_plain;
  {
    Fuzz f(in);
    f.run();
  }
  expect_ok(vkattn_context_synchronize(g_ctx), "synchronize");
  uint32_t msgs = 0;
  expect_ok(vkattn_context_validation_messages(g_ctx, &msgs), "validation_messages");
  if (msgs) die("validation messages: " + std::to_string(msgs));
  return 0;
}

// Out of memory and device loss (issue E): every allocation of a
// continuous-batching step fails in turn (white-box: links the static
// library to arm core/faults.h), and each failure must surface as an
// OUT_OF_*_MEMORY status with every tensor and the cache unchanged and
// usable. An injected device loss must be sticky on its context and leave
// other contexts working.
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "core/faults.h"
#include "kv_model.h"

using namespace vkattn_test;

namespace {

struct StepRun {
  vkattn_status status = VKATTN_SUCCESS;
  const char* failed_call = "";
  int failed_layer = -1;
};

// The fixture of the sweep: a cache with committed sequences (one of them a
// fork sharing a partial page, so the step copies on write), over several
// pool buffers, and the tensors of one step.
class FaultSweep {
 public:
  explicit FaultSweep(vkattn_context* ctx) : ctx_(ctx) {
    s_.layers = 2;
    s_.hkv = 2;
    s_.d = 8;
    s_.dv = 8;
    s_.page_size = 4;
    s_.pages = 48;
    s_.dtype = VKATTN_F16;
    {
      // A slab (one layer of a page) is 256 bytes: 4 pages per buffer.
      ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "1024"}});
      vkattn_kv_cache_desc d = kv_cache_desc(s_);
      EXPECT_EQ(vkattn_kv_cache_create(ctx, &d, &cache_), VKATTN_SUCCESS) << vkattn_last_error();
    }
    commit({1, 2}, {9, 4}, 1.0f);
    EXPECT_EQ(vkattn_kv_cache_fork(cache_, 1, 3), VKATTN_SUCCESS);
    total_ = 0;
    for (int32_t x : t_) total_ += x;
    k_ = tensor(VKATTN_F32, {total_, s_.hkv, s_.d});
    v_ = tensor(VKATTN_F32, {total_, s_.hkv, s_.dv});
    q_ = tensor(VKATTN_F32, {total_, 4, s_.d});
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1, 1);
    for (vkattn_tensor* t : {k_, v_, q_}) {
      std::vector<float> x(vkattn_tensor_nbytes(t) / 4);
      for (float& e : x) e = u(rng);
      EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    }
    for (uint32_t l = 0; l < s_.layers; ++l) {
      out_.push_back(tensor(VKATTN_F32, {total_, 4, s_.dv}));
      lse_.push_back(tensor(VKATTN_F32, {total_, 4}));
    }
  }
  ~FaultSweep() {
    for (vkattn_tensor* t : owned_) vkattn_tensor_destroy(t);
    vkattn_kv_cache_destroy(cache_);
  }

  // Everything a caller can observe of the cache.
  std::vector<uint8_t> snapshot() {
    std::vector<uint8_t> all;
    uint32_t free = 0;
    EXPECT_EQ(vkattn_kv_cache_num_free_pages(cache_, &free), VKATTN_SUCCESS) << vkattn_last_error();
    all.push_back(static_cast<uint8_t>(free));
    for (int64_t id : {1, 2, 3, 4}) {
      int32_t len = -1;
      EXPECT_EQ(vkattn_kv_cache_length(cache_, id, &len), VKATTN_SUCCESS);
      all.push_back(static_cast<uint8_t>(len));
      if (len <= 0) continue;
      for (uint32_t l = 0; l < s_.layers; ++l) {
        std::vector<uint8_t> k(len * s_.hkv * s_.d * 2), v(len * s_.hkv * s_.dv * 2);
        EXPECT_EQ(
            vkattn_kv_cache_read(cache_, l, id, 0, len, k.data(), k.size(), v.data(), v.size()),
            VKATTN_SUCCESS)
            << vkattn_last_error();
        all.insert(all.end(), k.begin(), k.end());
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    return all;
  }

  // NaN in every output (what a failed attention call must leave).
  void poison_outputs() {
    for (uint32_t l = 0; l < s_.layers; ++l) {
      std::vector<float> nan(vkattn_tensor_nbytes(out_[l]) / 4, NAN);
      EXPECT_EQ(vkattn_tensor_write(out_[l], nan.data(), nan.size() * 4), VKATTN_SUCCESS);
      std::vector<float> nl(vkattn_tensor_nbytes(lse_[l]) / 4, NAN);
      EXPECT_EQ(vkattn_tensor_write(lse_[l], nl.data(), nl.size() * 4), VKATTN_SUCCESS);
    }
  }
  std::vector<float> outputs(uint32_t layer) {
    std::vector<float> o(vkattn_tensor_nbytes(out_[layer]) / 4);
    EXPECT_EQ(vkattn_tensor_read(out_[layer], o.data(), o.size() * 4), VKATTN_SUCCESS)
        << vkattn_last_error();
    return o;
  }

  // begin, append + attention for every layer, read the outputs back; stops
  // at the first failing call. The step is left open for the caller.
  StepRun run(vkattn_step** st) {
    StepRun r;
    auto call = [&](vkattn_status s, const char* what) {
      if (s != VKATTN_SUCCESS && r.status == VKATTN_SUCCESS) r.status = s, r.failed_call = what;
      return s == VKATTN_SUCCESS;
    };
    *st = nullptr;
    if (!call(vkattn_step_begin(cache_, 3, ids_.data(), t_.data(), st), "step_begin")) return r;
    vkattn_attention_desc desc;
    vkattn_attention_desc_init(&desc);
    desc.num_heads = 4;
    desc.num_kv_heads = s_.hkv;
    desc.head_dim = s_.d;
    desc.causal = 1;
    for (uint32_t l = 0; l < s_.layers; ++l) {
      if (!call(vkattn_step_append(*st, l, k_, v_), "step_append")) return r;
      desc.lse = lse_[l];
      if (!call(vkattn_step_attention(*st, l, &desc, q_, out_[l]), "step_attention")) {
        r.failed_layer = static_cast<int>(l);
        return r;
      }
    }
    std::vector<float> o(vkattn_tensor_nbytes(out_[1]) / 4);
    call(vkattn_tensor_read(out_[1], o.data(), o.size() * 4), "tensor_read (submits)");
    return r;
  }

  vkattn_kv_cache* cache() { return cache_; }

 private:
  vkattn_tensor* tensor(vkattn_dtype dt, std::vector<int64_t> shape) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx_, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    owned_.push_back(t);
    return t;
  }
  void commit(std::vector<int64_t> ids, std::vector<int32_t> t, float x) {
    vkattn_step* st = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache_, uint32_t(ids.size()), ids.data(), t.data(), &st), 0);
    int64_t n = 0;
    for (int32_t e : t) n += e;
    vkattn_tensor* k = tensor(VKATTN_F32, {n, s_.hkv, s_.d});
    std::vector<float> kx(n * s_.hkv * s_.d);
    for (size_t i = 0; i < kx.size(); ++i) kx[i] = x + 0.01f * float(i % 97);
    ASSERT_EQ(vkattn_tensor_write(k, kx.data(), kx.size() * 4), VKATTN_SUCCESS);
    for (uint32_t l = 0; l < s_.layers; ++l) ASSERT_EQ(vkattn_step_append(st, l, k, k), 0);
    ASSERT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  }

  vkattn_context* ctx_;
  KvShape s_;
  vkattn_kv_cache* cache_ = nullptr;
  std::vector<vkattn_tensor*> owned_;
  std::vector<int64_t> ids_ = {1, 3, 4};  // a decode, its fork (copy on write), a new prompt
  std::vector<int32_t> t_ = {1, 2, 6};
  int64_t total_ = 0;
  vkattn_tensor *k_ = nullptr, *v_ = nullptr, *q_ = nullptr;
  std::vector<vkattn_tensor*> out_, lse_;
};

}  // namespace

// Fails allocation N of a step for N = 1, 2, ... until a step makes fewer
// than N allocations: every failure is an OUT_OF_*_MEMORY status of the
// call that hit it, the cache (contents, lengths, free pages) and the
// outputs of a failed attention call are unchanged, nothing leaks (the
// ASan run of this test) and the next attempt works. Returns the number of
// allocations failed.
static uint64_t sweep(vkattn_context* ctx, bool in_submit) {
  FaultSweep f(ctx);
  // A clean run first: pipelines compiled, reference outputs.
  vkattn_step* st = nullptr;
  EXPECT_EQ(f.run(&st).status, VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_step_abort(st);
  const std::vector<float> want0 = f.outputs(0), want1 = f.outputs(1);
  const std::vector<uint8_t> before = f.snapshot();
  std::map<std::string, int> outcomes;
  uint64_t n = 1, failed = 0;
  for (;; ++n) {
    f.poison_outputs();
    vkattn::arm_alloc_fault(n, in_submit);
    StepRun r = f.run(&st);
    const bool fired = vkattn::alloc_fault_fired();
    const uint64_t count = vkattn::alloc_fault_count();
    vkattn::arm_alloc_fault(0);
    std::string why = vkattn_last_error();
    vkattn_step_abort(st);
    SCOPED_TRACE(testing::Message() << "allocation " << n << " failed in " << r.failed_call);
    if (!fired) {
      // Allocation n was not reached (the sweep is over) or was one the
      // sweep does not fail (inside vkQueueSubmit): the step ran through.
      EXPECT_EQ(r.status, VKATTN_SUCCESS) << r.failed_call << ": " << why;
      EXPECT_EQ(f.outputs(0), want0);
      EXPECT_EQ(f.outputs(1), want1);
      if (count < n) break;
      outcomes["(not failed: inside vkQueueSubmit)"]++;
      continue;
    }
    ++failed;
    EXPECT_TRUE(r.status == VKATTN_ERROR_OUT_OF_HOST_MEMORY ||
                r.status == VKATTN_ERROR_OUT_OF_DEVICE_MEMORY)
        << vkattn_status_string(r.status) << ": " << why;
    outcomes[std::string(r.failed_call) + " -> " + vkattn_status_string(r.status)]++;
    EXPECT_EQ(f.snapshot(), before) << "the cache changed";
    if (r.failed_layer >= 0) {
      // A failed attention call recorded nothing: its outputs are as they
      // were (NaN).
      for (float x : f.outputs(r.failed_layer)) EXPECT_TRUE(std::isnan(x)) << "out was written";
    }
    if (n > 5000) {
      ADD_FAILURE() << "the sweep does not end";
      break;
    }
  }
  std::printf("%s: %llu allocations of one step, each failed once (%llu injected):\n",
              in_submit ? "without validation, vkQueueSubmit included" : "validation on",
              static_cast<unsigned long long>(n - 1), static_cast<unsigned long long>(failed));
  for (auto& [k, c] : outcomes) std::printf("  %4d x %s\n", c, k.c_str());
  // Usable afterwards: a step commits and the cache holds its tokens.
  EXPECT_EQ(f.run(&st).status, VKATTN_SUCCESS) << vkattn_last_error();
  EXPECT_EQ(vkattn_step_commit(st), VKATTN_SUCCESS);
  int32_t len = 0;
  EXPECT_EQ(vkattn_kv_cache_length(f.cache(), 4, &len), VKATTN_SUCCESS);
  EXPECT_EQ(len, 6);
  return failed;
}

TEST(Faults, EveryAllocationOfAStepFailsCleanly) {
  vkattn_context* ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  // How many points a step allocates at depends on the device (an H100 has
  // 16: no host-visible pool, so fewer mapped rings).
  EXPECT_GE(sweep(ctx, false), 12u) << "the sweep reached too few allocation points";
  EXPECT_EQ(validation_messages(ctx), 0u);
  vkattn_context_destroy(ctx);
}

// The same with failures inside vkQueueSubmit too: the batch stays
// pending and the next submitting call submits it. Without the validation
// layer, which misreads a retried submission (src/core/faults.h).
TEST(Faults, SubmitFailuresAreRetried) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  EXPECT_GE(sweep(ctx, true), 12u);
  vkattn_context_destroy(ctx);
}

// Cold paths: creating a context, a cache and tensors, and the first step
// of a context (pipelines compiled then), with allocation N failing. Each
// call either succeeds or returns OUT_OF_*_MEMORY; nothing crashes or
// leaks, and what was created can be destroyed.
TEST(Faults, ColdPathsFailCleanly) {
  // Mesa 22.3's device-select implicit layer dereferences a failed
  // allocation in vkEnumeratePhysicalDevices (a crash in the layer, not in
  // vkattn): this test runs without it. Self-check results are kept in
  // memory only (an empty VKATTN_PIPELINE_CACHE_DIR), so every context's
  // first attention call runs its pipeline's self-check cold: its
  // allocations fail in turn too.
  ScopedEnv no_layer(ScopedEnv::Vars{{"NODEVICE_SELECT", "1"}, {"VKATTN_PIPELINE_CACHE_DIR", ""}});
  std::map<std::string, int> outcomes;
  uint64_t n = 1, failed = 0;
  for (;; ++n) {
    vkattn::arm_alloc_fault(n);
    std::string where;
    vkattn_status bad = VKATTN_SUCCESS;
    auto call = [&](vkattn_status s, const char* what) {
      if (s != VKATTN_SUCCESS && bad == VKATTN_SUCCESS) bad = s, where = what;
      return s == VKATTN_SUCCESS;
    };
    vkattn_context* ctx = nullptr;
    vkattn_kv_cache* cache = nullptr;
    vkattn_step* st = nullptr;
    std::vector<vkattn_tensor*> ts;
    if (call(vkattn_context_create(nullptr, &ctx), "context_create")) {
      KvShape s;
      s.layers = 1, s.d = 16, s.dv = 16;
      vkattn_kv_cache_desc d = kv_cache_desc(s);
      int64_t id = 1;
      int32_t t = 5;
      int64_t kshape[3] = {5, s.hkv, s.d}, qshape[3] = {5, 4, s.d};
      ts.assign(4, nullptr);
      if (call(vkattn_kv_cache_create(ctx, &d, &cache), "kv_cache_create") &&
          call(vkattn_tensor_create(ctx, VKATTN_F32, 3, kshape, &ts[0]), "tensor_create") &&
          call(vkattn_tensor_create(ctx, VKATTN_F32, 3, qshape, &ts[1]), "tensor_create") &&
          call(vkattn_tensor_create(ctx, VKATTN_F32, 3, qshape, &ts[2]), "tensor_create") &&
          call(vkattn_step_begin(cache, 1, &id, &t, &st), "step_begin") &&
          call(vkattn_step_append(st, 0, ts[0], ts[0]), "step_append")) {
        vkattn_attention_desc desc;
        vkattn_attention_desc_init(&desc);
        desc.num_heads = 4;
        desc.num_kv_heads = s.hkv;
        desc.head_dim = s.d;
        if (call(vkattn_step_attention(st, 0, &desc, ts[1], ts[2]), "step_attention") &&
            call(vkattn_context_synchronize(ctx), "synchronize"))
          call(vkattn_step_commit(st), "step_commit") && (st = nullptr, true);
      }
    }
    const bool fired = vkattn::alloc_fault_fired();
    const uint64_t count = vkattn::alloc_fault_count();
    vkattn::arm_alloc_fault(0);
    SCOPED_TRACE(testing::Message()
                 << "allocation " << n << " failed in " << where << ": " << vkattn_last_error());
    vkattn_step_abort(st);
    for (vkattn_tensor* x : ts) vkattn_tensor_destroy(x);
    vkattn_kv_cache_destroy(cache);
    vkattn_context_destroy(ctx);
    if (!fired) {
      EXPECT_EQ(bad, VKATTN_SUCCESS) << where;
      if (count < n) break;
      continue;
    }
    ++failed;
    // The Vulkan loader tolerates some failed allocations of its own (an
    // implicit layer it cannot load) and succeeds: then every call did.
    EXPECT_TRUE(bad == VKATTN_ERROR_OUT_OF_HOST_MEMORY ||
                bad == VKATTN_ERROR_OUT_OF_DEVICE_MEMORY || bad == VKATTN_SUCCESS)
        << vkattn_status_string(bad);
    outcomes[bad == VKATTN_SUCCESS ? std::string("(absorbed by the loader: every call succeeded)")
                                   : where + " -> " + vkattn_status_string(bad)]++;
    if (n > 20000) {
      ADD_FAILURE() << "the sweep does not end";
      break;
    }
  }
  std::printf("cold paths: %llu allocations, each failed once (%llu injected):\n",
              static_cast<unsigned long long>(n - 1), static_cast<unsigned long long>(failed));
  for (auto& [k, c] : outcomes) std::printf("  %4d x %s\n", c, k.c_str());
  EXPECT_GT(failed, 50u);
}

// An injected device loss (VKATTN_FAULT_DEVICE_LOST=3: the third
// submission of the context created while it is set) turns into
// VKATTN_ERROR_DEVICE_LOST on that call and on every later call of that
// context and its objects; destroying them in any order neither crashes
// nor hangs; a context created without the option keeps working.
TEST(Faults, DeviceLossIsStickyAndLocal) {
  vkattn_context* lost = nullptr;
  {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_FAULT_DEVICE_LOST", "3"}});
    lost = make_context();
  }
  vkattn_context* other = make_context();
  ASSERT_NE(lost, nullptr);
  ASSERT_NE(other, nullptr);
  KvShape s;
  s.layers = 1;
  vkattn_kv_cache_desc cd = kv_cache_desc(s);
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(lost, &cd, &cache), VKATTN_SUCCESS);
  int64_t n = 64;
  vkattn_tensor* t = nullptr;
  ASSERT_EQ(vkattn_tensor_create(lost, VKATTN_F32, 1, &n, &t), VKATTN_SUCCESS);
  std::vector<float> x(64, 1.0f), y(64);
  int64_t id = 1;
  int32_t tok = 2;
  vkattn_step* st = nullptr;
  ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &tok, &st), VKATTN_SUCCESS);
  // Submissions: each synchronize submits an append recorded before it.
  int64_t kshape[3] = {2, s.hkv, s.d};
  vkattn_tensor* kv = nullptr;
  ASSERT_EQ(vkattn_tensor_create(lost, VKATTN_F32, 3, kshape, &kv), VKATTN_SUCCESS);
  vkattn_status got = VKATTN_SUCCESS;
  int rounds = 0;
  for (; rounds < 5 && got == VKATTN_SUCCESS; ++rounds) {
    ASSERT_EQ(vkattn_step_append(st, 0, kv, kv), VKATTN_SUCCESS) << vkattn_last_error();
    got = vkattn_context_synchronize(lost);
  }
  EXPECT_EQ(rounds, 3) << "the third submission is lost";
  EXPECT_EQ(got, VKATTN_ERROR_DEVICE_LOST) << vkattn_last_error();
  EXPECT_NE(std::strstr(vkattn_last_error(), "lost"), nullptr) << vkattn_last_error();
  // Every later call on the lost context and its objects.
  vkattn_tensor* t2 = nullptr;
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = s.hkv;
  desc.num_kv_heads = s.hkv;
  desc.head_dim = s.d;
  int32_t cu[2] = {0, 2};
  uint32_t u32 = 0;
  int32_t i32 = 0;
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  uint32_t u32b = 0;
  uint64_t u64 = 0, u64b = 0, u64c = 0;
  vkattn_vulkan_desc vd;
  vkattn_vulkan_desc_init(&vd);
  vkattn_tensor* t3 = nullptr;
  vkattn_step* st2 = nullptr;
  int64_t id2 = 2;
  vkattn_tune_desc td;
  vkattn_tune_desc_init(&td);
  const vkattn_status calls[] = {
      vkattn_tensor_create(lost, VKATTN_F32, 1, &n, &t2),
      vkattn_tensor_write(t, x.data(), 256),
      vkattn_tensor_read(t, y.data(), 256),
      vkattn_context_flush(lost),
      vkattn_context_synchronize(lost),
      vkattn_context_get_device_info(lost, &info),
      vkattn_attention_varlen(lost, &desc, 1, cu, cu, t, t, t, t),
      vkattn_kv_cache_create(lost, &cd, &cache),
      vkattn_kv_cache_length(cache, 1, &i32),
      vkattn_kv_cache_num_free_pages(cache, &u32),
      vkattn_kv_cache_fork(cache, 1, 2),
      vkattn_step_append(st, 0, kv, kv),
      vkattn_step_commit(st),
      // E4 defect 7: the self-check counts succeeded after the loss; so
      // did these.
      vkattn_context_self_check_counts(lost, 0, &u32, &u32b),
      vkattn_context_self_check(lost, &desc, VKATTN_F32, VKATTN_F32, 0, 1),
      vkattn_context_get_vulkan(lost, &vd),
      vkattn_context_begin_external(lost, reinterpret_cast<void*>(uintptr_t(1))),
      vkattn_context_end_external(lost, 1, 1),
      vkattn_context_flush_with(lost, 0, 0, 0, 0),
      vkattn_context_validation_messages(lost, &u32),
      vkattn_context_last_gpu_time(lost, &u64),
      vkattn_tensor_get_vk_buffer(t, &u64, &u64b, &u64c),
      vkattn_tensor_view(t, 0, 1, &n, nullptr, &t3),
      vkattn_attention_merge(lost, t, t, t, t, t, nullptr),
      vkattn_kv_cache_truncate(cache, 1, 0),
      vkattn_kv_cache_remove(cache, 1),
      vkattn_kv_cache_read(cache, 0, 1, 0, 1, y.data(), 256, y.data(), 256),
      vkattn_step_begin(cache, 1, &id2, &tok, &st2),
      vkattn_step_attention(st, 0, &desc, t, t),
      vkattn_tune(lost, &td),
  };
  for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); ++i)
    EXPECT_EQ(calls[i], VKATTN_ERROR_DEVICE_LOST) << "call " << i;
  EXPECT_EQ(t2, nullptr);
  EXPECT_EQ(t3, nullptr);
  EXPECT_EQ(st2, nullptr);
  // The other context is untouched.
  vkattn_tensor* ok = nullptr;
  ASSERT_EQ(vkattn_tensor_create(other, VKATTN_F32, 1, &n, &ok), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(ok, x.data(), 256), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(ok, y.data(), 256), VKATTN_SUCCESS);
  EXPECT_EQ(x, y);
  EXPECT_EQ(validation_messages(other), 0u);
  // Destroy the lost context first, then its objects: no crash, no hang.
  vkattn_context_destroy(lost);
  vkattn_step_abort(st);
  vkattn_kv_cache_destroy(cache);
  vkattn_tensor_destroy(t);
  vkattn_tensor_destroy(kv);
  vkattn_tensor_destroy(ok);
  vkattn_context_destroy(other);
}

// VKATTN_DEVICE_MEMORY_LIMIT caps a context's device allocations: calls
// beyond it fail with OUT_OF_DEVICE_MEMORY and change nothing; freeing
// makes room again; other contexts are not limited.
TEST(Faults, DeviceMemoryLimitIsEnforced) {
  vkattn_context* ctx = nullptr;
  {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_DEVICE_MEMORY_LIMIT", "16777216"}});  // 16 MiB
    ctx = make_context();
  }
  ASSERT_NE(ctx, nullptr);
  // Tensors of 4 MiB until the limit (the context's own buffers count too).
  std::vector<vkattn_tensor*> ts;
  int64_t n = 1 << 20;
  vkattn_status s = VKATTN_SUCCESS;
  while (ts.size() < 8) {
    vkattn_tensor* t = nullptr;
    s = vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &t);
    if (s != VKATTN_SUCCESS) break;
    std::vector<float> x(n, float(ts.size()));
    // Staging memory (device-local tensors) does not count: writes work.
    ASSERT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    ts.push_back(t);
  }
  EXPECT_EQ(s, VKATTN_ERROR_OUT_OF_DEVICE_MEMORY) << vkattn_last_error();
  EXPECT_NE(std::strstr(vkattn_last_error(), "VKATTN_DEVICE_MEMORY_LIMIT"), nullptr);
  EXPECT_GE(ts.size(), 2u);
  EXPECT_LE(ts.size(), 3u);
  // A cache above the limit is refused the same way.
  KvShape big;
  big.layers = 4, big.hkv = 8, big.d = 64, big.dv = 64, big.pages = 256;  // 32 MiB
  vkattn_kv_cache_desc cd = kv_cache_desc(big);
  vkattn_kv_cache* cache = nullptr;
  EXPECT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(cache, nullptr);
  // Existing tensors are intact; freeing one makes room for another.
  for (size_t i = 0; i < ts.size(); ++i) {
    std::vector<float> y(n);
    ASSERT_EQ(vkattn_tensor_read(ts[i], y.data(), y.size() * 4), VKATTN_SUCCESS);
    EXPECT_EQ(y[0], float(i));
    EXPECT_EQ(y[n - 1], float(i));
  }
  vkattn_tensor_destroy(ts.back());
  ts.pop_back();
  vkattn_context_synchronize(ctx);
  vkattn_tensor* again = nullptr;
  EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &again), VKATTN_SUCCESS)
      << vkattn_last_error();
  ts.push_back(again);
  // Another context has no limit.
  vkattn_context* other = make_context();
  vkattn_kv_cache* c2 = nullptr;
  EXPECT_EQ(vkattn_kv_cache_create(other, &cd, &c2), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_kv_cache_destroy(c2);
  vkattn_context_destroy(other);
  EXPECT_EQ(validation_messages(ctx), 0u);
  for (vkattn_tensor* t : ts) vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
}

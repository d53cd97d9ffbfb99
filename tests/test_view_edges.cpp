// Views at the edges (issue E3): per-layer slices of one activation buffer
// in a step (each layer reads its own q and writes its own out), 16-bit
// outputs with an odd element count next to the caller's data, and views
// whose byte spans interleave while their elements are disjoint (vLLM's
// combined K/V pool, out as columns of q's fused buffer), which must be
// accepted, while views that really share an element are still refused.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

class ViewEdges : public ContextTest {
 public:
  vkattn_tensor* view(vkattn_tensor* base, int64_t offset, std::vector<int64_t> shape,
                      std::vector<int64_t> strides) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_view(base, offset, static_cast<uint32_t>(shape.size()), shape.data(),
                                 strides.data(), &t),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    owned.emplace_back(t, &vkattn_tensor_destroy);
    return t;
  }
  vkattn_tensor* filled(std::vector<int64_t> shape, const std::vector<float>& data) {
    vkattn_tensor* t = tensor(VKATTN_F32, shape);
    EXPECT_EQ(vkattn_tensor_write(t, data.data(), data.size() * 4), VKATTN_SUCCESS)
        << vkattn_last_error();
    return t;
  }
  template <typename T>
  std::vector<T> read_as(vkattn_tensor* t) {
    std::vector<T> v(vkattn_tensor_nbytes(t) / sizeof(T));
    EXPECT_EQ(vkattn_tensor_read(t, v.data(), v.size() * sizeof(T)), VKATTN_SUCCESS)
        << vkattn_last_error();
    return v;
  }
  std::vector<float> read(vkattn_tensor* t) { return read_as<float>(t); }
};

// Bitwise equality, NaN included.
template <typename T>
void expect_same(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0 && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " differs";
  EXPECT_EQ(bad, 0u) << what;
}

vkattn_attention_desc attention_desc(int H, int Hkv, int d) {
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = Hkv, desc.head_dim = d, desc.causal = 1;
  return desc;
}

// An engine keeps q and out of every layer in one buffer each and passes
// layer l's slice as a view at offset l x T x H x d: every layer must read
// its own q and write its own out (a plan kept for the step must not keep
// layer 0's offsets). Each slice's out is compared with the same layer run
// on dense copies; slices of layers not run yet stay NaN.
TEST_F(ViewEdges, StepLayersUseTheirOwnViewOffsets) {
  for (vkattn_dtype dt : {VKATTN_F32, VKATTN_F16}) {
    SCOPED_TRACE(dt == VKATTN_F32 ? "f32" : "f16");
    const int L = 3, H = 4, Hkv = 2, d = 8, T = 5;
    const int64_t slice = int64_t(T) * H * d;  // 640 / 320 bytes: same 16-byte alignment
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = L, cd.num_kv_heads = Hkv, cd.head_dim = d, cd.page_size = 4;
    cd.num_pages = 8, cd.dtype = VKATTN_F16;
    vkattn_kv_cache* cache = nullptr;
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    const int64_t ids[2] = {1, 2};
    const int32_t n_new[2] = {2, 3};
    vkattn_step* step = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 2, ids, n_new, &step), VKATTN_SUCCESS);
    // Activations of every layer, as the engine holds them (dtype dt).
    auto as_dt = [&](const std::vector<float>& x) {
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = vkattn_ref::f32_to_f16(x[i]);
      return h;
    };
    auto make = [&](std::vector<int64_t> shape, const std::vector<float>& x) {
      vkattn_tensor* t = tensor(dt, shape);
      if (dt == VKATTN_F32) {
        EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
      } else {
        std::vector<uint16_t> h = as_dt(x);
        EXPECT_EQ(vkattn_tensor_write(t, h.data(), h.size() * 2), VKATTN_SUCCESS);
      }
      return t;
    };
    std::vector<float> q_all = random_floats(size_t(L) * slice, 7);
    vkattn_tensor* qs = make({L * slice}, q_all);
    vkattn_tensor* outs = make({L * slice}, std::vector<float>(size_t(L) * slice, kNaN));
    vkattn_attention_desc desc = attention_desc(H, Hkv, d);
    std::vector<vkattn_tensor*> dense_out(L);
    for (int l = 0; l < L; ++l) {
      vkattn_tensor* k = make({T, Hkv, d}, random_floats(size_t(T) * Hkv * d, 100 + l));
      vkattn_tensor* v = make({T, Hkv, d}, random_floats(size_t(T) * Hkv * d, 200 + l));
      ASSERT_EQ(vkattn_step_append(step, l, k, v), VKATTN_SUCCESS) << vkattn_last_error();
      vkattn_tensor* q = view(qs, l * slice, {T, H, d}, {H * d, d, 1});
      vkattn_tensor* out = view(outs, l * slice, {T, H, d}, {H * d, d, 1});
      ASSERT_EQ(vkattn_step_attention(step, l, &desc, q, out), VKATTN_SUCCESS)
          << vkattn_last_error();
      // The same layer on dense copies of its slice.
      std::vector<float> ql(q_all.begin() + l * slice, q_all.begin() + (l + 1) * slice);
      dense_out[l] = tensor(dt, {T, H, d});
      ASSERT_EQ(vkattn_step_attention(step, l, &desc, make({T, H, d}, ql), dense_out[l]),
                VKATTN_SUCCESS)
          << vkattn_last_error();
      if (l + 1 < L && dt == VKATTN_F32) {  // later slices untouched so far
        std::vector<float> all = read(outs);
        for (int64_t i = (l + 1) * slice; i < L * slice; ++i)
          ASSERT_TRUE(std::isnan(all[i])) << "layer " << l << " wrote element " << i;
      }
    }
    ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
    for (int l = 0; l < L; ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      vkattn_tensor* out = view(outs, l * slice, {T, H, d}, {H * d, d, 1});
      if (dt == VKATTN_F32)
        expect_same(read(out), read(dense_out[l]), "out slice");
      else
        expect_same(read_as<uint16_t>(out), read_as<uint16_t>(dense_out[l]), "out slice");
    }
    vkattn_kv_cache_destroy(cache);
  }
}

// vkattn_attention_merge into a 16-bit view with an odd element count that
// sits right before other data of the caller's: the neighbour keeps its
// bits, and the view gets what a dense output gets.
TEST_F(ViewEdges, MergeIntoAnOdd16BitViewLeavesItsNeighbour) {
  for (vkattn_dtype dt : {VKATTN_F16, VKATTN_BF16}) {
    const int n = 3, H = 1, dv = 5;  // 15 elements
    const int64_t count = int64_t(n) * H * dv;
    auto bits = [&](const std::vector<float>& x) {
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        h[i] = dt == VKATTN_F16 ? vkattn_ref::f32_to_f16(x[i]) : vkattn_ref::f32_to_bf16(x[i]);
      return h;
    };
    auto make16 = [&](std::vector<int64_t> shape, const std::vector<uint16_t>& h) {
      vkattn_tensor* t = tensor(dt, shape);
      EXPECT_EQ(vkattn_tensor_write(t, h.data(), h.size() * 2), VKATTN_SUCCESS);
      return t;
    };
    vkattn_tensor* a = make16({n, H, dv}, bits(random_floats(count, 1)));
    vkattn_tensor* b = make16({n, H, dv}, bits(random_floats(count, 2)));
    vkattn_tensor* la = filled({n, H}, random_floats(n * H, 3));
    vkattn_tensor* lb = filled({n, H}, random_floats(n * H, 4));
    vkattn_tensor* dense = tensor(dt, {n, H, dv});
    ASSERT_EQ(vkattn_attention_merge(ctx, a, la, b, lb, dense, nullptr), VKATTN_SUCCESS)
        << vkattn_last_error();
    // The caller's buffer: the output view, then its own data (0x1234...).
    std::vector<uint16_t> host(count + 3, 0x1234);
    vkattn_tensor* base = make16({count + 3}, host);
    vkattn_tensor* out = view(base, 0, {n, H, dv}, {H * dv, dv, 1});
    ASSERT_EQ(vkattn_attention_merge(ctx, a, la, b, lb, out, nullptr), VKATTN_SUCCESS)
        << vkattn_last_error();
    std::vector<uint16_t> got = read_as<uint16_t>(base);
    for (int64_t i = count; i < count + 3; ++i)
      EXPECT_EQ(got[i], 0x1234) << "the caller's element " << i << " was overwritten";
    expect_same(read_as<uint16_t>(out), read_as<uint16_t>(dense), "merged view");
  }
}

// q and out as column slices of one fused buffer [T, H d + H dv] (disjoint
// elements, interleaved byte spans): accepted, and equal to dense tensors.
TEST_F(ViewEdges, OutAsColumnsOfQsFusedBufferIsAccepted) {
  const int H = 2, Hkv = 1, d = 8, T = 6;
  const int64_t W = 2 * H * d;
  vkattn_tensor* fused = filled({T, W}, random_floats(size_t(T) * W, 5));
  vkattn_tensor* q = view(fused, 0, {T, H, d}, {W, d, 1});
  vkattn_tensor* out = view(fused, H * d, {T, H, d}, {W, d, 1});
  vkattn_tensor* k = filled({T, Hkv, d}, random_floats(size_t(T) * Hkv * d, 6));
  vkattn_tensor* v = filled({T, Hkv, d}, random_floats(size_t(T) * Hkv * d, 7));
  vkattn_tensor* dq = filled({T, H, d}, read(q));
  vkattn_tensor* dout = tensor(VKATTN_F32, {T, H, d});
  vkattn_attention_desc desc = attention_desc(H, Hkv, d);
  const int32_t cu[2] = {0, T};
  ASSERT_EQ(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, dq, k, v, dout), VKATTN_SUCCESS);
  const std::vector<float> q_before = read(q);
  ASSERT_EQ(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, q, k, v, out), VKATTN_SUCCESS)
      << vkattn_last_error();
  expect_same(read(out), read(dout), "out columns");
  expect_same(read(q), q_before, "q columns");
  // Columns that do share elements with q are still refused.
  vkattn_tensor* clash = view(fused, d, {T, H, d}, {W, d, 1});  // q's head 1 is its head 0
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, q, k, v, clash), "overlap");
}

// vLLM's combined pool [num_pages, 2, page_size, Hkv, d]: k_pages and
// v_pages are views at offsets 0 and page_size Hkv d with the page stride
// of both halves; vkattn_paged_append writes each token's K and V into
// their slots only, and attention over the views equals attention over
// dense copies. A v view shifted onto k's slots is refused.
TEST_F(ViewEdges, VllmCombinedKvPoolIsAccepted) {
  const int np = 4, ps = 4, Hkv = 2, d = 8, H = 4;
  const int64_t half = int64_t(ps) * Hkv * d, page = 2 * half;
  vkattn_tensor* kv = filled({np * page}, std::vector<float>(size_t(np) * page, kNaN));
  const std::vector<int64_t> pool_shape = {np, ps, Hkv, d}, strides = {page, Hkv * d, d, 1};
  vkattn_tensor* kp = view(kv, 0, pool_shape, strides);
  vkattn_tensor* vp = view(kv, half, pool_shape, strides);
  // Two sequences: 3 tokens in page 2, then 5 tokens in pages 0 and 3.
  const int32_t cu_new[3] = {0, 3, 8}, before[2] = {0, 0};
  const int32_t indptr[3] = {0, 1, 3}, indices[3] = {2, 0, 3};
  std::vector<float> kh = random_floats(size_t(8) * Hkv * d, 8);
  std::vector<float> vh = random_floats(size_t(8) * Hkv * d, 9);
  vkattn_tensor* k_new = filled({8, Hkv, d}, kh);
  vkattn_tensor* v_new = filled({8, Hkv, d}, vh);
  ASSERT_EQ(vkattn_paged_append(ctx, 2, cu_new, before, indptr, indices, ps, k_new, v_new, kp, vp),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> got = read(kv), want(size_t(np) * page, kNaN);
  const int seq_of[8] = {0, 0, 0, 1, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) {
    const int b = seq_of[i], pos = i - cu_new[b];
    const int pg = indices[indptr[b] + pos / ps], slot = pos % ps;
    for (int e = 0; e < Hkv * d; ++e) {
      want[pg * page + slot * Hkv * d + e] = kh[size_t(i) * Hkv * d + e];
      want[pg * page + half + slot * Hkv * d + e] = vh[size_t(i) * Hkv * d + e];
    }
  }
  expect_same(got, want, "combined pool");
  // Attention over the two views equals attention over dense copies.
  const int32_t cu_q[3] = {0, 1, 2}, lens[2] = {3, 5};
  vkattn_tensor* q = filled({2, H, d}, random_floats(size_t(2) * H * d, 10));
  vkattn_attention_desc desc = attention_desc(H, Hkv, d);
  vkattn_tensor* o_views = tensor(VKATTN_F32, {2, H, d});
  vkattn_tensor* o_dense = tensor(VKATTN_F32, {2, H, d});
  ASSERT_EQ(
      vkattn_attention_paged(ctx, &desc, 2, cu_q, lens, indptr, indices, ps, q, kp, vp, o_views),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  vkattn_tensor* dk = filled(pool_shape, read(kp));
  vkattn_tensor* dv = filled(pool_shape, read(vp));
  ASSERT_EQ(
      vkattn_attention_paged(ctx, &desc, 2, cu_q, lens, indptr, indices, ps, q, dk, dv, o_dense),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  expect_same(read(o_views), read(o_dense), "attention over the combined pool");
  // A v view one token into k's half shares k's slots: refused.
  vkattn_tensor* bad_v = view(kv, Hkv * d, pool_shape, strides);
  EXPECT_INVALID(
      vkattn_paged_append(ctx, 2, cu_new, before, indptr, indices, ps, k_new, v_new, kp, bad_v),
      "overlap");
}

// vkattn_attention_paged with page_size >= 2^31 (pools as views whose
// token stride is 0 cost no memory: every slot of a page is its one row):
// each sequence reads the page its table names. Keys of a page are equal,
// so each query's output is that page's value row.
TEST_F(ViewEdges, HugePageSizeReadsTheNamedPages) {
  const int np = 4, Hkv = 1, d = 8, H = 2;
  for (uint32_t ps : {3u << 30, 0xffffffffu}) {
    SCOPED_TRACE("page_size " + std::to_string(ps));
    std::vector<float> kh(np * Hkv * d), vh(np * Hkv * d);
    for (int i = 0; i < np * Hkv * d; ++i)
      kh[i] = 0.01f * i, vh[i] = float(i / d) + 0.125f * (i % d);
    vkattn_tensor* kb = filled({np * Hkv * d}, kh);
    vkattn_tensor* vb = filled({np * Hkv * d}, vh);
    const std::vector<int64_t> shape = {np, int64_t(ps), Hkv, d}, strides = {Hkv * d, 0, d, 1};
    vkattn_tensor* kp = view(kb, 0, shape, strides);
    vkattn_tensor* vp = view(vb, 0, shape, strides);
    const int32_t cu_q[3] = {0, 1, 2}, lens[2] = {5, 3}, indptr[3] = {0, 1, 2}, indices[2] = {2, 1};
    vkattn_tensor* q = filled({2, H, d}, random_floats(size_t(2) * H * d, 11));
    vkattn_tensor* out = tensor(VKATTN_F32, {2, H, d});
    vkattn_attention_desc desc = attention_desc(H, Hkv, d);
    ASSERT_EQ(
        vkattn_attention_paged(ctx, &desc, 2, cu_q, lens, indptr, indices, ps, q, kp, vp, out),
        VKATTN_SUCCESS)
        << vkattn_last_error();
    const std::vector<float> got = read(out);
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < d; ++e)
          EXPECT_NEAR(got[(b * H + h) * d + e], vh[indices[b] * d + e], 1e-5)
              << "sequence " << b << " head " << h << " element " << e;
  }
}

}  // namespace

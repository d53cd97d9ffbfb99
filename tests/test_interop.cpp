// Interop (issue F): strided views, wrapped VkBuffers, and attention, step
// and merge calls on views of one fused QKV buffer. Every device result is
// compared with the same call on dense copies, which the kernel suites
// check against src/reference; elements around the views hold NaN.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

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

class Interop : public ContextTest {
 protected:
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
  std::vector<float> read(vkattn_tensor* t) {
    std::vector<float> v(vkattn_tensor_nbytes(t) / 4);
    EXPECT_EQ(vkattn_tensor_read(t, v.data(), v.size() * 4), VKATTN_SUCCESS) << vkattn_last_error();
    return v;
  }
};

// Bitwise equality, NaN included (both runs compute the same arithmetic).
void expect_same(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0 && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << b[i];
  EXPECT_EQ(bad, 0u);
}

TEST_F(Interop, ViewReadsAndWritesItsElementsPacked) {
  // base [4, 6, 8]; view rows 1..3 of dim 1, every other one: [4, 3, 8].
  std::vector<float> host(4 * 6 * 8);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i);
  vkattn_tensor* base = filled({4, 6, 8}, host);
  vkattn_tensor* v = view(base, 8, {4, 3, 8}, {48, 16, 1});
  EXPECT_EQ(vkattn_tensor_is_contiguous(v), 0);
  EXPECT_EQ(vkattn_tensor_is_contiguous(base), 1);
  EXPECT_EQ(vkattn_tensor_nbytes(v), size_t(4 * 3 * 8 * 4));
  std::vector<float> got = read(v), want;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 8; ++c) want.push_back(host[a * 48 + 8 + b * 16 + c]);
  expect_same(got, want);
  // Writing the view changes exactly its elements.
  std::vector<float> neg(want.size());
  for (size_t i = 0; i < neg.size(); ++i) neg[i] = -1.0f - float(i);
  ASSERT_EQ(vkattn_tensor_write(v, neg.data(), neg.size() * 4), VKATTN_SUCCESS);
  std::vector<float> after = read(base), expect = host;
  size_t i = 0;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 8; ++c) expect[a * 48 + 8 + b * 16 + c] = neg[i++];
  expect_same(after, expect);
  // A view of the view composes offsets: its row 1 of dim 1 = base row 3.
  vkattn_tensor* vv = view(v, 16, {4, 8}, {48, 1});
  std::vector<float> row = read(vv), want_row;
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 8; ++c) want_row.push_back(expect[a * 48 + 8 + 16 + c]);
  expect_same(row, want_row);
  // The buffer range behind the view.
  uint64_t buf = 0, off = 0, size = 0;
  ASSERT_EQ(vkattn_tensor_get_vk_buffer(v, &buf, &off, &size), VKATTN_SUCCESS);
  EXPECT_NE(buf, 0u);
  EXPECT_EQ(off, 8u * 4);
  EXPECT_EQ(size, (3u * 48 + 2 * 16 + 8) * 4);
  // A dense view at an offset is contiguous.
  EXPECT_EQ(vkattn_tensor_is_contiguous(view(base, 48, {2, 48}, {48, 1})), 1);
}

TEST_F(Interop, ViewRulesAreChecked) {
  vkattn_tensor* base = tensor(VKATTN_F32, {4, 6, 8});
  vkattn_tensor* t = nullptr;
  const int64_t shape[3] = {4, 3, 8};
  const int64_t inner2[3] = {48, 16, 2}, neg[3] = {48, -16, 1}, ok[3] = {48, 16, 1};
  EXPECT_INVALID(vkattn_tensor_view(base, 0, 3, shape, inner2, &t), "innermost stride");
  EXPECT_INVALID(vkattn_tensor_view(base, 0, 3, shape, neg, &t), "negative");
  EXPECT_INVALID(vkattn_tensor_view(base, -1, 3, shape, ok, &t), "negative");
  // Last element 8 + 3 * 48 + 2 * 16 + 7 = 191 fits; offset 9 reaches 192.
  EXPECT_INVALID(vkattn_tensor_view(base, 9, 3, shape, ok, &t), "span");
  const int64_t huge[3] = {INT64_MAX / 2, 16, 1};
  EXPECT_INVALID(vkattn_tensor_view(base, 0, 3, shape, huge, &t), "overflow");
  EXPECT_INVALID(vkattn_tensor_view(base, 0, 5, shape, ok, &t), "ndim");
  EXPECT_EQ(t, nullptr);
  // An empty view may sit at the end of the span.
  const int64_t empty[1] = {0}, one[1] = {1};
  ASSERT_EQ(vkattn_tensor_view(base, 192, 1, empty, one, &t), VKATTN_SUCCESS);
  uint64_t buf = 1, off = 1, size = 1;
  ASSERT_EQ(vkattn_tensor_get_vk_buffer(t, &buf, &off, &size), VKATTN_SUCCESS);
  EXPECT_EQ(buf + off + size, 0u);
  vkattn_tensor_destroy(t);
}

TEST_F(Interop, WrappedBufferNeedsItsUsageBits) {
  vkattn_tensor* base = tensor(VKATTN_F32, {64});
  uint64_t buf = 0, off = 0, size = 0;
  ASSERT_EQ(vkattn_tensor_get_vk_buffer(base, &buf, &off, &size), VKATTN_SUCCESS);
  vkattn_tensor* t = nullptr;
  const int64_t shape[1] = {16};
  const uint32_t storage = 0x20, src = 0x1, dst = 0x2;
  EXPECT_INVALID(vkattn_tensor_wrap_vk_buffer(ctx, buf, 0, 64, src | dst, VKATTN_F32, 1, shape, &t),
                 "VK_BUFFER_USAGE_STORAGE_BUFFER_BIT");
  EXPECT_INVALID(
      vkattn_tensor_wrap_vk_buffer(ctx, buf, 0, 64, storage | src, VKATTN_F32, 1, shape, &t),
      "VK_BUFFER_USAGE_TRANSFER_DST_BIT");
  EXPECT_INVALID(
      vkattn_tensor_wrap_vk_buffer(ctx, buf, 0, 63, storage | src | dst, VKATTN_F32, 1, shape, &t),
      "fit");
  EXPECT_INVALID(
      vkattn_tensor_wrap_vk_buffer(ctx, 0, 0, 64, storage | src | dst, VKATTN_F32, 1, shape, &t),
      "VK_NULL_HANDLE");
  EXPECT_EQ(t, nullptr);
}

TEST_F(Interop, WrappedBufferAtAnOffsetReadsAndWrites) {
  std::vector<float> host = random_floats(256, 3);
  vkattn_tensor* base = filled({256}, host);
  uint64_t buf = 0, off = 0, size = 0;
  ASSERT_EQ(vkattn_tensor_get_vk_buffer(base, &buf, &off, &size), VKATTN_SUCCESS);
  // The caller's view of "its" buffer: 8 x 16 floats from byte 64, created
  // without texel usage (the packed path).
  vkattn_tensor* w = nullptr;
  const int64_t shape[2] = {8, 16};
  ASSERT_EQ(
      vkattn_tensor_wrap_vk_buffer(ctx, buf, 64, 512, 0x20 | 0x1 | 0x2, VKATTN_F32, 2, shape, &w),
      VKATTN_SUCCESS)
      << vkattn_last_error();
  owned.emplace_back(w, &vkattn_tensor_destroy);
  expect_same(read(w), std::vector<float>(host.begin() + 16, host.begin() + 144));
  std::vector<float> ones(128, 1.0f);
  ASSERT_EQ(vkattn_tensor_write(w, ones.data(), 512), VKATTN_SUCCESS);
  std::vector<float> want = host;
  std::fill(want.begin() + 16, want.begin() + 144, 1.0f);
  expect_same(read(base), want);
}

// q, k and v as views of one fused projection output [T, (H + 2 Hkv) d]
// (NaN in the padding columns), out as a strided view of a wider buffer;
// the same call on dense copies gives the same bits.
void fused_qkv_case(Interop& t_, vkattn_context* ctx, bool wrap_without_texels) {
  (void)t_;
  const int H = 4, Hkv = 2, d = 16, T = 13, pad = 4;
  const int64_t W = (H + 2 * Hkv) * d + pad;  // row stride, elements
  std::vector<float> fused = random_floats(size_t(T) * W, 7);
  for (int t = 0; t < T; ++t)
    for (int p = 0; p < pad; ++p) fused[t * W + (H + 2 * Hkv) * d + p] = kNaN;
  auto make = [&](std::vector<int64_t> shape) {
    vkattn_tensor* x = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, uint32_t(shape.size()), shape.data(), &x),
              VKATTN_SUCCESS);
    return x;
  };
  vkattn_tensor* fb = make({T, W});
  ASSERT_EQ(vkattn_tensor_write(fb, fused.data(), fused.size() * 4), VKATTN_SUCCESS);
  vkattn_tensor* base = fb;
  if (wrap_without_texels) {
    uint64_t buf = 0, off = 0, size = 0;
    ASSERT_EQ(vkattn_tensor_get_vk_buffer(fb, &buf, &off, &size), VKATTN_SUCCESS);
    const int64_t shape[2] = {T, W};
    ASSERT_EQ(vkattn_tensor_wrap_vk_buffer(ctx, buf, 0, size, 0x23, VKATTN_F32, 2, shape, &base),
              VKATTN_SUCCESS)
        << vkattn_last_error();
  }
  auto v3 = [&](vkattn_tensor* b, int64_t off, int64_t heads) {
    vkattn_tensor* x = nullptr;
    const int64_t shape[3] = {T, heads, d}, strides[3] = {W, d, 1};
    EXPECT_EQ(vkattn_tensor_view(b, off, 3, shape, strides, &x), VKATTN_SUCCESS)
        << vkattn_last_error();
    return x;
  };
  vkattn_tensor* q = v3(base, 0, H);
  vkattn_tensor* k = v3(base, H * d, Hkv);
  vkattn_tensor* v = v3(base, (H + Hkv) * d, Hkv);
  // out: every other row of a [2T, H, d] buffer pre-filled with NaN.
  vkattn_tensor* ob = make({2 * T, H, d});
  std::vector<float> nan_fill(size_t(2) * T * H * d, kNaN);
  ASSERT_EQ(vkattn_tensor_write(ob, nan_fill.data(), nan_fill.size() * 4), VKATTN_SUCCESS);
  vkattn_tensor* out = nullptr;
  {
    const int64_t shape[3] = {T, H, d}, strides[3] = {2 * H * d, d, 1};
    ASSERT_EQ(vkattn_tensor_view(ob, H * d, 3, shape, strides, &out), VKATTN_SUCCESS);
  }
  // Dense copies.
  auto dense_of = [&](vkattn_tensor* x, int64_t heads) {
    std::vector<float> h(size_t(T) * heads * d);
    EXPECT_EQ(vkattn_tensor_read(x, h.data(), h.size() * 4), VKATTN_SUCCESS);
    vkattn_tensor* y = make({T, heads, d});
    EXPECT_EQ(vkattn_tensor_write(y, h.data(), h.size() * 4), VKATTN_SUCCESS);
    return y;
  };
  vkattn_tensor *dq = dense_of(q, H), *dk = dense_of(k, Hkv), *dv = dense_of(v, Hkv);
  vkattn_tensor* dout = make({T, H, d});
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = Hkv, desc.head_dim = d, desc.causal = 1;
  const int32_t cu_q[3] = {0, 5, T}, cu_k[3] = {0, 5, T};
  ASSERT_EQ(vkattn_attention_varlen(ctx, &desc, 2, cu_q, cu_k, q, k, v, out), VKATTN_SUCCESS)
      << vkattn_last_error();
  ASSERT_EQ(vkattn_attention_varlen(ctx, &desc, 2, cu_q, cu_k, dq, dk, dv, dout), VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> got(size_t(T) * H * d), want(got.size()), whole(nan_fill.size());
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(dout, want.data(), want.size() * 4), VKATTN_SUCCESS);
  expect_same(got, want);
  for (float x : want) ASSERT_TRUE(std::isfinite(x));
  // The rows between out's rows are untouched.
  ASSERT_EQ(vkattn_tensor_read(ob, whole.data(), whole.size() * 4), VKATTN_SUCCESS);
  for (int r = 0; r < 2 * T; r += 2)
    for (int e = 0; e < H * d; ++e) ASSERT_TRUE(std::isnan(whole[size_t(r) * H * d + e]));
  for (vkattn_tensor* x : {q, k, v, out, dq, dk, dv, dout, ob, fb}) vkattn_tensor_destroy(x);
  if (base != fb) vkattn_tensor_destroy(base);
}

TEST_F(Interop, FusedQkvViewsMatchDenseCopies) {
  fused_qkv_case(*this, ctx, false);
}

TEST_F(Interop, FusedQkvOfAWrappedBufferWithoutTexelUsage) {
  fused_qkv_case(*this, ctx, true);
}

TEST_F(Interop, StepAppendAndAttentionTakeViews) {
  const int H = 4, Hkv = 2, d = 8, T = 5;
  const int64_t W = (H + 2 * Hkv) * d;
  std::vector<float> fused = random_floats(size_t(T) * W, 11);
  vkattn_tensor* fb = filled({T, W}, fused);
  vkattn_tensor* q = view(fb, 0, {T, H, d}, {W, d, 1});
  vkattn_tensor* k = view(fb, H * d, {T, Hkv, d}, {W, d, 1});
  vkattn_tensor* v = view(fb, (H + Hkv) * d, {T, Hkv, d}, {W, d, 1});
  auto dense = [&](vkattn_tensor* x, int64_t heads) { return filled({T, heads, d}, read(x)); };
  vkattn_tensor *dq = dense(q, H), *dk = dense(k, Hkv), *dv = dense(v, Hkv);
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = 2, cd.num_kv_heads = Hkv, cd.head_dim = d, cd.page_size = 4, cd.num_pages = 8;
  cd.dtype = VKATTN_F32;
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  const int64_t ids[2] = {1, 2};
  const int32_t n_new[2] = {2, 3};
  vkattn_step* step = nullptr;
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, n_new, &step), VKATTN_SUCCESS);
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = Hkv, desc.head_dim = d, desc.causal = 1;
  // Layer 0 from views, layer 1 from dense copies: the same cache rows and
  // the same attention.
  vkattn_tensor *o0 = tensor(VKATTN_F32, {T, H, d}), *o1 = tensor(VKATTN_F32, {T, H, d});
  ASSERT_EQ(vkattn_step_append(step, 0, k, v), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_step_append(step, 1, dk, dv), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_step_attention(step, 0, &desc, q, o0), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_step_attention(step, 1, &desc, dq, o1), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
  expect_same(read(o0), read(o1));
  for (int64_t id : ids) {
    const int32_t n = id == 1 ? 2 : 3;
    std::vector<float> k0(size_t(n) * Hkv * d), v0(k0.size()), k1(k0.size()), v1(k0.size());
    ASSERT_EQ(vkattn_kv_cache_read(cache, 0, id, 0, n, k0.data(), k0.size() * 4, v0.data(),
                                   v0.size() * 4),
              VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_kv_cache_read(cache, 1, id, 0, n, k1.data(), k1.size() * 4, v1.data(),
                                   v1.size() * 4),
              VKATTN_SUCCESS);
    expect_same(k0, k1);
    expect_same(v0, v1);
  }
  vkattn_kv_cache_destroy(cache);
}

TEST_F(Interop, MergeTakesContiguousViewsAndRefusesStridedOnes) {
  const int n = 3, H = 2, dv = 8;
  std::vector<float> a = random_floats(n * H * dv, 1), b = random_floats(n * H * dv, 2);
  std::vector<float> la = random_floats(n * H, 3), lb = random_floats(n * H, 4);
  // Dense reference run.
  vkattn_tensor *ta = filled({n, H, dv}, a), *tb = filled({n, H, dv}, b);
  vkattn_tensor *tla = filled({n, H}, la), *tlb = filled({n, H}, lb);
  vkattn_tensor *to = tensor(VKATTN_F32, {n, H, dv}), *tl = tensor(VKATTN_F32, {n, H});
  ASSERT_EQ(vkattn_attention_merge(ctx, ta, tla, tb, tlb, to, tl), VKATTN_SUCCESS);
  // The same inputs as dense views at offsets of one buffer.
  std::vector<float> all(4 + a.size() + b.size() + la.size() + lb.size(), kNaN);
  std::copy(a.begin(), a.end(), all.begin() + 4);
  std::copy(b.begin(), b.end(), all.begin() + 4 + a.size());
  std::copy(la.begin(), la.end(), all.begin() + 4 + a.size() + b.size());
  std::copy(lb.begin(), lb.end(), all.begin() + 4 + a.size() + b.size() + la.size());
  vkattn_tensor* big = filled({int64_t(all.size())}, all);
  const int64_t ob = 4 + n * H * dv, ola = ob + n * H * dv, olb = ola + n * H;
  vkattn_tensor* va = view(big, 4, {n, H, dv}, {H * dv, dv, 1});
  vkattn_tensor* vb = view(big, ob, {n, H, dv}, {H * dv, dv, 1});
  vkattn_tensor* vla = view(big, ola, {n, H}, {H, 1});
  vkattn_tensor* vlb = view(big, olb, {n, H}, {H, 1});
  vkattn_tensor *vo = tensor(VKATTN_F32, {n, H, dv}), *vl = tensor(VKATTN_F32, {n, H});
  ASSERT_EQ(vkattn_attention_merge(ctx, va, vla, vb, vlb, vo, vl), VKATTN_SUCCESS)
      << vkattn_last_error();
  expect_same(read(vo), read(to));
  expect_same(read(vl), read(tl));
  // In place into the first view.
  ASSERT_EQ(vkattn_attention_merge(ctx, va, vla, vb, vlb, va, vla), VKATTN_SUCCESS)
      << vkattn_last_error();
  expect_same(read(va), read(to));
  expect_same(read(vla), read(tl));
  vkattn_tensor* strided = view(big, 4, {n, H}, {2 * H, 1});
  EXPECT_INVALID(vkattn_attention_merge(ctx, ta, strided, tb, tlb, to, tl), "contiguous");
}

}  // namespace

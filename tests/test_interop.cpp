// Interop (issue F): strided views, wrapped VkBuffers, and attention, step
// and merge calls on views of one fused QKV buffer. Every device result is
// compared with the same call on dense copies, which the kernel suites
// check against src/reference; elements around the views hold NaN.
#include <algorithm>
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
 public:
  using ContextTest::tensor;
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
struct FusedCase {
  bool wrap = false;
  vkattn_dtype dt = VKATTN_F32;
  int pad = 4;       // NaN columns after q|k|v in each row (odd: odd row stride)
  int q_off = 0;     // elements before the fused rows (odd: unaligned views)
  int out_off = 0;   // elements before out's first row
  bool hnd = false;  // k and v head-major ([Hkv, T, d] storage), out too
};

uint16_t to_half(float f) {
  // Round to nearest even through the float's bits (normal range only).
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffffu;
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7e00u;  // NaN
  if (e <= 0) return uint16_t(sign);
  uint32_t h = sign | (uint32_t(e) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(h);
}

float half_to_float(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float v = e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(m | 1024), e - 25);
  return (h & 0x8000u) ? -v : v;
}

void fused_qkv_case(vkattn_context* ctx, const FusedCase& fc) {
  const int H = 4, Hkv = 2, d = 16, T = 13, pad = fc.pad;
  const bool wrap_without_texels = fc.wrap;
  const size_t es = fc.dt == VKATTN_F32 ? 4 : 2;
  const int64_t W = (H + 2 * Hkv) * d + pad;  // row stride, elements
  // Storage: q_off elements, then T rows of [q | k | v | pad]; with hnd,
  // k and v instead live head-major after the rows ([Hkv, T, d] each).
  const int64_t rows_w = fc.hnd ? H * d + pad : W;
  const int64_t kv_base = fc.q_off + T * rows_w;
  const int64_t total = kv_base + (fc.hnd ? 2 * Hkv * T * d : 0);
  std::vector<float> fused = random_floats(size_t(total), 7);
  for (int64_t i = 0; i < fc.q_off; ++i) fused[i] = kNaN;
  for (int t = 0; t < T; ++t)
    for (int p = 0; p < pad; ++p) fused[fc.q_off + t * rows_w + (rows_w - pad) + p] = kNaN;
  auto make = [&](std::vector<int64_t> shape) {
    vkattn_tensor* x = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, fc.dt, uint32_t(shape.size()), shape.data(), &x),
              VKATTN_SUCCESS);
    return x;
  };
  auto put = [&](vkattn_tensor* x, const std::vector<float>& h) {
    if (fc.dt == VKATTN_F32) {
      EXPECT_EQ(vkattn_tensor_write(x, h.data(), h.size() * 4), VKATTN_SUCCESS);
    } else {
      std::vector<uint16_t> b(h.size());
      for (size_t i = 0; i < h.size(); ++i) b[i] = to_half(h[i]);
      EXPECT_EQ(vkattn_tensor_write(x, b.data(), b.size() * 2), VKATTN_SUCCESS);
    }
  };
  vkattn_tensor* fb = make({total});
  put(fb, fused);
  vkattn_tensor* base = fb;
  if (wrap_without_texels) {
    uint64_t buf = 0, off = 0, size = 0;
    ASSERT_EQ(vkattn_tensor_get_vk_buffer(fb, &buf, &off, &size), VKATTN_SUCCESS);
    const int64_t shape[1] = {total};
    ASSERT_EQ(vkattn_tensor_wrap_vk_buffer(ctx, buf, 0, size, 0x23, fc.dt, 1, shape, &base),
              VKATTN_SUCCESS)
        << vkattn_last_error();
  }
  auto v3 = [&](vkattn_tensor* b, int64_t off, int64_t heads, int64_t ts, int64_t hs) {
    vkattn_tensor* x = nullptr;
    const int64_t shape[3] = {T, heads, d}, strides[3] = {ts, hs, 1};
    EXPECT_EQ(vkattn_tensor_view(b, off, 3, shape, strides, &x), VKATTN_SUCCESS)
        << vkattn_last_error();
    return x;
  };
  vkattn_tensor* q = v3(base, fc.q_off, H, rows_w, d);
  vkattn_tensor* k =
      fc.hnd ? v3(base, kv_base, Hkv, d, T * d) : v3(base, fc.q_off + H * d, Hkv, W, d);
  vkattn_tensor* v = fc.hnd ? v3(base, kv_base + Hkv * T * d, Hkv, d, T * d)
                            : v3(base, fc.q_off + (H + Hkv) * d, Hkv, W, d);
  // out: every other row of a [2T, H, d] buffer pre-filled with NaN (or
  // head-major), from element out_off.
  const int64_t ob_n = fc.out_off + 2 * T * H * d;
  vkattn_tensor* ob = make({ob_n});
  std::vector<float> nan_fill(size_t(ob_n), kNaN);
  put(ob, nan_fill);
  vkattn_tensor* out = nullptr;
  {
    const int64_t shape[3] = {T, H, d};
    const int64_t rows[3] = {2 * H * d, d, 1}, hm[3] = {d, 2 * T * d, 1};
    ASSERT_EQ(vkattn_tensor_view(ob, fc.out_off + (fc.hnd ? 0 : H * d), 3, shape,
                                 fc.hnd ? hm : rows, &out),
              VKATTN_SUCCESS);
  }
  // Dense copies.
  auto dense_of = [&](vkattn_tensor* x, int64_t heads) {
    std::vector<uint8_t> h(size_t(T) * heads * d * es);
    EXPECT_EQ(vkattn_tensor_read(x, h.data(), h.size()), VKATTN_SUCCESS);
    vkattn_tensor* y = make({T, heads, d});
    EXPECT_EQ(vkattn_tensor_write(y, h.data(), h.size()), VKATTN_SUCCESS);
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
  const size_t n_out = size_t(T) * H * d;
  std::vector<uint8_t> got(n_out * es), want(n_out * es), whole(size_t(ob_n) * es);
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size()), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(dout, want.data(), want.size()), VKATTN_SUCCESS);
  // Same bits when both calls get the same schedule; windows (small
  // binding limits) may cut them differently: then within rounding.
  double worst = 0;
  for (size_t i = 0; i < n_out; ++i) {
    float a, b;
    if (fc.dt == VKATTN_F32) {
      std::memcpy(&a, &got[i * 4], 4), std::memcpy(&b, &want[i * 4], 4);
    } else {
      a = half_to_float(((uint16_t*)got.data())[i]), b = half_to_float(((uint16_t*)want.data())[i]);
    }
    worst = std::max(worst, double(std::fabs(a - b)));
    if (!(std::fabs(a - b) <= (fc.dt == VKATTN_F32 ? 1e-5 : 2e-3))) {
      ADD_FAILURE() << "out element " << i << ": " << a << " vs dense " << b;
      break;
    }
  }
  if (fc.dt == VKATTN_F32)
    for (size_t i = 0; i < n_out; ++i) ASSERT_TRUE(std::isfinite(((float*)want.data())[i]));
  // Every element outside out's is untouched (still NaN).
  ASSERT_EQ(vkattn_tensor_read(ob, whole.data(), whole.size()), VKATTN_SUCCESS);
  std::vector<bool> in_out(size_t(ob_n), false);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int e = 0; e < d; ++e)
        in_out[fc.out_off +
               (fc.hnd ? int64_t(t) * d + int64_t(h) * 2 * T * d
                       : H * d + int64_t(t) * 2 * H * d + int64_t(h) * d) +
               e] = true;
  for (int64_t i = 0; i < ob_n; ++i) {
    if (in_out[i]) continue;
    if (fc.dt == VKATTN_F32) {
      ASSERT_TRUE(std::isnan(((float*)whole.data())[i])) << i;
    } else {
      ASSERT_EQ(((uint16_t*)whole.data())[i], 0x7e00u) << i;
    }
  }
  for (vkattn_tensor* x : {q, k, v, out, dq, dk, dv, dout, ob, fb}) vkattn_tensor_destroy(x);
  if (base != fb) vkattn_tensor_destroy(base);
}

TEST_F(Interop, FusedQkvViewsMatchDenseCopies) {
  fused_qkv_case(ctx, {});
}

TEST_F(Interop, FusedQkvOfAWrappedBuffer) {
  FusedCase fc;
  fc.wrap = true;
  fused_qkv_case(ctx, fc);
}

// Layouts that drop the wide texel fetches (odd strides and offsets: f16
// rows starting on odd elements, scalar texels, atomic 16-bit stores) and
// head-major (HND) k, v and out.
TEST_F(Interop, StridedLayoutsInPlace) {
  for (vkattn_dtype dt : {VKATTN_F32, VKATTN_F16})
    for (int pad : {4, 3})
      for (int off : {0, 1})
        for (bool hnd : {false, true}) {
          SCOPED_TRACE(std::string(dt == VKATTN_F32 ? "f32" : "f16") + " pad " +
                       std::to_string(pad) + " offset " + std::to_string(off) +
                       (hnd ? " hnd" : ""));
          FusedCase fc;
          fc.dt = dt, fc.pad = pad, fc.q_off = off, fc.out_off = off, fc.hnd = hnd;
          fused_qkv_case(ctx, fc);
        }
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

namespace {

TEST_F(Interop, OutputViewsWhoseElementsOverlapAreRefused) {
  const int64_t T = 3, H = 2, d = 8;
  vkattn_tensor* q = tensor(VKATTN_F32, {T, H, d});
  vkattn_tensor* base = tensor(VKATTN_F32, {T * H * d});
  vkattn_tensor* out = view(base, 0, {T, H, d}, {H * d, 0, 1});  // heads share a row
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = H, desc.head_dim = d;
  const int32_t cu[2] = {0, int32_t(T)};
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, q, q, q, out), "overlap");
  // Inputs may broadcast: q's heads all read one row.
  vkattn_tensor* qb = view(base, 0, {T, H, d}, {H * d, 0, 1});
  vkattn_tensor* o = tensor(VKATTN_F32, {T, H, d});
  EXPECT_EQ(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, qb, q, q, o), VKATTN_SUCCESS)
      << vkattn_last_error();
}

}  // namespace

namespace {

// vkattn_attention_paged over caller pools with a shuffled page table
// (NaN in every pool slot no sequence uses) equals varlen attention over
// the same keys gathered densely; HND pools as views; hostile tables are
// refused.
struct PoolCase {
  int np = 40, ps = 4, H = 4, Hkv = 2, d = 16;
  std::vector<int> t = {2, 1, 3, 4}, u = {5, 0, 11, 9};
  bool hnd = false;
  bool causal = true;
  bool sinks = false;  // desc->sinks (varlen's sinks are checked against the reference)
  vkattn_dtype kv_dt = VKATTN_F32;  // pools and dense K/V (f16: the coopmat family's dtype)
};

// A tensor of dtype dt (f32 or f16) holding `data` (rounded to f16).
vkattn_tensor* filled_as(Interop& self, vkattn_dtype dt, std::vector<int64_t> shape,
                         const std::vector<float>& data) {
  if (dt == VKATTN_F32) return self.filled(shape, data);
  vkattn_tensor* t = self.tensor(VKATTN_F16, shape);
  std::vector<uint16_t> bits(data.size());
  for (size_t i = 0; i < data.size(); ++i) bits[i] = to_half(data[i]);
  EXPECT_EQ(vkattn_tensor_write(t, bits.data(), bits.size() * 2), VKATTN_SUCCESS)
      << vkattn_last_error();
  return t;
}

void run_pool_case(Interop& self, vkattn_context* ctx, const PoolCase& pc) {
  const int np = pc.np, ps = pc.ps, H = pc.H, Hkv = pc.Hkv, d = pc.d;
  const int B = int(pc.t.size());
  std::mt19937 rng(17);
  // Shuffled pages for each sequence (distinct), one spare entry each.
  std::vector<int32_t> perm(np);
  for (int i = 0; i < np; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> indptr{0}, indices;
  int next = 0;
  for (int b = 0; b < B; ++b) {
    const int need = (pc.u[b] + ps - 1) / ps;
    for (int i = 0; i < need + 1; ++i) indices.push_back(perm[next++ % np]);
    indptr.push_back(int32_t(indices.size()));
  }
  // Pools [np, ps, Hkv, d] (or HND storage [np, Hkv, ps, d]): NaN, then
  // the used slots random.
  const size_t pool_n = size_t(np) * ps * Hkv * d;
  std::vector<float> kp(pool_n, kNaN), vp(pool_n, kNaN);
  auto at = [&](int page, int slot, int h, int e) {
    return pc.hnd ? ((size_t(page) * Hkv + h) * ps + slot) * d + e
                  : ((size_t(page) * ps + slot) * Hkv + h) * d + e;
  };
  std::uniform_real_distribution<float> u01(-1, 1);
  std::vector<int32_t> cu_q{0}, cu_k{0};
  for (int b = 0; b < B; ++b)
    cu_q.push_back(cu_q.back() + pc.t[b]), cu_k.push_back(cu_k.back() + pc.u[b]);
  const int TQ = cu_q.back(), TK = cu_k.back();
  std::vector<float> kd(size_t(TK) * Hkv * d), vd(kd.size());
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < pc.u[b]; ++j) {
      const int page = indices[indptr[b] + j / ps], slot = j % ps;
      for (int h = 0; h < Hkv; ++h)
        for (int e = 0; e < d; ++e) {
          const float x = u01(rng), y = u01(rng);
          kp[at(page, slot, h, e)] = x, vp[at(page, slot, h, e)] = y;
          kd[(size_t(cu_k[b] + j) * Hkv + h) * d + e] = x;
          vd[(size_t(cu_k[b] + j) * Hkv + h) * d + e] = y;
        }
    }
  std::vector<float> qh(size_t(TQ) * H * d);
  for (auto& x : qh) x = u01(rng);
  vkattn_tensor* q = self.filled({TQ, H, d}, qh);
  vkattn_tensor *kpt = filled_as(self, pc.kv_dt, {int64_t(pool_n)}, kp),
                *vpt = filled_as(self, pc.kv_dt, {int64_t(pool_n)}, vp);
  const std::vector<int64_t> shape = {np, ps, Hkv, d};
  const std::vector<int64_t> strides = pc.hnd ? std::vector<int64_t>{Hkv * ps * d, d, ps * d, 1}
                                              : std::vector<int64_t>{ps * Hkv * d, Hkv * d, d, 1};
  vkattn_tensor* kv = self.view(kpt, 0, shape, strides);
  vkattn_tensor* vv = self.view(vpt, 0, shape, strides);
  vkattn_tensor* kdt = filled_as(self, pc.kv_dt, {std::max(TK, 1), Hkv, d},
                                 kd.empty() ? std::vector<float>(Hkv * d) : kd);
  vkattn_tensor* vdt = filled_as(self, pc.kv_dt, {std::max(TK, 1), Hkv, d},
                                 vd.empty() ? std::vector<float>(Hkv * d) : vd);
  vkattn_tensor *o1 = self.tensor(VKATTN_F32, {TQ, H, d}),
                *o2 = self.tensor(VKATTN_F32, {TQ, H, d});
  vkattn_tensor *l1 = self.tensor(VKATTN_F32, {TQ, H}), *l2 = self.tensor(VKATTN_F32, {TQ, H});
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = Hkv, desc.head_dim = d, desc.causal = pc.causal;
  desc.lse = l1;
  if (pc.sinks) {
    std::vector<float> sk(H);
    for (int h = 0; h < H; ++h) sk[h] = 0.5f * h - 0.75f;
    desc.sinks = self.filled({H}, sk);
  }
  ASSERT_EQ(vkattn_attention_paged(ctx, &desc, B, cu_q.data(), pc.u.data(), indptr.data(),
                                   indices.data(), ps, q, kv, vv, o1),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  desc.lse = l2;
  ASSERT_EQ(vkattn_attention_varlen(ctx, &desc, B, cu_q.data(), cu_k.data(), q, kdt, vdt, o2),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> a = self.read(o1), b = self.read(o2), la = self.read(l1), lb = self.read(l2);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << "out " << i;
  for (size_t i = 0; i < la.size(); ++i) {
    if (std::isinf(lb[i])) {
      ASSERT_EQ(la[i], lb[i]) << "lse " << i;
    } else {
      ASSERT_NEAR(la[i], lb[i], 1e-5) << "lse " << i;
    }
  }
}

TEST_F(Interop, PagedOverCallerPoolsEqualsDenseKeys) {
  run_pool_case(*this, ctx, {});
  PoolCase hnd;
  hnd.hnd = true;
  run_pool_case(*this, ctx, hnd);
  PoolCase sinks;  // sequence 1 has no keys: its rows are out 0, lse = sink
  sinks.sinks = true;
  run_pool_case(*this, ctx, sinks);
  PoolCase decode;
  decode.t = {1, 1, 1};
  decode.u = {37, 1, 64};
  decode.causal = false;
  run_pool_case(*this, ctx, decode);
  // Decodes and prefill chunks in one call (t > u in one): with
  // VKATTN_ATTN_KERNEL_DECODE / _PREFILL naming two families, each class
  // runs on its own (ctest test_interop.classes).
  PoolCase mixed;
  mixed.t = {1, 12, 3, 9};
  mixed.u = {37, 20, 11, 5};
  run_pool_case(*this, ctx, mixed);
  // f16 pools (the coopmat family's K/V dtype; label mesa26 runs this
  // forced onto it), head-major.
  PoolCase half;
  half.kv_dt = VKATTN_F16;
  half.hnd = true;
  run_pool_case(*this, ctx, half);
}

TEST_F(Interop, HostilePageTablesAreRefused) {
  const int np = 4, ps = 4, H = 2, d = 8;
  vkattn_tensor* q = tensor(VKATTN_F32, {2, H, d});
  vkattn_tensor* o = tensor(VKATTN_F32, {2, H, d});
  vkattn_tensor* kp = tensor(VKATTN_F32, {np, ps, H, d});
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = H, desc.head_dim = d;
  const int32_t cu[2] = {0, 2};
  const int32_t len5[1] = {5}, indptr2[2] = {0, 2}, indptr1[2] = {0, 1};
  const int32_t past[2] = {0, 4}, neg[2] = {-1, 0}, ok[2] = {3, 0};
  EXPECT_INVALID(vkattn_attention_paged(ctx, &desc, 1, cu, len5, indptr2, past, ps, q, kp, kp, o),
                 "not a page");
  EXPECT_INVALID(vkattn_attention_paged(ctx, &desc, 1, cu, len5, indptr2, neg, ps, q, kp, kp, o),
                 "not a page");
  EXPECT_INVALID(vkattn_attention_paged(ctx, &desc, 1, cu, len5, indptr1, ok, ps, q, kp, kp, o),
                 "needs 2 page");
  EXPECT_INVALID(vkattn_attention_paged(ctx, &desc, 1, cu, len5, indptr2, ok, 8, q, kp, kp, o),
                 "k_pages");
  const int32_t bad_indptr[2] = {1, 2};
  EXPECT_INVALID(vkattn_attention_paged(ctx, &desc, 1, cu, len5, bad_indptr, ok, ps, q, kp, kp, o),
                 "page_indptr[0]");
  EXPECT_EQ(vkattn_attention_paged(ctx, &desc, 1, cu, len5, indptr2, ok, ps, q, kp, kp, o),
            VKATTN_SUCCESS)
      << vkattn_last_error();
}

// 8-bit dtypes are a vkattn_kv_cache's alone in this release: caller pools
// and the dense ops' k / v of them are refused as unsupported, with the
// pools untouched.
TEST_F(Interop, EightBitCallerPoolsAreUnsupported) {
  const int np = 2, ps = 4, H = 2, d = 8;
  vkattn_tensor* q = tensor(VKATTN_F32, {1, H, d});
  vkattn_tensor* o = tensor(VKATTN_F32, {1, H, d});
  vkattn_tensor* kn = tensor(VKATTN_F32, {1, H, d});
  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H, desc.num_kv_heads = H, desc.head_dim = d;
  const int32_t cu[2] = {0, 1}, len[1] = {1}, before[1] = {0}, indptr[2] = {0, 1}, idx[1] = {1};
  for (vkattn_dtype dt : {VKATTN_I8, VKATTN_FP8_E4M3}) {
    vkattn_tensor* kp = tensor(dt, {np, ps, H, d});
    vkattn_tensor* vp = tensor(dt, {np, ps, H, d});
    const std::vector<uint8_t> fill(vkattn_tensor_nbytes(kp), 0x5a);
    ASSERT_EQ(vkattn_tensor_write(kp, fill.data(), fill.size()), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_paged_append(ctx, 1, cu, before, indptr, idx, ps, kn, kn, kp, vp),
              VKATTN_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(vkattn_last_error()).find("8-bit caller pools"), std::string::npos)
        << vkattn_last_error();
    EXPECT_EQ(vkattn_attention_paged(ctx, &desc, 1, cu, len, indptr, idx, ps, q, kp, vp, o),
              VKATTN_ERROR_UNSUPPORTED);
    vkattn_tensor* k8 = tensor(dt, {1, H, d});
    EXPECT_EQ(vkattn_attention_varlen(ctx, &desc, 1, cu, cu, q, k8, k8, o),
              VKATTN_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(vkattn_last_error()).find("8-bit k/v"), std::string::npos)
        << vkattn_last_error();
    std::vector<uint8_t> got(fill.size());
    ASSERT_EQ(vkattn_tensor_read(kp, got.data(), got.size()), VKATTN_SUCCESS);
    EXPECT_EQ(got, fill);
  }
}

}  // namespace

namespace {

// vkattn_paged_append writes each new row at its sequence's slot of the
// caller pools (converted to the pools' dtype) and nothing else; a table
// mapping two new tokens to one slot is refused with the pools unchanged.
void run_paged_append(Interop& self, vkattn_context* ctx, vkattn_dtype pool_dt, bool hnd,
                      int64_t off) {
  const int np = 10, ps = 4, Hkv = 2, d = 8;
  const size_t es = pool_dt == VKATTN_F32 ? 4 : 2;
  const int64_t n = off + int64_t(np) * ps * Hkv * d;
  std::vector<uint8_t> nan_bits(size_t(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    if (es == 4) {
      std::memcpy(&nan_bits[i * 4], &kNaN, 4);
    } else {
      const uint16_t h = 0x7e00;
      std::memcpy(&nan_bits[i * 2], &h, 2);
    }
  }
  auto pool_tensor = [&]() {
    vkattn_tensor* t = self.tensor(pool_dt, {n});
    EXPECT_EQ(vkattn_tensor_write(t, nan_bits.data(), nan_bits.size()), VKATTN_SUCCESS);
    return t;
  };
  vkattn_tensor *kb = pool_tensor(), *vb = pool_tensor();
  const std::vector<int64_t> shape = {np, ps, Hkv, d};
  const std::vector<int64_t> strides = hnd ? std::vector<int64_t>{Hkv * ps * d, d, ps * d, 1}
                                           : std::vector<int64_t>{ps * Hkv * d, Hkv * d, d, 1};
  vkattn_tensor* kp = self.view(kb, off, shape, strides);
  vkattn_tensor* vp = self.view(vb, off, shape, strides);
  // Sequence 0: 3 tokens kept, 3 new (positions 3..5); sequence 1: 2 new.
  const int32_t cu_new[3] = {0, 3, 5}, before[2] = {3, 0};
  const int32_t indptr[3] = {0, 2, 3}, indices[3] = {7, 2, 5};
  std::vector<float> kn = random_floats(5 * Hkv * d, 21), vn = random_floats(5 * Hkv * d, 22);
  vkattn_tensor *kt = self.filled({5, Hkv, d}, kn), *vt = self.filled({5, Hkv, d}, vn);
  // A table that maps two new tokens to one slot: refused, nothing written.
  const int32_t clash[3] = {7, 2, 2};
  const int32_t before_clash[2] = {3, 1};
  EXPECT_INVALID(
      vkattn_paged_append(ctx, 2, cu_new, before_clash, indptr, clash, ps, kt, vt, kp, vp),
      "another new token");
  ASSERT_EQ(vkattn_paged_append(ctx, 2, cu_new, before, indptr, indices, ps, kt, vt, kp, vp),
            VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<uint8_t> kg(nan_bits.size()), vg(nan_bits.size());
  ASSERT_EQ(vkattn_tensor_read(kb, kg.data(), kg.size()), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(vb, vg.data(), vg.size()), VKATTN_SUCCESS);
  std::vector<uint8_t> kw = nan_bits, vw = nan_bits;
  auto put = [&](std::vector<uint8_t>& w, int page, int slot, int h, int e, float x) {
    const int64_t i = off + (hnd ? ((int64_t(page) * Hkv + h) * ps + slot) * d + e
                                 : ((int64_t(page) * ps + slot) * Hkv + h) * d + e);
    if (es == 4) {
      std::memcpy(&w[i * 4], &x, 4);
    } else {
      const uint16_t hb = to_half(x);
      std::memcpy(&w[i * 2], &hb, 2);
    }
  };
  for (int b = 0; b < 2; ++b)
    for (int i = cu_new[b]; i < cu_new[b + 1]; ++i) {
      const int pos = before[b] + i - cu_new[b];
      const int page = indices[indptr[b] + pos / ps], slot = pos % ps;
      for (int h = 0; h < Hkv; ++h)
        for (int e = 0; e < d; ++e) {
          put(kw, page, slot, h, e, kn[(size_t(i) * Hkv + h) * d + e]);
          put(vw, page, slot, h, e, vn[(size_t(i) * Hkv + h) * d + e]);
        }
    }
  EXPECT_EQ(std::memcmp(kg.data(), kw.data(), kg.size()), 0) << "k pool";
  EXPECT_EQ(std::memcmp(vg.data(), vw.data(), vg.size()), 0) << "v pool";
}

TEST_F(Interop, PagedAppendWritesItsSlotsOnly) {
  for (vkattn_dtype dt : {VKATTN_F32, VKATTN_F16})
    for (bool hnd : {false, true})
      for (int64_t off : {0, 1}) {
        SCOPED_TRACE(std::string(dt == VKATTN_F32 ? "f32" : "f16") + (hnd ? " hnd" : " nhd") +
                     " offset " + std::to_string(off));
        run_paged_append(*this, ctx, dt, hnd, off);
      }
}

}  // namespace

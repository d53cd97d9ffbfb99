// vkattn_attention_merge against the reference, and the attention entry
// points' input validation (nothing recorded, outputs untouched).
#include <cmath>
#include <random>
#include <vector>

#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(n);
  for (auto& e : x) e = u(rng);
  return x;
}

}  // namespace

class AttentionMerge : public ContextTest {
 protected:
  // Attention of q over keys [k0, k1) of k/v (non-causal): out/lse tensors.
  void attend(vkattn_tensor* q, const std::vector<float>& k, const std::vector<float>& v, int k0,
              int k1, vkattn_tensor* out, vkattn_tensor* lse) {
    int n = k1 - k0;
    vkattn_tensor* kt = tensor(VKATTN_F32, {n, 2, 16});
    vkattn_tensor* vt = tensor(VKATTN_F32, {n, 2, 16});
    ASSERT_EQ(vkattn_tensor_write(kt, k.data() + k0 * 32, n * 32 * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(vt, v.data() + k0 * 32, n * 32 * 4), VKATTN_SUCCESS);
    vkattn_attention_desc d;
    vkattn_attention_desc_init(&d);
    d.num_heads = 4, d.num_kv_heads = 2, d.head_dim = 16, d.lse = lse;
    int32_t cq[2] = {0, 6}, ck[2] = {0, n};
    ASSERT_EQ(vkattn_attention_varlen(ctx, &d, 1, cq, ck, q, kt, vt, out), VKATTN_SUCCESS)
        << vkattn_last_error();
  }
};

// Merging the attention over two halves of the keys equals the whole,
// including when the outputs alias the first half's tensors.
TEST_F(AttentionMerge, HalvesEqualWhole) {
  auto qh = random_floats(6 * 4 * 16, 1), k = random_floats(50 * 32, 2),
       v = random_floats(50 * 32, 3);
  vkattn_tensor* q = tensor(VKATTN_F32, {6, 4, 16});
  ASSERT_EQ(vkattn_tensor_write(q, qh.data(), qh.size() * 4), VKATTN_SUCCESS);
  vkattn_tensor *oa = tensor(VKATTN_F32, {6, 4, 16}), *la = tensor(VKATTN_F32, {6, 4});
  vkattn_tensor *ob = tensor(VKATTN_F32, {6, 4, 16}), *lb = tensor(VKATTN_F32, {6, 4});
  vkattn_tensor *ow = tensor(VKATTN_F32, {6, 4, 16}), *lw = tensor(VKATTN_F32, {6, 4});
  vkattn_tensor *om = tensor(VKATTN_F32, {6, 4, 16}), *lm = tensor(VKATTN_F32, {6, 4});
  attend(q, k, v, 0, 21, oa, la);
  attend(q, k, v, 21, 50, ob, lb);
  attend(q, k, v, 0, 50, ow, lw);
  ASSERT_EQ(vkattn_attention_merge(ctx, oa, la, ob, lb, om, lm), VKATTN_SUCCESS)
      << vkattn_last_error();
  std::vector<float> whole(384), merged(384), lwh(24), lmh(24);
  ASSERT_EQ(vkattn_tensor_read(ow, whole.data(), 384 * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(om, merged.data(), 384 * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(lw, lwh.data(), 96), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(lm, lmh.data(), 96), VKATTN_SUCCESS);
  for (int i = 0; i < 384; ++i) EXPECT_NEAR(merged[i], whole[i], 3e-6) << i;
  for (int i = 0; i < 24; ++i) EXPECT_NEAR(lmh[i], lwh[i], 3e-6) << i;
  // In place: out aliases out_a, lse aliases lse_a.
  ASSERT_EQ(vkattn_attention_merge(ctx, oa, la, ob, lb, oa, la), VKATTN_SUCCESS)
      << vkattn_last_error();
  ASSERT_EQ(vkattn_tensor_read(oa, merged.data(), 384 * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(la, lmh.data(), 96), VKATTN_SUCCESS);
  for (int i = 0; i < 384; ++i) EXPECT_NEAR(merged[i], whole[i], 3e-6) << i;
  for (int i = 0; i < 24; ++i) EXPECT_NEAR(lmh[i], lwh[i], 3e-6) << i;
}

// Rows whose lse is -inf on one side return the other side bit-exactly,
// even when the hidden side's output holds NaN; f16 and bf16 with odd dv.
TEST_F(AttentionMerge, MinusInfinitySideAndNarrowTypes) {
  for (vkattn_dtype dt : {VKATTN_F32, VKATTN_F16, VKATTN_BF16}) {
    const int n = 5, H = 3, dv = 7, rows = n * H;
    auto a = random_floats(rows * dv, 4), b = random_floats(rows * dv, 5);
    auto la = random_floats(rows, 6), lb = random_floats(rows, 7);
    for (int r = 0; r < rows; ++r) {
      if (r % 3 == 0) {
        la[r] = -INFINITY;
        for (int e = 0; e < dv; ++e) a[r * dv + e] = NAN;
      }
      if (r % 4 == 1) {
        lb[r] = -INFINITY;
        for (int e = 0; e < dv; ++e) b[r * dv + e] = NAN;
      }
      if (r == 12) la[r] = lb[r] = -INFINITY;  // both hidden: 0 and -inf
    }
    for (auto* x : {&a, &b})
      for (auto& e : *x) e = round_to(dt, e);
    std::vector<float> ref(rows * dv), ref_lse(rows);
    vkattn::ref::attention_merge(rows, dv, a.data(), la.data(), b.data(), lb.data(), ref.data(),
                                 ref_lse.data());
    auto put = [&](const std::vector<float>& x) {
      vkattn_tensor* t = tensor(dt, {n, H, dv});
      std::vector<uint8_t> bytes = encode_bytes(dt, x);
      EXPECT_EQ(vkattn_tensor_write(t, bytes.data(), bytes.size()), VKATTN_SUCCESS);
      return t;
    };
    vkattn_tensor *ta = put(a), *tb = put(b), *to = tensor(dt, {n, H, dv});
    vkattn_tensor *tla = tensor(VKATTN_F32, {n, H}), *tlb = tensor(VKATTN_F32, {n, H});
    vkattn_tensor* tlo = tensor(VKATTN_F32, {n, H});
    ASSERT_EQ(vkattn_tensor_write(tla, la.data(), rows * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(tlb, lb.data(), rows * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_attention_merge(ctx, ta, tla, tb, tlb, to, tlo), VKATTN_SUCCESS)
        << vkattn_last_error();
    std::vector<uint8_t> bytes(vkattn_tensor_nbytes(to));
    ASSERT_EQ(vkattn_tensor_read(to, bytes.data(), bytes.size()), VKATTN_SUCCESS);
    std::vector<float> lo(rows);
    ASSERT_EQ(vkattn_tensor_read(tlo, lo.data(), rows * 4), VKATTN_SUCCESS);
    std::vector<float> got = decode_bytes(dt, bytes);
    for (int i = 0; i < rows * dv; ++i) {
      float g = got[i];
      int r = i / dv;
      bool one_side = std::isinf(la[r]) || std::isinf(lb[r]);
      double tol = one_side ? 0.0 : 0.5 * ulp_of(dt, std::fabs(ref[i])) + 2e-6;
      EXPECT_LE(std::fabs(g - ref[i]), tol) << "dtype " << dt << " element " << i;
    }
    for (int r = 0; r < rows; ++r) {
      if (std::isinf(ref_lse[r]))
        EXPECT_EQ(lo[r], -INFINITY);
      else
        EXPECT_NEAR(lo[r], ref_lse[r], 2e-6);
    }
  }
}

class AttentionBadInput : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    q = tensor(VKATTN_F32, {10, 4, 8});
    k = tensor(VKATTN_F32, {12, 2, 8});
    v = tensor(VKATTN_F32, {12, 2, 8});
    out = tensor(VKATTN_F32, {10, 4, 8});
    vkattn_attention_desc_init(&d);
    d.num_heads = 4, d.num_kv_heads = 2, d.head_dim = 8;
    std::vector<float> nan(10 * 4 * 8, NAN);
    ASSERT_EQ(vkattn_tensor_write(out, nan.data(), nan.size() * 4), VKATTN_SUCCESS);
  }
  vkattn_status call(const vkattn_attention_desc& desc, uint32_t batch = 2) {
    return vkattn_attention_varlen(ctx, &desc, batch, cq, ck, q, k, v, out);
  }
  // Checks that `out` still holds its NaN fill: nothing was recorded.
  void expect_untouched() {
    std::vector<float> x(320);
    ASSERT_EQ(vkattn_tensor_read(out, x.data(), x.size() * 4), VKATTN_SUCCESS);
    for (float e : x) ASSERT_TRUE(std::isnan(e));
  }
  vkattn_tensor *q, *k, *v, *out;
  vkattn_attention_desc d;
  int32_t cq[3] = {0, 4, 10}, ck[3] = {0, 5, 12};
};

TEST_F(AttentionBadInput, Descriptor) {
  ASSERT_EQ(call(d), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
  std::vector<float> nan(320, NAN);
  ASSERT_EQ(vkattn_tensor_write(out, nan.data(), nan.size() * 4), VKATTN_SUCCESS);

  vkattn_attention_desc z{};
  EXPECT_INVALID(call(z), "struct_size");
  EXPECT_INVALID(vkattn_attention_varlen(ctx, nullptr, 2, cq, ck, q, k, v, out), "desc is NULL");
  auto bad = d;
  bad.num_kv_heads = 3;
  EXPECT_INVALID(call(bad), "not a multiple");
  bad = d, bad.head_dim = 0;
  EXPECT_INVALID(call(bad), "head_dim");
  bad = d, bad.head_dim = VKATTN_MAX_HEAD_DIM + 1;
  EXPECT_INVALID(call(bad), "desc->head_dim 577 is not in 1..576");
  bad = d, bad.head_dim_v = 1000;
  EXPECT_INVALID(call(bad), "desc->head_dim_v 1000 is not in 0..576");
  bad = d, bad.mask_type = 7;
  EXPECT_INVALID(call(bad), "mask_type");
  bad = d, bad.window_left = -2;
  EXPECT_INVALID(call(bad), "window_left");
  bad = d, bad.causal = 2;
  EXPECT_INVALID(call(bad), "causal");
  bad = d, bad.softcap = -1;
  EXPECT_INVALID(call(bad), "softcap");
  bad = d, bad.scale = NAN;
  EXPECT_INVALID(call(bad), "scale");
  bad = d, bad.reserved[1] = 1;
  EXPECT_INVALID(call(bad), "reserved");
  bad = d, bad.num_heads = 8;
  EXPECT_INVALID(call(bad), "q has shape");
  bad = d, bad.mask_type = VKATTN_MASK_BOOL;
  EXPECT_INVALID(call(bad), "desc->mask is NULL");
  bad = d, bad.mask = tensor(VKATTN_U8, {4 * 5 + 6 * 7 + 1});
  EXPECT_INVALID(call(bad), "mask_type is VKATTN_MASK_NONE");
  bad.mask_type = VKATTN_MASK_BOOL;
  EXPECT_INVALID(call(bad), "mask");
  bad.mask = tensor(VKATTN_F32, {4 * 5 + 6 * 7});
  EXPECT_INVALID(call(bad), "BOOL mask must be u8");
  bad.mask_type = VKATTN_MASK_ADDITIVE, bad.mask = tensor(VKATTN_U8, {4 * 5 + 6 * 7});
  EXPECT_INVALID(call(bad), "ADDITIVE mask");
  bad = d, bad.lse = tensor(VKATTN_F32, {10, 3});
  EXPECT_INVALID(call(bad), "lse has shape");
  bad = d, bad.lse = tensor(VKATTN_F16, {10, 4});
  EXPECT_INVALID(call(bad), "lse must be f32");
  bad = d, bad.alibi_slopes = tensor(VKATTN_F32, {3});
  EXPECT_INVALID(call(bad), "alibi_slopes has shape");
  bad = d, bad.sinks = tensor(VKATTN_F32, {5});
  EXPECT_INVALID(call(bad), "desc->sinks has shape");
  bad = d, bad.sinks = tensor(VKATTN_F32, {1, 4});
  EXPECT_INVALID(call(bad), "desc->sinks has shape");
  bad = d, bad.sinks = tensor(VKATTN_F16, {4});
  EXPECT_INVALID(call(bad), "desc->sinks must be f32");
  bad = d, bad.sinks = out;
  EXPECT_INVALID(call(bad), "alibi_slopes or sinks");
  expect_untouched();
}

// A 0.1 descriptor (struct_size 80, before `sinks` was appended) is read
// without the field: whatever follows it in the caller's memory is ignored.
TEST_F(AttentionBadInput, OldDescriptorSizeHasNoSinks) {
  struct {
    vkattn_attention_desc desc;
    char after[16];
  } old;
  old.desc = d;
  old.desc.struct_size = 80;
  old.desc.sinks = tensor(VKATTN_F16, {99});  // would be refused if read
  EXPECT_EQ(call(old.desc), VKATTN_SUCCESS) << vkattn_last_error();
  old.desc.struct_size = 84;
  EXPECT_INVALID(call(old.desc), "struct_size");
}

// A 0.3 descriptor (struct_size 88, before window_right, chunk_size and the
// spans were appended) reads them as absent: -1, 0 and NULL, whatever its
// memory holds there (a bad window_right or a span would be refused).
TEST_F(AttentionBadInput, OldDescriptorSizeHasNoRightWindowOrChunks) {
  vkattn_attention_desc old = d;
  old.struct_size = 88;
  old.window_right = -7;
  const int32_t indptr[3] = {0, 0, 0};
  old.span_indptr = indptr;
  EXPECT_EQ(call(old), VKATTN_SUCCESS) << vkattn_last_error();
  old.struct_size = 96;
  EXPECT_INVALID(call(old), "struct_size");
}

// window_right below -1 is refused; bad spans are refused with a message
// naming what is wrong, before anything is recorded (u = 5 and 7 here).
TEST_F(AttentionBadInput, RightWindowAndSpans) {
  vkattn_attention_desc init;
  vkattn_attention_desc_init(&init);
  EXPECT_EQ(init.window_right, -1);
  EXPECT_EQ(init.chunk_size, 0u);
  EXPECT_EQ(init.span_indptr, nullptr);
  EXPECT_EQ(init.spans, nullptr);
  std::vector<float> nan(320, NAN);
  ASSERT_EQ(vkattn_tensor_write(out, nan.data(), nan.size() * 4), VKATTN_SUCCESS);
  auto bad = d;
  bad.window_right = -2;
  EXPECT_INVALID(call(bad), "desc->window_right -2 is invalid");
  auto with = [&](std::vector<int32_t> indptr, const int32_t* spans) {
    static std::vector<int32_t> keep;
    keep = std::move(indptr);
    auto b = d;
    b.span_indptr = keep.data(), b.spans = spans;
    return call(b);
  };
  const int32_t ok_spans[4] = {0, 3, 3, 7}, empty[2] = {2, 2}, past[2] = {1, 6},
                negative[2] = {-1, 2}, overlap[4] = {0, 3, 2, 4}, unsorted[4] = {3, 5, 0, 2};
  bad = d, bad.spans = ok_spans;
  EXPECT_INVALID(call(bad), "desc->spans is set but desc->span_indptr is NULL");
  EXPECT_INVALID(with({1, 1, 1}, ok_spans), "span_indptr[0] is 1");
  EXPECT_INVALID(with({0, 2, 1}, ok_spans), "span_indptr decreases at 2");
  EXPECT_INVALID(with({0, 1, 1}, nullptr), "desc->spans is NULL");
  EXPECT_INVALID(with({0, 1, 1}, empty), "span 0 of sequence 0 is [2, 2)");
  EXPECT_INVALID(with({0, 1, 1}, past), "0 <= start < end <= u = 5");
  EXPECT_INVALID(with({0, 1, 1}, negative), "is [-1, 2)");
  EXPECT_INVALID(with({0, 2, 2}, overlap), "sorted and disjoint");
  EXPECT_INVALID(with({0, 2, 2}, unsorted), "sorted and disjoint");
  expect_untouched();
  auto ok = d;
  ok.window_right = 0, ok.chunk_size = 3;
  EXPECT_EQ(call(ok), VKATTN_SUCCESS) << vkattn_last_error();
  // Legal: adjacent spans, [1, 6) in sequence 1 (u = 7), no spans at all
  // with a NULL spans array.
  const int32_t adjacent[4] = {0, 3, 3, 5};
  EXPECT_EQ(with({0, 2, 2}, adjacent), VKATTN_SUCCESS) << vkattn_last_error();
  EXPECT_EQ(with({0, 0, 1}, past), VKATTN_SUCCESS) << vkattn_last_error();
  EXPECT_EQ(with({0, 0, 0}, nullptr), VKATTN_SUCCESS) << vkattn_last_error();
}

TEST_F(AttentionBadInput, PrefixSumsAndTensors) {
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, nullptr, ck, q, k, v, out),
                 "cu_seqlens_q is NULL");
  int32_t c1[3] = {1, 4, 10};
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, c1, ck, q, k, v, out), "[0] is 1");
  int32_t c2[3] = {0, 6, 5};
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, c2, ck, q, k, v, out), "decreases");
  int32_t c3[3] = {0, 4, 11};
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, c3, ck, q, k, v, out), "first dim");
  int32_t c4[3] = {0, 5, 13};
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, c4, q, k, v, out), "cu_seqlens_k");
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, nullptr, k, v, out),
                 "must not be NULL");
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k, v, nullptr), "must not be NULL");
  EXPECT_INVALID(vkattn_attention_varlen(nullptr, &d, 2, cq, ck, q, k, v, out), "ctx is NULL");
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k, v, q), "alias");
  vkattn_tensor* out16 = tensor(VKATTN_F16, {10, 4, 8});
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k, v, out16), "q's dtype");
  vkattn_tensor* v16 = tensor(VKATTN_F16, {12, 2, 8});
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k, v16, out), "share a dtype");
  vkattn_tensor* ki = tensor(VKATTN_I32, {12, 2, 8});
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, ki, ki, out), "k/v");
  vkattn_tensor* k2 = tensor(VKATTN_F32, {12, 2, 9});
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k2, v, out), "k has shape");
  vkattn_tensor* k4 = tensor(VKATTN_F32, {1, 12, 2, 8});
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k4, v, out), "k must be");
  // A tensor of another context.
  vkattn_context* other = make_context();
  int64_t shape[3] = {10, 4, 8};
  vkattn_tensor* foreign = nullptr;
  ASSERT_EQ(vkattn_tensor_create(other, VKATTN_F32, 3, shape, &foreign), VKATTN_SUCCESS);
  EXPECT_INVALID(vkattn_attention_varlen(ctx, &d, 2, cq, ck, q, k, v, foreign), "another context");
  vkattn_tensor_destroy(foreign);
  vkattn_context_destroy(other);
  expect_untouched();
}

TEST_F(AttentionBadInput, PaddedAndMerge) {
  vkattn_tensor* pq = tensor(VKATTN_F32, {2, 5, 4, 8});
  vkattn_tensor* pk = tensor(VKATTN_F32, {2, 6, 2, 8});
  vkattn_tensor* pv = tensor(VKATTN_F32, {2, 6, 2, 8});
  vkattn_tensor* po = tensor(VKATTN_F32, {2, 5, 4, 8});
  int32_t km[12] = {1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 2};
  EXPECT_INVALID(vkattn_attention_padded(ctx, &d, pq, pk, pv, km, po), "key_mask[11]");
  EXPECT_INVALID(vkattn_attention_padded(ctx, &d, q, k, v, nullptr, out),
                 "q must be [B, Sq, H, d]");
  vkattn_tensor* pv2 = tensor(VKATTN_F32, {2, 7, 2, 8});
  EXPECT_INVALID(vkattn_attention_padded(ctx, &d, pq, pk, pv2, nullptr, po), "v has shape");
  auto bad = d;
  bad.mask_type = VKATTN_MASK_BOOL, bad.mask = tensor(VKATTN_U8, {2, 5, 5});
  EXPECT_INVALID(vkattn_attention_padded(ctx, &bad, pq, pk, pv, nullptr, po), "mask has shape");

  vkattn_tensor* l = tensor(VKATTN_F32, {10, 4});
  vkattn_tensor* l3 = tensor(VKATTN_F32, {10, 3});
  EXPECT_INVALID(vkattn_attention_merge(ctx, out, l, q, l, out, l3), "lse has shape");
  EXPECT_INVALID(vkattn_attention_merge(ctx, out, nullptr, q, l, out, l), "must not be NULL");
  vkattn_tensor* o16 = tensor(VKATTN_F16, {10, 4, 8});
  EXPECT_INVALID(vkattn_attention_merge(ctx, out, l, o16, l, out, l), "share a dtype");
  EXPECT_INVALID(vkattn_attention_merge(ctx, out, l, q, l, l, nullptr), "out has shape");
  expect_untouched();
}

// The 4-bit cache (VKATTN_Q4, issue K4): appends store exactly the codes
// and block scales of src/reference/quant_ref.h's q4_quantize (odd dims,
// partial last blocks, zero / NaN / inf / huge blocks, pages over several
// pool buffers), RoPE'd appends within one code of it, fork / copy-on-write
// / truncate keep every row, bad input is refused; and every attention
// family reads it as the reference over what it holds.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv_model.h"
#include "reference/attention_ref.h"
#include "reference/quant_ref.h"
#include "reference/rope_ref.h"

using namespace vkattn_test;

namespace {

// What one sequence's layer must hold: its appended rows, f32, [len][Hkv][dim].
struct Rows {
  std::vector<float> k, v;
};

class Q4Cache : public ContextTest {
 protected:
  void TearDown() override {
    if (step_) vkattn_step_abort(step_);
    if (cache) vkattn_kv_cache_destroy(cache);
    ContextTest::TearDown();
  }

  void create(const KvShape& s, uint32_t flags = 0) {
    shape = s;
    vkattn_kv_cache_desc d = kv_cache_desc(s);
    d.flags = flags;
    // VKATTN_KV_ROTATE_KEYS: Hadamard groups of the largest power of two
    // dividing d.
    rot = flags & VKATTN_KV_ROTATE_KEYS ? s.d & (0u - s.d) : 1;
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  }

  // Gaussian rows with an outlier channel or two, and the nasty blocks:
  // a zero row, a NaN, an inf, a value past the f16 scale range.
  std::vector<float> rows(int64_t n, uint32_t dim) {
    std::normal_distribution<float> g;
    std::vector<float> x(size_t(n) * shape.hkv * dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] = g(rng) * (i % dim == 3 ? 30.0f : 1.0f);
    if (n > 2) {
      for (uint32_t e = 0; e < dim; ++e) x[dim + e] = 0.0f;  // token 0, head 1
      x[size_t(2) * shape.hkv * dim + 1] = std::numeric_limits<float>::quiet_NaN();
      x[size_t(2) * shape.hkv * dim + dim - 1] = std::numeric_limits<float>::infinity();
      x[size_t(1) * shape.hkv * dim + 2] = 3e6f;  // its block's scale saturates
    }
    return x;
  }

  // One step appending `t[i]` tokens to ids[i] in every layer (f32 rows);
  // the model keeps what each sequence must then hold. With `rope`, keys
  // are rotated (at their positions) before the model keeps them.
  void step(std::vector<int64_t> ids, std::vector<int32_t> t,
            const vkattn_rope_desc* rope = nullptr) {
    ASSERT_EQ(vkattn_step_begin(cache, uint32_t(ids.size()), ids.data(), t.data(), &step_),
              VKATTN_SUCCESS)
        << vkattn_last_error();
    int64_t total = 0;
    for (int32_t x : t) total += x;
    vkattn_tensor* k = tensor(VKATTN_F32, {total, shape.hkv, shape.d});
    vkattn_tensor* v = tensor(VKATTN_F32, {total, shape.hkv, shape.dv});
    for (uint32_t l = 0; l < shape.layers; ++l) {
      std::vector<float> kx = rows(total, shape.d), vx = rows(total, shape.dv);
      if (edit_keys) edit_keys(kx);
      ASSERT_EQ(vkattn_tensor_write(k, kx.data(), kx.size() * 4), VKATTN_SUCCESS);
      ASSERT_EQ(vkattn_tensor_write(v, vx.data(), vx.size() * 4), VKATTN_SUCCESS);
      if (rope) {
        ASSERT_EQ(vkattn_step_append_rope(step_, l, rope, k, v), VKATTN_SUCCESS)
            << vkattn_last_error();
        std::vector<int64_t> pos;
        for (size_t i = 0; i < ids.size(); ++i)
          for (int32_t j = 0; j < t[i]; ++j) pos.push_back(length(ids[i]) + j);
        vkattn::ref::RopeParams p;
        p.rotary_dim = int(shape.d);
        vkattn::ref::rope_apply(p, total, int(shape.hkv), int(shape.d), pos.data(), kx.data());
      } else {
        ASSERT_EQ(vkattn_step_append(step_, l, k, v), VKATTN_SUCCESS) << vkattn_last_error();
      }
      if (rot > 1)  // after RoPE, each group of rot elements
        for (size_t g = 0; g < kx.size(); g += rot) vkattn::ref::hadamard_rotate(&kx[g], int(rot));
      int64_t off = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        Rows& m = model[{ids[i], l}];
        const size_t kr = size_t(shape.hkv) * shape.d, vr = size_t(shape.hkv) * shape.dv;
        m.k.insert(m.k.end(), kx.begin() + off * kr, kx.begin() + (off + t[i]) * kr);
        m.v.insert(m.v.end(), vx.begin() + off * vr, vx.begin() + (off + t[i]) * vr);
        off += t[i];
      }
    }
    ASSERT_EQ(vkattn_step_commit(step_), VKATTN_SUCCESS) << vkattn_last_error();
    step_ = nullptr;
    for (size_t i = 0; i < ids.size(); ++i) lengths[ids[i]] += t[i];
  }

  int32_t length(int64_t id) { return lengths.count(id) ? lengths[id] : 0; }

  // Every row of sequence `id` reads back as q4_quantize of its model row:
  // codes and scales equal (exact: unrotated), or (RoPE'd keys: the
  // device's RoPE may differ from the reference's in the last bit before
  // quantization) scales within 1e-3 in magnitude (the sign may flip where
  // two elements tie for the block's largest magnitude) and values within
  // one step.
  void check(int64_t id, bool rotated = false) {
    const int32_t n = length(id);
    for (uint32_t l = 0; l < shape.layers; ++l) {
      const Rows& m = model[{id, l}];
      for (int is_v = 0; is_v < 2; ++is_v) {
        const uint32_t dim = is_v ? shape.dv : shape.d, nb = (dim + 31) / 32;
        std::vector<int8_t> kc(size_t(n) * shape.hkv * shape.d),
            vc(size_t(n) * shape.hkv * shape.dv);
        std::vector<float> ks(size_t(n) * shape.hkv * ((shape.d + 31) / 32)),
            vs(size_t(n) * shape.hkv * ((shape.dv + 31) / 32));
        ASSERT_EQ(
            vkattn_kv_cache_read(cache, l, id, 0, n, kc.data(), kc.size(), vc.data(), vc.size()),
            VKATTN_SUCCESS)
            << vkattn_last_error();
        ASSERT_EQ(vkattn_kv_cache_read_block_scales(cache, l, id, 0, n, ks.data(), ks.size(),
                                                    vs.data(), vs.size()),
                  VKATTN_SUCCESS)
            << vkattn_last_error();
        const std::vector<int8_t>& codes = is_v ? vc : kc;
        const std::vector<float>& scales = is_v ? vs : ks;
        const std::vector<float>& x = is_v ? m.v : m.k;
        const bool loose = rotated && !is_v;
        int bad = 0;
        for (size_t r = 0; r < size_t(n) * shape.hkv && bad < 3; ++r) {
          const vkattn::ref::Q4Row want = vkattn::ref::q4_quantize(x.data() + r * dim, int(dim));
          for (uint32_t b = 0; b < nb; ++b) {
            const float got = scales[r * nb + b], w = want.scales[b];
            const bool ok = std::isnan(w) ? std::isnan(got)
                            : loose
                                ? std::fabs(std::fabs(got) - std::fabs(w)) <= std::fabs(w) * 1e-3f
                                : got == w;
            if (!ok) {
              ADD_FAILURE() << "layer " << l << (is_v ? " V" : " K") << " row " << r << " block "
                            << b << ": scale " << got << ", want " << w;
              ++bad;
            }
          }
          for (uint32_t e = 0; e < dim; ++e) {
            const int got = codes[r * dim + e], w = want.codes[e];
            const float step = std::fabs(want.scales[e / 32]);
            const float gv = got * scales[r * nb + e / 32], wv = w * want.scales[e / 32];
            const bool near = std::isnan(step) || std::fabs(gv - wv) <= step * 1.002f;
            if (got < -8 || got > 7 || (loose ? !near : got != w)) {
              ADD_FAILURE() << "layer " << l << (is_v ? " V" : " K") << " row " << r << " elem "
                            << e << ": code " << got << ", want " << w << " (x " << x[r * dim + e]
                            << ")";
              ++bad;
              break;
            }
          }
        }
      }
    }
  }

  KvShape shape;
  vkattn_kv_cache* cache = nullptr;
  vkattn_step* step_ = nullptr;
  std::map<std::pair<int64_t, uint32_t>, Rows> model;
  std::map<int64_t, int32_t> lengths;
  std::mt19937 rng{41};
  uint32_t rot = 1;  // the keys' Hadamard group (1: not rotated)
  // Changes the keys step() appends ([total][Hkv][d], before RoPE).
  std::function<void(std::vector<float>&)> edit_keys;
};

KvShape q4_shape() {
  KvShape s;
  s.layers = 2;
  s.hkv = 3;
  s.d = 128;  // 4 whole blocks
  s.dv = 37;  // a block and 5 elements; rows of 5 words
  s.page_size = 5;
  s.pages = 64;
  s.dtype = VKATTN_Q4;
  return s;
}

}  // namespace

TEST_F(Q4Cache, AppendsStoreTheReferenceCodesAndScales) {
  create(q4_shape());
  step({1, 2}, {23, 4});
  check(1);
  check(2);
  // Fork 2 (a partial page) and append to both: the shared page is copied,
  // neither side sees the other's tokens.
  ASSERT_EQ(vkattn_kv_cache_fork(cache, 2, 3), VKATTN_SUCCESS) << vkattn_last_error();
  for (uint32_t l = 0; l < shape.layers; ++l) model[{3, l}] = model[{2, l}];
  lengths[3] = lengths[2];
  step({3, 2}, {2, 3});
  check(2);
  check(3);
  // Truncate into a page, then append over the dropped tail.
  ASSERT_EQ(vkattn_kv_cache_truncate(cache, 1, 13), VKATTN_SUCCESS) << vkattn_last_error();
  for (uint32_t l = 0; l < shape.layers; ++l) {
    model[{1, l}].k.resize(size_t(13) * shape.hkv * shape.d);
    model[{1, l}].v.resize(size_t(13) * shape.hkv * shape.dv);
  }
  lengths[1] = 13;
  step({1}, {6});
  check(1);
  check(3);
}

TEST_F(Q4Cache, RotatedKeysAreQuantizedAfterRope) {
  KvShape s = q4_shape();
  s.d = 64;
  create(s);
  vkattn_rope_desc rope;
  vkattn_rope_desc_init(&rope);
  step({7}, {9}, &rope);
  step({7}, {3}, &rope);
  check(7, /*rotated=*/true);
}

// VKATTN_KV_ROTATE_KEYS: keys are RoPE'd, rotated by the normalized
// Walsh-Hadamard transform of each group (the whole row for d 64, groups
// of 32 for 96, of 16 for 80), then quantized; values are not rotated.
// Codes within one of the reference's (the device's f32 butterflies round
// differently from the host's), exact for V; fork / truncate keep them.
TEST_F(Q4Cache, HadamardRotatedKeysAreQuantizedAfterRope) {
  for (uint32_t d : {64u, 96u, 80u}) {
    SCOPED_TRACE(d);
    KvShape s = q4_shape();
    s.d = d;
    create(s, VKATTN_KV_ROTATE_KEYS);
    vkattn_rope_desc rope;
    vkattn_rope_desc_init(&rope);
    step({7, 8}, {9, 3}, &rope);
    ASSERT_EQ(vkattn_kv_cache_fork(cache, 8, 9), VKATTN_SUCCESS) << vkattn_last_error();
    for (uint32_t l = 0; l < shape.layers; ++l) model[{9, l}] = model[{8, l}];
    lengths[9] = lengths[8];
    step({7, 9}, {3, 2}, &rope);
    step({8}, {1});
    check(7, /*rotated=*/true);
    check(8, /*rotated=*/true);
    check(9, /*rotated=*/true);
    vkattn_kv_cache_destroy(cache);
    cache = nullptr;
    model.clear(), lengths.clear();
  }
}

// Rotation never overflows where its result fits (the normalized
// transform's elements are at most sqrt(h) x max|x|, and its passes stay
// within that: include/hadamard.glsl): a d 64 row of 1e37 is (8e37, 0,
// ..), stored as block 0 with the saturated scale -65504 and code -8 on
// element 0, block 1 with scale 0; a row of +-3e37 alternating, whose
// transform is 2.4e38 on element 1, and Gaussian rows of 4e37 match the
// reference (its transform in double). Plain f32 butterflies reached 64 x
// 1e37 on the way and stored NaN blocks.
TEST_F(Q4Cache, RotationOfHugeFiniteRowsStaysFinite) {
  KvShape s = q4_shape();
  s.d = 64, s.dv = 32, s.hkv = 1, s.layers = 1;
  create(s, VKATTN_KV_ROTATE_KEYS);
  std::normal_distribution<float> g;
  edit_keys = [&](std::vector<float>& k) {
    for (size_t i = 0; i < k.size(); ++i) {
      const size_t row = i / 64, e = i % 64;
      k[i] = row == 0 ? 1e37f : row == 1 ? (e % 2 ? -3e37f : 3e37f) : g(rng) * 4e37f;
    }
  };
  step({1}, {5});
  check(1, /*rotated=*/true);
  std::vector<int8_t> kc(5 * 64), vc(5 * 32);
  std::vector<float> ks(5 * 2), vs(5 * 1);
  ASSERT_EQ(vkattn_kv_cache_read(cache, 0, 1, 0, 5, kc.data(), kc.size(), vc.data(), vc.size()),
            VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_kv_cache_read_block_scales(cache, 0, 1, 0, 5, ks.data(), ks.size(), vs.data(),
                                              vs.size()),
            VKATTN_SUCCESS);
  EXPECT_EQ(ks[0], -65504.0f);
  EXPECT_EQ(ks[1], 0.0f);
  EXPECT_EQ(kc[0], -8);
  for (int e = 1; e < 64; ++e) EXPECT_EQ(kc[e], 0) << "element " << e;
  // Token 1: 2.4e38 on element 1 of block 0 (saturated), nothing in block 1.
  EXPECT_EQ(ks[2], -65504.0f);
  EXPECT_EQ(ks[3], 0.0f);
  EXPECT_EQ(kc[64 + 1], -8);
  for (float x : ks) EXPECT_FALSE(std::isnan(x));
}

// Appends long enough that every workgroup takes as many rows as the
// host's bound on its loop iterations allows (lavapipe silently ends the
// loops of an invocation past 65535 iterations: rows past an undercounted
// bound stay unwritten; this caught an undercount by one loop): every row
// of every token is written, for cheap rows (d 64) and the costliest (d 512
// rotated whole: nine passes of butterflies).
TEST_F(Q4Cache, LongAppendsWriteEveryRow) {
  for (uint32_t d : {64u, 512u}) {
    SCOPED_TRACE(d);
    KvShape s;
    s.layers = 1, s.hkv = 2, s.d = d, s.dv = 64, s.page_size = 16, s.pages = 12000 / 16 + 2;
    s.dtype = VKATTN_Q4;
    create(s, d == 512 ? VKATTN_KV_ROTATE_KEYS : 0);
    step({1}, {12000});
    check(1, /*rotated=*/d == 512);
    vkattn_kv_cache_destroy(cache);
    cache = nullptr;
    model.clear(), lengths.clear();
  }
}

// Pools of several buffers (pages split in groups and layers apart; the
// variable is read when the cache is created).
TEST_F(Q4Cache, SeveralPoolBuffers) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", "4096"}});
  KvShape s = q4_shape();
  s.pages = 40;
  create(s);
  step({1, 2, 3}, {31, 17, 1});
  check(1);
  check(2);
  check(3);
}

TEST_F(Q4Cache, BadInputIsRefused) {
  EXPECT_EQ(vkattn_dtype_size(VKATTN_Q4), 0u);
  vkattn_tensor* t = nullptr;
  const int64_t shp[1] = {8};
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_Q4, 1, shp, &t), "cache dtype only");
  EXPECT_EQ(t, nullptr);
  create(q4_shape());
  step({1}, {6});
  std::vector<int8_t> kc(6 * 3 * 128), vc(6 * 3 * 37);
  std::vector<float> ks(6 * 3 * 4), vs(6 * 3 * 2);
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 0, 1, 0, 6, kc.data(), kc.size() - 1, vc.data(), vc.size()),
      "one int8 code per element");
  EXPECT_INVALID(vkattn_kv_cache_read_block_scales(cache, 0, 1, 0, 6, ks.data(), ks.size(),
                                                   vs.data(), vs.size() + 1),
                 "ceil(dv / 32)");
  EXPECT_INVALID(vkattn_kv_cache_read_block_scales(cache, 0, 1, 2, 6, ks.data(), ks.size(),
                                                   vs.data(), vs.size()),
                 "beyond");
  EXPECT_INVALID(vkattn_kv_cache_read_scales(cache, 0, 1, 0, 6, ks.data(), vs.data()),
                 "only 8-bit");
  check(1);
  // Other caches have no block scales.
  vkattn_kv_cache_destroy(cache);
  cache = nullptr;
  KvShape f16 = q4_shape();
  f16.dtype = VKATTN_F16;
  create(f16);
  EXPECT_INVALID(vkattn_kv_cache_read_block_scales(cache, 0, 1, 0, 0, ks.data(), 0, vs.data(), 0),
                 "only q4");
  // The rotation flag: Q4 caches only; unknown bits refused.
  vkattn_kv_cache* other = nullptr;
  vkattn_kv_cache_desc d = kv_cache_desc(f16);
  d.flags = VKATTN_KV_ROTATE_KEYS;
  EXPECT_INVALID(vkattn_kv_cache_create(ctx, &d, &other), "VKATTN_Q4 caches only");
  d.dtype = VKATTN_Q4;
  d.flags = 2;
  EXPECT_INVALID(vkattn_kv_cache_create(ctx, &d, &other), "bits vkattn does not know");
  EXPECT_EQ(other, nullptr);
  // A 0.1-0.4 struct (48 bytes, no flags field) is still accepted: flags 0.
  d.flags = 0xdead;  // past the older struct: not read
  d.struct_size = 48;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &other), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_kv_cache_destroy(other);
}

namespace {

// One q4 cache, two sequences (a prefill chunk of 7 tokens over 30, a
// decode over 20), GQA 4:2, d 64 / dv 37 (a partial block), pages of 5:
// the step's attention against the f64 reference over the K/V the cache
// holds (its codes times their block scales, read back), on `ctx`. With
// `nan`, one committed key of kv head 0 holds a NaN: its block's scale is
// NaN, and every row that sees it is NaN (the reference's rule too).
// With `rotate`, the cache has VKATTN_KV_ROTATE_KEYS: the keys it holds
// are rotated back (the transform is its own inverse) for the reference,
// which uses the caller's queries.
void attend_over_q4(vkattn_context* ctx, uint32_t d, uint32_t dv, bool nan = false,
                    bool rotate = false, bool rules = false) {
  const uint32_t hkv = 2, h = 4, ps = 5;
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = 1, cd.num_kv_heads = hkv, cd.head_dim = d, cd.head_dim_v = dv;
  cd.page_size = ps, cd.num_pages = 32, cd.dtype = VKATTN_Q4;
  cd.flags = rotate ? VKATTN_KV_ROTATE_KEYS : 0;
  vkattn_kv_cache* cache = nullptr;
  ASSERT_EQ(vkattn_kv_cache_create(ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  std::mt19937 rng(17);
  std::normal_distribution<float> g;
  // Keys with channels 20x the others (every 7th element); values and
  // queries Gaussian, as the K4 accuracy data (values with such channels
  // leave coopmat's f16 probabilities errors of their size).
  auto upload = [&](std::vector<int64_t> shape, float outlier) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, shape.data(), &t), VKATTN_SUCCESS);
    std::vector<float> x(shape[0] * shape[1] * shape[2]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = g(rng) * (i % 7 == 2 ? outlier : 1.0f);
    EXPECT_EQ(vkattn_tensor_write(t, x.data(), x.size() * 4), VKATTN_SUCCESS);
    return std::make_pair(t, x);
  };
  const int64_t ids[2] = {1, 2};
  vkattn_step* step = nullptr;
  // The context: 30 and 20 tokens, committed.
  const int32_t before[2] = {30, 20};
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, before, &step), VKATTN_SUCCESS);
  auto k0 = upload({50, hkv, d}, 20), v0 = upload({50, hkv, dv}, 1);
  if (nan) {  // sequence 2's key 3 (row 33 of the packed batch), kv head 0
    k0.second[(33 * hkv + 0) * d + d - 1] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_EQ(vkattn_tensor_write(k0.first, k0.second.data(), k0.second.size() * 4),
              VKATTN_SUCCESS);
  }
  ASSERT_EQ(vkattn_step_append(step, 0, k0.first, v0.first), VKATTN_SUCCESS) << vkattn_last_error();
  ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
  // The step: 7 and 1 new tokens, appended and attended (causal).
  const int32_t t[2] = {7, 1};
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &step), VKATTN_SUCCESS);
  auto k1 = upload({8, hkv, d}, 20), v1 = upload({8, hkv, dv}, 1), q = upload({8, h, d}, 1);
  ASSERT_EQ(vkattn_step_append(step, 0, k1.first, v1.first), VKATTN_SUCCESS);
  vkattn_tensor* out = nullptr;
  const int64_t os[3] = {8, h, dv};
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 3, os, &out), VKATTN_SUCCESS);
  vkattn_attention_desc a;
  vkattn_attention_desc_init(&a);
  a.num_heads = h, a.num_kv_heads = hkv, a.head_dim = d, a.head_dim_v = dv, a.causal = 1;
  // rules: a binary draft tree on sequence 1's 7 tokens (node i's parent
  // (i - 1) / 2) and top-k lists of 6 a kv head (a -1 pad on even rows)
  // over what the cache holds (issue T).
  std::vector<int32_t> tree_indptr = {0, 7, 7}, lists(8 * hkv * 6);
  std::vector<uint32_t> tree(7, 0u);
  for (int i = 0; i < 7; ++i)
    for (int x = i;; x = (x - 1) / 2) {
      tree[i] |= 1u << x;
      if (x == 0) break;
    }
  for (int r = 0; r < 8; ++r)
    for (uint32_t kh = 0; kh < hkv; ++kh)
      for (int x = 0; x < 6; ++x)
        lists[(r * hkv + kh) * 6 + x] =
            x == 5 && r % 2 == 0 ? -1 : (r * 3 + int(kh) * 5 + x * 7) % (r < 7 ? 37 : 21);
  vkattn_tensor* lt = nullptr;
  const int64_t ls[3] = {8, hkv, 6};
  ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_I32, 3, ls, &lt), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(lt, lists.data(), lists.size() * 4), VKATTN_SUCCESS);
  if (rules) {
    a.tree_indptr = tree_indptr.data(), a.tree_mask = tree.data();
    a.topk_indices = lt;
  }
  ASSERT_EQ(vkattn_step_attention(step, 0, &a, q.first, out), VKATTN_SUCCESS)
      << vkattn_last_error();
  vkattn_tensor_destroy(lt);
  ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
  std::vector<float> got(8 * h * dv);
  ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
  // What the cache holds, dequantized: [37 | 21 keys][Hkv][dim].
  std::vector<float> hk, hv;
  const uint32_t nbk = (d + 31) / 32, nbv = (dv + 31) / 32;
  for (int b = 0; b < 2; ++b) {
    const int32_t n = before[b] + t[b];
    std::vector<int8_t> kc(n * hkv * d), vc(n * hkv * dv);
    std::vector<float> ks(n * hkv * nbk), vs(n * hkv * nbv);
    ASSERT_EQ(
        vkattn_kv_cache_read(cache, 0, ids[b], 0, n, kc.data(), kc.size(), vc.data(), vc.size()),
        VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_kv_cache_read_block_scales(cache, 0, ids[b], 0, n, ks.data(), ks.size(),
                                                vs.data(), vs.size()),
              VKATTN_SUCCESS);
    for (size_t i = 0; i < kc.size(); ++i) hk.push_back(kc[i] * ks[i / d * nbk + i % d / 32]);
    for (size_t i = 0; i < vc.size(); ++i) hv.push_back(vc[i] * vs[i / dv * nbv + i % dv / 32]);
  }
  const uint32_t rot = rotate ? d & (0u - d) : 1;
  if (rot > 1)
    for (size_t g = 0; g < hk.size(); g += rot) vkattn::ref::hadamard_rotate(&hk[g], int(rot));
  vkattn::ref::AttentionParams p;
  p.num_heads = h, p.num_kv_heads = hkv, p.head_dim = d, p.head_dim_v = dv, p.causal = true;
  if (rules) {
    p.tree_indptr = tree_indptr.data(), p.tree_mask = tree.data();
    p.topk = lists.data(), p.topk_k = 6, p.topk_per_head = true;
  }
  const int32_t cu_q[3] = {0, 7, 8}, cu_k[3] = {0, 37, 58};
  std::vector<float> want(8 * h * dv);
  vkattn::ref::attention_varlen(p, 2, cu_q, cu_k, q.second.data(), hk.data(), hv.data(),
                                want.data(), nullptr);
  double worst = 0;
  size_t nans = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
      ++nans;
      continue;
    }
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1 + std::fabs(want[i])));
  }
  // The NaN key's rows: sequence 2's decode, the 2 heads of kv head 0.
  EXPECT_EQ(nans, nan ? 2u * dv : 0u);
  // coopmat multiplies f16 q and P (test_util.h's slack: 2e-3 relative).
  EXPECT_LT(worst, 2e-4 + 3 * f16_math_slack()) << "d " << d << " dv " << dv;
  for (vkattn_tensor* x : {k0.first, v0.first, k1.first, v1.first, q.first, out})
    vkattn_tensor_destroy(x);
  vkattn_kv_cache_destroy(cache);
}

}  // namespace

// The queries' rotation over a rotated cache stays finite wherever its
// result fits q's dtype (f32 here: the temporary is q's dtype): queries
// of 1e37 at d 64 rotate to (8e37, 0, ..); keys of +-0.125 rotate to
// (+-1, 0, ..), stored exactly (and values the cache holds exactly), so the scores are +-1e37 and
// each row's output is the first key's value, in every family with f32 math. Plain f32 butterflies
// reached 64 x 1e37 (inf) on the way: NaN rows.
TEST(Q4Rotation, HugeQueriesRotateWithoutOverflow) {
  const uint32_t d = 64, dv = 32, h = 2;
  for (const char* family : {"lanes", "tiled", "decode"}) {
    SCOPED_TRACE(family);
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL", family}, {"VKATTN_FORCE_F16_MATH", "0"}});
    ForcedContext fc;
    ASSERT_NE(fc.ctx, nullptr);
    vkattn_kv_cache_desc cd;
    vkattn_kv_cache_desc_init(&cd);
    cd.num_layers = 1, cd.num_kv_heads = 1, cd.head_dim = d, cd.head_dim_v = dv;
    cd.num_pages = 4, cd.dtype = VKATTN_Q4, cd.flags = VKATTN_KV_ROTATE_KEYS;
    vkattn_kv_cache* cache = nullptr;
    ASSERT_EQ(vkattn_kv_cache_create(fc.ctx, &cd, &cache), VKATTN_SUCCESS) << vkattn_last_error();
    const int64_t id = 1;
    const int32_t t = 2;
    vkattn_step* step = nullptr;
    ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &t, &step), VKATTN_SUCCESS);
    std::vector<float> k(2 * d), v(2 * dv), q(2 * h * d, 1e37f);
    for (uint32_t e = 0; e < d; ++e) k[e] = 0.125f, k[d + e] = -0.125f;
    // Values a q4 block holds exactly (scale 0.5, codes -8..7).
    for (uint32_t e = 0; e < dv; ++e) v[e] = (float(e % 16) - 8.0f) * 0.5f, v[dv + e] = 100.0f;
    auto upload = [&](std::vector<int64_t> shape, const std::vector<float>& x) {
      vkattn_tensor* tt = nullptr;
      EXPECT_EQ(vkattn_tensor_create(fc.ctx, VKATTN_F32, 3, shape.data(), &tt), VKATTN_SUCCESS);
      EXPECT_EQ(vkattn_tensor_write(tt, x.data(), x.size() * 4), VKATTN_SUCCESS);
      return tt;
    };
    vkattn_tensor *kt = upload({2, 1, d}, k), *vt = upload({2, 1, dv}, v);
    vkattn_tensor *qt = upload({2, h, d}, q),
                  *out = upload({2, h, dv}, std::vector<float>(2 * h * dv));
    ASSERT_EQ(vkattn_step_append(step, 0, kt, vt), VKATTN_SUCCESS) << vkattn_last_error();
    vkattn_attention_desc a;
    vkattn_attention_desc_init(&a);
    a.num_heads = h, a.num_kv_heads = 1, a.head_dim = d, a.head_dim_v = dv;
    ASSERT_EQ(vkattn_step_attention(step, 0, &a, qt, out), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(step), VKATTN_SUCCESS);
    std::vector<float> got(2 * h * dv);
    ASSERT_EQ(vkattn_tensor_read(out, got.data(), got.size() * 4), VKATTN_SUCCESS);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], v[i % dv]) << "row " << i / dv << " element " << i % dv;
    for (vkattn_tensor* x : {kt, vt, qt, out}) vkattn_tensor_destroy(x);
    vkattn_kv_cache_destroy(cache);
  }
}

// Every family reads the 4-bit cache: codes times their block's scale.
// A family forced from outside (ctest's mesa26 coopmat suite) is the only
// one run.
TEST(Q4Attention, EveryFamilyMatchesTheReferenceOverWhatTheCacheHolds) {
  std::vector<std::string> families = {"lanes", "tiled", "decode"};
  if (const char* forced = std::getenv("VKATTN_ATTN_KERNEL")) families = {forced};
  for (const std::string& family : families) {
    SCOPED_TRACE(family);
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL", family.c_str()}});
    ForcedContext fc;
    ASSERT_NE(fc.ctx, nullptr);
    attend_over_q4(fc.ctx, 64, 37);
    attend_over_q4(fc.ctx, 128, 128);
    attend_over_q4(fc.ctx, 64, 37, /*nan=*/true);
    // Rotated keys (the queries rotated before the kernel): d 64 whole,
    // d 96 in groups of 32.
    attend_over_q4(fc.ctx, 64, 37, false, /*rotate=*/true);
    attend_over_q4(fc.ctx, 96, 64, true, /*rotate=*/true);
    attend_over_q4(fc.ctx, 128, 128, false, /*rotate=*/true);
    // A tree and top-k lists (which run on decode whatever is forced).
    attend_over_q4(fc.ctx, 64, 37, false, false, /*rules=*/true);
    attend_over_q4(fc.ctx, 128, 128, false, /*rotate=*/true, /*rules=*/true);
    // Key ranges split (partials and their combine).
    ScopedEnv split(ScopedEnv::Vars{{"VKATTN_ATTN_SPLIT_KEYS", "8"}});
    ForcedContext fs;
    attend_over_q4(fs.ctx, 64, 37);
  }
  // A batch-invariant context (pages gathered into buffers of their own).
  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = validation_flag() | VKATTN_CONTEXT_BATCH_INVARIANT;
  vkattn_context* inv = nullptr;
  ASSERT_EQ(vkattn_context_create(&cd, &inv), VKATTN_SUCCESS) << vkattn_last_error();
  attend_over_q4(inv, 64, 37);
  attend_over_q4(inv, 128, 128);
  attend_over_q4(inv, 128, 128, false, /*rotate=*/true);
  EXPECT_EQ(validation_messages(inv), 0u);
  vkattn_context_destroy(inv);
}

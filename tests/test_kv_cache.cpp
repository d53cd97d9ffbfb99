// The paged KV cache (B1): appends read back bit-exact, fork / truncate /
// remove share and free pages correctly, a failed step changes nothing,
// bad input is rejected with the cache unchanged, pools beyond one buffer.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "kv_model.h"

using namespace vkattn_test;

namespace {

class KvCacheTest : public ContextTest {
 protected:
  void TearDown() override {
    if (step_) vkattn_step_abort(step_);
    if (cache) vkattn_kv_cache_destroy(cache);
    ContextTest::TearDown();
  }

  void create(const KvShape& s) {
    shape = s;
    model = KvModel(s);
    vkattn_kv_cache_desc d = kv_cache_desc(s);
    ASSERT_EQ(vkattn_kv_cache_create(ctx, &d, &cache), VKATTN_SUCCESS) << vkattn_last_error();
  }

  // A host array for calls that must be refused before they write it.
  float* ksc_dummy() {
    dummy_.assign(64, 0.0f);
    return dummy_.data();
  }
  std::vector<float> dummy_;
  uint32_t free_pages() {
    uint32_t n = 0;
    EXPECT_EQ(vkattn_kv_cache_num_free_pages(cache, &n), VKATTN_SUCCESS);
    return n;
  }

  // One step: begin, append every layer with random tokens (input dtype
  // in_dt), then commit (and update the model) or abort.
  vkattn_status step(std::vector<int64_t> ids, std::vector<int32_t> t, vkattn_dtype in_dt,
                     bool commit = true) {
    vkattn_status s =
        vkattn_step_begin(cache, static_cast<uint32_t>(ids.size()), ids.data(), t.data(), &step_);
    if (s != VKATTN_SUCCESS) return s;
    int64_t total = 0;
    for (int32_t x : t) total += x;
    vkattn_tensor* k = tensor(in_dt, {total, shape.hkv, shape.d});
    vkattn_tensor* v = tensor(in_dt, {total, shape.hkv, shape.dv});
    std::vector<NewTokens> nk, nv;
    for (uint32_t l = 0; l < shape.layers; ++l) {
      nk.push_back(random_tokens(rng, total * shape.hkv * shape.d, in_dt, shape.dtype));
      nv.push_back(random_tokens(rng, total * shape.hkv * shape.dv, in_dt, shape.dtype));
      EXPECT_EQ(vkattn_tensor_write(k, nk[l].in_bytes.data(), nk[l].in_bytes.size()),
                VKATTN_SUCCESS);
      EXPECT_EQ(vkattn_tensor_write(v, nv[l].in_bytes.data(), nv[l].in_bytes.size()),
                VKATTN_SUCCESS);
      EXPECT_EQ(vkattn_step_append(step_, l, k, v), VKATTN_SUCCESS) << vkattn_last_error();
    }
    if (!commit) {
      vkattn_step_abort(step_);
      step_ = nullptr;
      return VKATTN_SUCCESS;
    }
    EXPECT_EQ(vkattn_step_commit(step_), VKATTN_SUCCESS) << vkattn_last_error();
    step_ = nullptr;
    size_t off = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& m = model.get(ids[i]);
      for (uint32_t l = 0; l < shape.layers; ++l) {
        auto& kb = nk[l].cache_bytes;
        auto& vb = nv[l].cache_bytes;
        m.k[l].insert(m.k[l].end(), kb.begin() + off * model.k_row(),
                      kb.begin() + (off + t[i]) * model.k_row());
        m.v[l].insert(m.v[l].end(), vb.begin() + off * model.v_row(),
                      vb.begin() + (off + t[i]) * model.v_row());
      }
      m.len += t[i];
      off += t[i];
    }
    return VKATTN_SUCCESS;
  }

  // Every sequence of the model reads back exactly (whole and a random range).
  void check_all() {
    for (auto& [id, m] : model.seqs) {
      int32_t len = -1;
      ASSERT_EQ(vkattn_kv_cache_length(cache, id, &len), VKATTN_SUCCESS);
      ASSERT_EQ(len, m.len) << "sequence " << id;
      for (uint32_t l = 0; l < shape.layers; ++l) {
        int32_t start = m.len ? std::uniform_int_distribution<int32_t>(0, m.len - 1)(rng) : 0;
        for (auto [s0, n] : {std::pair<int32_t, int32_t>{0, m.len}, {start, m.len - start}}) {
          std::vector<uint8_t> k(n * model.k_row()), v(n * model.v_row());
          ASSERT_EQ(
              vkattn_kv_cache_read(cache, l, id, s0, n, k.data(), k.size(), v.data(), v.size()),
              VKATTN_SUCCESS)
              << vkattn_last_error();
          ASSERT_TRUE(std::equal(k.begin(), k.end(), m.k[l].begin() + s0 * model.k_row()))
              << "K of sequence " << id << " layer " << l << " from " << s0;
          ASSERT_TRUE(std::equal(v.begin(), v.end(), m.v[l].begin() + s0 * model.v_row()))
              << "V of sequence " << id << " layer " << l << " from " << s0;
        }
      }
    }
  }

  void fork(int64_t src, int64_t dst) {
    ASSERT_EQ(vkattn_kv_cache_fork(cache, src, dst), VKATTN_SUCCESS) << vkattn_last_error();
    model.seqs[dst] = model.seqs[src];
  }
  void truncate(int64_t id, int32_t n) {
    ASSERT_EQ(vkattn_kv_cache_truncate(cache, id, n), VKATTN_SUCCESS) << vkattn_last_error();
    auto& m = model.seqs[id];
    for (uint32_t l = 0; l < shape.layers; ++l) {
      m.k[l].resize(n * model.k_row());
      m.v[l].resize(n * model.v_row());
    }
    m.len = n;
  }
  void remove(int64_t id) {
    ASSERT_EQ(vkattn_kv_cache_remove(cache, id), VKATTN_SUCCESS) << vkattn_last_error();
    model.seqs.erase(id);
  }

  KvShape shape;
  KvModel model{KvShape{}};
  vkattn_kv_cache* cache = nullptr;
  vkattn_step* step_ = nullptr;
  std::mt19937 rng{1234};
};

uint32_t pages_for(int32_t len, uint32_t ps) {
  return (len + ps - 1) / ps;
}

}  // namespace

// Page sizes 1, 5, 16, 64; chunks that do and do not align with pages;
// several sequences interleaved; every dtype pair; odd dims (16-bit
// caches then share words between rows).
TEST_F(KvCacheTest, AppendReadsBackExactly) {
  struct Dims {
    uint32_t d, dv;
  };
  const vkattn_dtype dts[] = {VKATTN_F32, VKATTN_F16, VKATTN_BF16};
  int round = 0;
  for (uint32_t ps : {1u, 5u, 16u, 64u}) {
    for (Dims dims : {Dims{8, 8}, Dims{5, 3}, Dims{64, 40}}) {
      KvShape s;
      s.page_size = ps;
      s.d = dims.d;
      s.dv = dims.dv;
      s.dtype = dts[round % 3];
      s.pages = 400 / ps + 16;
      vkattn_dtype in_dt = dts[(round / 3 + round) % 3];
      ++round;
      SCOPED_TRACE(testing::Message() << "page_size " << ps << " d " << dims.d << " dv " << dims.dv
                                      << " cache " << s.dtype << " input " << in_dt);
      if (cache) vkattn_kv_cache_destroy(cache);
      create(s);
      ASSERT_EQ(step({10, 20, 30}, {7, 16, 1}, in_dt), VKATTN_SUCCESS);
      ASSERT_EQ(step({30, 10}, {33, 9}, in_dt), VKATTN_SUCCESS);
      ASSERT_EQ(step({20, 40, 10, 30}, {1, 64, 1, 2}, in_dt), VKATTN_SUCCESS);
      ASSERT_EQ(step({40}, {0}, in_dt), VKATTN_SUCCESS);
      check_all();
      uint32_t used = 0;
      for (auto& [id, m] : model.seqs) used += pages_for(m.len, ps);
      EXPECT_EQ(free_pages(), s.pages - used);
    }
  }
}

// A fork shares every page; divergent appends copy only the shared partial
// last page and leave the source untouched.
TEST_F(KvCacheTest, ForkSharesPagesAndCopiesOnWrite) {
  KvShape s;
  s.page_size = 16;
  s.pages = 32;
  create(s);
  ASSERT_EQ(step({1}, {40}, VKATTN_F32), VKATTN_SUCCESS);  // 3 pages, last one partial
  EXPECT_EQ(free_pages(), 29u);
  fork(1, 2);
  EXPECT_EQ(free_pages(), 29u) << "a fork copies nothing";
  ASSERT_EQ(step({2}, {3}, VKATTN_F16), VKATTN_SUCCESS);  // copies page 3 only
  EXPECT_EQ(free_pages(), 28u);
  ASSERT_EQ(step({1}, {5}, VKATTN_F16), VKATTN_SUCCESS);  // page 3 is no longer shared
  EXPECT_EQ(free_pages(), 28u);
  check_all();
  // All holders of a shared partial page in one step: each copies it (no
  // holder may write in place while another still holds the page: an abort
  // must find every committed token), and the page is freed at commit.
  fork(2, 3);
  fork(2, 4);
  const uint32_t free_before = free_pages();
  int64_t ids3[3] = {2, 3, 4};
  int32_t t3[3] = {1, 2, 3};
  ASSERT_EQ(vkattn_step_begin(cache, 3, ids3, t3, &step_), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), free_before - 3) << "three copies reserved";
  vkattn_step_abort(step_);
  step_ = nullptr;
  ASSERT_EQ(step({2, 3, 4}, {1, 2, 3}, VKATTN_BF16), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), 26u);
  check_all();
  // Full pages stay shared: a fork at a page boundary copies nothing.
  truncate(1, 32);
  fork(1, 5);
  uint32_t before = free_pages();
  ASSERT_EQ(step({5}, {1}, VKATTN_F32), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), before - 1);
  check_all();
}

// Truncating inside a shared page keeps sharing correct; then appending.
TEST_F(KvCacheTest, TruncateThenAppend) {
  KvShape s;
  s.page_size = 5;
  s.pages = 40;
  create(s);
  ASSERT_EQ(step({7}, {23}, VKATTN_F32), VKATTN_SUCCESS);
  fork(7, 8);
  truncate(7, 12);  // inside page 2, which 8 still holds
  EXPECT_EQ(free_pages(), 40u - 5u);
  ASSERT_EQ(step({7}, {6}, VKATTN_F16), VKATTN_SUCCESS);
  check_all();
  truncate(8, 0);
  truncate(7, 10);  // at a page boundary
  ASSERT_EQ(step({7, 8}, {11, 4}, VKATTN_F32), VKATTN_SUCCESS);
  check_all();
  EXPECT_EQ(free_pages(), 40u - pages_for(21, 5) - pages_for(4, 5));
}

// Abort gives back every reserved page and changes no committed token,
// also after appends into a page shared with another sequence.
TEST_F(KvCacheTest, AbortRestoresEverything) {
  KvShape s;
  s.page_size = 4;
  s.pages = 30;
  create(s);
  ASSERT_EQ(step({1, 2}, {6, 9}, VKATTN_F32), VKATTN_SUCCESS);
  fork(2, 3);
  const uint32_t before = free_pages();
  ASSERT_EQ(step({1, 2, 3, 9}, {3, 5, 1, 8}, VKATTN_F16, /*commit=*/false), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), before);
  int32_t len = -1;
  ASSERT_EQ(vkattn_kv_cache_length(cache, 9, &len), VKATTN_SUCCESS);
  EXPECT_EQ(len, 0) << "an aborted step creates no sequence";
  check_all();
}

// CACHE_FULL: nothing reserved, nothing written, every sequence intact.
TEST_F(KvCacheTest, CacheFullChangesNothing) {
  KvShape s;
  s.page_size = 8;
  s.pages = 10;
  create(s);
  ASSERT_EQ(step({1, 2}, {20, 30}, VKATTN_F32), VKATTN_SUCCESS);  // 3 + 4 pages
  fork(1, 3);
  EXPECT_EQ(free_pages(), 3u);
  // Needs 1 (copy of 3's shared last page) + 3 fresh = 4 > 3.
  EXPECT_EQ(vkattn_step_begin(cache, 2, std::vector<int64_t>{3, 4}.data(),
                              std::vector<int32_t>{1, 17}.data(), &step_),
            VKATTN_ERROR_CACHE_FULL);
  EXPECT_NE(std::strstr(vkattn_last_error(), "free pages"), nullptr) << vkattn_last_error();
  EXPECT_EQ(step_, nullptr);
  EXPECT_EQ(free_pages(), 3u);
  check_all();
  // What fits still works afterwards (the failed begin left no open step).
  ASSERT_EQ(step({3, 4}, {1, 9}, VKATTN_F16), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), 0u);
  check_all();
  for (int64_t id : {1, 2, 3, 4}) remove(id);
  EXPECT_EQ(free_pages(), 10u);
}

// A long random run against the host model, on a pool split over several
// buffers (forced small), ends with the same contents and no leaked page.
// A slab (one layer of one page) is 80 + 48 bytes; one layer of the pool
// 20 KiB.
class KvCacheRandomRun : public KvCacheTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(KvCacheRandomRun, MatchesModel) {
  KvShape s;
  s.layers = 3;
  s.hkv = 2;
  s.d = 6;
  s.dv = 4;
  s.page_size = 3;
  s.pages = 160;
  s.dtype = VKATTN_BF16;
  {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_KV_BUFFER_BYTES", GetParam()}});
    create(s);
  }
  const vkattn_dtype dts[] = {VKATTN_F32, VKATTN_F16, VKATTN_BF16};
  int64_t next_id = 100;
  int committed = 0, full = 0, aborted = 0;
  for (int it = 0; it < 300; ++it) {
    std::vector<int64_t> live;
    for (auto& [id, m] : model.seqs) live.push_back(id);
    int op = std::uniform_int_distribution<int>(0, 9)(rng);
    if (!live.empty() && free_pages() < s.pages / 8 && rng() % 3 == 0) op = 9;  // make room
    auto pick = [&] {
      return live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng)];
    };
    if (op <= 4 || live.empty()) {  // a step: some live sequences, maybe a new one
      std::vector<int64_t> ids;
      std::vector<int32_t> t;
      for (int64_t id : live)
        if (rng() % 2) ids.push_back(id), t.push_back(rng() % 8);
      if (rng() % 3 == 0) ids.push_back(next_id++), t.push_back(rng() % 12);
      std::shuffle(ids.begin(), ids.end(), rng);  // t stays random per position
      bool commit = rng() % 5 != 0;
      uint32_t before = free_pages();
      vkattn_status st = step(ids, t, dts[rng() % 3], commit);
      ASSERT_TRUE(st == VKATTN_SUCCESS || st == VKATTN_ERROR_CACHE_FULL) << vkattn_last_error();
      if (st != VKATTN_SUCCESS || !commit) EXPECT_EQ(free_pages(), before);
      (st != VKATTN_SUCCESS ? full : commit ? committed : aborted)++;
    } else if (op <= 6) {
      fork(pick(), next_id++);
    } else if (op <= 8) {
      int64_t id = pick();
      int32_t len = model.seqs[id].len;
      truncate(id, len ? static_cast<int32_t>(rng() % (len + 1)) : 0);
    } else {
      remove(pick());
    }
    if (it % 25 == 0) check_all();
  }
  check_all();
  // The run must have exercised every outcome.
  EXPECT_GT(committed, 20);
  EXPECT_GT(aborted, 3);
  EXPECT_GT(full, 0);
  std::cout << "committed " << committed << ", aborted " << aborted << ", cache full " << full
            << "\n";
  std::vector<int64_t> live;
  for (auto& [id, m] : model.seqs) live.push_back(id);
  for (int64_t id : live) remove(id);
  EXPECT_EQ(free_pages(), s.pages) << "pages leaked";
}

// 4096 bytes: 32 pages per buffer, 5 page groups, a buffer per layer and
// group; 45000 bytes: every page in one group, layers 0-1 in one buffer and
// layer 2 in another; unset: one buffer.
INSTANTIATE_TEST_SUITE_P(PoolSplits, KvCacheRandomRun,
                         ::testing::Values("4096", "45000", "4294967295"));

// A pool of 300 MiB: more than lavapipe's 128 MiB maxStorageBufferRange.
TEST_F(KvCacheTest, PoolLargerThanOneBuffer) {
  KvShape s;
  s.layers = 4;
  s.hkv = 8;
  s.d = 128;
  s.dv = 128;
  s.page_size = 16;
  s.pages = 1200;  // 256 KiB per page: 300 MiB
  s.dtype = VKATTN_F16;
  create(s);
  // Three sequences of 400 pages each fill the pool (and so every buffer).
  const int32_t n = 400 * 16;
  ASSERT_EQ(step({1, 2, 3}, {n, n, n}, VKATTN_F16), VKATTN_SUCCESS);
  EXPECT_EQ(free_pages(), 0u);
  check_all();
  remove(2);
  EXPECT_EQ(free_pages(), 400u);
  ASSERT_EQ(step({4}, {n}, VKATTN_F32), VKATTN_SUCCESS);
  check_all();
}

// 8-bit caches: a large append (thousands of rows per workgroup, within
// lavapipe's loop cap) reads back as codes and scales that dequantize to
// the appended values within half a code; an all-zero row has scale 0, a
// row holding NaN a NaN scale (int8) or NaN codes (fp8), fp8 saturates at
// 448 x scale. Bytes per page follow the header's formula.
TEST_F(KvCacheTest, EightBitAppendsAndScales) {
  for (vkattn_dtype dt : {VKATTN_I8, VKATTN_FP8_E4M3}) {
    SCOPED_TRACE(dt == VKATTN_I8 ? "i8" : "fp8");
    if (cache) vkattn_kv_cache_destroy(cache);
    KvShape s;
    s.layers = 2;
    s.hkv = 8;
    s.d = 128;
    s.dv = 37;
    s.page_size = 16;
    s.pages = 6016 / 16;
    s.dtype = dt;
    create(s);
    std::vector<float> ks(s.hkv), vs(s.hkv);
    for (uint32_t h = 0; h < s.hkv; ++h) ks[h] = 0.004f * (h + 1), vs[h] = 0.01f;
    if (dt == VKATTN_FP8_E4M3) {
      // Layer 1 has no scales: its append is refused, nothing recorded.
      ASSERT_EQ(vkattn_kv_cache_set_scales(cache, 0, s.hkv, ks.data(), vs.data()), 0)
          << vkattn_last_error();
    }
    const int32_t t[2] = {6000, 3};
    const int64_t ids[2] = {1, 2};
    ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &step_), VKATTN_SUCCESS);
    const int64_t n = 6003;
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> kx(n * s.hkv * s.d), vx(n * s.hkv * s.dv);
    for (float& x : kx) x = u(rng);
    for (float& x : vx) x = u(rng) * 0.1f;
    for (uint32_t e = 0; e < s.d; ++e) kx[5 * s.d + e] = 0.0f;  // token 0, head 5: zeros
    kx[9 * s.d + 3] = std::numeric_limits<float>::quiet_NaN();  // token 1, head 1: NaN
    vkattn_tensor* k = tensor(VKATTN_F32, {n, s.hkv, s.d});
    vkattn_tensor* v = tensor(VKATTN_F32, {n, s.hkv, s.dv});
    ASSERT_EQ(vkattn_tensor_write(k, kx.data(), kx.size() * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_write(v, vx.data(), vx.size() * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_step_append(step_, 0, k, v), VKATTN_SUCCESS) << vkattn_last_error();
    if (dt == VKATTN_FP8_E4M3) {
      EXPECT_INVALID(vkattn_step_append(step_, 1, k, v), "no scales");
      EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 1, ks.data(), vs.data()), "fixed");
      ASSERT_EQ(vkattn_kv_cache_set_scales(cache, 1, 1, ks.data(), vs.data()), 0);
    }
    ASSERT_EQ(vkattn_step_append(step_, 1, k, v), VKATTN_SUCCESS) << vkattn_last_error();
    ASSERT_EQ(vkattn_step_commit(step_), VKATTN_SUCCESS);
    step_ = nullptr;
    for (uint32_t l = 0; l < s.layers; ++l) {
      for (int64_t id : ids) {
        const int32_t cnt = t[id - 1];
        const size_t first = id == 1 ? 0 : 6000;
        std::vector<uint8_t> kb(size_t(cnt) * s.hkv * s.d), vb(size_t(cnt) * s.hkv * s.dv);
        std::vector<float> ksc(size_t(cnt) * s.hkv), vsc(size_t(cnt) * s.hkv);
        ASSERT_EQ(
            vkattn_kv_cache_read(cache, l, id, 0, cnt, kb.data(), kb.size(), vb.data(), vb.size()),
            VKATTN_SUCCESS);
        ASSERT_EQ(vkattn_kv_cache_read_scales(cache, l, id, 0, cnt, ksc.data(), vsc.data()),
                  VKATTN_SUCCESS)
            << vkattn_last_error();
        int bad = 0;
        for (size_t r = 0; r < size_t(cnt) * s.hkv * 2 && bad < 3; ++r) {
          const bool is_v = r % 2;
          const size_t row = r / 2, dim = is_v ? s.dv : s.d, h = row % s.hkv;
          const float* x = (is_v ? vx.data() : kx.data()) + (first * s.hkv + row) * dim;
          const uint8_t* c = (is_v ? vb.data() : kb.data()) + row * dim;
          const float scale = (is_v ? vsc : ksc)[row];
          const float want_scale = dt == VKATTN_I8 ? 0.0f
                                   : l == 1        ? (is_v ? vs[0] : ks[0])
                                                   : (is_v ? vs[h] : ks[h]);
          float amax = 0.0f;
          bool nan = false;
          for (size_t e = 0; e < dim; ++e)
            amax = std::max(amax, std::fabs(x[e])), nan |= std::isnan(x[e]);
          if (dt == VKATTN_I8) {
            if (nan) {
              EXPECT_TRUE(std::isnan(scale)) << "row " << row << " holds NaN";
              continue;
            }
            EXPECT_NEAR(scale, amax / 127.0f, 1e-6 * amax) << "row " << row;
          } else {
            EXPECT_EQ(scale, want_scale) << "row " << row;
          }
          for (size_t e = 0; e < dim; ++e) {
            if (std::isnan(x[e])) {
              EXPECT_TRUE(std::isnan(dequantize(dt, c[e], scale)));
              continue;
            }
            EXPECT_NE(c[e], dt == VKATTN_I8 ? 0x80 : 0x7f) << "-128 is never stored; 0x7f is NaN";
            double want = 0;
            const double tol = quantized_tolerance(dt, x[e], amax, scale, &want);
            const double got = dequantize(dt, c[e], scale);
            if (!(std::fabs(got - want) <= tol)) {
              ADD_FAILURE() << "layer " << l << " seq " << id << (is_v ? " V" : " K") << " row "
                            << row << " elem " << e << ": " << got << ", appended " << x[e];
              ++bad;
              break;
            }
          }
        }
      }
    }
    // Per page: 2 layers x (K: round16(16 x 8 x 128) [+ 16 x 8 x 4 scales] + V likewise).
    EXPECT_INVALID(vkattn_kv_cache_read_scales(cache, 2, 1, 0, 1, ksc_dummy(), ksc_dummy()),
                   "layer");
    EXPECT_INVALID(vkattn_kv_cache_read_scales(cache, 0, 1, 5990, 11, ksc_dummy(), ksc_dummy()),
                   "beyond");
    if (dt == VKATTN_I8)
      EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 1, ks.data(), vs.data()), "int8");
  }
  // Other caches have no scales; fp8 scales must be 1 or Hkv, finite, > 0.
  vkattn_kv_cache_destroy(cache);
  KvShape s;
  create(s);
  ASSERT_EQ(step({1}, {2}, VKATTN_F32), VKATTN_SUCCESS);
  EXPECT_INVALID(vkattn_kv_cache_read_scales(cache, 0, 1, 0, 1, ksc_dummy(), ksc_dummy()),
                 "only 8-bit");
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 1, ksc_dummy(), ksc_dummy()), "only fp8");
  vkattn_kv_cache_destroy(cache);
  s.dtype = VKATTN_FP8_E4M3;
  create(s);
  const float good[2] = {1.0f, 2.0f}, zero[2] = {0.0f, 1.0f};
  const float nan[2] = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 3, good, good), "num_scales");
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 2, good, zero), "finite and > 0");
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 1, nan, good), "finite and > 0");
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 0, 2, nullptr, good), "NULL");
  EXPECT_INVALID(vkattn_kv_cache_set_scales(cache, 7, 2, good, good), "layer");
  EXPECT_EQ(vkattn_step_begin(cache, 0, nullptr, nullptr, &step_), VKATTN_SUCCESS);
  EXPECT_INVALID(vkattn_step_append(step_, 0, tensor(VKATTN_F32, {0, s.hkv, s.d}),
                                    tensor(VKATTN_F32, {0, s.hkv, s.dv})),
                 "no scales");
}

// Bad input: a status with a message, the cache unchanged.
TEST_F(KvCacheTest, BadInputIsRejected) {
  KvShape s;
  s.page_size = 4;
  s.pages = 16;
  s.dv = 4;
  create(s);
  ASSERT_EQ(step({1, 2}, {5, 3}, VKATTN_F32), VKATTN_SUCCESS);
  const uint32_t free0 = free_pages();

  vkattn_kv_cache_desc d;
  vkattn_kv_cache_desc_init(&d);
  vkattn_kv_cache* c2 = nullptr;
  EXPECT_INVALID(vkattn_kv_cache_create(ctx, &d, &c2), "num_layers");
  d.struct_size = 0;
  EXPECT_INVALID(vkattn_kv_cache_create(ctx, &d, &c2), "struct_size");
  EXPECT_INVALID(vkattn_kv_cache_create(ctx, nullptr, &c2), "desc");
  EXPECT_EQ(c2, nullptr);

  int64_t ids[2] = {1, 1};
  int32_t t[2] = {1, 1};
  EXPECT_INVALID(vkattn_step_begin(cache, 2, ids, t, &step_), "twice");
  ids[1] = 2;
  t[1] = -1;
  EXPECT_INVALID(vkattn_step_begin(cache, 2, ids, t, &step_), ">= 0");
  EXPECT_INVALID(vkattn_step_begin(cache, 2, nullptr, t, &step_), "NULL");
  EXPECT_EQ(step_, nullptr);

  // With a step open: a second step, fork/remove/truncate, bad appends.
  t[1] = 2;
  ASSERT_EQ(vkattn_step_begin(cache, 2, ids, t, &step_), VKATTN_SUCCESS);
  vkattn_step* other = nullptr;
  EXPECT_INVALID(vkattn_step_begin(cache, 1, ids, t, &other), "open step");
  EXPECT_INVALID(vkattn_kv_cache_fork(cache, 1, 9), "step is open");
  EXPECT_INVALID(vkattn_kv_cache_remove(cache, 1), "step is open");
  EXPECT_INVALID(vkattn_kv_cache_truncate(cache, 1, 0), "step is open");
  vkattn_tensor* k = tensor(VKATTN_F32, {3, s.hkv, s.d});
  vkattn_tensor* v = tensor(VKATTN_F32, {3, s.hkv, s.dv});
  vkattn_tensor* k_short = tensor(VKATTN_F32, {2, s.hkv, s.d});
  vkattn_tensor* k_i32 = tensor(VKATTN_I32, {3, s.hkv, s.d});
  vkattn_tensor* v_f16 = tensor(VKATTN_F16, {3, s.hkv, s.dv});
  EXPECT_INVALID(vkattn_step_append(step_, s.layers, k, v), "layer");
  EXPECT_INVALID(vkattn_step_append(step_, 0, k_short, v), "k_new must be [3");
  EXPECT_INVALID(vkattn_step_append(step_, 0, v, k), "must be [3");
  EXPECT_INVALID(vkattn_step_append(step_, 0, k_i32, v), "f32, f16 or bf16");
  EXPECT_INVALID(vkattn_step_append(step_, 0, k, v_f16), "share a dtype");
  EXPECT_INVALID(vkattn_step_append(step_, 0, nullptr, v), "NULL");
  vkattn_step_abort(step_);
  step_ = nullptr;
  EXPECT_EQ(free_pages(), free0);

  EXPECT_INVALID(vkattn_kv_cache_fork(cache, 77, 78), "does not exist");
  EXPECT_INVALID(vkattn_kv_cache_fork(cache, 1, 2), "already exists");
  EXPECT_INVALID(vkattn_kv_cache_truncate(cache, 77, 0), "does not exist");
  EXPECT_INVALID(vkattn_kv_cache_truncate(cache, 1, 6), "not in 0..5");
  EXPECT_INVALID(vkattn_kv_cache_truncate(cache, 1, -1), "not in 0..5");
  EXPECT_INVALID(vkattn_kv_cache_remove(cache, 77), "does not exist");
  std::vector<uint8_t> kb(model.k_row() * 5), vb(model.v_row() * 5);
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 0, 77, 0, 1, kb.data(), model.k_row(), vb.data(), model.v_row()),
      "does not exist");
  EXPECT_INVALID(vkattn_kv_cache_read(cache, 0, 1, 3, 3, kb.data(), 3 * model.k_row(), vb.data(),
                                      3 * model.v_row()),
                 "beyond");
  EXPECT_INVALID(vkattn_kv_cache_read(cache, 0, 1, 0, 2, kb.data(), 3 * model.k_row(), vb.data(),
                                      2 * model.v_row()),
                 "k_bytes");
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 0, 1, 0, 2, kb.data(), 2 * model.k_row(), vb.data(), 1),
      "v_bytes");
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 5, 1, 0, 1, kb.data(), model.k_row(), vb.data(), model.v_row()),
      "layer");
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 0, 1, -1, 1, kb.data(), model.k_row(), vb.data(), model.v_row()),
      ">= 0");
  EXPECT_INVALID(
      vkattn_kv_cache_read(cache, 0, 1, 0, 1, nullptr, model.k_row(), vb.data(), model.v_row()),
      "NULL");
  uint32_t* null_out = nullptr;
  EXPECT_INVALID(vkattn_kv_cache_num_free_pages(cache, null_out), "NULL");
  EXPECT_INVALID(vkattn_kv_cache_length(nullptr, 1, nullptr), "NULL");
  EXPECT_INVALID(vkattn_step_commit(nullptr), "NULL");
  vkattn_step_abort(nullptr);
  vkattn_kv_cache_destroy(nullptr);
  EXPECT_EQ(free_pages(), free0);
  check_all();
}

// Handles may be destroyed in any order; an open step keeps its cache alive.
TEST_F(KvCacheTest, StepOutlivesCacheHandle) {
  KvShape s;
  create(s);
  int64_t id = 5;
  int32_t t = 3;
  ASSERT_EQ(vkattn_step_begin(cache, 1, &id, &t, &step_), VKATTN_SUCCESS);
  vkattn_kv_cache_destroy(cache);
  cache = nullptr;
  vkattn_tensor* k = tensor(VKATTN_F32, {3, s.hkv, s.d});
  vkattn_tensor* v = tensor(VKATTN_F32, {3, s.hkv, s.dv});
  EXPECT_EQ(vkattn_step_append(step_, 0, k, v), VKATTN_SUCCESS) << vkattn_last_error();
  EXPECT_EQ(vkattn_step_commit(step_), VKATTN_SUCCESS);
  step_ = nullptr;
}

// What a cache's pages cost (white box: the pool's slab sizes and buffers):
// the header's bytes-per-page formula, and issue K4's target that a q4
// cache takes at most 4.5/16 of f16's bytes per token where the head dim
// is a multiple of 32, plus the page metadata (each block rounded to 16
// bytes).
#include <gtest/gtest.h>

#include "api/handles.h"
#include "ops/kv_cache.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

uint64_t round16(uint64_t x) {
  return (x + 15) / 16 * 16;
}

class KvCacheSizes : public ContextTest {
 protected:
  // One layer's slab (one page) of a cache of this shape, and the bytes of
  // its pool buffers.
  uint64_t slab(vkattn_dtype dt, uint32_t hkv, uint32_t d, uint32_t dv, uint32_t ps,
                uint64_t* pool = nullptr) {
    vkattn_kv_cache_desc desc;
    vkattn_kv_cache_desc_init(&desc);
    desc.num_layers = 2, desc.num_kv_heads = hkv, desc.head_dim = d, desc.head_dim_v = dv;
    desc.page_size = ps, desc.num_pages = 32, desc.dtype = dt;
    vkattn_kv_cache* c = nullptr;
    EXPECT_EQ(vkattn_kv_cache_create(ctx, &desc, &c), VKATTN_SUCCESS) << vkattn_last_error();
    if (!c) return 0;
    const uint64_t s = c->impl->slab_bytes();
    if (pool) {
      *pool = 0;
      for (const auto& b : c->impl->buffers()) *pool += b->size();
    }
    vkattn_kv_cache_destroy(c);
    return s;
  }
};

}  // namespace

TEST_F(KvCacheSizes, Q4TakesFourAndAHalfBitsAnElement) {
  for (uint32_t d : {32u, 64u, 96u, 128u, 256u, 576u}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const uint32_t hkv = 8, ps = 16;
    const uint64_t f16 = slab(VKATTN_F16, hkv, d, d, ps);
    uint64_t pool = 0;
    const uint64_t q4 = slab(VKATTN_Q4, hkv, d, d, ps, &pool);
    // The header's formula: per K (V) block, round16(ps x Hkv x 4 x
    // ceil(d / 8)) + round16(ps x Hkv x 2 x ceil(d / 32)).
    const uint64_t block = round16(uint64_t(ps) * hkv * 4 * ((d + 7) / 8)) +
                           round16(uint64_t(ps) * hkv * 2 * ((d + 31) / 32));
    EXPECT_EQ(q4, 2 * block);
    EXPECT_EQ(f16, 2 * round16(uint64_t(ps) * hkv * d * 2));
    // 4.5 bits against f16's 16, plus at most 16 bytes of rounding a block.
    EXPECT_LE(q4 * 16, f16 * 4.5 + 2 * 16 * 16) << q4 << " vs " << f16;
    EXPECT_GE(q4 * 16, f16 * 4.5);
    // The pool holds 2 layers x 32 pages of slabs (and texel padding).
    EXPECT_GE(pool, 2 * 32 * q4);
    EXPECT_LE(pool, 2 * 32 * q4 + 65536);
  }
  // An odd dim: the rows of codes are whole words, the scales packed.
  EXPECT_EQ(slab(VKATTN_Q4, 3, 37, 70, 5), round16(5 * 3 * 4 * 5) + round16(5 * 3 * 2 * 2) +
                                               round16(5 * 3 * 4 * 9) + round16(5 * 3 * 2 * 3));
}

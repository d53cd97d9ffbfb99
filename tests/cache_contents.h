// What a KV cache holds, as attention reads it: the reference side of the
// tests that run a step over a cache of any dtype (test_cache_dtypes,
// test_variants). White-box: links the library's internals (STATIC tests).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/handles.h"
#include "ops/attention/self_check.h"
#include "reference/dtype_util.h"
#include "vkattn/vkattn.h"

namespace vkattn_test {

// Keys [0, len) of sequence `id` in layer 0 of `cache` (dtype `dtype`, Hkv
// heads of d): f32/f16/bf16 rows read back and decoded, 8-bit and 4-bit
// codes times their scales; appended to *k and *v ([len, Hkv, d] each).
// Call under ASSERT_NO_FATAL_FAILURE.
inline void append_cache_contents(vkattn_kv_cache* cache, vkattn_dtype dtype, int64_t id,
                                  int32_t len, uint32_t Hkv, uint32_t d, std::vector<float>* k,
                                  std::vector<float>* v) {
  std::vector<float> kb(size_t(len) * Hkv * d), vb(kb.size());
  if (dtype == VKATTN_F32 || dtype == VKATTN_F16 || dtype == VKATTN_BF16) {
    std::vector<uint8_t> kr(kb.size() * vkattn_dtype_size(dtype)), vr(kr.size());
    ASSERT_EQ(
        vkattn_kv_cache_read(cache, 0, id, 0, len, kr.data(), kr.size(), vr.data(), vr.size()),
        VKATTN_SUCCESS)
        << vkattn_last_error();
    kb = decode_bytes(dtype, kr), vb = decode_bytes(dtype, vr);
  } else {  // codes and scales
    vkattn::read_dequantized(*cache->impl, id, uint32_t(len), kb.data(), vb.data());
  }
  k->insert(k->end(), kb.begin(), kb.end());
  v->insert(v->end(), vb.begin(), vb.end());
}

}  // namespace vkattn_test

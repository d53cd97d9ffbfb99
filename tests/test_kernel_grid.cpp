// A small kernel grid for the sanitizer builds (label `sanitize`; it runs
// in the default suite too): every entry point that records kernels
// (varlen, padded, step attention, merge, append) over a pairwise sample of
// head dims, dtypes, masks and shapes, checked against src/reference. Small
// sizes and few variants: under ASan/UBSan the point is the host code
// around the kernels, which these paths exercise end to end.
#include <vector>

#include "attention_case.h"
#include "kv_model.h"

using namespace vkattn_test;

class KernelGrid : public ContextTest {};

TEST_F(KernelGrid, VarlenAndPadded) {
  const std::pair<vkattn_dtype, vkattn_dtype> dts[] = {{VKATTN_F32, VKATTN_F32},
                                                       {VKATTN_F32, VKATTN_F16},
                                                       {VKATTN_F16, VKATTN_F16},
                                                       {VKATTN_BF16, VKATTN_BF16}};
  uint32_t seed = 900;
  int i = 0;
  for (int d : {3, 8, 64}) {
    for (int mask : {VKATTN_MASK_NONE, VKATTN_MASK_BOOL, VKATTN_MASK_ADDITIVE}) {
      AttnCase c;
      c.H = 4, c.Hkv = i % 2 ? 1 : 2, c.d = d, c.dv = d == 3 ? 5 : d;
      c.seqs = {{3, 20}, {0, 4}, {7, 0}, {1, 300}, {12, 12}};
      c.causal = i % 2 == 0;
      c.window = i % 3 == 0 ? 6 : -1;
      c.mask_type = mask;
      c.qdt = dts[i % 4].first, c.kdt = dts[i % 4].second;
      c.seed = seed++;
      run_attention_case(ctx, c);
      ++i;
    }
  }
  AttnCase p;
  p.padded = true;
  p.pad_keys = 3;
  p.H = 2, p.Hkv = 1, p.d = 8;
  p.seqs = std::vector<std::pair<int, int>>(3, {5, 17});
  p.softcap = 3.0f;
  p.alibi = true;
  run_attention_case(ctx, p);
}

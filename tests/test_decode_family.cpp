// The `decode` attention family (src/ops/attention/families/decode.cpp)
// forced through VKATTN_ATTN_KERNEL=decode, against src/reference: calls
// whose sequences have at most 8 query tokens each (decodes, speculative
// verification chunks, short tails), over head dims 1..576, GQA groups
// 1..16, every dtype pair, masks, windows, softcap, ALiBi, sinks, padding,
// t > u and empty sequences, and key splits forced through the device's
// compute units (VKATTN_DEVICE_COMPUTE_UNITS) and the minimum split
// length. Every case fills K/V positions no query may see with NaN. The
// kernel log must show that every dispatch ran on decode (no fallback).
// The paged suites run forced onto decode as ctest entries
// (test_step_attention.decode, test_interop.decode; tests/CMakeLists.txt).
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

const std::pair<vkattn_dtype, vkattn_dtype> kDtypePairs[] = {
    {VKATTN_F32, VKATTN_F32}, {VKATTN_F32, VKATTN_F16},  {VKATTN_F32, VKATTN_BF16},
    {VKATTN_F16, VKATTN_F16}, {VKATTN_F16, VKATTN_BF16}, {VKATTN_BF16, VKATTN_BF16},
    {VKATTN_BF16, VKATTN_F16}};

// Decode-shaped batches: a decode over many keys (split), a verification
// chunk of 8 tokens, t > u, an empty query and an empty key range.
const std::vector<std::pair<int, int>> kDecodeSeqs = {{1, 700}, {8, 203}, {5, 3},
                                                      {0, 5},   {2, 0},   {3, 40}};

// Runs `cases` on a context made under VKATTN_ATTN_KERNEL=decode plus
// `vars`, and returns the kernel log; every dispatch must be decode's.
std::string run_on_decode(const ScopedEnv::Vars& vars, const std::vector<AttnCase>& cases) {
  ScopedEnv::Vars all = vars;
  all.push_back({"VKATTN_ATTN_KERNEL", "decode"});
  all.push_back({"VKATTN_LOG", "kernels"});
  ScopedEnv env(all);
  std::string label;
  for (auto [k, v] : vars) label += std::string(k) + "=" + v + " ";
  SCOPED_TRACE(label);
  ForcedContext forced;
  testing::internal::CaptureStderr();
  for (const AttnCase& c : cases) run_attention_case(forced.ctx, c);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("vkattn: attention family=decode "), std::string::npos) << log;
  EXPECT_EQ(log.find("fallback"), std::string::npos) << log;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("vkattn: attention family=", 0) == 0)
      EXPECT_EQ(line.rfind("vkattn: attention family=decode ", 0), 0u) << line;
  return log;
}

AttnCase decode_case(int d, int H, int Hkv, int seed) {
  AttnCase c;
  c.d = d, c.H = H, c.Hkv = Hkv;
  c.seqs = kDecodeSeqs;
  c.causal = true;
  c.seed = static_cast<uint32_t>(seed);
  return c;
}

}  // namespace

class DecodeFamily : public ContextTest {};

// Head dims (odd ones read 4 single elements a unit; multiples of 8 read
// 16-byte texels) and dtype pairs; the rest of the product is
// SlowHeadDimProduct (label slow).
TEST_F(DecodeFamily, HeadDimsAndDtypes) {
  std::vector<AttnCase> cases;
  int n = 0;
  for (int d : {1, 40, 64, 128, 256}) {
    AttnCase c = decode_case(d, 4, 2, 200 + n);
    c.qdt = kDtypePairs[(2 * n + 1) % 7].first, c.kdt = kDtypePairs[(2 * n + 1) % 7].second;
    cases.push_back(c);
    ++n;
  }
  AttnCase c = decode_case(59, 4, 2, 301);
  c.dv = 111;
  cases.push_back(c);
  run_on_decode({}, cases);
}

TEST_F(DecodeFamily, SlowHeadDimProduct) {
  std::vector<AttnCase> cases;
  int n = 0;
  for (int d : {1, 8, 40, 59, 64, 96, 111, 128, 192, 256})
    for (auto [q, kv] : kDtypePairs) {
      AttnCase c = decode_case(d, 4, 2, 400 + n++);
      c.qdt = q, c.kdt = kv;
      cases.push_back(c);
    }
  for (auto [d, dv] : std::vector<std::pair<int, int>>{{64, 40}, {59, 111}, {1, 256}, {256, 1}}) {
    AttnCase c = decode_case(d, 8, 2, 400 + n++);
    c.dv = dv;
    cases.push_back(c);
  }
  run_on_decode({}, cases);
}

// MLA's d 576 / dv 512 over one kv head, d 320 / dv 256, odd 573 / 571.
TEST_F(DecodeFamily, LargeHeadDims) {
  AttnCase c;
  c.H = 8, c.Hkv = 1, c.d = 576, c.dv = 512;
  c.seqs = {{1, 300}, {6, 40}, {0, 3}, {3, 0}, {7, 2}};
  c.causal = true;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  std::vector<AttnCase> cases = {c};
  c.d = 320, c.dv = 256, c.H = 4, c.Hkv = 2, c.qdt = VKATTN_F32, c.kdt = VKATTN_BF16, c.seed = 2;
  c.mask_type = VKATTN_MASK_BOOL;
  cases.push_back(c);
  c.d = 573, c.dv = 571, c.Hkv = 4, c.kdt = VKATTN_F32, c.seed = 3;
  c.mask_type = VKATTN_MASK_NONE, c.causal = false, c.window = 5;
  cases.push_back(c);
  run_on_decode({}, cases);
}

// MLA on a GPU's wide workgroup (families/decode.cpp, widen_for_wide_rows):
// 16 heads over one kv head in one tile, row splits filling the workgroup
// with one key group (no merge), 2 rows a lane; forced here (lavapipe keeps
// its own shape), with shuffle and shared-memory sums, split keys, a
// causal speculative chunk and a NaN-free hidden tail.
TEST_F(DecodeFamily, WideRowsOneKeyGroup) {
  AttnCase c;
  c.H = 16, c.Hkv = 1, c.d = 576, c.dv = 512;
  c.seqs = {{1, 300}, {2, 41}, {0, 3}, {1, 1}};
  c.causal = true;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  AttnCase o = c;
  o.d = 573, o.dv = 509, o.H = 8, o.seqs = {{1, 77}, {3, 20}}, o.kdt = VKATTN_BF16, o.seed = 5;
  o.sinks = true;
  for (const char* sums : {"0", "1"}) {
    ScopedEnv::Vars vars = {{"VKATTN_ATTN_WG", "64"},
                            {"VKATTN_ATTN_ROW_SPLITS", "8"},
                            {"VKATTN_ATTN_ROWS", "16"},
                            {"VKATTN_ATTN_MIN_SPLIT_KEYS", "64"},
                            {"VKATTN_DISABLE_SUBGROUP_OPS", sums}};
    // (The odd dims once: 12 s of lavapipe compile each.)
    if (sums[0] == '0')
      run_on_decode(vars, {c, o});
    else
      run_on_decode(vars, {c});
  }
}

// GQA groups 1, 2, 4, 8 and 16 query heads per kv head (16 x 8 tokens = 128
// rows: several tiles of one group).
TEST_F(DecodeFamily, GqaGroups) {
  std::vector<AttnCase> cases;
  int seed = 10;
  for (auto [H, Hkv] : std::vector<std::pair<int, int>>{{4, 4}, {4, 2}, {8, 2}, {16, 2}, {16, 1}}) {
    AttnCase c = decode_case(64, H, Hkv, seed++);
    c.kdt = VKATTN_F16;
    cases.push_back(c);
  }
  run_on_decode({}, cases);
}

// Masks, windows, softcap, ALiBi, sinks, padding and lse over split keys,
// all at one shape (d 64, 8 / 2 heads, 8 rows per tile) so that the
// pipelines differ only by the transforms compiled in.
TEST_F(DecodeFamily, Transforms) {
  auto base = [](int seed) {
    AttnCase c = decode_case(64, 8, 2, seed);
    c.kdt = VKATTN_F16;
    return c;
  };
  std::vector<AttnCase> cases;
  AttnCase c = base(20);
  c.window = 17, c.sinks = true;
  cases.push_back(c);
  c.causal = false, c.window = 200, c.seed = 21;
  cases.push_back(c);
  c = base(22);
  c.softcap = 0.5f, c.scale = 0.3f, c.alibi = true;
  cases.push_back(c);
  c.softcap = 2.0f, c.window = 30, c.seed = 24;
  cases.push_back(c);
  c = base(25);
  c.sinks = true, c.mask_type = VKATTN_MASK_BOOL;
  cases.push_back(c);
  for (vkattn_dtype mdt : {VKATTN_F32, VKATTN_F16, VKATTN_BF16}) {
    c = base(27 + static_cast<int>(mdt));
    c.mask_type = VKATTN_MASK_ADDITIVE, c.mask_dt = mdt, c.causal = mdt == VKATTN_F16;
    cases.push_back(c);
  }
  for (bool left : {true, false}) {
    c = base(left ? 40 : 41);
    c.padded = true, c.left_pad = left, c.pad_keys = 7, c.seqs = {{4, 300}, {4, 300}, {4, 300}};
    cases.push_back(c);
  }
  c = base(42);
  c.sinks = true;
  c.seqs = {{1, 5000}, {1, 3}, {2, 2100}};
  cases.push_back(c);
  // Chunked local attention (a decode reads only its chunk's keys, split
  // over items) and a two-sided window, also as the dense mask.
  for (bool as_mask : {false, true}) {
    c = base(43 + as_mask);
    c.causal = true, c.chunk = 1000, c.rules_as_mask = as_mask;
    c.seqs = {{1, 5000}, {3, 2100}, {1, 1000}, {2, 1001}};
    cases.push_back(c);
    c = base(45 + as_mask);
    c.causal = false, c.window = 40, c.window_right = 3, c.rules_as_mask = as_mask;
    c.seqs = {{4, 300}, {1, 7}, {8, 8}};
    cases.push_back(c);
  }
  run_on_decode({}, cases);
}

// Hidden rows and NaN keys: every row of a bool mask hidden somewhere, and
// more than 65535 loop iterations' worth of keys in one call.
// Speculative trees of up to 8 nodes (issue T) on decode, split or not,
// against the reference and as the equivalent bool mask.
TEST_F(DecodeFamily, SpeculativeTrees) {
  std::vector<AttnCase> cases;
  for (bool as_mask : {false, true}) {
    AttnCase c = decode_case(64, 8, 2, 230 + as_mask);
    c.seqs = {{1, 700}, {8, 203}, {5, 3}, {0, 5}, {2, 0}, {8, 8}, {3, 40}};
    c.trees = {true, true, false, false, false, true, true};
    c.tree_as_mask = as_mask;
    cases.push_back(c);
  }
  run_on_decode({}, cases);
  run_on_decode({{"VKATTN_DEVICE_COMPUTE_UNITS", "64"}, {"VKATTN_ATTN_MIN_SPLIT_KEYS", "16"}},
                cases);
}

// Top-k lists on decode (issue T), split over the lanes and over
// workgroups, with GQA groups of 1 and 8.
TEST_F(DecodeFamily, TopKLists) {
  std::vector<AttnCase> cases;
  for (int form : {0, 1, 2}) {
    AttnCase c = decode_case(64, form == 1 ? 8 : 16, form == 1 ? 8 : 2, 240 + form);
    c.seqs = {{1, 700}, {8, 203}, {5, 3}, {0, 5}, {2, 0}, {3, 40}};
    c.topk = 48, c.topk_per_head = form == 1, c.topk_as_mask = form == 2;
    cases.push_back(c);
  }
  // Lists longer than one item's compacted slots (lavapipe's loop cap
  // bounds an item to a few hundred): several items a row, merged.
  AttnCase longer = decode_case(64, 8, 2, 243);
  longer.seqs = {{1, 1500}, {2, 900}};
  longer.topk = 1200;
  cases.push_back(longer);
  run_on_decode({}, cases);
  run_on_decode({{"VKATTN_DEVICE_COMPUTE_UNITS", "64"}, {"VKATTN_ATTN_MIN_SPLIT_KEYS", "16"}},
                cases);
  // A GPU-sized workgroup: the compaction's scan over 64 lanes' runs.
  run_on_decode({{"VKATTN_ATTN_WG", "64"}}, cases);
}

TEST_F(DecodeFamily, HiddenRowsAndLongKeys) {
  AttnCase c = decode_case(64, 4, 2, 50);
  c.mask_type = VKATTN_MASK_BOOL;
  AttnCase l;
  l.H = 8, l.Hkv = 2, l.d = 128, l.kdt = VKATTN_F16, l.causal = true, l.seed = 51;
  l.seqs = {{3, 100000}, {1, 70001}};
  run_on_decode({}, {c, l});
}

// Key splits from the device's compute units (2 workgroups per unit over
// the whole call) and the minimum split length: 1 item per tile, 2, an odd
// count and more than 64 (a combine tree), each checked by the kernel
// log's items= and against the reference.
TEST_F(DecodeFamily, SplitCounts) {
  AttnCase c;
  c.H = 4, c.Hkv = 1, c.d = 64, c.kdt = VKATTN_F16, c.causal = true;
  struct Want {
    const char* cu;
    const char* min_keys;
    int keys;
    int items;
  };
  // One tile (1 sequence x 1 kv head): splits = min(2 x units, keys /
  // minimum), keys cut evenly.
  for (const Want& w : {Want{"1", "128", 300, 2}, Want{"4", "16", 112, 7},
                        Want{"50", "8", 1000, 100}, Want{"1", "4096", 300, 1}}) {
    c.seqs = {{1, w.keys}};
    c.seed = static_cast<uint32_t>(w.items);
    const std::string log = run_on_decode(
        {{"VKATTN_DEVICE_COMPUTE_UNITS", w.cu}, {"VKATTN_ATTN_MIN_SPLIT_KEYS", w.min_keys}}, {c});
    EXPECT_EQ(kernel_log_items(log), std::vector<uint64_t>{uint64_t(w.items)}) << w.cu << " units\n"
                                                                               << log;
    // kv_reads: the splits cover the keys once, however many there are.
    EXPECT_EQ(kernel_log_field(log, "kv_reads"), std::vector<uint64_t>{uint64_t(w.keys)}) << log;
  }
  // Two kv heads of two decodes: every (key, kv head) row once, for the
  // four query heads each serves.
  AttnCase g;
  g.H = 8, g.Hkv = 2, g.d = 64, g.kdt = VKATTN_F16, g.seed = 7;
  g.seqs = {{1, 300}, {1, 120}};
  const std::string log = run_on_decode({}, {g});
  EXPECT_EQ(kernel_log_field(log, "kv_reads"), std::vector<uint64_t>{2 * (300 + 120)}) << log;
}

// The workgroup shapes any device may be given: shared-memory sums, one
// key per key group, key groups merging in shared memory (several per
// workgroup), few lanes per key (rows read in several units per lane),
// one row per tile (a GQA group over several tiles). Each runs a d 40 case
// (a window and a bool mask, f16); the shared-memory and one-lane shapes
// also odd dims with an additive mask, ALiBi and softcap over bf16, and
// the wide workgroup a d 128 case with sinks.
TEST_F(DecodeFamily, ForcedShapes) {
  struct Variant {
    ScopedEnv::Vars vars;
    bool odd, wide;
  };
  const std::vector<Variant> variants = {
      {{{"VKATTN_DISABLE_SUBGROUP_OPS", "1"}}, true, false},
      // A tile of one key needs one key group: a workgroup of one key row's
      // lanes (the default workgroup has 16 groups on NVIDIA, H200 run).
      {{{"VKATTN_ATTN_WG", "8"},
        {"VKATTN_ATTN_LANES_PER_ROW", "8"},
        {"VKATTN_ATTN_TILE_KEYS", "1"}},
       false,
       false},
      {{{"VKATTN_ATTN_WG", "32"}, {"VKATTN_ATTN_TILE_KEYS", "8"}}, false, true},
      // A forced workgroup narrower than the lanes a key row would take
      // (d 128: 16 lanes on a 32-lane GPU, 8 here): the row takes fewer
      // lanes. It was refused ("ROW_SPLITS=1 must divide ... 0 key rows")
      // on the H200, where the table sends test_attention's decode cases
      // under VKATTN_ATTN_WG=4 to this family.
      {{{"VKATTN_ATTN_WG", "4"}}, true, true},
      {{{"VKATTN_ATTN_WG", "64"},
        {"VKATTN_ATTN_LANES_PER_ROW", "2"},
        {"VKATTN_DISABLE_SUBGROUP_OPS", "1"},
        {"VKATTN_ATTN_TILE_KEYS", "64"}},
       false,
       false},
      {{{"VKATTN_ATTN_LANES_PER_ROW", "1"}, {"VKATTN_ATTN_ROWS", "1"}}, true, false},
      // Row splits (the GPU rows' default): 2 and 4 lane sets a key group,
      // each holding its share of the tile's rows; shuffle and
      // shared-memory sums.
      {{{"VKATTN_ATTN_WG", "32"}, {"VKATTN_ATTN_ROW_SPLITS", "2"}, {"VKATTN_ATTN_ROWS", "4"}},
       true,
       true},
      {{{"VKATTN_ATTN_WG", "32"},
        {"VKATTN_ATTN_LANES_PER_ROW", "4"},
        {"VKATTN_ATTN_ROW_SPLITS", "4"},
        {"VKATTN_ATTN_ROWS", "8"},
        {"VKATTN_DISABLE_SUBGROUP_OPS", "1"}},
       true,
       false},
  };
  int seed = 60;
  for (const Variant& v : variants) {
    AttnCase c = decode_case(40, 8, 2, seed++);
    c.qdt = VKATTN_F16, c.kdt = VKATTN_F16, c.window = 60, c.mask_type = VKATTN_MASK_BOOL;
    std::vector<AttnCase> cases = {c};
    if (v.odd) {
      AttnCase o = decode_case(59, 4, 1, seed++);
      o.dv = 23, o.kdt = VKATTN_BF16, o.alibi = true, o.softcap = 20.0f;
      o.mask_type = VKATTN_MASK_ADDITIVE;
      cases.push_back(o);
    }
    if (v.wide) {
      AttnCase w = decode_case(128, 8, 2, seed++);
      w.qdt = VKATTN_BF16, w.kdt = VKATTN_F16, w.sinks = true;
      cases.push_back(w);
    }
    run_on_decode(v.vars, cases);
  }
}

// The full product of the forced shapes (label slow): workgroups 8..32,
// lanes per key 1..8, keys per tile, rows per tile, shuffles or shared
// memory, over the d 40 and odd-dim cases.
TEST_F(DecodeFamily, SlowForcedShapeProduct) {
  int seed = 900;
  for (const char* wg : {"8", "16", "32"})
    for (const char* lpk : {"1", "2", "8"})
      for (const char* keys : {"1", "2", "4"})  // per key group
        for (const char* rows : {"1", "4"})
          for (const char* smem : {"0", "1"}) {
            const uint32_t groups = uint32_t(std::stoul(wg)) / uint32_t(std::stoul(lpk));
            const std::string tile = std::to_string(groups * uint32_t(std::stoul(keys)));
            ScopedEnv::Vars vars = {{"VKATTN_ATTN_WG", wg},
                                    {"VKATTN_ATTN_LANES_PER_ROW", lpk},
                                    {"VKATTN_ATTN_TILE_KEYS", tile.c_str()},
                                    {"VKATTN_ATTN_ROWS", rows},
                                    {"VKATTN_DISABLE_SUBGROUP_OPS", smem}};
            AttnCase c = decode_case(40, 8, 2, seed++);
            c.qdt = VKATTN_F16, c.kdt = VKATTN_F16, c.window = 60;
            c.mask_type = VKATTN_MASK_BOOL;
            AttnCase o = decode_case(59, 4, 1, seed++);
            o.dv = 23, o.kdt = VKATTN_BF16, o.alibi = true, o.softcap = 20.0f;
            run_on_decode(vars, {c, o});
          }
}

// A call's sequences of more than 8 query tokens are declined with a
// logged reason and run on the table's other family; the call's
// decode-shaped sequences stay on decode.
TEST_F(DecodeFamily, PrefillIsDeclined) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_KERNEL", "decode"}, {"VKATTN_LOG", "kernels"}});
  ForcedContext forced;
  AttnCase c = decode_case(64, 4, 2, 70);
  c.seqs.push_back({9, 30});
  testing::internal::CaptureStderr();
  run_attention_case(forced.ctx, c);
  std::string log = testing::internal::GetCapturedStderr();
  const std::string fallback = "vkattn: attention fallback from decode to ";
  const size_t at = log.find(fallback);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find("9 query tokens, more than the 8 of a decode tile"), std::string::npos) << log;
  // The call's decode-shaped sequences still ran on decode (each class on
  // its own family); the declined part, the 9-token sequence's 18 rows,
  // ran on the device table's family (lanes on lavapipe, tiled on GPUs:
  // the H200 ran it there, 2026-11-28).
  const size_t to = at + fallback.size();
  const std::string family = log.substr(to, log.find(':', to) - to);
  EXPECT_NE(family, "decode") << log;
  EXPECT_NE(log.find("family=decode"), std::string::npos) << log;
  EXPECT_NE(log.find("family=" + family + " rows=18 "), std::string::npos) << log;
  // A call of prefill sequences only: nothing on decode.
  c.seqs = {{9, 30}, {20, 20}};
  testing::internal::CaptureStderr();
  run_attention_case(forced.ctx, c);
  log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("vkattn: attention fallback from decode to "), std::string::npos) << log;
  EXPECT_EQ(log.find("family=decode"), std::string::npos) << log;
}

// A forced workgroup and lanes per key row that do not fit together are
// refused naming both; a forced workgroup alone gives the row fewer lanes
// (ForcedShapes).
TEST(DecodeFamilyOptions, WorkgroupNotAMultipleOfForcedLanesIsRefused) {
  ScopedEnv env({{"VKATTN_ATTN_KERNEL", "decode"},
                 {"VKATTN_ATTN_WG", "12"},
                 {"VKATTN_ATTN_LANES_PER_ROW", "8"}});
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  vkattn_tensor *q = nullptr, *kv = nullptr, *out = nullptr;
  const int64_t qs[3] = {1, 4, 64}, ks[3] = {40, 2, 64};
  ASSERT_EQ(vkattn_tensor_create(fc.ctx, VKATTN_F32, 3, qs, &q), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_create(fc.ctx, VKATTN_F32, 3, ks, &kv), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_create(fc.ctx, VKATTN_F32, 3, qs, &out), VKATTN_SUCCESS);
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.num_heads = 4, d.num_kv_heads = 2, d.head_dim = 64;
  const int32_t cu_q[2] = {0, 1}, cu_k[2] = {0, 40};
  EXPECT_INVALID(vkattn_attention_varlen(fc.ctx, &d, 1, cu_q, cu_k, q, kv, kv, out),
                 "VKATTN_ATTN_LANES_PER_ROW=8");
  for (vkattn_tensor* t : {q, kv, out}) vkattn_tensor_destroy(t);
}

// E4 defect 1: a forced option reaches no arithmetic before its range
// check. VKATTN_ATTN_LANES_PER_ROW=0 on the decode family took a modulo by
// it (SIGFPE: the process died); a 0 lanes per row gave tiled's tile_rows
// a division by zero. Since E6 every value outside a knob's range is
// refused when the context is created (INVALID_ARGUMENT naming the
// variable and the value), whatever family is forced: no context, so no
// call, reaches the arithmetic. (tests/test_env.cpp walks every variable.)
TEST(DecodeFamilyOptions, OutOfRangeOptionsAreRefusedBeforeUse) {
  struct Bad {
    const char* var;
    const char* value;
  };
  const Bad bad[] = {{"VKATTN_ATTN_LANES_PER_ROW", "0"},
                     {"VKATTN_ATTN_LANES_PER_ROW", "128"},
                     {"VKATTN_ATTN_WG", "0"},
                     {"VKATTN_ATTN_WG", "4294967296"},
                     {"VKATTN_ATTN_TILE_KEYS", "0"},
                     {"VKATTN_ATTN_ROWS", "0"},
                     {"VKATTN_ATTN_ROWS", "100000"},
                     {"VKATTN_ATTN_BLOCK_KEYS", "0"},
                     {"VKATTN_ATTN_SUBGROUPS", "0"},
                     {"VKATTN_ATTN_TARGET_ITEMS", "0"},
                     {"VKATTN_ATTN_SPLIT_KEYS", "0"},
                     {"VKATTN_ATTN_HEAD_CHUNK", "0"},
                     {"VKATTN_ATTN_DECODE_MERGE", "7"},
                     {"VKATTN_ATTN_UNROLL_D", "2"},
                     {"VKATTN_ATTN_STATIC_CHUNKS", "99999999"}};
  for (const char* family : {"decode", "tiled", "lanes", "coopmat", ""}) {
    for (const Bad& b : bad) {
      SCOPED_TRACE(std::string(family) + " " + b.var + "=" + b.value);
      ScopedEnv env({{"VKATTN_ATTN_KERNEL", family}, {b.var, b.value}});
      vkattn_context* ctx = nullptr;
      EXPECT_INVALID(vkattn_context_create(nullptr, &ctx),
                     (std::string(b.var) + "=\"" + b.value + "\"").c_str());
      EXPECT_EQ(ctx, nullptr);
    }
  }
}

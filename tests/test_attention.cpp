// vkattn_attention_varlen / _padded against src/reference (label kernels;
// the full product is the Slow* suite, label slow). Every case fills the
// K/V positions no query may see with NaN and out/lse with NaN first.
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

// The seven (q, k/v) dtype pairs the API allows.
const std::pair<vkattn_dtype, vkattn_dtype> kDtypePairs[] = {
    {VKATTN_F32, VKATTN_F32}, {VKATTN_F32, VKATTN_F16},  {VKATTN_F32, VKATTN_BF16},
    {VKATTN_F16, VKATTN_F16}, {VKATTN_F16, VKATTN_BF16}, {VKATTN_BF16, VKATTN_BF16},
    {VKATTN_BF16, VKATTN_F16}};

const std::vector<std::pair<int, int>> kMixedSeqs = {{1, 147}, {113, 203}, {0, 5}, {7, 0}, {9, 4}};

}  // namespace

class Attention : public ContextTest {};

TEST_F(Attention, HeadDims) {
  const int dims[] = {1, 8, 40, 59, 64, 80, 96, 111, 128, 192, 256};
  int n = 0;
  for (int d : dims) {
    AttnCase c;
    c.d = d;
    c.seqs = kMixedSeqs;
    c.causal = true;
    c.qdt = kDtypePairs[n % 7].first;
    c.kdt = kDtypePairs[n % 7].second;
    c.seed = 100 + n++;
    run_attention_case(ctx, c);
  }
}

// Head dims past 256: DeepSeek MLA (d 576, dv 512, one kv head shared by
// every query head) and d 320 / dv 256; odd ones, t > u and hidden rows.
TEST_F(Attention, LargeHeadDims) {
  AttnCase c;
  c.H = 4, c.Hkv = 1, c.d = 576, c.dv = 512;
  c.seqs = {{1, 300}, {6, 40}, {0, 3}, {3, 0}, {7, 2}};
  c.causal = true;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  run_attention_case(ctx, c);
  c.d = 320, c.dv = 256, c.Hkv = 2, c.qdt = VKATTN_F32, c.kdt = VKATTN_BF16, c.seed = 2;
  c.mask_type = VKATTN_MASK_BOOL;
  run_attention_case(ctx, c);
  c.d = 573, c.dv = 571, c.Hkv = 4, c.kdt = VKATTN_F32, c.seed = 3;
  c.mask_type = VKATTN_MASK_NONE, c.causal = false, c.window = 5;
  run_attention_case(ctx, c);
}

TEST_F(Attention, ValueDimDiffers) {
  for (auto [d, dv] : std::vector<std::pair<int, int>>{{64, 40}, {59, 111}, {1, 256}, {256, 1}}) {
    AttnCase c;
    c.d = d, c.dv = dv;
    c.seqs = {{5, 33}, {17, 17}};
    c.causal = true;
    run_attention_case(ctx, c);
  }
}

TEST_F(Attention, GqaAndMqa) {
  for (auto [H, Hkv] :
       std::vector<std::pair<int, int>>{{4, 4}, {8, 4}, {8, 2}, {16, 2}, {8, 1}, {32, 1}}) {
    AttnCase c;
    c.H = H, c.Hkv = Hkv, c.d = 64;
    c.seqs = {{1, 300}, {19, 40}, {3, 3}};
    c.causal = true;
    c.kdt = VKATTN_F16;
    run_attention_case(ctx, c);
  }
}

TEST_F(Attention, QueryKeyLengths) {
  const std::vector<std::vector<std::pair<int, int>>> batches = {
      {{1023, 1024}}, {{1024, 1023}}, {{50, 20}, {20, 50}}, {{0, 0}}, {{3, 0}, {0, 9}, {1, 1}}};
  for (bool causal : {true, false})
    for (const auto& seqs : batches) {
      AttnCase c;
      c.seqs = seqs;
      c.causal = causal;
      c.H = 2, c.Hkv = 1;
      run_attention_case(ctx, c);
    }
}

TEST_F(Attention, EmptyBatchRecordsNothing) {
  AttnCase c;
  c.seqs = {};
  run_attention_case(ctx, c);
  c.seqs = {{0, 0}, {0, 3}};
  run_attention_case(ctx, c);
}

TEST_F(Attention, SlidingWindow) {
  int seed = 7;
  for (int w : {0, 1, 17, 200})
    for (bool causal : {true, false}) {
      AttnCase c;
      c.seqs = kMixedSeqs;
      c.window = w;
      c.causal = causal;
      c.seed = seed++;
      run_attention_case(ctx, c);
    }
}

// Two-sided windows and chunked local attention (issue X), each against
// the reference and as the equivalent dense bool mask: t > u (negative
// positions lie in negative chunks), chunks that cut tiles, a chunk of one
// position, windows with and without causal, GQA, f16, lse.
TEST_F(Attention, WindowRightAndChunks) {
  struct Rule {
    bool causal;
    int left, right, chunk;
  };
  const Rule rules[] = {{false, 3, 5, 0},   {false, -1, 0, 0}, {false, 40, 17, 0},
                        {true, -1, -1, 16}, {true, 20, -1, 7}, {false, -1, -1, 33},
                        {false, 5, 2, 12},  {true, -1, -1, 1}, {false, -1, 9, 64}};
  const std::vector<std::pair<int, int>> seqs = {{1, 147}, {113, 203}, {0, 5},  {7, 0},
                                                 {9, 4},   {30, 30},   {40, 17}};
  int seed = 40;
  for (const Rule& r : rules)
    for (bool as_mask : {false, true}) {
      AttnCase c;
      c.seqs = seqs;
      c.causal = r.causal, c.window = r.left, c.window_right = r.right, c.chunk = r.chunk;
      c.rules_as_mask = as_mask;
      c.H = 8, c.Hkv = 2, c.d = 40;
      c.qdt = c.kdt = (seed / 2 % 2) ? VKATTN_F16 : VKATTN_F32;
      c.seed = seed++;
      const CaseStats st = run_attention_case(ctx, c);
      EXPECT_GT(st.checked, 0);
    }
  // With sinks and ALiBi on top (a chunked row with no visible key gives
  // the sink's lse), and padded batches.
  AttnCase c;
  c.seqs = {{64, 64}, {64, 64}};
  c.causal = true, c.chunk = 24, c.sinks = true, c.alibi = true, c.seed = 77;
  run_attention_case(ctx, c);
  c.padded = true, c.pad_keys = 5, c.chunk = 0, c.window = 6, c.window_right = 3, c.causal = false;
  run_attention_case(ctx, c);
}

// Bidirectional spans (issue X): each against the reference and as the
// equivalent dense bool mask (the whole rule in the mask). Spans that cut
// tiles, hold a sequence's last rows, start before its queries (t < u),
// lie wholly before them, cover negative positions' neighbours (t > u),
// sit in a sequence with no queries; over causal, windows on both sides
// and chunks (a span widens them all), GQA, f16, sinks, ALiBi, padded.
TEST_F(Attention, BidirectionalSpans) {
  struct Rule {
    bool causal;
    int left, right, chunk;
  };
  const Rule rules[] = {{true, -1, -1, 0}, {true, 9, -1, 0}, {false, 4, 2, 0}, {true, -1, -1, 32}};
  const std::vector<std::pair<int, int>> seqs = {{200, 200}, {50, 300}, {40, 17}, {0, 5},
                                                 {7, 0},     {1, 90},   {33, 33}};
  const std::vector<std::vector<std::pair<int, int>>> spans = {{{20, 60}, {100, 164}, {180, 200}},
                                                               {{10, 30}, {240, 270}},
                                                               {{0, 17}},
                                                               {{1, 3}},
                                                               {},
                                                               {{80, 90}},
                                                               {{0, 1}, {1, 2}, {5, 33}}};
  int seed = 90;
  for (const Rule& r : rules)
    for (bool as_mask : {false, true}) {
      AttnCase c;
      c.seqs = seqs;
      c.spans = spans;
      c.causal = r.causal, c.window = r.left, c.window_right = r.right, c.chunk = r.chunk;
      c.rules_as_mask = as_mask;
      c.H = 8, c.Hkv = 2, c.d = 40;
      c.qdt = c.kdt = (seed / 2 % 2) ? VKATTN_F16 : VKATTN_F32;
      c.seed = seed++;
      const CaseStats st = run_attention_case(ctx, c);
      EXPECT_GT(st.checked, 0);
    }
  // Sinks, ALiBi and a bool mask on top; padded batches with a span per row.
  AttnCase c;
  c.seqs = {{64, 64}, {64, 64}};
  c.spans = {{{8, 40}}, {{0, 64}}};
  c.causal = true, c.sinks = true, c.alibi = true, c.seed = 98;
  run_attention_case(ctx, c);
  c.alibi = c.sinks = false, c.mask_type = VKATTN_MASK_BOOL, c.seed = 99;
  run_attention_case(ctx, c);
  c.mask_type = VKATTN_MASK_NONE, c.padded = true, c.pad_keys = 5,
  c.spans = {{{3, 50}}, {{60, 64}}};
  run_attention_case(ctx, c);
}

// Speculative-decoding trees (issue T): each against the reference (which
// takes the tree's bits) and as the equivalent dense bool mask. Trees of
// 1, 8, 9, 32, 33 and 64 nodes over cached prefixes (64 and 33: rows of
// two words, bits past t set and ignored), a tree as long as its keys
// (no prefix), a sequence without one beside them, t > u and empty
// sequences untreed; under causal, windows, chunks and spans; GQA, f16.
TEST_F(Attention, SpeculativeTrees) {
  struct Rule {
    bool causal;
    int left, right, chunk;
  };
  const Rule rules[] = {
      {true, -1, -1, 0}, {false, -1, -1, 0}, {true, 40, -1, 0}, {true, -1, -1, 48}};
  const std::vector<std::pair<int, int>> seqs = {{1, 50},  {8, 203},  {9, 9}, {32, 140}, {40, 17},
                                                 {33, 96}, {64, 300}, {0, 5}, {7, 0},    {5, 77}};
  const std::vector<bool> trees = {true, true, true, true, false, true, true, false, false, false};
  int seed = 300;
  for (const Rule& r : rules)
    for (bool as_mask : {false, true}) {
      AttnCase c;
      c.seqs = seqs;
      c.trees = trees;
      c.tree_as_mask = as_mask;
      c.causal = r.causal, c.window = r.left, c.window_right = r.right, c.chunk = r.chunk;
      c.H = 8, c.Hkv = 2, c.d = 40;
      c.qdt = c.kdt = (seed / 2 % 2) ? VKATTN_F16 : VKATTN_F32;
      c.seed = seed++;
      const CaseStats st = run_attention_case(ctx, c);
      EXPECT_GT(st.checked, 0);
      EXPECT_GT(st.nan_keys, 0);  // keys only hidden tree branches hold: NaN, never read
    }
  // Spans (a span never re-opens a key the tree hides), sinks and ALiBi,
  // a bool mask on top, and padded batches with a tree per row.
  AttnCase c;
  c.seqs = {{64, 64}, {16, 90}};
  c.trees = {true, true};
  c.spans = {{{8, 40}}, {{70, 90}}};
  c.causal = true, c.sinks = true, c.alibi = true, c.seed = 320;
  run_attention_case(ctx, c);
  c.spans.clear(), c.alibi = c.sinks = false, c.mask_type = VKATTN_MASK_BOOL, c.seed = 321;
  run_attention_case(ctx, c);
  c.mask_type = VKATTN_MASK_NONE, c.padded = true, c.pad_keys = 5;
  c.seqs = {{24, 70}, {24, 70}}, c.seed = 322;
  run_attention_case(ctx, c);
}

// Top-k lists (issue T): against the reference (which reads the lists)
// and as the equivalent bool mask (lists without repeats or stray
// entries). K of 0, 1, 7, 16 and 64 (past some sequences' u), short lists
// padded with -1, entries past u and below -1, repeats (counted twice),
// a list per row or per kv head under GQA, t > u and empty sequences;
// causal, windows, sinks, ALiBi, softcap and padded batches on top.
TEST_F(Attention, TopKLists) {
  const std::vector<std::pair<int, int>> seqs = {{1, 147}, {8, 203}, {5, 3}, {0, 5},
                                                 {3, 0},   {33, 90}, {1, 64}};
  int seed = 400;
  for (int K : {0, 1, 7, 16, 64})
    for (int form : {0, 1, 2}) {  // lists a row, a list per kv head, the bool mask
      AttnCase c;
      c.seqs = seqs;
      c.topk = K, c.topk_per_head = form == 1, c.topk_as_mask = form == 2;
      c.causal = K % 2 == 1;
      c.H = 8, c.Hkv = 2, c.d = 40;
      c.qdt = c.kdt = (seed / 2 % 2) ? VKATTN_F16 : VKATTN_F32;
      c.seed = seed++;
      const CaseStats st = run_attention_case(ctx, c);
      EXPECT_GT(st.checked, 0);
      if (K < 64) EXPECT_GT(st.nan_keys, 0);  // unlisted keys: NaN, never read
    }
  AttnCase c;
  c.seqs = {{4, 300}, {2, 90}};
  c.topk = 32, c.topk_per_head = true, c.window = 100, c.sinks = true, c.alibi = true;
  c.softcap = 20.0f, c.seed = 420;
  run_attention_case(ctx, c);
  c.padded = true, c.pad_keys = 7, c.seqs = {{3, 80}, {3, 80}}, c.sinks = c.alibi = false;
  c.softcap = 0.0f, c.topk_per_head = false, c.seed = 421;
  run_attention_case(ctx, c);
}

TEST_F(Attention, SoftcapAndAlibi) {
  AttnCase c;
  c.seqs = kMixedSeqs;
  c.causal = true;
  c.softcap = 0.5f;
  c.scale = 0.3f;
  run_attention_case(ctx, c);
  c.softcap = 0.0f;
  c.alibi = true;
  run_attention_case(ctx, c);
  c.softcap = 2.0f;
  c.window = 30;
  run_attention_case(ctx, c);
  // A cap far above the logits leaves them as they are: s / softcap is
  // tiny, where tanh(y) = (e^2y - 1) / (e^2y + 1) in f32 loses every digit
  // (found by the fuzzer's self-check op at softcap 6.5e35), and near
  // FLT_MAX it is denormal (flushed on some devices). A denormal cap
  // flattens every logit to about 0.
  c.alibi = false, c.window = -1;
  for (float cap : {1e4f, 1e6f, 1e30f, 3e38f, 1e-39f}) {
    c.softcap = cap;
    run_attention_case(ctx, c);
  }
}

// Attention sinks (desc->sinks, API.md "Models"): per head -inf (none), a
// dominant +6 and mixed values; rows with no visible key give out 0 and
// lse = sink; long keys split inside vkattn join the sink once (combine).
TEST_F(Attention, Sinks) {
  AttnCase c;
  c.H = 8, c.Hkv = 2, c.d = 40;
  c.seqs = kMixedSeqs;
  c.sinks = true;
  c.mask_type = VKATTN_MASK_BOOL;
  auto st = run_attention_case(ctx, c);
  EXPECT_GT(st.sink_only_rows, 0) << "the case must include hidden rows with a finite sink";
  EXPECT_GT(st.hidden_rows, 0) << "and hidden rows of the head without a sink";
  c.mask_type = VKATTN_MASK_NONE, c.causal = true, c.softcap = 4.0f, c.alibi = true;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16, c.seed = 2;
  run_attention_case(ctx, c);
  // Decode rows over many keys: split-KV with a combine pass.
  c = AttnCase{};
  c.H = 8, c.Hkv = 1, c.d = 64, c.sinks = true;
  c.seqs = {{1, 5000}, {1, 3}, {2, 2100}};
  c.seed = 3;
  run_attention_case(ctx, c);
  c.padded = true, c.pad_keys = 5, c.seqs = {{4, 40}, {4, 40}}, c.seed = 4;
  run_attention_case(ctx, c);
}

TEST_F(Attention, BoolMaskWithHiddenRows) {
  AttnCase c;
  c.seqs = kMixedSeqs;
  c.mask_type = VKATTN_MASK_BOOL;
  auto st = run_attention_case(ctx, c);
  EXPECT_GT(st.hidden_rows, 0) << "the case must include fully hidden rows";
  EXPECT_GT(st.nan_keys, 0) << "the case must include NaN keys";
  c.causal = true;
  run_attention_case(ctx, c);
}

TEST_F(Attention, AdditiveMasks) {
  for (vkattn_dtype mdt : {VKATTN_F32, VKATTN_F16, VKATTN_BF16}) {
    AttnCase c;
    c.seqs = kMixedSeqs;
    c.mask_type = VKATTN_MASK_ADDITIVE;
    c.mask_dt = mdt;
    c.causal = mdt == VKATTN_F16;
    auto st = run_attention_case(ctx, c);
    EXPECT_GT(st.hidden_rows, 0);
  }
}

TEST_F(Attention, EveryDtypePair) {
  for (auto [q, kv] : kDtypePairs) {
    AttnCase c;
    c.seqs = kMixedSeqs;
    c.causal = true;
    c.qdt = q, c.kdt = kv;
    c.d = 64;
    run_attention_case(ctx, c);
  }
}

TEST_F(Attention, PaddedLeftAndRight) {
  for (bool left : {true, false}) {
    AttnCase c;
    c.padded = true;
    c.left_pad = left;
    c.pad_keys = 7;
    c.seqs = {{12, 30}, {12, 30}, {12, 30}};
    c.causal = true;
    auto st = run_attention_case(ctx, c);
    EXPECT_GT(st.nan_keys, 0);
    c.causal = false;
    c.mask_type = VKATTN_MASK_BOOL;
    run_attention_case(ctx, c);
  }
}

// More than 65535 loop iterations' worth of keys: lavapipe's loop cap.
TEST_F(Attention, HundredThousandKeys) {
  AttnCase c;
  c.H = 8, c.Hkv = 2;
  c.seqs = {{3, 100000}, {1, 70001}};
  c.causal = true;
  c.kdt = VKATTN_F16;
  run_attention_case(ctx, c);
}

// The first case of every forced-variant grid: d 40 over the mixed
// sequences, causal with a 60-key window and a bool mask, f16.
AttnCase windowed_mask_case(int seed) {
  AttnCase c;
  c.d = 40;
  c.seqs = kMixedSeqs;
  c.causal = true;
  c.window = 60;
  c.mask_type = VKATTN_MASK_BOOL;
  c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
  c.seed = seed;
  return c;
}

// Every variant any device may be given, forced through the environment.
TEST_F(Attention, ForcedVariants) {
  const std::vector<std::vector<std::pair<const char*, const char*>>> variants = {
      {{"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_UNROLL_D", "1"}, {"VKATTN_ATTN_ROWS", "2"}},
      {{"VKATTN_ATTN_WG", "16"}, {"VKATTN_ATTN_ROWS", "1"}},
      {{"VKATTN_ATTN_WG", "32"}, {"VKATTN_ATTN_ROWS", "2"}, {"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_ROWS", "16"}, {"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_BLOCK_KEYS", "1"}},
      {{"VKATTN_ATTN_BLOCK_KEYS", "4"}, {"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_BLOCK_KEYS", "16"}, {"VKATTN_ATTN_ROWS", "2"}},
      {{"VKATTN_ATTN_SCALAR_FETCH", "1"}},
      {{"VKATTN_ATTN_SPLIT_KEYS", "40"}},
      {{"VKATTN_ATTN_TARGET_ITEMS", "500"}, {"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_DECODE_MIN_KEYS", "0"}},
      {{"VKATTN_ATTN_DECODE_MIN_KEYS", "1"}, {"VKATTN_ATTN_SPLIT_KEYS", "24"}},
      // One pipeline with every optional transform compiled in, switched by
      // the call's flags (by default each set of transforms gets its own).
      {{"VKATTN_ATTN_ALL_FEATURES", "1"}},
      {{"VKATTN_ATTN_ALL_FEATURES", "1"}, {"VKATTN_ATTN_BLOCK_KEYS", "8"}},
      // Item order within a dispatch: heaviest first (GPUs) and balanced
      // over 3 contiguous chunks (a 3-thread lavapipe).
      {{"VKATTN_ATTN_STATIC_CHUNKS", "0"}},
      {{"VKATTN_ATTN_STATIC_CHUNKS", "3"}, {"VKATTN_ATTN_TARGET_ITEMS", "64"}},
  };
  int seed = 50;
  for (const auto& vars : variants) {
    ScopedEnv env(vars);
    std::string label;
    for (auto [k, v] : vars) label += std::string(k) + "=" + v + " ";
    SCOPED_TRACE(label);
    ForcedContext forced;  // a context reads the options once, when created
    vkattn_context* ctx = forced.ctx;
    AttnCase c = windowed_mask_case(seed++);
    run_attention_case(ctx, c);
    c.d = 59, c.dv = 23, c.mask_type = VKATTN_MASK_NONE, c.qdt = VKATTN_F32;
    c.kdt = VKATTN_BF16, c.window = -1, c.alibi = true;
    run_attention_case(ctx, c);
  }
}

// Kernel options are read once, when a context is created: an
// out-of-range override fails the creation (since E6; before, the context
// refused its attention calls), and a context made before it never sees it.
TEST_F(Attention, OptionsAreReadAtContextCreation) {
  AttnCase c;
  c.seqs = {{3, 20}};
  {
    ScopedEnv env(ScopedEnv::Vars{{"VKATTN_ATTN_ROWS", "99"}});  // above the 64 allowed
    vkattn_context* forced = nullptr;
    EXPECT_INVALID(vkattn_context_create(nullptr, &forced), "VKATTN_ATTN_ROWS=\"99\"");
    EXPECT_EQ(forced, nullptr);
    run_attention_case(ctx, c);  // the fixture's context predates the variable
  }
  ForcedContext after;  // and one made once it is gone takes the defaults
  ASSERT_NE(after.ctx, nullptr);
  run_attention_case(after.ctx, c);
}

// VKATTN_LOG=stats: where the device gives pipeline statistics, a line
// "vkattn: stats SHADER [spec] EXECUTABLE: Name=value; ..." per executable
// of every pipeline created; where it does not (lavapipe), one line per
// process saying so, however many contexts.
TEST_F(Attention, StatsLogNamesEveryPipelineOrSaysWhyNot) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_LOG", "stats"}});
  AttnCase c;
  c.seqs = {{5, 40}, {1, 300}};
  testing::internal::CaptureStderr();
  {
    ForcedContext a;
    run_attention_case(a.ctx, c);
    ForcedContext b;
    run_attention_case(b.ctx, c);
  }
  const std::string log = testing::internal::GetCapturedStderr();
  size_t none = 0;
  for (size_t at = log.find("gives no pipeline statistics"); at != std::string::npos;
       at = log.find("gives no pipeline statistics", at + 1))
    ++none;
  if (none) {
    EXPECT_EQ(none, 1u) << log;
    EXPECT_EQ(log.find("vkattn: stats attention_"), std::string::npos) << log;
    return;
  }
  EXPECT_NE(log.find("vkattn: stats attention_"), std::string::npos) << log;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("vkattn: stats ", 0) != 0) continue;
    EXPECT_NE(line.find(" ["), std::string::npos) << line;
    EXPECT_NE(line.find("]"), std::string::npos) << line;
    EXPECT_NE(line.find("="), std::string::npos) << line;
  }
}

// VKATTN_LOG=kernels names the family of every recorded forward dispatch.
// What the planner skips, from the kernel log's "read=" (the most keys one
// tile of rows reads): a causal decode over 5000 keys in chunks of 512
// reads its own chunk's 392 keys; a two-sided window of 6 + 4 around 8
// query rows at most 6 + 8 + 4 keys a tile (rows per tile permitting).
TEST_F(Attention, ChunksAndWindowsSkipKeys) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_LOG", "kernels"}});
  ForcedContext logged;
  auto most_read = [&](const AttnCase& c) {
    testing::internal::CaptureStderr();
    run_attention_case(logged.ctx, c);
    const std::string log = testing::internal::GetCapturedStderr();
    uint64_t most = 0;
    size_t lines = 0;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(" read=");
      if (line.rfind("vkattn: attention family=", 0) != 0 || at == std::string::npos) continue;
      most = std::max<uint64_t>(most, std::stoull(line.substr(at + 6)));
      ++lines;
    }
    EXPECT_GT(lines, 0u) << log;
    return most;
  };
  AttnCase c;
  c.H = 4, c.Hkv = 4, c.d = 16;
  c.seqs = {{1, 5000}};
  c.causal = true, c.chunk = 512;
  EXPECT_EQ(most_read(c), 5000u - 9 * 512);
  c.chunk = 0, c.causal = false, c.window = 6, c.window_right = 4;
  c.seqs = {{8, 3000}};
  EXPECT_LE(most_read(c), 6u + 8 + 4);
  c.window = c.window_right = -1;  // the whole range, for contrast
  EXPECT_EQ(most_read(c), 3000u);
}

// What spans cost, from the kernel log's "pairs=" (the (row, key) pairs
// the items read, summed over passes): a causal prefill of 256 tokens
// holding a 64-token span reads at most the causal pairs plus the span's
// own 64 x 64 per kv head; the same rule as a dense mask reads all
// 256 x 256.
TEST_F(Attention, SpansReadOnlyTheirOwnKeys) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_LOG", "kernels"}});
  ForcedContext logged;
  auto pairs_read = [&](const AttnCase& c) {
    testing::internal::CaptureStderr();
    run_attention_case(logged.ctx, c);
    const std::string log = testing::internal::GetCapturedStderr();
    uint64_t pairs = 0;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(" pairs=");
      if (line.rfind("vkattn: attention family=", 0) != 0 || at == std::string::npos) continue;
      pairs += std::stoull(line.substr(at + 7));
    }
    EXPECT_GT(pairs, 0u) << log;
    return pairs;
  };
  AttnCase c;
  c.H = 4, c.Hkv = 4, c.d = 16;
  c.seqs = {{256, 256}};
  c.causal = true;
  const uint64_t causal = pairs_read(c);
  c.spans = {{{64, 128}}};
  const uint64_t spans = pairs_read(c);
  EXPECT_GE(spans, causal);
  EXPECT_LE(spans, causal + 4u * 64 * 64);
  c.rules_as_mask = true;
  EXPECT_EQ(pairs_read(c), 4u * 256 * 256);
}

TEST_F(Attention, KernelLogNamesTheFamily) {
  ScopedEnv env(ScopedEnv::Vars{{"VKATTN_LOG", "kernels"}});
  ForcedContext logged;
  AttnCase c;
  c.seqs = {{5, 40}, {1, 300}};
  testing::internal::CaptureStderr();
  run_attention_case(logged.ctx, c);
  const std::string log = testing::internal::GetCapturedStderr();
  // The default family (the device table: lanes on CPU devices, tiled on
  // GPUs), or the one the whole suite is forced to.
  const char* forced = std::getenv("VKATTN_ATTN_KERNEL");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  ASSERT_EQ(vkattn_context_get_device_info(logged.ctx, &info), VKATTN_SUCCESS);
  // Unforced, a GPU's table may give a call decode (at most 8 query tokens
  // a sequence) or coopmat (prefill on RADV, ANV) instead of tiled.
  const bool cpu = info.device_type == VKATTN_DEVICE_CPU;
  const bool is_forced = forced && *forced;
  const std::string name = is_forced ? forced : cpu ? "lanes" : "tiled";
  const std::string want = "vkattn: attention family=" + name + " ";
  auto table_family = [&](const std::string& line) {
    if (is_forced || cpu) return false;
    for (const char* f : {"decode", "coopmat"})
      if (line.rfind(std::string("vkattn: attention family=") + f + " ", 0) == 0) return true;
    return false;
  };
  // A forced family that declines a call (coopmat: K/V dtypes without a
  // matrix type) says so before that call's dispatches, naming the family
  // that runs them instead.
  size_t lines = 0;
  std::string instead;  // the family the last fallback line named
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const std::string fb = "vkattn: attention fallback from " + name + " to ";
    if (line.compare(0, fb.size(), fb) == 0) {
      instead = line.substr(fb.size(), line.find(':', fb.size()) - fb.size());
      continue;
    }
    if (line.rfind("vkattn: attention family=", 0) != 0) continue;
    const bool ok =
        line.compare(0, want.size(), want) == 0 || table_family(line) ||
        (!instead.empty() && line.rfind("vkattn: attention family=" + instead + " ", 0) == 0);
    EXPECT_TRUE(ok) << line << "\n" << log;
    ++lines;
  }
  EXPECT_GE(lines, 1u) << log;
  // Without the variable nothing is printed.
  testing::internal::CaptureStderr();
  run_attention_case(ctx, c);
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("vkattn: attention"), std::string::npos);
}

// The tiled family (VKATTN_ATTN_KERNEL=tiled) under forced configurations;
// the kernel log must show that tiled ran every dispatch. `decode` adds a
// d 128 decode-sized case (GQA rows of single tokens over long keys).
void run_tiled_variants(const std::vector<ScopedEnv::Vars>& variants, bool decode, int seed) {
  for (const ScopedEnv::Vars& vars : variants) {
    ScopedEnv::Vars all = vars;
    all.push_back({"VKATTN_ATTN_KERNEL", "tiled"});
    all.push_back({"VKATTN_LOG", "kernels"});
    ScopedEnv env(all);
    std::string label;
    for (auto [k, v] : vars) label += std::string(k) + "=" + v + " ";
    SCOPED_TRACE(label);
    ForcedContext forced;
    testing::internal::CaptureStderr();
    AttnCase c = windowed_mask_case(seed++);  // d 40: not a multiple of 4 x lanes per row
    run_attention_case(forced.ctx, c);
    c.d = 59, c.dv = 23, c.mask_type = VKATTN_MASK_ADDITIVE, c.qdt = VKATTN_F32;
    c.kdt = VKATTN_BF16, c.window = -1, c.alibi = true, c.softcap = 20.0f;
    c.seed = seed++;
    run_attention_case(forced.ctx, c);
    if (decode) {
      c = AttnCase{};
      c.H = 8, c.Hkv = 2, c.d = 128;
      c.seqs = {{1, 3000}, {1, 1}, {1, 700}};
      c.qdt = VKATTN_F32, c.kdt = VKATTN_F16;
      c.seed = seed++;
      run_attention_case(forced.ctx, c);
    }
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("vkattn: attention family=tiled "), std::string::npos) << log;
    EXPECT_EQ(log.find("family=lanes"), std::string::npos) << log;
    EXPECT_EQ(log.find("fallback"), std::string::npos) << log;
    if (decode && vars.empty()) {
      // The decode call (12 rows: 3 tokens x 4 GQA heads, 4 per tile) took
      // the decode shape: one row group of R = 4 rows.
      const size_t at = log.find("vkattn: attention family=tiled rows=12 keys=3701 ");
      ASSERT_NE(at, std::string::npos) << log;
      const std::string line = log.substr(at, log.find('\n', at) - at);
      EXPECT_NE(line.find(" R=4 "), std::string::npos) << line;
    }
  }
}

// The tiled configurations of the default run: the defaults (L 8, WG 32,
// R 2, 16 keys per tile, subgroup shuffles; for decode calls one row group
// of L = subgroup lanes holding every row), shared-memory
// sums, a narrow row group, one-key tiles over split key ranges.
TEST_F(Attention, TiledFamily) {
  run_tiled_variants({{}}, true, 700);
  run_tiled_variants({{{"VKATTN_DISABLE_SUBGROUP_OPS", "1"}},
                      {{"VKATTN_ATTN_LANES_PER_ROW", "4"},
                       {"VKATTN_ATTN_WG", "16"},
                       {"VKATTN_ATTN_ROWS", "1"},
                       {"VKATTN_ATTN_TILE_KEYS", "8"}},
                      {{"VKATTN_ATTN_TILE_KEYS", "1"}, {"VKATTN_ATTN_SPLIT_KEYS", "40"}},
                      // f16 arithmetic with shared-memory sums (the shuffle
                      // module runs in ctest test_attention.tiled_f16).
                      {{"VKATTN_FORCE_F16_MATH", "1"}, {"VKATTN_DISABLE_SUBGROUP_OPS", "1"}},
                      // Double-buffered tiles over split key ranges.
                      {{"VKATTN_ATTN_DOUBLE_BUFFER", "1"},
                       {"VKATTN_ATTN_TILE_KEYS", "8"},
                       {"VKATTN_ATTN_SPLIT_KEYS", "72"}},
                      // The GPU rows' shape at d 128: 8 lanes a row, 256
                      // lanes, 32-key tiles taken in 8 chunks of 4.
                      {{"VKATTN_ATTN_LANES_PER_ROW", "8"},
                       {"VKATTN_ATTN_WG", "256"},
                       {"VKATTN_ATTN_TILE_KEYS", "32"}}},
                     false, 720);
}

// The rest of the product (label slow: lavapipe compiles the wide unrolled
// tiles for minutes): one lane per row, wide workgroups with many rows, 16
// lanes per row (wider than lavapipe's subgroup: shared-memory sums), one
// pipeline with every transform, many items.
TEST_F(Attention, SlowTiledFamilyProduct) {
  run_tiled_variants({{{"VKATTN_DISABLE_SUBGROUP_OPS", "1"}},
                      {{"VKATTN_ATTN_LANES_PER_ROW", "2"},
                       {"VKATTN_ATTN_WG", "64"},
                       {"VKATTN_ATTN_ROWS", "4"},
                       {"VKATTN_ATTN_TILE_KEYS", "4"}},
                      {{"VKATTN_ATTN_LANES_PER_ROW", "1"},
                       {"VKATTN_ATTN_WG", "8"},
                       {"VKATTN_ATTN_TILE_KEYS", "32"}},
                      {{"VKATTN_ATTN_LANES_PER_ROW", "16"},
                       {"VKATTN_ATTN_WG", "32"},
                       {"VKATTN_DISABLE_SUBGROUP_OPS", "1"}},
                      // The GPU rows' shape at d 256 (16 lanes a row, 256
                      // lanes; shared-memory sums on lavapipe's 8-lane
                      // subgroups), with 8-key tiles: 32 would need 64-76 KiB
                      // of shared memory here, past lavapipe's 32 KiB, and
                      // the forced tiled would decline to lanes.
                      {{"VKATTN_ATTN_LANES_PER_ROW", "16"},
                       {"VKATTN_ATTN_WG", "256"},
                       {"VKATTN_ATTN_TILE_KEYS", "8"}},
                      {{"VKATTN_ATTN_TARGET_ITEMS", "500"}, {"VKATTN_ATTN_ALL_FEATURES", "1"}}},
                     true, 760);
}

// Decode mode (flash-decoding inside a workgroup: every lane holds all rows
// of the tile and takes every WG-th key block, partials merged by lse):
// GQA groups of 1..8 rows, lengths around the block and chunk boundaries,
// masks and windows, at the default and forced workgroup sizes.
TEST_F(Attention, DecodeMode) {
  const std::vector<std::vector<std::pair<const char*, const char*>>> variants = {
      {},
      {{"VKATTN_ATTN_WG", "16"}},
      {{"VKATTN_ATTN_WG", "4"}, {"VKATTN_ATTN_BLOCK_KEYS", "4"}, {"VKATTN_ATTN_UNROLL_D", "0"}},
      {{"VKATTN_ATTN_SPLIT_KEYS", "64"}, {"VKATTN_ATTN_DECODE_MIN_KEYS", "1"}},
      // The shared-memory merge of a decode item's lanes (GPUs' default).
      {{"VKATTN_ATTN_DECODE_MERGE", "1"}},
      {{"VKATTN_ATTN_DECODE_MERGE", "1"}, {"VKATTN_ATTN_SPLIT_KEYS", "64"}},
  };
  uint32_t seed = 300;
  for (const auto& vars : variants) {
    ScopedEnv env(vars);
    std::string label;
    for (auto [k, v] : vars) label += std::string(k) + "=" + v + " ";
    SCOPED_TRACE(label);
    ForcedContext forced;
    vkattn_context* ctx = forced.ctx;
    for (auto [H, Hkv] : {std::pair<int, int>{8, 1}, {8, 2}, {3, 3}}) {
      AttnCase c;
      c.H = H, c.Hkv = Hkv, c.d = 64;
      c.seqs = {{1, 4096}, {1, 1}, {1, 255}, {1, 257}, {1, 1000}, {2, 70}};
      if (H / Hkv > 4) c.seqs.pop_back();  // 2 tokens x 8 heads: more rows than R
      c.causal = true;
      c.qdt = VKATTN_F32, c.kdt = VKATTN_F16;
      c.seed = seed++;
      run_attention_case(ctx, c);
      c.window = 300, c.mask_type = VKATTN_MASK_ADDITIVE, c.d = 40, c.dv = 24;
      c.qdt = VKATTN_BF16, c.kdt = VKATTN_BF16, c.seed = seed++;
      run_attention_case(ctx, c);
    }
  }
}

// The split-KV combine over many splits, in both variants
// (attention_combine.comp's (row, word) jobs, attention_combine_rows.comp's
// lane per row): one level (up to 2048 splits an item for words), and
// trees of levels when the fan in is forced down; in each family that
// splits; 16-bit outputs with an odd dv (rows starting mid-word: the edge
// halves go through atomics, the rest as whole words), sinks, lse, rows
// with no visible key, NaN beyond the valid keys.
TEST_F(Attention, CombineMergesManySplits) {
  for (const char* combine : {"words", "rows"}) {
    SCOPED_TRACE(combine);
    const std::vector<std::vector<std::pair<const char*, const char*>>> variants = {
        {{"VKATTN_ATTN_SPLIT_KEYS", "8"}},
        {{"VKATTN_ATTN_SPLIT_KEYS", "8"}, {"VKATTN_ATTN_COMBINE_FAN_IN", "2"}},
        {{"VKATTN_ATTN_SPLIT_KEYS", "5"}, {"VKATTN_ATTN_COMBINE_FAN_IN", "3"}},
        {{"VKATTN_ATTN_SPLIT_KEYS", "8"},
         {"VKATTN_ATTN_COMBINE_FAN_IN", "7"},
         {"VKATTN_ATTN_KERNEL", "tiled"}},
        {{"VKATTN_ATTN_SPLIT_KEYS", "16"},
         {"VKATTN_ATTN_DECODE_MIN_KEYS", "1"},
         {"VKATTN_ATTN_KERNEL", "decode"}},
        {{"VKATTN_ATTN_SPLIT_KEYS", "16"},
         {"VKATTN_ATTN_DECODE_MIN_KEYS", "1"},
         {"VKATTN_ATTN_COMBINE_FAN_IN", "2"},
         {"VKATTN_ATTN_KERNEL", "decode"}},
    };
    uint32_t seed = 900;
    for (auto vars : variants) {
      vars.push_back({"VKATTN_ATTN_COMBINE", combine});
      ScopedEnv env(vars);
      std::string label;
      for (auto [k, v] : vars) label += std::string(k) + "=" + v + " ";
      SCOPED_TRACE(label);
      ForcedContext forced;
      AttnCase c;
      c.H = 4, c.Hkv = 2, c.d = 40, c.dv = 23;
      c.seqs = {{1, 700}, {3, 301}, {1, 1}, {2, 129}};
      c.causal = true;
      c.sinks = true;
      c.qdt = VKATTN_F16, c.kdt = VKATTN_F16;
      c.seed = seed++;
      run_attention_case(forced.ctx, c);
      c.window = 40, c.dv = 64, c.qdt = VKATTN_F32, c.seed = seed++;  // whole f32 rows
      run_attention_case(forced.ctx, c);
    }
  }
}

// The full product (label slow).
TEST_F(Attention, SlowFullGrid) {
  const int dims[] = {1, 8, 40, 59, 64, 80, 96, 111, 128, 192, 256};
  uint32_t seed = 1000;
  for (int d : dims)
    for (auto [q, kv] : kDtypePairs)
      for (int mask : {VKATTN_MASK_NONE, VKATTN_MASK_BOOL, VKATTN_MASK_ADDITIVE})
        for (bool causal : {false, true}) {
          AttnCase c;
          c.d = d;
          c.H = 8, c.Hkv = 2;
          c.seqs = kMixedSeqs;
          c.qdt = q, c.kdt = kv;
          c.mask_type = mask;
          c.mask_dt = q;
          c.causal = causal;
          c.window = (seed % 3 == 0) ? static_cast<int>(seed % 50) : -1;
          c.seed = seed++;
          run_attention_case(ctx, c);
        }
}

// Flash-decoding, family `decode` (src/ops/attention/families/decode.cpp):
// one workgroup per work item (sequence, kv head, tile of at most R rows,
// key split), shaped for tiles of a few query tokens (decodes, speculative
// verification, short prefill tails) whose cost is reading K and V once.
//
//   - Every lane holds R / RS of the tile's R rows (the query heads of the
//     GQA group x the tile's tokens; RS row splits, below): each K/V byte
//     is read from memory once per tile, not once per head.
//   - A key's row is spread over LPK consecutive lanes (a "key group"): lane
//     sl of the group reads units sl, sl + LPK, ... of the row, a unit being
//     one texel (16 bytes: 8 f16/bf16, 4 f32; 8 codes of an 8-bit cache) or,
//     for rows the wide texels cannot address (odd head dims, odd view
//     offsets), four single elements. So a subgroup reads whole contiguous
//     rows, and a 128-dim f16 row is 16 lanes x 16 bytes.
//   - The workgroup's NKG = WG / LPK key groups take interleaved keys: a tile
//     of BC keys gives key group g the keys kt + j * NKG + g, j < KPG.
//   - The next tile's K/V words (attention_fetch.glsl raw_chunk; decoded
//     at use by decode_chunk, as fetch_row does for the other families),
//     block-table lookups and 8-bit scales are loaded into registers before
//     the current tile's math, so two tiles are in flight per lane: decode
//     is bound by latency and bandwidth, not arithmetic.
//   - A score is the sum of the LPK lanes' partial dot products: subgroup
//     shuffles (DECODE_SUBGROUP_OPS = 1, attention_decode.comp) or shared
//     memory (attention_decode_smem.comp).
//   - Each key group keeps its own online softmax (m, l) and f32
//     accumulators; at the end the groups merge by lse in shared memory (a
//     tree of NKG / 2, NKG / 4, ... groups) and group 0 writes the tile's
//     rows: out/lse, or one normalized partial per row for
//     attention_combine.comp when the key range was split.
//
// Hidden pairs are selected out (a hidden score is -inf; a hidden V never
// enters as 0 * V). Only the tile loop iterates (lavapipe's loop cap: the
// host bounds an item's keys, families/decode.cpp); everything in a tile is
// unrolled.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_common.glsl"

layout(local_size_x_id = 0) in;
// constant_ids 0-11 are the ones every attention family shares
// (FwdSpecHead, src/ops/attention/family.h); this family's own are 12-15.
layout(constant_id = 0) const uint WG = 128;   // lanes per workgroup
layout(constant_id = 1) const uint R = 4;      // rows of a tile, held by every lane
layout(constant_id = 2) const uint BC = 16;    // keys per tile (a multiple of NKG)
layout(constant_id = 3) const uint D = 128;    // head dim of q/k
layout(constant_id = 4) const uint DV = 128;   // head dim of v/out
layout(constant_id = 5) const uint QDT = DT_F32;
layout(constant_id = 6) const uint KDT = DT_F32;
layout(constant_id = 7) const uint KVEC = 1;   // texel kinds (attention_fetch.glsl)
layout(constant_id = 8) const uint VVEC = 1;
layout(constant_id = 9) const uint QVEC = 1;
layout(constant_id = 10) const uint PAGED = 0; // K/V in the pages of a paged KV cache
layout(constant_id = 11) const uint FEATURES = 0xffffffffu;  // transforms compiled in
layout(constant_id = 12) const uint LPK = 16;  // lanes per key row (a power of two dividing WG)
layout(constant_id = 13) const uint RS = 1;    // row splits (divides R; LPK * RS divides WG)
layout(constant_id = 14) const uint PW = 0;    // paged: block-table entries kept in shared memory
layout(constant_id = 15) const uint TA = 0;    // F_TOPK: rows touched TA tiles past the loaded one
// Attention variants: rows per evaluation of a mask function that reads no
// head (a lane's RL rows start at a multiple of UEV = gcd(G, RL), so each
// run of UEV rows is one token's heads); 1: once per row.
layout(constant_id = 16) const uint UEV = 1;

// Row splits: the RS lane sets of a key group each hold RL of the tile's
// rows (lane set ry rows ry * RL ..), and each reads the key's K/V units
// itself (the second read hits L1), so a lane's q and accumulators stay
// RL rows' worth.
const uint RL = R / RS;              // rows per lane
const uint NKG = WG / (LPK * RS);    // key groups
const uint NGRP = WG / LPK;          // lane sets of LPK lanes
const uint KPG = BC / NKG;  // keys of a tile per key group
const uint D4 = (D + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;
// vec4 chunks per unit (a 16-byte texel of 16-bit data holds two).
const uint CK = KVEC == 2u ? 2u : 1u;
const uint CV = VVEC == 2u ? 2u : 1u;
const uint NUK = (D4 + CK - 1u) / CK;  // units per K row
const uint NUV = (DV4 + CV - 1u) / CV;
const uint UK = (NUK + LPK - 1u) / LPK;  // units per lane
const uint UV = (NUV + LPK - 1u) / LPK;
const uint QS = UK * CK;  // q vec4 per row and lane
const uint VS = UV * CV;  // accumulator vec4 per row and lane
// Every lane's units are inside the row (no lane idles on a unit).
const bool FULL_K = NUK % LPK == 0u;
const bool FULL_V = NUV % LPK == 0u;

// The key groups' merge: (m, l) of every group and row, and the
// accumulators of the upper half of the groups still merging.
// One key group (MLA's wide workgroups: every lane set a row split) has
// no merge: one element each.
const uint MERGE_GROUPS = NKG > 1u ? NKG / 2u : 1u;
const uint MERGE_LEVELS = FLOOR_LOG2(MERGE_GROUPS) + 1u;  // h = MERGE_GROUPS, / 2, ... 1
// Steps of the lanes' scan (o = 1, 2, 4, ... < WG) and of a key group's
// shuffle sum (o < LPK).
const uint WG_STEPS = CEIL_LOG2(WG);
const uint LPK_STEPS = CEIL_LOG2(LPK);
shared vec2 sh_ml[NKG > 1u ? NKG * R : 1u];
shared vec4 sh_acc[NKG > 1u ? MERGE_GROUPS * R * VS * LPK : 1u];
#if DECODE_SUBGROUP_OPS == 0
// Partial dot products of every lane, row and key of a tile, and each key
// group's sums (lane sl of a group adds the entries x = sl mod LPK).
shared float sh_red[WG * RL * KPG];
shared float sh_sum[NGRP * RL * KPG];
#endif

// Paged K/V: a window of PW consecutive entries of the item's block table
// (from entry pw0 of its sequence) in shared memory, filled when the item
// starts and again when the next tile's keys leave it, so the next tile's
// address chain starts from shared memory, not from a global load per key
// and tile. Keys outside the window read block_table (never wrong, only
// slower).
const bool PAGE_WINDOW = PAGED != 0u && PW > 0u;
shared uint sh_pages[PAGE_WINDOW ? PW : 1u];
uint pw0 = 0u;
#define PAGE_OF_OWN 1
#include "attention_fetch.glsl"

uint page_of(Seq sq, uint key) {
  uint e = key / pc.page_size;
  if (PAGE_WINDOW && e - pw0 < PW) return sh_pages[e - pw0];  // (e < pw0 wraps: outside)
  // (F_TOPK over several pool buffers: a page of another buffer is NO_SLOT
  // in this pass's table; compact_list leaves its keys out.)
  return block_table[sq.k_off + e - pc.table_base];
}

// Refills the window from entry `first` (uniform in the workgroup); `last`:
// the item's last entry.
void fill_page_window(Seq sq, uint first, uint last, uint lane) {
  barrier();  // every lane is done with the previous window
  pw0 = first;
  for (uint e = lane; e < PW; e += WG) {
    if (first + e <= last) sh_pages[e] = block_table[sq.k_off + first + e - pc.table_base];
  }
  memoryBarrierShared();
  barrier();
}
#include "attention_mask.glsl"
#include "attention_store.glsl"

// F_TOPK: an item's list slots compacted to the key positions it reads
// (listed_key not NO_SLOT), in slot order, before the tile loop: a pass
// over pages of several pool buffers, and pads and entries past u, cost
// one list read per slot, not a tile's loads and math. Lane l counts the
// valid slots of its run of ceil(n / WG) consecutive slots, a
// Hillis-Steele scan over the lanes' counts gives each run's offset, and
// the lane writes its keys there: the same order on every run and device
// (an atomic counter would not be), so results are deterministic. The host
// bounds a top-k item to TOPK_ITEM_SLOTS slots (families/decode.cpp,
// kTopkItemSlots).
const uint TOPK_ITEM_SLOTS = 1024u;
const bool TOPK = (FEATURES & F_TOPK) != 0u;

// TA > 0 (a CPU's default, families/decode.cpp): listed keys lie anywhere,
// so a CPU's hardware prefetcher does not follow them, and a tile's loads
// (~30 texel fetches of 8 lanes each, a K row's and a V row's a key) span
// more instructions than the core's reorder window: the first rows' misses
// are waited for before the last rows' loads issue. So each tile also
// reads one texel per 64 bytes of the rows of the tile TA past the one it
// loads, a key a lane (the 8 K and 8 V rows of a lavapipe tile in 8
// fetches), and those rows are in cache when their tile loads them.
// lavapipe, topk-decode-2048-of-131072: the stall on the first K load fell
// from 14 % to 3 % of the samples (perf, docs/bench). Off on GPUs, whose
// occupancy hides the latency and where a touched word's first use would
// wait for it.
const bool TOUCH = TOPK && TA > 0u;
const uint EBITS = KDT == DT_F32 ? 32u : KDT == DT_Q4 ? 4u : KDT >= DT_I8 ? 8u : 16u;
const uint TBK = (KVEC == 2u ? 8u : KVEC == 1u ? 4u : 1u) * EBITS / 8u;  // bytes a texel
const uint TBV = (VVEC == 2u ? 8u : VVEC == 1u ? 4u : 1u) * EBITS / 8u;
const uint TSK = TBK == 0u ? 64u : TBK >= 64u ? 1u : 64u / TBK;  // texels per 64 bytes
const uint TSV = TBV == 0u ? 64u : TBV >= 64u ? 1u : 64u / TBV;
const uint RTK = KVEC == 2u ? D / 8u : KVEC == 1u ? (D + 3u) / 4u : D;  // texels a row
const uint RTV = VVEC == 2u ? DV / 8u : VVEC == 1u ? (DV + 3u) / 4u : DV;
const uint TOUCH_K = (RTK + TSK - 1u) / TSK;
const uint TOUCH_V = (RTV + TSV - 1u) / TSV;
shared uint sh_list[TOPK ? TOPK_ITEM_SLOTS : 1u];
shared uint sh_runs[TOPK ? WG : 1u];

// Compacts slots [b, e) of token `tok`'s list into sh_list; returns how
// many keys it holds. (Uniform control flow: every lane of the workgroup.)
uint compact_list(Seq sq, uint tok, uint kv_head, uint b, uint e, uint lane) {
  const uint per = (e - b + WG - 1u) / WG;
  const uint s0 = b + lane * per;
  uint c = 0u;
  for (uint x = 0u; x < per; ++x) {
    uint s = s0 + x;
    if (s < e && listed_key(sq, tok, kv_head, s) != NO_SLOT) ++c;
  }
  sh_runs[lane] = c;
  memoryBarrierShared();
  barrier();
  [[unroll]] for (uint i = 0u; i < WG_STEPS; ++i) {  // inclusive scan of the counts
    const uint o = 1u << i;
    uint add = lane >= o ? sh_runs[lane - o] : 0u;
    barrier();
    sh_runs[lane] += add;
    memoryBarrierShared();
    barrier();
  }
  uint at = sh_runs[lane] - c;
  for (uint x = 0u; x < per; ++x) {
    uint s = s0 + x;
    uint key = s < e ? listed_key(sq, tok, kv_head, s) : NO_SLOT;
    if (key != NO_SLOT) sh_list[min(at++, TOPK_ITEM_SLOTS - 1u)] = key;
  }
  uint n = min(sh_runs[WG - 1u], TOPK_ITEM_SLOTS);
  memoryBarrierShared();
  barrier();
  return n;
}

// Sum of a value over the LPK lanes of a key group (shuffle variant).
#if DECODE_SUBGROUP_OPS != 0
float group_sum(float x) {
  [[unroll]] for (uint i = 0u; i < LPK_STEPS; ++i) x += subgroupShuffleXor(x, 1u << i);
  return x;
}
#endif

void main() {
  USER_INIT();  // (attention variants: attention_mask.glsl)
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;  // uniform in the workgroup
  Item it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  const uint G = pc.num_heads / pc.num_kv_heads;
#if DECODE_SUBGROUP_OPS != 0
  // The lane as the subgroup counts it, so that xor partners below LPK
  // share a key group (the host requires LPK | subgroup size | WG).
  const uint lin = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
  const uint lin = gl_LocalInvocationID.x;
#endif
  const uint grp = lin / LPK, kg = grp / RS, ry = grp % RS, sl = lin % LPK;
  const uint nrows = sq.t * G;

  // Rows past the tile read the tile's first row and are masked out.
  vec4 q[RL * QS];
  vec4 acc[RL * VS];
  float m[RL], l[RL];
  int pos[RL];
  uint tok[RL], head[RL];
  bool row_ok[RL];
  [[unroll]] for (uint i = 0u; i < RL; ++i) {
    uint r = it.row0 + ry * RL + i;
    row_ok[i] = r < min(nrows, it.row_end);
    r = row_ok[i] ? r : it.row0;
    tok[i] = r / G;
    head[i] = it.kv_head * G + r % G;
    pos[i] = int(sq.u) - int(sq.t) + int(tok[i]);
    m[i] = NEG_INF;
    l[i] = 0.0;
    uint qbase = q_texel(sq.q_off + tok[i], head[i]);
    [[unroll]] for (uint n = 0u; n < UK; ++n) {
      [[unroll]] for (uint e = 0u; e < CK; ++e) {
        uint c = (sl + n * LPK) * CK + e;
        // Unscaled: the scale multiplies the dot product (scale * q may
        // overflow where scale * dot(q, k) does not).
        vec4 x = fetch_row(QVEC, D, qbase, min(c, D4 - 1u), 2u);
        q[i * QS + n * CK + e] = c < D4 ? x : vec4(0.0);
      }
    }
    [[unroll]] for (uint s = 0u; s < VS; ++s) acc[i * VS + s] = vec4(0.0);
  }

  const bool causal = (pc.flags & F_CAUSAL) != 0u;
  const bool windowed = (pc.flags & F_WINDOW) != 0u;
  // The item's keys [k_begin, k_end); top-k: indices into its compacted
  // list (sh_list), whose range counts slots of one token's list (a top-k
  // tile holds one token).
  const uint list_tok = it.row0 / G;
  uint k_begin = it.k_begin, k_end = it.k_end;
  if (uses(F_TOPK)) {
    k_end = compact_list(sq, list_tok, it.kv_head, it.k_begin, it.k_end, gl_LocalInvocationID.x);
    k_begin = 0u;
  }
  const uint k_last = max(k_end, 1u) - 1u;

  // A tile's raw K/V words, block-table lookups and 8-bit scales for this
  // lane (keys past the range repeat the last; they are hidden below).
  // 4-bit caches: each key's first block scale (q4_scale_base), applied
  // per decoded chunk (their ksc / vsc are 1).
  uvec4 kr[KPG * UK], vr[KPG * UV];
  float ksc[KPG], vsc[KPG];
  uint ksb[KPG], vsb[KPG];
  // F_TOPK: the tile's key positions (past the compacted list: hidden below).
  uint kpos[KPG];
#define LOAD_TILE(kt, KR, VR, KS, VSC, KSB, VSB, KP)                                       \
  [[unroll]] for (uint j = 0u; j < KPG; ++j) {                                             \
    uint key = min((kt) + j * NKG + kg, k_last);                                           \
    if (uses(F_TOPK)) {                                                                    \
      KP[j] = sh_list[min(key, TOPK_ITEM_SLOTS - 1u)];                                     \
      key = KP[j];                                                                         \
    }                                                                                      \
    uint kb = key_texel(PAGED != 0u, false, sq, it.kv_head, key, KVEC, D);                 \
    uint vb = key_texel(PAGED != 0u, true, sq, it.kv_head, key, VVEC, DV);                 \
    [[unroll]] for (uint n = 0u; n < UK; ++n)                                              \
      KR[j * UK + n] = raw_chunk(0u, KVEC, D, kb, min(sl + n * LPK, NUK - 1u) * CK);       \
    [[unroll]] for (uint n = 0u; n < UV; ++n)                                              \
      VR[j * UV + n] = raw_chunk(1u, VVEC, DV, vb, min(sl + n * LPK, NUV - 1u) * CV);      \
    KS[j] = kv_scale(false, sq, it.kv_head, key);                                          \
    VSC[j] = kv_scale(true, sq, it.kv_head, key);                                          \
    KSB[j] = KDT == DT_Q4 ? q4_scale_base(false, sq, it.kv_head, key) : 0u;               \
    VSB[j] = KDT == DT_Q4 ? q4_scale_base(true, sq, it.kv_head, key) : 0u;                \
  }
#if USER_MASK != 0
  // Attention variants with a mask function: before a tile's K/V words
  // are loaded, each lane evaluates vkattn_mask_mod over its pairs of the
  // tile (its RL rows x its key group's KPG keys) that the range, causal
  // and window rules leave, into bits; a lane none of whose pairs is
  // seen loads nothing of the tile (its registers are zeroed, so no index
  // derived from them reaches memory) and its pairs stay hidden. Every
  // lane of a key group decides alike. The math runs as before, each
  // pair's visibility from the bits (the function once per pair and lane,
  // or once per run of UEV rows).
  const uint UW = (RL * KPG + 31u) / 32u;
  uint ub[UW], ub_next[UW];
#define TILE_UBITS(kt, UB, ANY)                                                            \
  {                                                                                        \
    [[unroll]] for (uint w = 0u; w < UW; ++w) UB[w] = 0u;                                  \
    [[unroll]] for (uint j = 0u; j < KPG; ++j) {                                           \
      uint key = (kt) + j * NKG + kg;                                                      \
      const bool key_ok = key < k_end;                                                     \
      if (uses(F_TOPK)) key = sh_list[min(min(key, k_last), TOPK_ITEM_SLOTS - 1u)];        \
      bool uf = true;                                                                      \
      [[unroll]] for (uint i = 0u; i < RL; ++i) {                                          \
        bool cw = in_view(sq, pos[i], int(key), causal, windowed);                         \
        if (i % UEV == 0u) uf = user_allows(sq, head[i], pos[i], int(key));                \
        bool v = uf && key_ok && row_ok[i] && cw;                                          \
        const uint x = i * KPG + j;                                                        \
        UB[x / 32u] |= v ? 1u << (x & 31u) : 0u;                                           \
      }                                                                                    \
    }                                                                                      \
    ANY = false;                                                                           \
    [[unroll]] for (uint w = 0u; w < UW; ++w) ANY = ANY || UB[w] != 0u;                    \
  }
#define CLEAR_TILE(KR, VR, KS, VSC, KSB, VSB, KP)                                          \
  [[unroll]] for (uint x = 0u; x < KPG * UK; ++x) KR[x] = uvec4(0u);                       \
  [[unroll]] for (uint x = 0u; x < KPG * UV; ++x) VR[x] = uvec4(0u);                       \
  [[unroll]] for (uint j = 0u; j < KPG; ++j) {                                             \
    KS[j] = 0.0;                                                                           \
    VSC[j] = 0.0;                                                                          \
    KSB[j] = 0u;                                                                           \
    VSB[j] = 0u;                                                                           \
    KP[j] = 0u;                                                                            \
  }
#endif
  uint touched = 0u;  // TOUCH: the touched words, kept by the test after the loop
  const uint last_page = k_last / max(pc.page_size, 1u);
  // (An item of no keys would read a block-table entry past its sequence.)
  if (PAGE_WINDOW && k_begin < k_end) fill_page_window(sq, k_begin / pc.page_size, last_page, lin);
#if USER_MASK != 0
  bool uany = false;
  TILE_UBITS(k_begin, ub, uany)
  if (k_begin < k_end && uany) {
    LOAD_TILE(k_begin, kr, vr, ksc, vsc, ksb, vsb, kpos)
  } else {
    CLEAR_TILE(kr, vr, ksc, vsc, ksb, vsb, kpos)
  }
#else
  if (k_begin < k_end) {
    LOAD_TILE(k_begin, kr, vr, ksc, vsc, ksb, vsb, kpos)
  }
#endif
  for (uint kt = k_begin; kt < k_end; kt += BC) {
    // The next tile's loads, issued before this tile's math (this tile's
    // words are in registers: the window may move first).
    uvec4 nkr[KPG * UK], nvr[KPG * UV];
    float nks[KPG], nvs[KPG];
    uint nksb[KPG], nvsb[KPG], nkpos[KPG];
    if (PAGE_WINDOW && kt + BC < k_end &&
        min(kt + 2u * BC - 1u, k_last) / pc.page_size >= pw0 + PW)
      fill_page_window(sq, (kt + BC) / pc.page_size, last_page, lin);
#if USER_MASK != 0
    bool nany = false;
    if (kt + BC < k_end) TILE_UBITS(kt + BC, ub_next, nany)
    if (nany) {
      LOAD_TILE(kt + BC, nkr, nvr, nks, nvs, nksb, nvsb, nkpos)
    } else {
      CLEAR_TILE(nkr, nvr, nks, nvs, nksb, nvsb, nkpos)
    }
#else
    if (kt + BC < k_end) {
      LOAD_TILE(kt + BC, nkr, nvr, nks, nvs, nksb, nvsb, nkpos)
    }
#endif
    if (TOUCH && uses(F_TOPK) && kt + (1u + TA) * BC < k_end) {
      // Lane sl of a key group touches keys sl, sl + LPK, ... of tile
      // kt + (1 + TA) BC: one texel a 64 bytes of each K and V row.
      [[unroll]] for (uint x = 0u; x < (KPG + LPK - 1u) / LPK; ++x) {
        uint j = min(sl + x * LPK, KPG - 1u);
        uint slot = min(kt + (1u + TA) * BC + j * NKG + kg, k_last);
        uint key = sh_list[min(slot, TOPK_ITEM_SLOTS - 1u)];
        uint kb = key_texel(PAGED != 0u, false, sq, it.kv_head, key, KVEC, D);
        uint vb = key_texel(PAGED != 0u, true, sq, it.kv_head, key, VVEC, DV);
        [[unroll]] for (uint t = 0u; t < TOUCH_K; ++t)
          touched ^= fetch_texel(0u, int(kb + min(t * TSK, RTK - 1u))).x;
        [[unroll]] for (uint t = 0u; t < TOUCH_V; ++t)
          touched ^= fetch_texel(1u, int(vb + min(t * TSV, RTV - 1u))).x;
      }
    }

    // Partial dot products of this lane's units, then the key group's sums.
    float s[RL * KPG];
    [[unroll]] for (uint x = 0u; x < RL * KPG; ++x) s[x] = 0.0;
    [[unroll]] for (uint j = 0u; j < KPG; ++j) {
      [[unroll]] for (uint n = 0u; n < UK; ++n) {
        uint u = sl + n * LPK;
        bool in_row = FULL_K || u < NUK;  // a clamped unit would count twice
        [[unroll]] for (uint e = 0u; e < CK; ++e) {
          uint ch = min(u, NUK - 1u) * CK + e;
          vec4 kv = decode_chunk(KDT, KVEC, D, kr[j * UK + n], ch);
          if (KDT == DT_Q4) kv *= q4_scale_at(ksb[j] + ch / 8u);
          [[unroll]] for (uint i = 0u; i < RL; ++i) {
            float d = dot(q[i * QS + n * CK + e], kv);
            s[i * KPG + j] += in_row ? d : 0.0;
          }
        }
      }
    }
#if DECODE_SUBGROUP_OPS != 0
    [[unroll]] for (uint x = 0u; x < RL * KPG; ++x) s[x] = group_sum(s[x]);
#else
    [[unroll]] for (uint x = 0u; x < RL * KPG; ++x) sh_red[lin * RL * KPG + x] = s[x];
    memoryBarrierShared();
    barrier();
    [[unroll]] for (uint n = 0u; n < (RL * KPG + LPK - 1u) / LPK; ++n) {
      uint x = n * LPK + sl;
      if (x < RL * KPG) {
        float t = 0.0;
        [[unroll]] for (uint p = 0u; p < LPK; ++p) t += sh_red[(grp * LPK + p) * RL * KPG + x];
        sh_sum[grp * RL * KPG + x] = t;
      }
    }
    memoryBarrierShared();
    barrier();  // sh_red is read before the next tile writes it (and sh_sum
                // before the next tile's sums, a barrier later)
    [[unroll]] for (uint x = 0u; x < RL * KPG; ++x) s[x] = sh_sum[grp * RL * KPG + x];
#endif

    // Scores: 8-bit scale, transforms, visibility (hidden: -inf by selection).
    bool vis[RL * KPG];
    [[unroll]] for (uint j = 0u; j < KPG; ++j) {
      uint key = kt + j * NKG + kg;
      uint kc = min(key, k_last);
      bool key_ok = key < k_end;
      if (uses(F_TOPK)) key = kc = kpos[j];  // the listed key position
      if (uses(F_KEY_VALID)) key_ok = key_ok && key_is_valid(sq, kc);
      [[unroll]] for (uint i = 0u; i < RL; ++i) {
        float x = s[i * KPG + j] * ksc[j] * pc.scale;
        if (uses(F_SOFTCAP)) x = soft_capped(x);
        if (uses(F_ALIBI)) x += alibi_bias(head[i], pos[i], int(key));
        // The call first: glslang turns a && whose right side calls a
        // function into a branch.
        bool cw = in_view(sq, pos[i], int(key), causal, windowed);
        bool ok = key_ok && row_ok[i] && cw;
        if (uses(F_MASK_BOOL)) ok = ok && mask_allows(mask_index(sq, tok[i], kc));
        if (uses(F_TREE)) ok = ok && tree_allows(sq, tok[i], kc);
        if (uses(F_MASK_ADD)) {
          float a = mask_bias(mask_index(sq, tok[i], kc));
          ok = ok && a != NEG_INF;
          x += a;
        }
#if USER_MASK != 0
        ok = ok && ((ub[(i * KPG + j) / 32u] >> ((i * KPG + j) & 31u)) & 1u) != 0u;
#endif
#if USER_SCORE != 0
        x = user_score(sq, head[i], pos[i], int(key), x);
        ok = ok && x != NEG_INF;
#endif
        vis[i * KPG + j] = ok;
        s[i * KPG + j] = ok ? x : NEG_INF;
      }
    }
    // One online-softmax update per row and tile.
    float alphas[RL];
    [[unroll]] for (uint i = 0u; i < RL; ++i) {
      float bm = m[i];
      [[unroll]] for (uint j = 0u; j < KPG; ++j) bm = max(bm, s[i * KPG + j]);
      // Nothing visible yet: subtract 0, not -inf, so every p is exp(-inf) = 0.
      float base = bm == NEG_INF ? 0.0 : bm;
      float alpha = exp(m[i] - base);
      float sum = 0.0;
      [[unroll]] for (uint j = 0u; j < KPG; ++j) {
        s[i * KPG + j] = exp(s[i * KPG + j] - base);
        sum += s[i * KPG + j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = bm;
      alphas[i] = alpha;
    }
    // P.V into this lane's accumulator slices; 8-bit: p times the V scale.
    [[unroll]] for (uint i = 0u; i < RL; ++i) {
      [[unroll]] for (uint x = 0u; x < VS; ++x) acc[i * VS + x] *= alphas[i];
    }
    [[unroll]] for (uint j = 0u; j < KPG; ++j) {
      [[unroll]] for (uint n = 0u; n < UV; ++n) {
        [[unroll]] for (uint e = 0u; e < CV; ++e) {
          uint ch = min(sl + n * LPK, NUV - 1u) * CV + e;
          vec4 vv = decode_chunk(KDT, VVEC, DV, vr[j * UV + n], ch);
          if (KDT == DT_Q4) vv *= q4_scale_at(vsb[j] + ch / 8u);
          [[unroll]] for (uint i = 0u; i < RL; ++i) {
            float p = s[i * KPG + j] * vsc[j];
            acc[i * VS + n * CV + e] += vis[i * KPG + j] ? p * vv : vec4(0.0);
          }
        }
      }
    }
    [[unroll]] for (uint x = 0u; x < KPG * UK; ++x) kr[x] = nkr[x];
    [[unroll]] for (uint x = 0u; x < KPG * UV; ++x) vr[x] = nvr[x];
    [[unroll]] for (uint j = 0u; j < KPG; ++j) {
      ksc[j] = nks[j];
      vsc[j] = nvs[j];
      ksb[j] = nksb[j];
      vsb[j] = nvsb[j];
      kpos[j] = nkpos[j];
    }
#if USER_MASK != 0
    [[unroll]] for (uint w = 0u; w < UW; ++w) ub[w] = ub_next[w];
#endif
  }

  // The touched words must look used, or the compiler drops their loads:
  // a test that never holds (the host builds items with k_begin <= k_end)
  // and that the compiler cannot fold.
  if (TOUCH && touched == 0x9e3779b9u && it.k_begin > it.k_end) m[0] = 0.0;
  // Merge the key groups by lse: weights exp(m_g - M), never multiplying a
  // group that saw no key (l exactly 0; a NaN l, from a visible NaN key,
  // must reach the output); then a tree sums the accumulators into group 0.
  if (NKG > 1u) {
    if (sl == 0u) {
      [[unroll]] for (uint i = 0u; i < RL; ++i) sh_ml[kg * R + ry * RL + i] = vec2(m[i], l[i]);
    }
    memoryBarrierShared();
    barrier();
    [[unroll]] for (uint i = 0u; i < RL; ++i) {
      float M = NEG_INF;
      [[unroll]] for (uint g = 0u; g < NKG; ++g) M = max(M, sh_ml[g * R + ry * RL + i].x);
      float L = 0.0;
      [[unroll]] for (uint g = 0u; g < NKG; ++g) {
        vec2 ml = sh_ml[g * R + ry * RL + i];
        L += (ml.y > 0.0 || isnan(ml.y)) ? exp(ml.x - M) * ml.y : 0.0;
      }
      float w = exp(m[i] - M);
      [[unroll]] for (uint x = 0u; x < VS; ++x)
        acc[i * VS + x] = l[i] != 0.0 ? acc[i * VS + x] * w : vec4(0.0);
      m[i] = M;
      l[i] = L;
    }
    [[unroll]] for (uint lv = 0u; lv < MERGE_LEVELS; ++lv) {
      const uint h = MERGE_GROUPS >> lv;
      barrier();  // the previous level's reads are done
      if (kg >= h && kg < 2u * h) {
        [[unroll]] for (uint i = 0u; i < RL; ++i) {
          [[unroll]] for (uint x = 0u; x < VS; ++x)
            sh_acc[(((kg - h) * R + ry * RL + i) * VS + x) * LPK + sl] = acc[i * VS + x];
        }
      }
      memoryBarrierShared();
      barrier();
      if (kg < h) {
        [[unroll]] for (uint i = 0u; i < RL; ++i) {
          [[unroll]] for (uint x = 0u; x < VS; ++x)
            acc[i * VS + x] += sh_acc[((kg * R + ry * RL + i) * VS + x) * LPK + sl];
        }
      }
    }
  }

  // Key group 0 writes the tile's rows (each lane set its own).
  if (kg == 0u) {
    [[unroll]] for (uint i = 0u; i < RL; ++i) {
      if (row_ok[i]) {
        vec2 nl = row_norm(m[i], l[i]);
        float inv = nl.x, lse = nl.y;
        if (it.slot != NO_SLOT) {
          uint prow = it.slot + ry * RL + i;
          [[unroll]] for (uint n = 0u; n < UV; ++n) {
            [[unroll]] for (uint e = 0u; e < CV; ++e) {
              uint c = (sl + n * LPK) * CV + e;
              if ((FULL_V || sl + n * LPK < NUV) && c < DV4)
                store_part4(prow, c, acc[i * VS + n * CV + e] * inv);
            }
          }
          if (sl == 0u) part_lse[prow] = lse;
        } else {
          uint orow = (sq.q_off + tok[i]) * pc.num_heads + head[i];
          uint base = out_elem(sq.q_off + tok[i], head[i]);
          inv *= final_row_factor(head[i], lse);
          [[unroll]] for (uint n = 0u; n < UV; ++n) {
            [[unroll]] for (uint e = 0u; e < CV; ++e) {
              uint c = (sl + n * LPK) * CV + e;
              if ((FULL_V || sl + n * LPK < NUV) && c < DV4)
                store_out4(base, c, acc[i * VS + n * CV + e] * inv);
            }
          }
          if (sl == 0u && (pc.flags & F_WRITE_LSE) != 0u) lse_out[orow - pc.lse_base] = lse;
        }
      }
    }
  }
}

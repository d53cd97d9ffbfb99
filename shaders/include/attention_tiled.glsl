// Flash attention forward, family `tiled` (GPU-shaped): a workgroup of WG
// lanes serves one work item (sequence, kv head, tile of rows, key range),
// like attention_fwd.comp, but
//   - L consecutive lanes share a row: lane sl of the group holds the head
//     dim slices c = sl, sl + L, ... of the row's q and accumulator, so q
//     and the accumulators of R rows take R * (D + DV) / L floats per lane;
//   - keys come in tiles of BC: the whole workgroup loads a tile's K and V
//     rows into shared memory once (converted to f32), then every row group
//     reads them from there;
//   - a score is the sum of the L lanes' partial dot products: subgroup
//     shuffles (TILED_SUBGROUP_OPS = 1) or shared memory (0);
//   - one online-softmax update per row and tile; P.V into each lane's
//     slices;
//   - TILED_F16 = 1 (modules attention_tiled*_f16.comp, devices with
//     shaderFloat16): q and the K/V tiles are f16, dot products and the
//     p * V products in f16 arithmetic; the scores, the softmax and the
//     P.V accumulation stay f32.
// Rows are (query token, query head of the GQA group) pairs, so the heads
// that share a kv head share every K/V load. Hidden pairs are selected out
// (a hidden score is -inf; a hidden V never enters as 0 * V).
//
// Iterating loops (the tile loop and the cooperative loads) are bounded by
// the host within lavapipe's loop cap (src/ops/attention/families/tiled.cpp mirrors
// them); everything per tile is unrolled.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_common.glsl"
#ifndef TILED_F16
#define TILED_F16 0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 32;   // lanes per workgroup
layout(constant_id = 1) const uint R = 2;     // rows per row group
layout(constant_id = 2) const uint BC = 16;   // keys per shared tile
layout(constant_id = 3) const uint D = 64;    // head dim of q/k
layout(constant_id = 4) const uint DV = 64;   // head dim of v/out
layout(constant_id = 5) const uint QDT = DT_F32;
layout(constant_id = 6) const uint KDT = DT_F32;
layout(constant_id = 7) const uint KVEC = 1;  // texel kinds (attention_fetch.glsl)
layout(constant_id = 8) const uint VVEC = 1;
layout(constant_id = 9) const uint QVEC = 1;
layout(constant_id = 10) const uint PAGED = 0;  // K/V in the pages of a paged KV cache
layout(constant_id = 11) const uint FEATURES = 0xffffffffu;  // transforms compiled in
layout(constant_id = 12) const uint L = 8;    // lanes per row (divides WG; a power of two)
layout(constant_id = 13) const uint DBUF = 0; // 1: next tile's loads issued before this tile's math
// Attention variants: rows per evaluation of a mask function that reads no
// head (a row group's R rows start at a multiple of UEV = gcd(G, R), so
// each run of UEV rows is one token's heads); 1: once per row.
layout(constant_id = 14) const uint UEV = 1;
// 1: the mask function reads no head (the range scan evaluates it once
// per token of the workgroup's rows, whatever the GQA group).
layout(constant_id = 15) const uint UHF = 0;
// Budget of an attention variant's mask function (variant-window-8192:
// WG 64, L 8, R 4 rows per group, BC 32, d 64, f16 K/V):
//   - shared: + 3 * (WG / L) * R * ceil(BC / 32) words of tile bits (384 B
//     here) + 20 B of range and any-hidden words; 17172 B in all on ga102;
//   - evaluations a lane and visited tile: R / UEV * ceil(BC / L) (16), met
//     in the shared bits (atomicOr), then read back by the row's L lanes;
//   - range scan: about ceil(tiles / WG) + 2 tested tiles a lane, once per
//     item (each test one evaluation per row, or per token with UHF);
//   - registers: ga102 (NAK) 144 GPRs, 12 warps/SM, no spills; navi31
//     (RADV) 252 VGPRs, 6 subgroups/SIMD, no spills (the built-in tiled:
//     128 GPRs, 16 warps/SM) -- docs/bench/lavapipe-2026-12-04-variants-families.md.

const uint D4 = (D + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;
const uint DS = (D4 + L - 1u) / L;    // q slices per lane
const uint DVS = (DV4 + L - 1u) / L;  // accumulator slices per lane
// Double buffering (DBUF = 1): each lane holds its share of the next
// tile's K and V (NK + NV vec4) in registers while the workgroup computes
// on the current tile in shared memory.
const uint NK = (BC * D4 + WG - 1u) / WG;
const uint NV = (BC * DV4 + WG - 1u) / WG;
// Keys per chunk of the shared tile that one pass of scores, softmax and
// P.V takes (the scores of R * BCH pairs, and the K texels the compiler
// loads ahead for them, live in registers at once): at 8, NAK took 160
// GPRs at d 128 (one 256-lane workgroup a SM by registers), at 4 it takes
// 128 (two).
const uint BCH = BC % 4u == 0u ? 4u : BC;

#if TILED_F16 != 0
#define TVEC f16vec4
#else
#define TVEC vec4
#endif
shared TVEC sh_k[BC * D4];
shared TVEC sh_v[BC * DV4];
#if TILED_SUBGROUP_OPS == 0
// Partial dot products of every lane, row and key of a tile.
shared float sh_red[WG * R * BC];
#endif
#if USER_MASK != 0
// Attention variants with a mask function: whether any lane of the
// workgroup sees a pair of a tile, in three slots used in turn (one
// barrier a tile: see TILE_BITS below).
shared uint sh_uany[3];
// The tiles the workgroup visits, [first, last + 1) of the item's (the
// range scan below).
shared uint sh_urange[2];
// The row groups' bits of a tile (TILE_BITS): three slots of a word per
// row of the workgroup and 32 keys.
shared uint sh_ubits[3u * (WG / L) * R * ((BC + 31u) / 32u)];
#endif

#include "attention_fetch.glsl"
#include "attention_mask.glsl"
#include "attention_store.glsl"

void main() {
  USER_INIT();  // (attention variants: attention_mask.glsl)
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;  // uniform in the workgroup
  Item it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  const uint G = pc.num_heads / pc.num_kv_heads;
#if TILED_SUBGROUP_OPS != 0
  // The lane as the subgroup counts it, so that xor partners below L share
  // a row group (the host requires whole subgroups: WG % size == 0).
  const uint lin = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
  const uint lin = gl_LocalInvocationID.x;
#endif
  const uint grp = lin / L, sl = lin % L;
  const uint nrows = sq.t * G;

  TVEC q[R * DS];
  vec4 acc[R * DVS];
  float m[R], l[R];
  int pos[R];
  uint tok[R], head[R];
  bool row_ok[R];
  [[unroll]] for (uint i = 0u; i < R; ++i) {
    uint r = it.row0 + grp * R + i;
    row_ok[i] = r < min(nrows, it.row_end);
    r = row_ok[i] ? r : it.row0;
    tok[i] = r / G;
    head[i] = it.kv_head * G + r % G;
    pos[i] = int(sq.u) - int(sq.t) + int(tok[i]);
    m[i] = NEG_INF;
    l[i] = 0.0;
    uint qbase = q_texel(sq.q_off + tok[i], head[i]);
    [[unroll]] for (uint s = 0u; s < DS; ++s) {
      uint c = sl + s * L;
      // f32 math scales the dot product (scale * q may overflow where
      // scale * dot(q, k) does not); f16 math scales q, which keeps the
      // f16 products in range (the header's range for f16 arithmetic).
      vec4 x = fetch_row(QVEC, D, qbase, min(c, D4 - 1u), 2u) * (TILED_F16 != 0 ? pc.scale : 1.0);
      q[i * DS + s] = TVEC(c < D4 ? x : vec4(0.0));
    }
    [[unroll]] for (uint s = 0u; s < DVS; ++s) acc[i * DVS + s] = vec4(0.0);
  }

  const bool causal = (pc.flags & F_CAUSAL) != 0u;
  const bool windowed = (pc.flags & F_WINDOW) != 0u;
  const uint lid = gl_LocalInvocationID.x;
  // Element x of a tile's K or V rows (keys past the range repeat the
  // last; they are hidden below).
  // 8-bit and 4-bit caches: dequantized here (kv_chunk_scale is 1.0,
  // folded away, for others).
#define TILE_KEY(kt, x, n4) min((kt) + (x) / (n4), it.k_end - 1u)
#define TILE_K(kt, x)                                                                         \
  (fetch_row(KVEC, D, key_texel(PAGED != 0u, false, sq, it.kv_head, TILE_KEY(kt, x, D4), KVEC, D), \
             (x) % D4, 0u) *                                                                  \
   kv_chunk_scale(false, sq, it.kv_head, TILE_KEY(kt, x, D4), (x) % D4))
#define TILE_V(kt, x)                                                                            \
  (fetch_row(VVEC, DV, key_texel(PAGED != 0u, true, sq, it.kv_head, TILE_KEY(kt, x, DV4), VVEC, DV), \
             (x) % DV4, 1u) *                                                                    \
   kv_chunk_scale(true, sq, it.kv_head, TILE_KEY(kt, x, DV4), (x) % DV4))
  // DBUF: this lane's share of the tile at kt (element lid + n * WG).
  vec4 nk[NK], nv[NV];
#define PREFETCH(kt)                                                                    \
  [[unroll]] for (uint n = 0u; n < NK; ++n) nk[n] = TILE_K(kt, min(lid + n * WG, BC * D4 - 1u)); \
  [[unroll]] for (uint n = 0u; n < NV; ++n) nv[n] = TILE_V(kt, min(lid + n * WG, BC * DV4 - 1u));
  // (An item of no keys, k_end = 0, would fetch keys 0..BC-1 past its
  // sequence: rows at positions < 0, or u = 0.)
  uint tbits[R];  // F_TREE: a tile's tree bits (below)
#if USER_MASK != 0
  // Attention variants with a mask function skip the tiles it hides
  // (docs/guide/variants.md, "speed"): before any K or V of a tile is
  // loaded, each lane evaluates vkattn_mask_mod over its rows' pairs of
  // the tile that the built-in range, causal and window rules leave
  // (bits ub, R x BC, in registers), and the workgroup learns whether any
  // lane sees one (TILE_BITS). A tile nobody sees is neither loaded nor
  // computed; the others take their visibility from the bits, so the
  // function runs once per row group and pair (below: its L lanes share
  // the tile's keys). The loop's first pass only
  // evaluates the first tile (and prefetches it), each pass the next
  // one's: the evaluation is compiled once. Skipping is exact: a hidden
  // tile's update is the identity (alpha 1, sum 0), so results, batch
  // invariance included, are the same bit for bit.
  const uint UW = (BC + 31u) / 32u;
  uint ub[R * UW], ub_next[R * UW];
  bool any_cur = false, any_next = false;
  uint ueval = 0u;  // evaluations so far (TILE_BITS's slot)
  if (lid < 3u) sh_uany[lid] = 0u;
  [[unroll]] for (uint x = 0u; x < (3u * (WG / L) * R * UW + WG - 1u) / WG; ++x) {
    if (lid + x * WG < 3u * (WG / L) * R * UW) sh_ubits[lid + x * WG] = 0u;
  }
  memoryBarrierShared();
  barrier();
  // The L lanes of a row group share the evaluation: lane sl takes the
  // tile's keys j = sl (mod L), KPL of them, and the group's bits meet in
  // shared words (sh_ubits, one per row and 32 keys, three slots in turn
  // as sh_uany's) before every lane reads them back after the barrier.
  const uint KPL = (BC + L - 1u) / L;
  const uint UBW = WG / L * R * UW;  // words of one slot of sh_ubits
#define TILE_BITS(kt)                                                                   \
  {                                                                                     \
    bool mine = false;                                                                  \
    const uint slot = ueval % 3u;                                                       \
    [[unroll]] for (uint w = 0u; w < R * UW; ++w) ub_next[w] = 0u;                      \
    [[unroll]] for (uint jj = 0u; jj < KPL; ++jj) {                                     \
      const uint j = sl + jj * L;                                                       \
      const bool key_ok = j < BC && (kt) + j < it.k_end;                                \
      const int key = int(min((kt) + j, it.k_end - 1u));                                \
      bool uf = true;                                                                   \
      [[unroll]] for (uint i = 0u; i < R; ++i) {                                        \
        bool cw = in_view(sq, pos[i], key, causal, windowed);                           \
        if (i % UEV == 0u) uf = user_allows(sq, head[i], pos[i], key);                  \
        bool v = uf && key_ok && row_ok[i] && cw;                                       \
        [[unroll]] for (uint w = 0u; w < UW; ++w)                                       \
          ub_next[i * UW + w] |= v && j / 32u == w ? 1u << (j & 31u) : 0u;              \
        mine = mine || v;                                                               \
      }                                                                                 \
    }                                                                                   \
    [[unroll]] for (uint w = 0u; w < R * UW; ++w) {                                     \
      if (ub_next[w] != 0u) atomicOr(sh_ubits[slot * UBW + grp * R * UW + w], ub_next[w]); \
    }                                                                                   \
    if (mine) atomicOr(sh_uany[slot], 1u);                                              \
    memoryBarrierShared();                                                              \
    barrier();                                                                          \
    any_next = sh_uany[slot] != 0u;                                                     \
    [[unroll]] for (uint w = 0u; w < R * UW; ++w)                                       \
      ub_next[w] = sh_ubits[slot * UBW + grp * R * UW + w];                             \
    /* The slot of the evaluation before: read by every lane before this   */          \
    /* barrier, written next two evaluations on, after another barrier.   */          \
    const uint old = (ueval + 2u) % 3u;                                                 \
    if (lid == 0u) sh_uany[old] = 0u;                                                   \
    [[unroll]] for (uint x = 0u; x < (UBW + WG - 1u) / WG; ++x) {                       \
      if (lid + x * WG < UBW) sh_ubits[old * UBW + lid + x * WG] = 0u;                  \
    }                                                                                   \
    ueval += 1u;                                                                        \
  }
  // Range scan: the workgroup finds the first and the last tile of the
  // item that some row sees (the function and the built-in range, causal
  // and window rules), and visits only the tiles between. lavapipe runs a
  // skipped tile under an empty execution mask (its loads and math cost
  // as if it ran), so only a shorter loop saves its time there; a GPU
  // branches over the hidden tiles between. The host leaves loop budget
  // for the scans (tiled_max_keys, mask_scans).
  // The whole workgroup shares the scan: lane lid tests the tiles
  // n = lid (mod WG) for every row of the workgroup (once per token where
  // the function reads no head, UHF), the tiles from the front until one
  // is seen, then its class from the top down to that first one. The
  // least first over the lanes is the workgroup's first seen tile (the
  // lane of its class finds it), the greatest last its last.
  const uint WROWS = WG / L * R;  // the workgroup's rows
  // Its rows [row0, scan_end); with UHF, one row per token (the row
  // index x stands for token x, any of its heads).
  const uint scan_end = min(min(nrows, it.row_end), it.row0 + WROWS);
  const uint scan_x0 = UHF != 0u ? it.row0 / G : it.row0;
  const uint scan_x1 = scan_end <= it.row0 ? scan_x0 : UHF != 0u ? (scan_end - 1u) / G + 1u : scan_end;
#define TILE_SEEN(kt, SEEN)                                                             \
  {                                                                                     \
    SEEN = false;                                                                       \
    for (uint x = scan_x0; x < scan_x1 && !SEEN; ++x) {                                 \
      const uint hd = UHF != 0u ? it.kv_head * G : it.kv_head * G + x % G;              \
      const int ps = int(sq.u) - int(sq.t) + int(UHF != 0u ? x : x / G);                \
      [[unroll]] for (uint j = 0u; j < BC; ++j) {                                       \
        const uint key = min((kt) + j, it.k_end - 1u);                                  \
        const bool u = user_allows(sq, hd, ps, int(key));                               \
        SEEN = SEEN || (u && (kt) + j < it.k_end && in_view(sq, ps, int(key), causal, windowed)); \
      }                                                                                 \
    }                                                                                   \
  }
  const uint item_tiles = (it.k_end - min(it.k_begin, it.k_end) + BC - 1u) / BC;
  {
    uint first = item_tiles;
    for (uint n = lid; n < item_tiles; n += WG) {
      bool seen;
      TILE_SEEN(it.k_begin + n * BC, seen)
      if (seen) {
        first = n;
        break;
      }
    }
    uint last = first;
    const uint above = first < item_tiles ? (item_tiles - 1u - first) / WG : 0u;
    for (uint k = above; k > 0u; --k) {  // (tiles first + k WG of the class)
      bool seen;
      TILE_SEEN(it.k_begin + (first + k * WG) * BC, seen)
      if (seen) {
        last = first + k * WG;
        break;
      }
    }
    if (lid == 0u) {
      sh_urange[0] = item_tiles;
      sh_urange[1] = 0u;
    }
    memoryBarrierShared();
    barrier();
    atomicMin(sh_urange[0], first);
    if (first < item_tiles) atomicMax(sh_urange[1], last + 1u);
    memoryBarrierShared();
    barrier();
  }
  const uint t_first = sh_urange[0];
  const uint ntiles = max(sh_urange[1], t_first) - t_first;
  const uint k_scan = it.k_begin + t_first * BC;  // the first tile visited
  for (uint n = 0u; n <= ntiles; ++n) {
    const uint kt = k_scan + (n - 1u) * BC;  // (unused on the first pass)
    // The tile's bits and whether anyone sees it (uniform in the workgroup).
    any_cur = any_next;
    [[unroll]] for (uint w = 0u; w < R * UW; ++w) ub[w] = ub_next[w];
    const bool have = n > 0u && any_cur;
    any_next = false;
    if (n == 0u && ntiles > 0u) {
      TILE_BITS(k_scan)
      if (DBUF != 0u && any_next) {
        PREFETCH(k_scan)
      }
    }
    if (have) {
#else
  if (DBUF != 0u && it.k_begin < it.k_end) {
    PREFETCH(it.k_begin)
  }
  for (uint kt = it.k_begin; kt < it.k_end; kt += BC) {
    {
#endif
    // F_TREE: each row's tree bits of the tile's first 32 keys (then of
    // each next 32), loaded while the tile is staged.
    if (uses(F_TREE)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) tbits[i] = tree_bits(sq, tok[i], kt);
    }
    // The tile's K and V rows into shared memory, all lanes.
    if (DBUF != 0u) {
      [[unroll]] for (uint n = 0u; n < NK; ++n) {
        if (lid + n * WG < BC * D4) sh_k[lid + n * WG] = TVEC(nk[n]);
      }
      [[unroll]] for (uint n = 0u; n < NV; ++n) {
        if (lid + n * WG < BC * DV4) sh_v[lid + n * WG] = TVEC(nv[n]);
      }
    } else {
      for (uint x = lid; x < BC * D4; x += WG) sh_k[x] = TVEC(TILE_K(kt, x));
      for (uint x = lid; x < BC * DV4; x += WG) sh_v[x] = TVEC(TILE_V(kt, x));
    }
    memoryBarrierShared();
    barrier();
#if USER_MASK != 0
    }
    // The next tile's bits, and its loads if anyone sees it.
    if (n > 0u && n < ntiles) {
      TILE_BITS(kt + BC)
      if (DBUF != 0u && any_next) {
        PREFETCH(kt + BC)
      }
    }
    if (have) {
#else
    // The next tile's loads go out now; the math below hides their latency.
    if (DBUF != 0u && kt + BC < it.k_end) {
      PREFETCH(kt + BC)
    }
#endif

    // A tile that every row of this group sees whole (all its keys in the
    // range, no causal or window edge inside it: both conditions are
    // monotone in the key, so its first and last key decide; no mask or
    // padding compiled in) skips the per-pair tests.
    bool whole = kt + BC <= it.k_end && !uses(F_MASK_BOOL) && !uses(F_MASK_ADD) &&
                 !uses(F_KEY_VALID) && tree_free(sq, kt + BC);
    [[unroll]] for (uint i = 0u; i < R; ++i) {
      whole = whole && row_ok[i] && in_view(sq, pos[i], int(kt), causal, windowed) &&
              in_view(sq, pos[i], int(kt + BC - 1u), causal, windowed);
    }
    // The shared tile is consumed in chunks of BCH keys: scores, softmax
    // update and P.V per chunk, so only R * BCH scores are live at once
    // (R * BC spilled on RDNA2, NVK, AGX and ir3: tools/gpu/static_sweep.sh).
    [[unroll]] for (uint j0 = 0u; j0 < BC; j0 += BCH) {
      if (uses(F_TREE) && j0 > 0u && (j0 & 31u) == 0u) {  // (tiles past 32 keys)
        [[unroll]] for (uint i = 0u; i < R; ++i) tbits[i] = tree_bits(sq, tok[i], kt + j0);
      }
      // Partial scores over this lane's slices, then the row's sum.
      float s[R * BCH];
      [[unroll]] for (uint j = 0u; j < BCH; ++j) {
        [[unroll]] for (uint i = 0u; i < R; ++i) {
          float p = 0.0;
          [[unroll]] for (uint t = 0u; t < DS; ++t) {
            uint c = sl + t * L;
            float d = float(dot(q[i * DS + t], sh_k[(j0 + j) * D4 + min(c, D4 - 1u)]));
            p += c < D4 ? d : 0.0;
          }
          s[i * BCH + j] = p;
        }
      }
#if TILED_SUBGROUP_OPS != 0
      // A counted loop (lavapipe keeps a loop with a shifted counter rolled,
      // and every iteration counts against its loop cap); L <= 64.
      [[unroll]] for (uint x = 0u; x < R * BCH; ++x) {
        [[unroll]] for (uint b = 0u; b < 6u; ++b) {
          if ((1u << b) < L) s[x] += subgroupShuffleXor(s[x], 1u << b);
        }
      }
#else
      // This chunk's own region of sh_red: no chunk overwrites what another
      // still reads; the tile's last barrier orders the next tile's writes.
      [[unroll]] for (uint x = 0u; x < R * BCH; ++x) sh_red[lin * R * BC + j0 * R + x] = s[x];
      memoryBarrierShared();
      barrier();
      [[unroll]] for (uint x = 0u; x < R * BCH; ++x) {
        float t = 0.0;
        [[unroll]] for (uint u = 0u; u < L; ++u) t += sh_red[(grp * L + u) * R * BC + j0 * R + x];
        s[x] = t;
      }
#endif
      if (TILED_F16 == 0) {
        [[unroll]] for (uint x = 0u; x < R * BCH; ++x) s[x] *= pc.scale;
      }

      // Transforms (compiled in only when FEATURES has them) and visibility.
      bool vis[R * BCH];
      if (whole) {
        [[unroll]] for (uint j = 0u; j < BCH; ++j) {
          [[unroll]] for (uint i = 0u; i < R; ++i) {
            uint x = i * BCH + j;
            if (uses(F_SOFTCAP)) s[x] = soft_capped(s[x]);
            if (uses(F_ALIBI)) s[x] += alibi_bias(head[i], pos[i], int(kt + j0 + j));
            vis[x] = true;
          }
        }
      } else {
        [[unroll]] for (uint j = 0u; j < BCH; ++j) {
          int key = int(kt + j0 + j);
          bool key_ok = kt + j0 + j < it.k_end;
          uint kc = min(kt + j0 + j, it.k_end - 1u);
          bool valid = uses(F_KEY_VALID) ? key_is_valid(sq, kc) : true;
          [[unroll]] for (uint i = 0u; i < R; ++i) {
            uint x = i * BCH + j;
            if (uses(F_SOFTCAP)) s[x] = soft_capped(s[x]);
            if (uses(F_ALIBI)) s[x] += alibi_bias(head[i], pos[i], key);
            bool cw = in_view(sq, pos[i], key, causal, windowed);
            bool v = key_ok && row_ok[i] && cw && valid;
            if (uses(F_MASK_BOOL)) {
              bool ok = mask_allows(mask_index(sq, tok[i], kc));
              v = v && ok;
            }
            if (uses(F_TREE)) v = v && ((tbits[i] >> ((j0 + j) & 31u)) & 1u) != 0u;
            if (uses(F_MASK_ADD)) {
              float a = mask_bias(mask_index(sq, tok[i], kc));
              v = v && a != NEG_INF;
              s[x] += a;
            }
            vis[x] = v;
          }
        }
      }
#if USER_MASK != 0 || USER_SCORE != 0
      // Attention variants: the user's mask and score (attention_mask.glsl).
      [[unroll]] for (uint j = 0u; j < BCH; ++j) {
        [[unroll]] for (uint i = 0u; i < R; ++i) {
          const uint x = i * BCH + j;
          const int key = int(kt + j0 + j);
#if USER_MASK != 0
          vis[x] = vis[x] && ((ub[i * UW + (j0 + j) / 32u] >> ((j0 + j) & 31u)) & 1u) != 0u;
#endif
          if (USER_SCORE != 0) {
            s[x] = user_score(sq, head[i], pos[i], key, s[x]);
            vis[x] = vis[x] && s[x] != NEG_INF;
          }
        }
      }
#endif
      // One online-softmax update per row and chunk.
      float alphas[R];
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        float bm = m[i];
        [[unroll]] for (uint j = 0u; j < BCH; ++j) {
          s[i * BCH + j] = vis[i * BCH + j] ? s[i * BCH + j] : NEG_INF;
          bm = max(bm, s[i * BCH + j]);
        }
        // Nothing visible yet: subtract 0, not -inf, so every p is exp(-inf) = 0.
        float base = bm == NEG_INF ? 0.0 : bm;
        alphas[i] = exp(m[i] - base);
        float sum = 0.0;
        [[unroll]] for (uint j = 0u; j < BCH; ++j) {
          s[i * BCH + j] = exp(s[i * BCH + j] - base);
          sum += s[i * BCH + j];
        }
        l[i] = l[i] * alphas[i] + sum;
        m[i] = bm;
      }
      // P.V into this lane's slices.
      [[unroll]] for (uint t = 0u; t < DVS; ++t) {
        uint c = min(sl + t * L, DV4 - 1u);
        [[unroll]] for (uint i = 0u; i < R; ++i) {
          vec4 a = acc[i * DVS + t] * alphas[i];
          [[unroll]] for (uint j = 0u; j < BCH; ++j) {
#if TILED_F16 != 0
            vec4 pv = vec4(float16_t(s[i * BCH + j]) * sh_v[(j0 + j) * DV4 + c]);
#else
            vec4 pv = s[i * BCH + j] * sh_v[(j0 + j) * DV4 + c];
#endif
            a += vis[i * BCH + j] ? pv : vec4(0.0);
          }
          acc[i * DVS + t] = a;
        }
      }
    }
    // Every lane is done with the tile before the next one overwrites it.
    barrier();
    }
  }

  [[unroll]] for (uint i = 0u; i < R; ++i) {
    if (row_ok[i]) {
      vec2 nl = row_norm(m[i], l[i]);
      float inv = nl.x, lse = nl.y;
      if (it.slot != NO_SLOT) {
        uint prow = it.slot + grp * R + i;
        [[unroll]] for (uint t = 0u; t < DVS; ++t) {
          uint c = sl + t * L;
          if (c < DV4) store_part4(prow, c, acc[i * DVS + t] * inv);
        }
        if (sl == 0u) part_lse[prow] = lse;
      } else {
        uint orow = (sq.q_off + tok[i]) * pc.num_heads + head[i];
        uint base = out_elem(sq.q_off + tok[i], head[i]);
        inv *= final_row_factor(head[i], lse);
        [[unroll]] for (uint t = 0u; t < DVS; ++t) {
          uint c = sl + t * L;
          if (c < DV4) store_out4(base, c, acc[i * DVS + t] * inv);
        }
        if (sl == 0u && (pc.flags & F_WRITE_LSE) != 0u) lse_out[orow - pc.lse_base] = lse;
      }
    }
  }
}

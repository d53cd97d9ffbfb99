#version 450
// Flash attention forward over a packed batch, register-blocked.
//
// One workgroup per work item (sequence, kv head, tile of rows, key range);
// rows are (query token, query head of the GQA group) pairs, so every head
// that shares the kv head is served by the same K/V fetches. Decode mode
// (item.n_slots = WG): the tile has at most R rows, every lane holds all of
// them and takes every WG-th block of keys (flash-decoding inside the
// workgroup), writing its own partial for attention_combine.comp. Each lane owns
// R rows: their q and f32 accumulators live in registers; keys come in
// blocks of BK: R x BK scores, one online-softmax update per block, then
// P.V. No score matrix in memory. Loops over rows and the block are
// unrolled, and so are the head-dim loops when UNROLL_D = 1 (else they
// iterate in chunks of CK). The loops that iterate (key blocks, head-dim
// chunks, the page walk, decode-mode merging) are bounded by the host:
// lavapipe ends a loop after 65535 iterations per invocation
// (src/core/loop_budget.h).
//
// Top-k lists (F_TOPK, when forced or tuned here): an item's range counts
// slots of one token's list, each slot's key read through it (a slot that
// lists none is hidden like any other key).
//
// Hidden keys are selected out: a hidden score becomes -inf (never
// q.k * 0), and a non-finite V is added only to rows that see it.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_common.glsl"

layout(local_size_x_id = 0) in;
// constant_ids 0-11 are the ones every attention family shares
// (FwdSpecHead, src/ops/attention/family.h); this family's own are 12-13.
layout(constant_id = 1) const uint R = 4;    // rows per lane
layout(constant_id = 2) const uint BK = 8;   // keys per block
layout(constant_id = 3) const uint D = 64;   // head dim of q/k
layout(constant_id = 4) const uint DV = 64;  // head dim of v/out
layout(constant_id = 5) const uint QDT = DT_F32;
layout(constant_id = 6) const uint KDT = DT_F32;
layout(constant_id = 7) const uint KVEC = 1;  // elements per K texel: 0 -> 1, 1 -> 4, 2 -> 8
layout(constant_id = 8) const uint VVEC = 1;  // 1: 4 elements per V texel
layout(constant_id = 0) const uint WG = 8;
// 1: unroll the head-dim loops too (fastest code, but lavapipe's compile
// time grows steeply with R * D); 0: iterate them.
layout(constant_id = 12) const uint UNROLL_D = 0;
layout(constant_id = 9) const uint QVEC = 1;  // 1: 4 elements per q texel
// 1: K/V live in the pages of a paged KV cache (src/ops/kv_cache.h): key j
// of a sequence is slot j % page_size of page block_table[k_off + j /
// page_size], inside this dispatch's pool buffer (bound to k_tex/v_tex).
layout(constant_id = 10) const uint PAGED = 0;
// 1: a decode-mode item merges its lanes' partial results in shared memory
// (their m, l and accumulators, by lse) and writes one result for the
// tile's rows: out directly when the item covers the tile's keys, else one
// partial of R rows at slot. 0: every lane writes its own partial for
// attention_combine.comp. The host enables it where WG x R rows fit.
layout(constant_id = 13) const uint SMEM_MERGE = 0;
// Attention variants with a mask function: rows per evaluation of it. A
// function that reads no head (the host proves it from the source) gives
// the heads of one token the same answer; a lane's R rows start at a
// multiple of UEV = gcd(G, R), so each run of UEV rows is one token's and
// the function runs once per run (the first row's) instead of once per
// row. 1: once per row.
layout(constant_id = 14) const uint UEV = 1;
// Optional transforms compiled in (F_SOFTCAP | F_ALIBI | F_MASK_BOOL |
// F_MASK_ADD | F_KEY_VALID bits; the push constant flags then switch them
// per call). lavapipe runs both sides of every branch under an execution
// mask, so a transform that is compiled in costs its work on every key
// block even when the call does not use it (masked loads are per-lane
// scalar loops): the host builds the variant a call needs.
layout(constant_id = 11) const uint FEATURES = 0xffffffffu;

const uint D4 = (D + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;
const uint TILE_ROWS = WG * R;
// Shared memory of the decode merge (one element when it is off).
const uint MERGE_ROWS = SMEM_MERGE != 0u ? WG * R : 1u;
shared vec2 sh_ml[MERGE_ROWS];
shared vec4 sh_acc[MERGE_ROWS * DV4];
// Head-dim chunks unrolled inside the iterated loops of the compact variant.
const uint CK = (D4 % 4u == 0u) ? 4u : ((D4 % 2u == 0u) ? 2u : 1u);
const uint CV = (DV4 % 4u == 0u) ? 4u : ((DV4 % 2u == 0u) ? 2u : 1u);
// 4-bit caches: block scales a K (V) row has (one element otherwise); a
// key block keeps BK x (NSK + NSV) of them per lane (64 floats at d 128,
// BK 8: lanes is lavapipe's family, where they live in memory anyway).
const uint NSK = KDT == DT_Q4 ? (D + 31u) / 32u : 1u;
const uint NSV = KDT == DT_Q4 ? (DV + 31u) / 32u : 1u;

#include "attention_fetch.glsl"
#include "attention_mask.glsl"
#include "attention_store.glsl"

// Scores of the R rows against the BK keys of the block, head-dim slice c.
#define QK_STEP(c)                                                                      \
  {                                                                                     \
    vec4 kv[BK];                                                                        \
    [[unroll]] for (uint j = 0u; j < BK; ++j)                                           \
      kv[j] = fetch_row(KVEC, D, kbase[j], c, 0u) *                                     \
              (KDT == DT_Q4 ? kscl[j * NSK + (c) / 8u] : 1.0);                         \
    [[unroll]] for (uint i = 0u; i < R; ++i) {                                          \
      vec4 qi = q[i * D4 + c];                                                          \
      [[unroll]] for (uint j = 0u; j < BK; ++j) s[i * BK + j] += dot(qi, kv[j]);        \
    }                                                                                   \
  }

// Rescale by alpha and add P.V for head-dim slice c; a hidden key adds a
// selected 0, never 0 * V (V may be NaN there).
#define PV_STEP(c)                                                                      \
  {                                                                                     \
    vec4 vv[BK];                                                                        \
    [[unroll]] for (uint j = 0u; j < BK; ++j)                                           \
      vv[j] = fetch_row(VVEC, DV, vbase[j], c, 1u) *                                    \
              (KDT == DT_Q4 ? vscl[j * NSV + (c) / 8u] : 1.0);                         \
    [[unroll]] for (uint i = 0u; i < R; ++i) {                                          \
      vec4 a = acc[i * DV4 + c] * alphas[i];                                            \
      [[unroll]] for (uint j = 0u; j < BK; ++j)                                         \
        a += vis[i * BK + j] ? s[i * BK + j] * vv[j] : vec4(0.0);                       \
      acc[i * DV4 + c] = a;                                                             \
    }                                                                                   \
  }

// q row i, head-dim slice c (rows past the tile read row 0). The scale
// multiplies the dot product, not q: scale * q may overflow where
// scale * dot(q, k) does not.
#define Q_LOAD(i, c) q[(i) * D4 + (c)] = fetch_row(QVEC, D, qrow, (c), 2u);

// Normalized partial row i, slice c, of a split key range.
#define PART_STORE(i, c) store_part4(prow, (c), acc[(i) * DV4 + (c)] * inv);

// Output row i, slice c, in the output dtype.
#define OUT_STORE(i, c) store_out4(base, (c), acc[(i) * DV4 + (c)] * inv);

void main() {
  USER_INIT();  // (attention variants: attention_mask.glsl)
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;
  Item it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  const uint G = pc.num_heads / pc.num_kv_heads;
  const uint lane = gl_LocalInvocationID.x;
  // Lanes that share rows and split the keys (decode mode: all of them).
  const uint LK = max(it.n_slots, 1u);
  const uint sub = lane % LK, grp = lane / LK;
  const uint nrows = sq.t * G;

  // Straight-line code wherever possible: branches inside unrolled loops
  // multiply lavapipe's compile time. Rows past the tile read the tile's
  // first row (inside the dispatch's q window) and are masked out.
  vec4 q[R * D4];
  vec4 acc[R * DV4];
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
    uint qrow = q_texel(sq.q_off + tok[i], head[i]);
    if (UNROLL_D != 0u) {
      [[unroll]] for (uint c = 0u; c < D4; ++c) Q_LOAD(i, c)
      [[unroll]] for (uint c = 0u; c < DV4; ++c) acc[i * DV4 + c] = vec4(0.0);
    } else {
      [[dont_unroll]] for (uint c = 0u; c < D4; ++c) Q_LOAD(i, c)
      [[dont_unroll]] for (uint c = 0u; c < DV4; ++c) acc[i * DV4 + c] = vec4(0.0);
    }
  }

  const bool causal = (pc.flags & F_CAUSAL) != 0u;
  const bool windowed = (pc.flags & F_WINDOW) != 0u;
  // Top-k: the item's range counts slots of one token's list (a top-k
  // tile holds one token).
  const uint list_tok = it.row0 / G;
  // Each lane of a decode-mode item takes one contiguous run of key blocks.
  const uint span = ((it.k_end - it.k_begin + LK - 1u) / LK + BK - 1u) / BK * BK;
  const uint k_first = min(it.k_end, it.k_begin + sub * span);
  const uint k_last = min(it.k_end, k_first + span);
  uint kb_lo = k_first, kb_hi = k_last;  // the blocks the loop visits
#if USER_MASK != 0
  // Attention variants with a mask function: the loop visits only the
  // blocks from the first this lane's rows see to the last (by the
  // function alone: the plan's ranges already hold the built-in rules; found by
  // scanning from each end; drivers that run a skipped block's body
  // under an empty mask, as lavapipe does, then still save its time), and
  // skips hidden blocks between them (below). The plan leaves room in the
  // loop budget for the scans (plan_shape: at most the range's blocks + 2).
#define BLOCK_SEEN(kb, SEEN)                                                            \
  {                                                                                     \
    SEEN = false;                                                                       \
    [[unroll]] for (uint j = 0u; j < BK; ++j) {                                         \
      uint key = min((kb) + j, k_last - 1u);                                            \
      bool key_ok = (kb) + j < k_last;                                                  \
      if (uses(F_TOPK)) {                                                               \
        const uint lk = listed_key(sq, list_tok, it.kv_head, key);                      \
        key_ok = key_ok && lk != NO_SLOT;                                               \
        key = key_ok ? lk : 0u;                                                         \
      }                                                                                 \
      [[unroll]] for (uint i = 0u; i < R; i += UEV) {                                   \
        bool v = user_allows(sq, head[i], pos[i], int(key));                            \
        SEEN = SEEN || (v && key_ok && row_ok[i]);                                      \
      }                                                                                 \
    }                                                                                   \
  }
  {
    const uint nblk = (k_last - min(k_first, k_last) + BK - 1u) / BK;
    uint first = nblk;
    for (uint n = 0u; n < nblk; ++n) {
      bool seen;
      BLOCK_SEEN(k_first + n * BK, seen)
      if (seen) {
        first = n;
        break;
      }
    }
    uint last = first;
    for (uint n = nblk; n > first + 1u; --n) {
      bool seen;
      BLOCK_SEEN(k_first + (n - 1u) * BK, seen)
      if (seen) {
        last = n - 1u;
        break;
      }
    }
    kb_lo = k_first + first * BK;
    kb_hi = first < nblk ? min(k_last, k_first + (last + 1u) * BK) : kb_lo;
  }
#endif
  for (uint kb = kb_lo; kb < kb_hi; kb += BK) {
    // Scores of R rows x BK keys.
    float s[R * BK];
    [[unroll]] for (uint x = 0u; x < R * BK; ++x) s[x] = 0.0;
    // First texel of each key's K and V row (keys past the range repeat the last).
    // 4-bit caches: every block scale of each key's K and V rows, loaded
    // once per key block (QK_STEP, PV_STEP multiply a chunk by its block's;
    // loading them per chunk made decode-16x2048-q4 1.39x f16's time).
    uint kbase[BK], vbase[BK];
    float kscl[BK * NSK], vscl[BK * NSV];
    // Key positions of the block; top-k: the slots' listed keys (a slot
    // that lists none reads key 0 and is hidden below).
    uint kp[BK];
    bool listed[BK];
    [[unroll]] for (uint j = 0u; j < BK; ++j) {
      kp[j] = min(kb + j, k_last - 1u);
      listed[j] = true;
      if (uses(F_TOPK)) {
        uint key = listed_key(sq, list_tok, it.kv_head, kp[j]);
        listed[j] = key != NO_SLOT;
        kp[j] = listed[j] ? key : 0u;
      }
    }
    // A block none of whose slots lists a key of this pass's pool buffer
    // is skipped whole (uniform across the workgroup outside decode mode:
    // its lanes share the tile's one list), so a pass over the other
    // buffer's keys costs only the list reads.
    if (uses(F_TOPK)) {
      bool any_listed = false;
      [[unroll]] for (uint j = 0u; j < BK; ++j) any_listed = any_listed || listed[j];
      if (!any_listed) continue;
    }
#if USER_MASK != 0
    // Attention variants with a mask function: the block's pairs the
    // user's function and the built-in range, causal and window rules let
    // through, decided before any K or V of the block is loaded; a block
    // none of this lane's rows sees is skipped (exact: its update would be
    // the identity), and each pair's function runs once (once per run of
    // UEV rows: one token's heads).
    bool uvis[R * BK];
    bool uany = false;
    [[unroll]] for (uint j = 0u; j < BK; ++j) {
      const int key = int(kp[j]);
      const bool key_ok = kb + j < k_last && listed[j];
      bool uf = true;
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        bool cw = in_view(sq, pos[i], key, causal, windowed);
        if (i % UEV == 0u) uf = user_allows(sq, head[i], pos[i], key);
        bool v = uf && key_ok && row_ok[i] && cw;
        uvis[i * BK + j] = v;
        uany = uany || v;
      }
    }
    if (!uany) continue;
#endif
    [[unroll]] for (uint j = 0u; j < BK; ++j) {
      uint key = kp[j];
      kbase[j] = key_texel(PAGED != 0u, false, sq, it.kv_head, key, KVEC, D);
      vbase[j] = key_texel(PAGED != 0u, true, sq, it.kv_head, key, VVEC, DV);
      if (KDT == DT_Q4) {
        uint ksb = q4_scale_base(false, sq, it.kv_head, key);
        uint vsb = q4_scale_base(true, sq, it.kv_head, key);
        [[unroll]] for (uint b = 0u; b < NSK; ++b) kscl[j * NSK + b] = q4_scale_at(ksb + b);
        [[unroll]] for (uint b = 0u; b < NSV; ++b) vscl[j * NSV + b] = q4_scale_at(vsb + b);
      }
    }
    // UNROLL_D = 0 iterates the head dim in chunks of CK (q and acc then
    // live in memory, which keeps lavapipe's compile time in seconds);
    // rows and keys are always unrolled.
    if (UNROLL_D != 0u) {
      [[unroll]] for (uint c = 0u; c < D4; ++c) QK_STEP(c)
    } else {
      [[dont_unroll]] for (uint c0 = 0u; c0 < D4; c0 += CK) {
        [[unroll]] for (uint cc = 0u; cc < CK; ++cc) QK_STEP(c0 + cc)
      }
    }
    // 8-bit caches: a score is q . codes times the key's K scale.
    if (KDT >= DT_I8) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        float ks = kv_scale(false, sq, it.kv_head, kp[j]);
        [[unroll]] for (uint i = 0u; i < R; ++i) s[i * BK + j] *= ks;
      }
    }
    [[unroll]] for (uint x = 0u; x < R * BK; ++x) s[x] *= pc.scale;
    // Transforms, each compiled in only when FEATURES has it (uses()).
    if (uses(F_SOFTCAP)) {
      [[unroll]] for (uint x = 0u; x < R * BK; ++x) s[x] = soft_capped(s[x]);
    }
    if (uses(F_ALIBI)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j)
          s[i * BK + j] += alibi_bias(head[i], pos[i], int(kp[j]));
      }
    }
    // Visibility; hidden scores become -inf by selection.
    bool vis[R * BK];
    [[unroll]] for (uint j = 0u; j < BK; ++j) {
      int key = int(kp[j]);
      bool key_ok = kb + j < k_last && listed[j];
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        // The call first: glslang turns a && whose right side calls a
        // function into a branch.
        bool cw = in_view(sq, pos[i], key, causal, windowed);
        vis[i * BK + j] = key_ok && row_ok[i] && cw;
      }
    }
    if (uses(F_KEY_VALID)) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        bool ok = key_is_valid(sq, kp[j]);
        [[unroll]] for (uint i = 0u; i < R; ++i) vis[i * BK + j] = vis[i * BK + j] && ok;
      }
    }
    if (uses(F_MASK_BOOL)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j) {
          bool ok = mask_allows(mask_index(sq, tok[i], kp[j]));
          vis[i * BK + j] = vis[i * BK + j] && ok;
        }
      }
    }
    if (uses(F_TREE)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j) {
          bool ok = tree_allows(sq, tok[i], kp[j]);
          vis[i * BK + j] = vis[i * BK + j] && ok;
        }
      }
    }
    if (uses(F_MASK_ADD)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j) {
          float a = mask_bias(mask_index(sq, tok[i], kp[j]));
          vis[i * BK + j] = vis[i * BK + j] && a != NEG_INF;
          s[i * BK + j] += a;
        }
      }
    }
#if USER_MASK != 0 || USER_SCORE != 0
    // Attention variants: the user's mask and score (attention_mask.glsl).
    [[unroll]] for (uint i = 0u; i < R; ++i) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        const uint x = i * BK + j;
#if USER_MASK != 0
        vis[x] = vis[x] && uvis[x];
#endif
        if (USER_SCORE != 0) {
          s[x] = user_score(sq, head[i], pos[i], int(kp[j]), s[x]);
          vis[x] = vis[x] && s[x] != NEG_INF;
        }
      }
    }
#endif
    // One online-softmax update per row and block.
    float alphas[R];
    [[unroll]] for (uint i = 0u; i < R; ++i) {
      float bm = m[i];
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        s[i * BK + j] = vis[i * BK + j] ? s[i * BK + j] : NEG_INF;
        bm = max(bm, s[i * BK + j]);
      }
      // Nothing visible yet: subtract 0, not -inf, so every p is exp(-inf) = 0.
      float base = bm == NEG_INF ? 0.0 : bm;
      float alpha = exp(m[i] - base);
      float sum = 0.0;
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        s[i * BK + j] = exp(s[i * BK + j] - base);
        sum += s[i * BK + j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = bm;
      alphas[i] = alpha;
    }
    // 8-bit caches: p times the key's V scale multiplies the V codes (l
    // already holds the unscaled p).
    if (KDT >= DT_I8) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        float vs = kv_scale(true, sq, it.kv_head, kp[j]);
        [[unroll]] for (uint i = 0u; i < R; ++i) s[i * BK + j] *= vs;
      }
    }
    if (UNROLL_D != 0u) {
      [[unroll]] for (uint c = 0u; c < DV4; ++c) PV_STEP(c)
    } else {
      [[dont_unroll]] for (uint c0 = 0u; c0 < DV4; c0 += CV) {
        [[unroll]] for (uint cc = 0u; cc < CV; ++cc) PV_STEP(c0 + cc)
      }
    }
  }

  // Decode mode with the shared-memory merge: lane `lane` < R gathers tile
  // row `lane` from every lane (weights exp(m_s - M), never multiplying a
  // lane that saw no key) into register row 0, and stores it below.
  const bool merged = SMEM_MERGE != 0u && LK == WG;
  if (merged) {
    [[unroll]] for (uint i = 0u; i < R; ++i) {
      sh_ml[lane * R + i] = vec2(m[i], l[i]);
      [[unroll]] for (uint c = 0u; c < DV4; ++c) sh_acc[(lane * R + i) * DV4 + c] = acc[i * DV4 + c];
    }
    memoryBarrierShared();
    barrier();
    const uint i = min(lane, R - 1u);
    float M = NEG_INF;
    [[dont_unroll]] for (uint s = 0u; s < WG; ++s) M = max(M, sh_ml[s * R + i].x);
    float L = 0.0;
    float w[WG];
    [[unroll]] for (uint s = 0u; s < WG; ++s) {
      vec2 ml = sh_ml[s * R + i];
      // A lane whose l is NaN (a visible NaN or +inf score) makes L NaN.
      w[s] = ml.y > 0.0 ? exp(ml.x - M) : (isnan(ml.y) ? NAN_F : 0.0);
      L += w[s] * ml.y;
    }
    [[dont_unroll]] for (uint c = 0u; c < DV4; ++c) {
      vec4 a = vec4(0.0);
      [[unroll]] for (uint s = 0u; s < WG; ++s) a += w[s] > 0.0 ? w[s] * sh_acc[(s * R + i) * DV4 + c] : vec4(0.0);
      acc[c] = a;
    }
    m[0] = M;
    l[0] = L;
    uint r = it.row0 + lane;
    row_ok[0] = lane < R && r < min(nrows, it.row_end);
    tok[0] = r / G;
    head[0] = it.kv_head * G + r % G;
    [[unroll]] for (uint k = 1u; k < R; ++k) row_ok[k] = false;
  }

  [[unroll]] for (uint i = 0u; i < R; ++i) {
    if (row_ok[i]) {
      vec2 nl = row_norm(m[i], l[i]);
      float inv = nl.x, lse = nl.y;
      if (it.slot != NO_SLOT) {
        uint prow = merged ? it.slot + lane : it.slot + (sub * (WG / LK) + grp) * R + i;
        if (UNROLL_D != 0u) {
          [[unroll]] for (uint c = 0u; c < DV4; ++c) PART_STORE(i, c)
        } else {
          [[dont_unroll]] for (uint c = 0u; c < DV4; ++c) PART_STORE(i, c)
        }
        part_lse[prow] = lse;
      } else {
        uint orow = (sq.q_off + tok[i]) * pc.num_heads + head[i];
        uint base = out_elem(sq.q_off + tok[i], head[i]);
        inv *= final_row_factor(head[i], lse);
        if (UNROLL_D != 0u) {
          [[unroll]] for (uint c = 0u; c < DV4; ++c) OUT_STORE(i, c)
        } else {
          [[dont_unroll]] for (uint c = 0u; c < DV4; ++c) OUT_STORE(i, c)
        }
        if ((pc.flags & F_WRITE_LSE) != 0u) lse_out[orow - pc.lse_base] = lse;
      }
    }
  }
}

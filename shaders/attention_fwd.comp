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
// Hidden keys are selected out: a hidden score becomes -inf (never
// q.k * 0), and a non-finite V is added only to rows that see it.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "attention_common.glsl"

layout(local_size_x_id = 0) in;
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
layout(constant_id = 9) const uint UNROLL_D = 0;
layout(constant_id = 10) const uint QVEC = 1;  // 1: 4 elements per q texel
// 1: K/V live in the pages of a paged KV cache (src/ops/kv_cache.h): key j
// of a sequence is slot j % page_size of page block_table[k_off + j /
// page_size], inside this dispatch's pool buffer (bound to k_tex/v_tex).
layout(constant_id = 11) const uint PAGED = 0;
// 1: a decode-mode item merges its lanes' partial results in shared memory
// (their m, l and accumulators, by lse) and writes one result for the
// tile's rows: out directly when the item covers the tile's keys, else one
// partial of R rows at slot. 0: every lane writes its own partial for
// attention_combine.comp. The host enables it where WG x R rows fit.
layout(constant_id = 12) const uint SMEM_MERGE = 0;
// Optional transforms compiled in (F_SOFTCAP | F_ALIBI | F_MASK_BOOL |
// F_MASK_ADD | F_KEY_VALID bits; the push constant flags then switch them
// per call). lavapipe runs both sides of every branch under an execution
// mask, so a transform that is compiled in costs its work on every key
// block even when the call does not use it (masked loads are per-lane
// scalar loops): the host builds the variant a call needs.
layout(constant_id = 13) const uint FEATURES = 0xffffffffu;

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

// q, k and v are read as texels: storage-buffer loads are scalarized per
// lane (with a bounds check each) on lavapipe, which made unrolled q loads
// compile for minutes, and are ~3x dearer at run time.
layout(binding = 0) uniform usamplerBuffer q_tex;
layout(binding = 1) uniform usamplerBuffer k_tex;
layout(binding = 2) uniform usamplerBuffer v_tex;
layout(std430, binding = 3) coherent buffer Out {
  uint out_w[];
};
layout(std430, binding = 4) writeonly buffer Lse {
  float lse_out[];
};
layout(std430, binding = 5) readonly buffer Items {
  Item items[];
};
layout(std430, binding = 6) readonly buffer Seqs {
  Seq seqs[];
};
layout(std430, binding = 7) readonly buffer Mask {
  uint mask_w[];
};
layout(std430, binding = 8) readonly buffer Alibi {
  float alibi[];
};
layout(std430, binding = 9) readonly buffer KeyValid {
  uint key_valid_w[];
};
layout(std430, binding = 10) writeonly buffer PartO {
  float part_o[];
};
layout(std430, binding = 11) writeonly buffer PartL {
  float part_lse[];
};
layout(std430, binding = 12) readonly buffer BlockTable {
  uint block_table[];  // pages local to this dispatch's pool buffer
};

layout(push_constant) uniform Push {
  uint n_items;
  uint num_heads;
  uint num_kv_heads;
  uint flags;
  float scale;
  float softcap;
  int window_left;
  uint mask_dtype;
  uint item_base;  // items[item_base + id]: items before the dispatch's first in the window
  // Paged: page size in tokens; the page stride (one layer's slab) and this
  // layer's K/V block of local page 0 in the bound pool buffer, in K (V)
  // texels (ops/kv_cache.h).
  uint page_size;
  uint k_page_tx;
  uint k_layer_tx;
  uint v_page_tx;
  uint v_layer_tx;
  // First texel / element / record of each window (see attention_common.glsl).
  uint q_base;
  uint k_base;
  uint v_base;
  uint out_base;
  uint lse_base;
  uint mask_base;
  uint seq_base;
  uint table_base;
  uint key_valid_base;
}
pc;

// The call uses optional transform f and this variant compiles it in.
bool uses(uint f) {
  return (FEATURES & pc.flags & f) != 0u;
}

// Texels per row of `dim` elements for a texel kind.
uint row_texels(uint kind_vec, uint dim) {
  return kind_vec == 2u ? dim / 8u : kind_vec == 1u ? (dim + 3u) / 4u : dim;
}

// Elements [4c, 4c + 4) of the K/V/q row starting at texel `base` (zero
// beyond the head dim). which: 0 = k, 1 = v, 2 = q (q has its own dtype QDT).
uvec4 fetch_texel(uint which, int t) {
  return which == 0u ? texelFetch(k_tex, t) : which == 1u ? texelFetch(v_tex, t) : texelFetch(q_tex, t);
}

vec4 fetch_row(uint kind_vec, uint dim, uint base, uint c, uint which) {
  uint dt = which == 2u ? QDT : KDT;
  if (kind_vec == 2u) {
    // 16-bit data, dim % 8 == 0: one 16-byte texel holds 8 elements (slices
    // c and c ^ 1 fetch the same texel; the compiler merges the fetches).
    uvec4 w = fetch_texel(which, int(base + c / 2u));
    uvec2 h = (c & 1u) != 0u ? w.zw : w.xy;
    if (dt == DT_F16) return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    return uintBitsToFloat(uvec4(h.x << 16, h.x & 0xffff0000u, h.y << 16, h.y & 0xffff0000u));
  }
  if (kind_vec == 1u) {
    uvec4 w = fetch_texel(which, int(base + c));
    if (dt == DT_F32) return uintBitsToFloat(w);
    if (dt == DT_F16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
  }
  vec4 r;
  [[unroll]] for (uint e = 0u; e < 4u; ++e) {
    uint col = 4u * c + e;
    uint w = fetch_texel(which, int(base + min(col, dim - 1u))).x;
    float x = dt == DT_F32 ? uintBitsToFloat(w) : decode16(dt, w & 0xffffu);
    r[e] = col < dim ? x : 0.0;
  }
  return r;
}

// Scores of the R rows against the BK keys of the block, head-dim slice c.
#define QK_STEP(c)                                                                      \
  {                                                                                     \
    vec4 kv[BK];                                                                        \
    [[unroll]] for (uint j = 0u; j < BK; ++j) kv[j] = fetch_row(KVEC, D, kbase[j], c, 0u); \
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
    [[unroll]] for (uint j = 0u; j < BK; ++j) vv[j] = fetch_row(VVEC, DV, vbase[j], c, 1u); \
    [[unroll]] for (uint i = 0u; i < R; ++i) {                                          \
      vec4 a = acc[i * DV4 + c] * alphas[i];                                            \
      [[unroll]] for (uint j = 0u; j < BK; ++j)                                         \
        a += vis[i * BK + j] ? s[i * BK + j] * vv[j] : vec4(0.0);                       \
      acc[i * DV4 + c] = a;                                                             \
    }                                                                                   \
  }

// q row i, head-dim slice c, pre-scaled (rows past the tile read row 0).
#define Q_LOAD(i, c) q[(i) * D4 + (c)] = fetch_row(QVEC, D, qrow * row_texels(QVEC, D) - pc.q_base, (c), 2u) * pc.scale;

// Normalized partial row i, slice c, of a split key range.
#define PART_STORE(i, c)                                                  \
  {                                                                       \
    vec4 o = acc[(i) * DV4 + (c)] * inv;                                  \
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {                           \
      if (4u * (c) + e < DV) part_o[prow * DV + 4u * (c) + e] = o[e];     \
    }                                                                     \
  }

// Output row i, slice c, in the output dtype.
#define OUT_STORE(i, c)  \
  {  \
    vec4 o = acc[i * DV4 + c] * inv;  \
    if (QDT == DT_F32) {  \
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {  \
        if (4u * c + e < DV) out_w[base + 4u * c + e] = floatBitsToUint(o[e]);  \
      }  \
    } else if (DV % 2u == 0u) {  \
      [[unroll]] for (uint e = 0u; e < 4u; e += 2u) {  \
        if (4u * c + e < DV)  \
          out_w[(base + 4u * c + e) >> 1] = encode16(QDT, o[e]) | (encode16(QDT, o[e + 1u]) << 16);  \
      }  \
    } else {  \
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {  \
        if (4u * c + e < DV) STORE16_ATOMIC(out_w, base + 4u * c + e, encode16(QDT, o[e]));  \
      }  \
    }  \
  }

void main() {
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
    uint qrow = (sq.q_off + tok[i]) * pc.num_heads + head[i];
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
  // Each lane of a decode-mode item takes one contiguous run of key blocks.
  const uint span = ((it.k_end - it.k_begin + LK - 1u) / LK + BK - 1u) / BK * BK;
  const uint k_first = min(it.k_end, it.k_begin + sub * span);
  const uint k_last = min(it.k_end, k_first + span);
  for (uint kb = k_first; kb < k_last; kb += BK) {
    // Scores of R rows x BK keys.
    float s[R * BK];
    [[unroll]] for (uint x = 0u; x < R * BK; ++x) s[x] = 0.0;
    // First texel of each key's K and V row (keys past the range repeat the last).
    uint kbase[BK], vbase[BK];
    if (PAGED != 0u) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        uint key = min(kb + j, k_last - 1u);
        uint page = block_table[sq.k_off + key / pc.page_size - pc.table_base];
        uint row = it.kv_head * pc.page_size + key % pc.page_size;
        kbase[j] = page * pc.k_page_tx + pc.k_layer_tx + row * row_texels(KVEC, D);
        vbase[j] = page * pc.v_page_tx + pc.v_layer_tx + row * row_texels(VVEC, DV);
      }
    } else {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        uint row = (sq.k_off + min(kb + j, k_last - 1u)) * pc.num_kv_heads + it.kv_head;
        kbase[j] = row * row_texels(KVEC, D) - pc.k_base;
        vbase[j] = row * row_texels(VVEC, DV) - pc.v_base;
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
    // Transforms, each compiled in only when FEATURES has it (uses()).
    if (uses(F_SOFTCAP)) {
      [[unroll]] for (uint x = 0u; x < R * BK; ++x) s[x] = pc.softcap * tanh(s[x] / pc.softcap);
    }
    if (uses(F_ALIBI)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        float slope = alibi[head[i]];
        [[unroll]] for (uint j = 0u; j < BK; ++j)
          s[i * BK + j] -= slope * float(abs(pos[i] - int(kb + j)));
      }
    }
    // Visibility; hidden scores become -inf by selection.
    bool vis[R * BK];
    [[unroll]] for (uint j = 0u; j < BK; ++j) {
      int key = int(kb + j);
      bool key_ok = kb + j < k_last;
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        bool v = key_ok && row_ok[i];
        v = v && (!causal || key <= pos[i]);
        v = v && (!windowed || pos[i] - key <= pc.window_left);
        vis[i * BK + j] = v;
      }
    }
    if (uses(F_KEY_VALID)) {
      [[unroll]] for (uint j = 0u; j < BK; ++j) {
        uint kidx = sq.k_off + min(kb + j, k_last - 1u) - pc.key_valid_base;
        bool ok = ((key_valid_w[kidx >> 2] >> ((kidx & 3u) * 8u)) & 0xffu) != 0u;
        [[unroll]] for (uint i = 0u; i < R; ++i) vis[i * BK + j] = vis[i * BK + j] && ok;
      }
    }
    if (uses(F_MASK_BOOL)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j) {
          uint midx = sq.mask_off + tok[i] * sq.u + min(kb + j, k_last - 1u) - pc.mask_base;
          bool ok = ((mask_w[midx >> 2] >> ((midx & 3u) * 8u)) & 0xffu) != 0u;
          vis[i * BK + j] = vis[i * BK + j] && ok;
        }
      }
    }
    if (uses(F_MASK_ADD)) {
      [[unroll]] for (uint i = 0u; i < R; ++i) {
        [[unroll]] for (uint j = 0u; j < BK; ++j) {
          uint midx = sq.mask_off + tok[i] * sq.u + min(kb + j, k_last - 1u) - pc.mask_base;
          float a = LOAD_ELEM(mask_w, pc.mask_dtype, midx);
          vis[i * BK + j] = vis[i * BK + j] && a != NEG_INF;
          s[i * BK + j] += a;
        }
      }
    }
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
      w[s] = ml.y > 0.0 ? exp(ml.x - M) : 0.0;
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
      float inv = l[i] > 0.0 ? 1.0 / l[i] : 0.0;
      float lse = l[i] > 0.0 ? m[i] + log(l[i]) : NEG_INF;
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
        uint base = orow * DV - pc.out_base;
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

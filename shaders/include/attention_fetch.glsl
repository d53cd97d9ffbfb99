// The inputs of a forward pass, shared by every attention family
// (src/ops/attention/family.h): q/k/v texel views, the plan's items,
// sequences and block table, the push constants (FwdPush), and row fetches.
// The including shader defines QDT, KDT (dtypes of q and of k/v) and
// FEATURES (transforms compiled in) before including this file.
//
// q, k and v are read as texels: storage-buffer loads are scalarized per
// lane (with a bounds check each) on lavapipe, which made unrolled q loads
// compile for minutes, and are ~3x dearer at run time.
#ifndef VKATTN_ATTENTION_FETCH_GLSL
#define VKATTN_ATTENTION_FETCH_GLSL

#include "attention_common.glsl"

layout(binding = 0) uniform usamplerBuffer q_tex;
layout(binding = 1) uniform usamplerBuffer k_tex;
layout(binding = 2) uniform usamplerBuffer v_tex;
layout(std430, binding = 5) readonly buffer Items {
  Item items[];
};
layout(std430, binding = 6) readonly buffer Seqs {
  Seq seqs[];
};
layout(std430, binding = 12) readonly buffer BlockTable {
  uint block_table[];  // pages local to this dispatch's pool buffer
};
// 8-bit caches: int8, the pool buffer (each K/V block's rows are followed
// by their scales, f32 [Hkv][page_size]); fp8, the cache's scale table
// [layer][K, V][Hkv]; 4-bit: the pool buffer (the rows' block scales, f16
// [Hkv][page_size][blocks], follow them) (ops/kv_cache.h).
layout(std430, binding = 14) readonly buffer KvScales {
  float kv_scales[];
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
  // Row strides (token, head): q, k and v in their texels, out in elements
  // (strided views; paged K/V: the cache's slot and head strides).
  uint q_tok;
  uint q_head;
  uint k_tok;
  uint k_head;
  uint v_tok;
  uint v_head;
  uint out_tok;
  uint out_head;
  uint scale_base;  // fp8 caches: this layer's first entry of kv_scales
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

// The page (local to this dispatch's pool buffer) holding key `key` of
// sequence sq. A shader that defines PAGE_OF_OWN before including this
// file supplies its own (attention_decode.glsl: an item's entries kept in
// shared memory), reading block_table for keys outside it.
#ifdef PAGE_OF_OWN
uint page_of(Seq sq, uint key);
#else
uint page_of(Seq sq, uint key) {
  uint p = block_table[sq.k_off + key / pc.page_size - pc.table_base];
  // F_TOPK over several pool buffers (lanes): a hidden slot's stand-in key
  // 0 may lie in another buffer (NO_SLOT in this pass's table); its load
  // reads page 0 of this one and is selected out.
  return (FEATURES & F_TOPK) != 0u && p == NO_SLOT ? 0u : p;
}
#endif

// First texel of key `key`'s K (V) row, kind kvec (vvec), of sequence sq
// and kv head `kv_head`: through the block table when paged.
uint key_texel(bool paged, bool is_v, Seq sq, uint kv_head, uint key, uint kvec, uint dim) {
  uint tok = is_v ? pc.v_tok : pc.k_tok, hs = is_v ? pc.v_head : pc.k_head;
  if (paged) {
    uint page = page_of(sq, key);
    return page * (is_v ? pc.v_page_tx : pc.k_page_tx) + (is_v ? pc.v_layer_tx : pc.k_layer_tx) +
           (key % pc.page_size) * tok + kv_head * hs;
  }
  return (sq.k_off + key) * tok + kv_head * hs - (is_v ? pc.v_base : pc.k_base);
}

// The factor that dequantizes key `key`'s K (V) row of an 8-bit cache
// (value = code x factor); 1 for other dtypes. A paged cache only.
float kv_scale(bool is_v, Seq sq, uint kv_head, uint key) {
  if (KDT == DT_I8) {
    uint page = page_of(sq, key);
    uint kind = is_v ? VVEC : KVEC;
    uint tb = kind == 2u ? 8u : kind == 1u ? 4u : 1u;  // bytes per texel (texel_format)
    uint blk = (page * (is_v ? pc.v_page_tx : pc.k_page_tx) + (is_v ? pc.v_layer_tx : pc.k_layer_tx)) * tb;
    uint rows = (pc.num_kv_heads * pc.page_size * (is_v ? DV : D) + 15u) & ~15u;
    return kv_scales[(blk + rows) / 4u + kv_head * pc.page_size + key % pc.page_size];
  }
  if (KDT == DT_FP8) return kv_scales[pc.scale_base + (is_v ? pc.num_kv_heads : 0u) + kv_head];
  return 1.0;
}

// 4-bit caches: the index (in f16 halves of the pool) of the first block
// scale of key `key`'s K (V) row. Its page's block starts at texel
// page * page_tx + layer_tx (4-byte texels); the rows of codes, whole
// words each, take round16(Hkv x page_size x 4 x ceil(dim / 8)) bytes.
uint q4_scale_base(bool is_v, Seq sq, uint kv_head, uint key) {
  uint dim = is_v ? DV : D, nb = (dim + 31u) / 32u;
  uint page = page_of(sq, key);
  uint blk = (page * (is_v ? pc.v_page_tx : pc.k_page_tx) + (is_v ? pc.v_layer_tx : pc.k_layer_tx)) * 4u;
  uint rows = (pc.num_kv_heads * pc.page_size * ((dim + 7u) / 8u) * 4u + 15u) & ~15u;
  return (blk + rows) / 2u + (kv_head * pc.page_size + key % pc.page_size) * nb;
}

// The f16 at half index i of the pool (a 4-bit block scale), widened.
float q4_scale_at(uint i) {
  uint w = floatBitsToUint(kv_scales[i >> 1]);
  return unpackHalf2x16((i & 1u) != 0u ? w >> 16 : w).x;
}

// The factor that dequantizes elements [4c, 4c + 4) of key `key`'s K (V)
// row: a 4-bit cache's block scale (block c / 8), else kv_scale's.
float kv_chunk_scale(bool is_v, Seq sq, uint kv_head, uint key, uint c) {
  if (KDT == DT_Q4) return q4_scale_at(q4_scale_base(is_v, sq, kv_head, key) + c / 8u);
  return kv_scale(is_v, sq, kv_head, key);
}

// First texel of q's row (token, head) in the bound window.
uint q_texel(uint token, uint head) {
  return token * pc.q_tok + head * pc.q_head - pc.q_base;
}

// First element of out's row (token, head) in the bound window.
uint out_elem(uint token, uint head) {
  return token * pc.out_tok + head * pc.out_head - pc.out_base;
}

// Texel t of k (which 0), v (1) or q (2).
uvec4 fetch_texel(uint which, int t) {
  return which == 0u ? texelFetch(k_tex, t) : which == 1u ? texelFetch(v_tex, t) : texelFetch(q_tex, t);
}

// The raw words that hold elements [4c, 4c + 4) of the row starting at
// texel `base`: its texel (kind 2: 16-byte texels of eight 16-bit or 8-bit
// elements, so slices c and c ^ 1 share one; kind 1: four elements), or
// for kind 0 four single elements gathered, clamped into the row.
// which: 0 = k, 1 = v, 2 = q.
uvec4 raw_chunk(uint which, uint kind_vec, uint dim, uint base, uint c) {
  if (kind_vec == 2u) return fetch_texel(which, int(base + c / 2u));
  if (kind_vec == 1u) return fetch_texel(which, int(base + c));
  uvec4 w;
  [[unroll]] for (uint e = 0u; e < 4u; ++e)
    w[e] = fetch_texel(which, int(base + min(4u * c + e, dim - 1u))).x;
  return w;
}

// Elements [4c, 4c + 4) of dtype dt from raw_chunk's words, zero beyond the
// head dim. 8-bit codes (K/V of an 8-bit cache; kind 2 texels hold 8, kind
// 1 texels 4, kind 0 one) are not yet scaled (kv_scale).
vec4 decode_chunk(uint dt, uint kind_vec, uint dim, uvec4 w, uint c) {
  if (dt == DT_Q4) {  // kind 2 over 32-bit texels: chunk c is half c & 1 of w.x
    uint h = (c & 1u) != 0u ? w.x >> 16 : w.x & 0xffffu;
    vec4 r = vec4(ivec4(int(h << 28), int(h << 24), int(h << 20), int(h << 16)) >> 28);
    [[unroll]] for (uint e = 0u; e < 4u; ++e) r[e] = 4u * c + e < dim ? r[e] : 0.0;
    return r;
  }
  if (dt >= DT_I8) {
    if (kind_vec == 2u) return decode8x4(dt, (c & 1u) != 0u ? w.y : w.x);
    if (kind_vec == 1u) return decode8x4(dt, w.x);
    uint g = 0u;  // kind 0: four single codes gathered into one word
    [[unroll]] for (uint e = 0u; e < 4u; ++e) g |= (w[e] & 0xffu) << (8u * e);
    vec4 r = decode8x4(dt, g);
    [[unroll]] for (uint e = 0u; e < 4u; ++e) r[e] = 4u * c + e < dim ? r[e] : 0.0;
    return r;
  }
  if (kind_vec == 2u) {
    uvec2 h = (c & 1u) != 0u ? w.zw : w.xy;
    if (dt == DT_F16) return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    return uintBitsToFloat(uvec4(h.x << 16, h.x & 0xffff0000u, h.y << 16, h.y & 0xffff0000u));
  }
  if (kind_vec == 1u) {
    if (dt == DT_F32) return uintBitsToFloat(w);
    if (dt == DT_F16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
  }
  vec4 r;
  [[unroll]] for (uint e = 0u; e < 4u; ++e) {
    float x = dt == DT_F32 ? uintBitsToFloat(w[e]) : decode16(dt, w[e] & 0xffffu);
    r[e] = 4u * c + e < dim ? x : 0.0;
  }
  return r;
}

// Elements [4c, 4c + 4) of the K/V/q row starting at texel `base` (zero
// beyond the head dim). which: 0 = k, 1 = v, 2 = q (q has its own dtype QDT).
vec4 fetch_row(uint kind_vec, uint dim, uint base, uint c, uint which) {
  return decode_chunk(which == 2u ? QDT : KDT, kind_vec, dim,
                      raw_chunk(which, kind_vec, dim, base, c), c);
}

#endif

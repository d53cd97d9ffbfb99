#version 450
// vkattn_step_append: writes the new tokens of one layer into their pages,
// converted to the cache dtype (round to nearest even; same dtype = the
// same bits). Workgroups take (token, kv head) rows of K or V; a lane
// writes units of a row: a 32-bit word of a 16-bit cache row of even length,
// else one element (odd 16-bit rows share words with their neighbours:
// atomics).
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 8) in;

// K and V pools: the cache binds its pool buffer twice; caller pools
// (vkattn_paged_append) are two tensors.
layout(std430, binding = 0) buffer PoolK {
  uint pool_k[];
};
layout(std430, binding = 4) buffer PoolV {
  uint pool_v[];
};
layout(std430, binding = 1) readonly buffer KNew {
  uint k_new[];
};
layout(std430, binding = 2) readonly buffer VNew {
  uint v_new[];
};
// Per token of this chunk: (row in k_new/v_new counted from the chunk's
// first row, local page * page_size + slot).
layout(std430, binding = 3) readonly buffer Jobs {
  uvec2 jobs[];
};
// The *_rope appends: per job, rope_rd / 2 (cos, sin) of its position.
layout(std430, binding = 5) readonly buffer RopeTable {
  vec2 rope_cs[];
};

layout(push_constant) uniform Push {
  uint n_units;  // rows: tokens x kv heads x 2 (K, V)
  uint hkv;
  uint d;
  uint dv;
  uint uk;  // units per K row
  uint uv;  // units per V row
  uint page_size;
  uint page_elems;  // K page stride, elements (the cache: one slab, a layer of a page)
  uint k_off;       // K of local page 0, elements from the bound window's start
  uint v_off;
  uint in_dt;
  uint cache_dt;
  // Elements of the bound k_new / v_new windows before the chunk's first
  // row (job rows count from that row: windows keep indices 32-bit).
  uint k_skip;
  uint v_skip;
  uint v_page_elems;  // V page stride
  // Row strides (slot, head) in elements: the cache's [Hkv, page_size,
  // dim] pages, or a caller pool's [page_size, Hkv, dim] view.
  uint k_tok;
  uint k_head;
  uint v_tok;
  uint v_head;
  uint pairs;  // 16-bit rows start on even elements: write 32-bit words
  // RoPE of the keys (0 = none): elements [rope_off, rope_off + rope_rd)
  // of each K row, pairs interleaved (rope_gptj) or halves.
  uint rope_rd;
  uint rope_off;
  uint rope_gptj;
}
pc;

void write_word(bool is_v, uint i, uint w) {
  if (is_v)
    pool_v[i] = w;
  else
    pool_k[i] = w;
}

void write_half(bool is_v, uint i, uint bits) {
  if (is_v)
    STORE16_ATOMIC(pool_v, i, bits)
  else
    STORE16_ATOMIC(pool_k, i, bits)
}

// Element i of k_new / v_new (i counted from the chunk's first row).
float input_value(bool is_v, uint i) {
  i += is_v ? pc.v_skip : pc.k_skip;
  return is_v ? LOAD_ELEM(v_new, pc.in_dt, i) : LOAD_ELEM(k_new, pc.in_dt, i);
}

// x rounded to the cache dtype (nearest even), as its bits.
uint cache_bits(float x) {
  return pc.cache_dt == DT_F32 ? floatBitsToUint(x) : encode16(pc.cache_dt, x);
}

// Element i of the input, as cache-dtype bits (the same dtype: the same
// bits, NaN payloads included).
uint convert(bool is_v, uint i) {
  if (pc.in_dt != pc.cache_dt) return cache_bits(input_value(is_v, i));
  i += is_v ? pc.v_skip : pc.k_skip;
  uint w = is_v ? v_new[pc.in_dt == DT_F32 ? i : i >> 1] : k_new[pc.in_dt == DT_F32 ? i : i >> 1];
  return pc.in_dt == DT_F32 ? w : (w >> ((i & 1u) * 16u)) & 0xffffu;
}

// Element e of the row starting at `src` (of chunk job `job`) as cache-dtype
// bits: keys rotated first when RoPE is on (before any rounding).
uint convert_rope(bool is_v, uint job, uint src, uint e) {
  if (is_v || pc.rope_rd == 0u || e < pc.rope_off || e >= pc.rope_off + pc.rope_rd)
    return convert(is_v, src + e);
  uint half_rd = pc.rope_rd / 2u, j = e - pc.rope_off;
  uint pair = pc.rope_gptj != 0u ? j / 2u : j % half_rd;
  bool first = pc.rope_gptj != 0u ? (j & 1u) == 0u : j < half_rd;
  uint partner = pc.rope_gptj != 0u ? (first ? e + 1u : e - 1u) : (first ? e + half_rd : e - half_rd);
  vec2 c = rope_cs[job * half_rd + pair];
  float x = input_value(false, src + e), y = input_value(false, src + partner);
  return cache_bits(first ? x * c.x - y * c.y : x * c.x + y * c.y);
}

void main() {
  // Workgroups stride over the (token, kv head, K or V) rows; the 8 lanes
  // (one lavapipe subgroup: 64-lane workgroups measured 2x slower here)
  // stride over the units of a row. The host keeps both loops short (loop
  // cap: src/ops/kv_append.cpp append_rows_per_group).
  uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  for (uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; wid < pc.n_units;
       wid += groups) {
    uint job = wid / (2u * pc.hkv);
    uint h = (wid >> 1) % pc.hkv;
    bool is_v = (wid & 1u) != 0u;
    uint dim = is_v ? pc.dv : pc.d;
    uint units = is_v ? pc.uv : pc.uk;
    uvec2 jb = jobs[job];
    uint page = jb.y / pc.page_size, slot = jb.y % pc.page_size;
    uint src = (jb.x * pc.hkv + h) * dim;
    uint dst = is_v ? page * pc.v_page_elems + pc.v_off + slot * pc.v_tok + h * pc.v_head
                    : page * pc.page_elems + pc.k_off + slot * pc.k_tok + h * pc.k_head;
    for (uint u = gl_LocalInvocationID.x; u < units; u += 8u) {
      if (pc.cache_dt == DT_F32) {
        write_word(is_v, dst + u, convert_rope(is_v, job, src, u));
      } else if (dim % 2u == 0u && pc.pairs != 0u) {
        uint e = 2u * u;
        write_word(is_v, (dst + e) >> 1, convert_rope(is_v, job, src, e) | (convert_rope(is_v, job, src, e + 1u) << 16));
      } else {
        write_half(is_v, dst + u, convert_rope(is_v, job, src, u));
      }
    }
  }
}

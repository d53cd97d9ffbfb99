// Bindings, push constants and row reads shared by kv_append.comp (16/32-
// bit caches and pools) and kv_append_q8.comp (8-bit caches): see
// src/ops/kv_append.cpp for the host side.
#ifndef VKATTN_KV_APPEND_COMMON_GLSL
#define VKATTN_KV_APPEND_COMMON_GLSL

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
// fp8 caches: every layer's scales, [layer][K, V][hkv] (ops/kv_cache.h).
layout(std430, binding = 6) readonly buffer Fp8Scales {
  float fp8_scales[];
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
  // 8-bit caches: bytes from a K (V) block's start to its int8 scales
  // [hkv][page_size] f32; fp8: this layer's first entry in fp8_scales.
  uint k_scale_off;
  uint v_scale_off;
  uint scale_base;
  // Q4 caches with VKATTN_KV_ROTATE_KEYS: the Walsh-Hadamard group of
  // the keys (1 = none) and its normalization 1 / sqrt(k_rot).
  uint k_rot;
  float k_rot_scale;
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

bool rotated(bool is_v, uint e) {
  return !is_v && pc.rope_rd != 0u && e >= pc.rope_off && e < pc.rope_off + pc.rope_rd;
}

// Element e of the row starting at `src` (of chunk job `job`) as a float:
// keys rotated first when RoPE is on.
float new_value(bool is_v, uint job, uint src, uint e) {
  if (!rotated(is_v, e)) return input_value(is_v, src + e);
  uint half_rd = pc.rope_rd / 2u, j = e - pc.rope_off;
  uint pair = pc.rope_gptj != 0u ? j / 2u : j % half_rd;
  bool first = pc.rope_gptj != 0u ? (j & 1u) == 0u : j < half_rd;
  uint partner = pc.rope_gptj != 0u ? (first ? e + 1u : e - 1u) : (first ? e + half_rd : e - half_rd);
  vec2 c = rope_cs[job * half_rd + pair];
  float x = input_value(false, src + e), y = input_value(false, src + partner);
  return first ? x * c.x - y * c.y : x * c.x + y * c.y;
}

// Element e of the row as cache-dtype bits (16/32-bit caches): rotated
// keys are rounded once, after the rotation.
uint convert_rope(bool is_v, uint job, uint src, uint e) {
  if (!rotated(is_v, e)) return convert(is_v, src + e);
  return cache_bits(new_value(is_v, job, src, e));
}

// The row of work item `wid`: its job, kv head, K or V, and where it goes.
struct AppendRow {
  uint job, h, dim, units, page, slot, src, dst;
  bool is_v;
};

AppendRow append_row(uint wid) {
  AppendRow r;
  r.job = wid / (2u * pc.hkv);
  r.h = (wid >> 1) % pc.hkv;
  r.is_v = (wid & 1u) != 0u;
  r.dim = r.is_v ? pc.dv : pc.d;
  r.units = r.is_v ? pc.uv : pc.uk;
  uvec2 jb = jobs[r.job];
  r.page = jb.y / pc.page_size;
  r.slot = jb.y % pc.page_size;
  r.src = (jb.x * pc.hkv + r.h) * r.dim;
  r.dst = r.is_v ? r.page * pc.v_page_elems + pc.v_off + r.slot * pc.v_tok + r.h * pc.v_head
                 : r.page * pc.page_elems + pc.k_off + r.slot * pc.k_tok + r.h * pc.k_head;
  return r;
}

#endif

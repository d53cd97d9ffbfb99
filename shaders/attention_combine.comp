#version 450
// Second pass of split-KV attention: merges partial results (rows
// normalized per split, with their lse) by lse. One workgroup per combine
// item (src/ops/attention/plan.h CombineItem): its rows row0.. (at most
// `stride`), each with n_slots partials at arena rows src + s * stride.
// A level of the schedule's combine tree writes a partial again (dst !=
// NO_SLOT), the last level writes out/lse. A split that saw no key (lse
// -inf) has weight 0 and is skipped, never multiplied (its row may hold
// anything). A split whose lse is NaN (a visible NaN or +inf score), or a
// +inf lse (exp(inf - inf)), makes the row's out and lse NaN.
//
// Parallel over the item, in chunks of RC rows (RC x n_slots <= MAX_W):
//   1. every lane loads (row, slot) lse values into shared memory;
//   2. LPR lanes per row reduce them (a shared-memory tree): the row's
//      max M, then the sum of exp(lse - M); one lane joins the sink;
//   3. the weights exp(lse - M) / sum replace the lse values, once per
//      (row, slot);
//   4. lanes take (row, 32-bit word of out) jobs: each sums its elements
//      over the slots, the slots' loads independent (4 issued at a time),
//      and stores a whole word where both halves are the row's (16-bit
//      outputs; atomics only on a row's partial edge words, which may be
//      shared with a neighbour or the caller's data beside a view).
//
// Budget (64 lanes, one item per workgroup; a decode's items have 4-16
// rows of dv 64-512 and 2-64 slots): 10 KiB of shared memory (2048
// weights, the reductions' and rows' 64-entry arrays); per lane 2
// accumulators, 8 loads in flight (4 slots x 2 elements); ~1 FMA per
// 4-byte partial element read (memory-bound: a decode's few hundred
// items need few workgroups, so occupancy is not its limit). Fake GPUs
// (build/static, 2026-11-28): 32-36 VGPRs on RDNA2/3, 3 waves/SIMD (LDS);
// 48 registers on NVK; 32 (a740) / 21 (a660) registers on Adreno; 75 on
// M1; no spill, no scratch anywhere. Loop
// cost per lane (lavapipe's cap): src/ops/attention/prepare.cpp
// combine_loop_cost mirrors every loop below; combine_fan_in keeps it, and
// n_slots <= MAX_W, within the cap.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint QDT = DT_F32;  // out's dtype (q's, or f32: kFlagOutF32)

layout(std430, binding = 0) coherent buffer Out { uint out_w[]; };
layout(std430, binding = 1) writeonly buffer Lse { float lse_out[]; };
layout(std430, binding = 2) readonly buffer Items { CombineItem items[]; };
layout(std430, binding = 3) readonly buffer Seqs { Seq seqs[]; };
layout(std430, binding = 4) buffer PartO { float part_o[]; };
layout(std430, binding = 5) buffer PartL { float part_lse[]; };
layout(std430, binding = 6) readonly buffer Sinks { float sinks[]; };  // [H], F_SINKS

layout(push_constant) uniform Push {
  uint n_items;
  uint num_heads;
  uint num_kv_heads;
  uint flags;
  uint dv;
  uint item_base;  // items[item_base + id]
  uint seq_base;   // first record / element of each window (attention_common.glsl)
  uint out_base;
  uint lse_base;
  uint out_tok;  // out's row strides (token, head), elements
  uint out_head;
} pc;

const uint LANES = 64u;
const uint MAX_W = 2048u;  // (row, slot) weights of a chunk; combine_fan_in keeps n <= MAX_W
shared float sh_w[MAX_W];
shared float sh_a[LANES];  // the reduction's partials: max, then sum
shared uint sh_nan[LANES];
// Per row of the chunk: M (NEG_INF: no key), the sum, the sink factor,
// the lse, whether the row is NaN.
shared float sh_m[LANES], sh_tot[LANES], sh_f[LANES], sh_lse[LANES];
shared uint sh_bad[LANES];

// The tree over the LPR lanes of each row (lanes r * LPR .. + LPR): max or
// sum of sh_a, OR of sh_nan, into the row's first lane. Every lane calls it.
void reduce_rows(uint lane, uint lpr, bool is_max) {
  for (uint off = lpr / 2u; off > 0u; off /= 2u) {
    memoryBarrierShared();
    barrier();
    if (lane % lpr < off) {
      float a = sh_a[lane], b = sh_a[lane + off];
      sh_a[lane] = is_max ? max(a, b) : a + b;
      sh_nan[lane] |= sh_nan[lane + off];
    }
  }
  memoryBarrierShared();
  barrier();
}

// A word job's store: o at out element e_abs, and o2 at e_abs + 1 where
// that element is the row's too (whole_word; for 16-bit outputs e_abs is
// then even: both halves of one word, stored at once).
void store_out(uint e_abs, float o, bool whole_word, float o2) {
  if (QDT == DT_F32) {
    out_w[e_abs] = floatBitsToUint(o);
    if (whole_word) out_w[e_abs + 1u] = floatBitsToUint(o2);
  } else if (whole_word) {
    out_w[e_abs >> 1] = encode16(QDT, o) | (encode16(QDT, o2) << 16);
  } else {
    STORE16_ATOMIC(out_w, e_abs, encode16(QDT, o));
  }
}

void main() {
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;
  uint lane = gl_LocalInvocationID.x;
  CombineItem it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  uint G = pc.num_heads / pc.num_kv_heads;
  uint DV = pc.dv;
  uint n = it.n_slots;
  uint row_end = min(sq.t * G, it.row_end);
  uint rows = row_end > it.row0 ? min(it.stride, row_end - it.row0) : 0u;
  if (rows == 0u || n == 0u) return;  // (uniform in the workgroup)
  // Rows a chunk: the weights fit sh_w, a row has at least one lane.
  uint rc = min(min(rows, LANES), max(1u, MAX_W / max(n, 1u)));
  uint lpr = 1u;  // lanes per row: the largest power of two <= LANES / rc
  while (lpr * 2u * rc <= LANES) lpr *= 2u;
  uint words = (DV + 1u) / 2u;  // words of a row; an odd base needs one more (jobs: words + 1)
  for (uint c0 = 0u; c0 < rows; c0 += rc) {
    uint cr = min(rc, rows - c0);
    // 1. the chunk's lse values
    for (uint p = lane; p < cr * n; p += LANES)
      sh_w[p] = part_lse[it.src + (p % n) * it.stride + c0 + p / n];
    memoryBarrierShared();
    barrier();
    // 2. per row: max (and NaN), then the sum of exp(lse - M)
    uint r = lane / lpr, sub = lane % lpr;
    float mx = NEG_INF;
    bool nan_part = false;
    if (r < cr)
      for (uint s = sub; s < n; s += lpr) {
        float x = sh_w[r * n + s];
        mx = max(mx, x);
        nan_part = nan_part || isnan(x);
      }
    sh_a[lane] = mx;
    sh_nan[lane] = nan_part ? 1u : 0u;
    reduce_rows(lane, lpr, true);
    float M = sh_a[r * lpr];
    float total = 0.0;
    if (r < cr && M != NEG_INF)
      for (uint s = sub; s < n; s += lpr) total += exp(sh_w[r * n + s] - M);
    memoryBarrierShared();
    barrier();  // every lane read its row's M before the sums overwrite sh_a
    sh_a[lane] = total;
    reduce_rows(lane, lpr, false);
    if (sub == 0u && r < cr) {
      float tot = sh_a[lane];
      bool bad = sh_nan[lane] != 0u || isnan(tot);
      float lse = bad ? NAN_F : M == NEG_INF ? NEG_INF : M + log(tot);
      // The last level joins the head's sink (once per row, API.md "Models").
      float f = 1.0;
      uint row = it.row0 + c0 + r;
      if (it.dst == NO_SLOT && (pc.flags & F_SINKS) != 0u)
        f = join_sink(lse, sinks[it.kv_head * G + row % G]);
      sh_m[r] = M;
      sh_tot[r] = tot;
      sh_f[r] = f;
      sh_lse[r] = lse;
      sh_bad[r] = bad ? 1u : 0u;
    }
    memoryBarrierShared();
    barrier();
    // 3. weights exp(lse - M) / sum, once per (row, slot); 0 for a split
    //    with no key (or a row with none)
    for (uint p = lane; p < cr * n; p += LANES) {
      uint pr = p / n;
      float Mr = sh_m[pr];
      sh_w[p] = Mr == NEG_INF ? 0.0 : exp(sh_w[p] - Mr) / sh_tot[pr];
    }
    memoryBarrierShared();
    barrier();
    // 4. (row, word) jobs
    for (uint j = lane; j < cr * (words + 1u); j += LANES) {
      uint jr = j / (words + 1u), jw = j % (words + 1u);
      uint row = it.row0 + c0 + jr;
      uint orow_tok = sq.q_off + row / G, orow_head = it.kv_head * G + row % G;
      uint base = orow_tok * pc.out_tok + orow_head * pc.out_head - pc.out_base;
      // Word jw of the row: elements [e0, e0 + 2) of it, e0 = 2 jw - (base & 1)
      // (16-bit outputs align pairs to words; f32 takes pairs as they come).
      uint shift = (QDT == DT_F32 || it.dst != NO_SLOT) ? 0u : (base & 1u);
      int e0 = int(2u * jw) - int(shift);
      if (e0 >= int(DV) || (jw == words && shift == 0u)) continue;
      bool lo_in = e0 >= 0, hi_in = e0 + 1 < int(DV);
      uint ea = uint(max(e0, 0)), eb = uint(e0 + 1);
      float o0 = 0.0, o1 = 0.0;
      uint prow = it.src + c0 + jr;
      uint s = 0u;
      for (; s + 4u <= n; s += 4u) {  // four slots' loads issued before their sums
        float w0 = sh_w[jr * n + s], w1 = sh_w[jr * n + s + 1u];
        float w2 = sh_w[jr * n + s + 2u], w3 = sh_w[jr * n + s + 3u];
        uint r0 = (prow + s * it.stride) * DV, r1 = r0 + it.stride * DV;
        uint r2 = r1 + it.stride * DV, r3 = r2 + it.stride * DV;
        float a0 = lo_in ? part_o[r0 + ea] : 0.0, b0 = hi_in ? part_o[r0 + eb] : 0.0;
        float a1 = lo_in ? part_o[r1 + ea] : 0.0, b1 = hi_in ? part_o[r1 + eb] : 0.0;
        float a2 = lo_in ? part_o[r2 + ea] : 0.0, b2 = hi_in ? part_o[r2 + eb] : 0.0;
        float a3 = lo_in ? part_o[r3 + ea] : 0.0, b3 = hi_in ? part_o[r3 + eb] : 0.0;
        if (w0 > 0.0) o0 += w0 * a0, o1 += w0 * b0;
        if (w1 > 0.0) o0 += w1 * a1, o1 += w1 * b1;
        if (w2 > 0.0) o0 += w2 * a2, o1 += w2 * b2;
        if (w3 > 0.0) o0 += w3 * a3, o1 += w3 * b3;
      }
      for (; s < n; ++s) {
        float w = sh_w[jr * n + s];
        uint rs = (prow + s * it.stride) * DV;
        float a = lo_in ? part_o[rs + ea] : 0.0, b = hi_in ? part_o[rs + eb] : 0.0;
        if (w > 0.0) o0 += w * a, o1 += w * b;
      }
      bool bad = sh_bad[jr] != 0u;
      float f = sh_f[jr];
      o0 = bad ? NAN_F : o0 * f;
      o1 = bad ? NAN_F : o1 * f;
      if (it.dst != NO_SLOT) {
        uint drow = (it.dst + c0 + jr) * DV;
        part_o[drow + ea] = o0;
        if (hi_in) part_o[drow + eb] = o1;
      } else if (lo_in) {
        store_out(base + ea, o0, hi_in, o1);
      } else {  // the row's first element, upper half of a shared word
        STORE16_ATOMIC(out_w, base + eb, encode16(QDT, o1));
      }
    }
    if (lane < cr) {
      uint row = it.row0 + c0 + lane;
      if (it.dst != NO_SLOT) {
        part_lse[it.dst + c0 + lane] = sh_lse[lane];
      } else if ((pc.flags & F_WRITE_LSE) != 0u) {
        uint orow = (sq.q_off + row / G) * pc.num_heads + it.kv_head * G + row % G;
        lse_out[orow - pc.lse_base] = sh_lse[lane];
      }
    }
    memoryBarrierShared();
    barrier();  // the next chunk reuses the shared arrays
  }
}

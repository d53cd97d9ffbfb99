#version 450
// Flash attention forward, family `coopmat` (src/ops/attention/families/coopmat.cpp):
// Q K^T and P V as cooperative-matrix products (VK_KHR_cooperative_matrix,
// the tensor cores of NVIDIA, AMD RDNA3+ and Intel Xe2), softmax in f32.
// Built only with -DVKATTN_COOPMAT=ON (Debian 12's glslang cannot compile
// it: tools/with-mesa26.sh fetches Debian 13's).
//
// A workgroup of NSG subgroups serves one work item (sequence, kv head,
// rows [row0, row_end), keys [k_begin, k_end), as every family); subgroup
// sg owns rows row0 + sg * TM .. + TM, the M side of every product. Per
// tile of BC keys:
//   1. S = Q K^T, TM x TN blocks accumulated in fragments over the head
//      dim, one chunk of DC columns at a time: the workgroup stages the
//      chunk's K columns of the tile in shared memory as f16 (zero beyond
//      the key range, padding keys and the head dim), and q's (scaled, f16)
//      unless the whole head dim fits one chunk (then q is staged once:
//      with QREG through the K/V tile into A fragments the subgroup keeps
//      in registers for every tile, FlashAttention-2's Q in registers,
//      which frees q's shared memory for 64-key tiles); S goes to shared
//      memory as f32 (the accumulators' only way out), a block as soon as
//      it is done where one chunk holds the head dim;
//   2. the subgroup's lanes take its rows, LPR lanes a row (SG / TM by
//      default: every row at once; each lane a strided share of the tile's
//      keys; row max and sum by subgroup shuffles): transforms and visibility exactly as attention_mask.glsl
//      says (a hidden score is -inf; a row that sees the tile whole, its
//      first and last keys visible and no mask compiled in, skips the
//      per-pair tests: only tiles on an edge evaluate them), the
//      online-softmax update, P as f16,
//      the row's rescale alpha;
//   3. O = O * alpha + P V, DVC columns of V at a time: the chunk's V
//      columns, f16, zero for keys no row of the item sees (so a 0 in P
//      never meets a NaN in V). Where O lives (OREG):
//      2, accumulators (one V chunk): each of O's TM x TN blocks is a
//      cooperative matrix across the tiles; the rows' alphas are written
//      into a TM x TN block (row i all alpha_i) in the subgroup's score
//      rows, loaded as an accumulator (the same opaque layout as O's) and
//      multiplied in element by element, then P V is added in place: no
//      round trip through shared memory until the end (the store, once
//      per item, goes BC / TN blocks at a time through the score rows);
//      1, registers of a known layout (one V chunk; a lane holds the same
//      TM*TN/SG elements of every block: element e = lane + SG * k of a
//      block is its row e / TN, column e % TN): each block of P V starts
//      from zero in a fresh accumulator, is stored into the subgroup's
//      score rows, and the lanes add it to O (a round trip per block);
//      0, shared memory (MLA's dv 512, or V in chunks), the same way.
//      A NaN in V at a key that some row of the tile sees reaches the
//      tile's other rows too (0 * NaN), as in every tensor-core attention.
// Per tile with one chunk: four workgroup barriers (before K is stored,
// after it, after the softmax, after V is stored) and two subgroup ones
// (the scores, the alpha block) with accumulators; OREG 1 adds two a
// block of P V.
// K and V take turns in one shared tile (sh_kv: K's chunk for step 1, V's
// for step 3). Where each is one chunk (ONE_CHUNK: the head dims fit), the
// tile's V is loaded into registers when the tile starts and the next
// tile's K right after this one's is staged, so both global loads run
// under the math (V's unconditionally: a key no row sees is zeroed when
// it is stored, never skipped by the load, which would wait for the
// softmax); with chunks, each chunk is loaded when it is staged.
// Between a subgroup's stores and its own lanes' loads (scores, P V
// blocks) a subgroup barrier is enough: no other subgroup touches those
// rows. Workgroup barriers guard only what is shared (the K/V tile, the
// seen-keys mask): four per tile when V is one chunk.
//
// The Vulkan rules the matrices follow (../shared/GPU-KERNELS.md §2; an
// H100 gave wrong answers when they did not): every array a coopMatLoad
// or coopMatStore touches is of 4-vectors (f16vec4 for f16 operands, vec4
// for the f32 scores and products), offsets and strides are counted in
// those vectors and are multiples of 16 bytes (rows padded by 2 f16vec4,
// as ggml's cm1), every shared array is a whole number of 16 bytes (so
// that whatever order the driver packs them in, each starts on 16 bytes:
// the H200 found this one, 2026-11-28), a barrier with shared-memory
// semantics sits between every write and the load that reads it, the
// one accumulator loaded from memory (OREG 2's alpha block, never a
// product read back) comes from the vec4 score rows on 16-byte offsets
// and strides (the two H100 symptoms: an accumulator reloaded from a
// scalar float array read 0 or garbage; S missed the last two head-dim
// elements, as a 4-byte-misaligned scalar f16 row would; both were arrays
// off 16 bytes; VKATTN_ATTN_O_REGS=1 avoids the load where a driver
// still gets it wrong, and the self-check falls back), the pipeline
// asks for full subgroups of the size the shapes were queried for where
// the device allows it (src/ops/attention/families/coopmat.cpp), and the
// SPIR-V is not optimized (CMakeLists.txt).
// The chunks (DC, DVC) keep MLA's d 576 / dv 512 within 32 KiB: the host
// narrows them only when the whole head dims do not fit (src/ops/attention/variant.cpp).
// Tile shape (TM, TN, TK) comes from the device's cooperative-matrix
// properties (16x16x16 / 16x8x16 on NVIDIA, 8x8x8 on lavapipe); head dims
// are padded to it with zeros in shared memory. K/V are f16 (or 8-bit
// caches, dequantized into the f16 tiles): the host declines bf16 and f32
// (they run on `tiled`, logged).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 8;    // lanes per workgroup: NSG subgroups
layout(constant_id = 1) const uint NSG = 1;   // subgroups per workgroup
layout(constant_id = 2) const uint BC = 16;   // keys per tile (a multiple of TN and TK)
layout(constant_id = 3) const uint D = 64;    // head dim of q/k
layout(constant_id = 4) const uint DV = 64;   // head dim of v/out
layout(constant_id = 5) const uint QDT = DT_F32;
layout(constant_id = 6) const uint KDT = DT_F16;
layout(constant_id = 7) const uint KVEC = 1;  // texel kinds (attention_fetch.glsl)
layout(constant_id = 8) const uint VVEC = 1;
layout(constant_id = 9) const uint QVEC = 1;
layout(constant_id = 10) const uint PAGED = 0;  // K/V in the pages of a paged KV cache
layout(constant_id = 11) const uint FEATURES = 0xffffffffu;  // transforms compiled in
layout(constant_id = 12) const uint TM = 8;   // matrix shape: rows of A and C
layout(constant_id = 13) const uint TN = 8;   // columns of B and C
layout(constant_id = 14) const uint TK = 8;   // columns of A, rows of B
layout(constant_id = 15) const uint DC = 64;  // q/k head-dim columns per chunk: a multiple of TK, <= DP
layout(constant_id = 16) const uint DVC = 64; // v head-dim columns per chunk: a multiple of TN, <= DVP
layout(constant_id = 17) const uint SG = 8;    // the subgroup size the pipeline requires
layout(constant_id = 18) const uint OREG = 0;  // O: 0 shared, 1 registers (DVC == DVP, TM*TN % SG == 0), 2 accumulators (DVC == DVP)
layout(constant_id = 19) const uint LPR = 1;   // lanes a row in the softmax: SG / TM .. SG, powers of 2
layout(constant_id = 20) const uint QREG = 0;  // 1: q's A fragments in registers (DC == DP, DVC == DVP, ROWS*QS <= KVN)
layout(constant_id = 21) const uint COLS = 0;  // 1: the subgroups share TM rows, splitting S's head dim and O's columns (OREG 2)
layout(constant_id = 22) const uint UHF = 0;   // 1: the mask function reads no head (its range scan: once per token)

const uint D4 = (D + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;
const uint DP = (D + TK - 1u) / TK * TK;     // q/k head dim padded to TK
const uint DVP = (DV + TN - 1u) / TN * TN;  // v head dim padded to TN
const uint DC4 = DC / 4u;
const uint DVC4 = DVC / 4u;
const bool Q_ONCE = DC == DP;  // q staged once, not per tile and chunk
// COLS (MLA's dv 512 on 32 lanes: O's columns too many for one subgroup's
// registers, FlashMLA's split): the NSG subgroups share the item's TM
// rows; each computes a partial S over every NSG-th TK columns of the head
// dim into its own score rows, the softmax sums the partials (TM / NSG
// rows a subgroup), and each subgroup owns DVP / NSG of O's columns in
// accumulators. Else each subgroup owns TM rows.
const bool COLS_ = COLS != 0u;
const uint ROWS = COLS_ ? TM : NSG * TM;  // rows of a work item
const uint SROWS = NSG * TM;  // score rows: each subgroup's TM (COLS: its partial S)
const uint SMR = COLS_ ? TM / NSG : TM;  // rows a subgroup's softmax takes

// Row strides of the matrix arrays, in their vectors: whole rows plus a
// pad of 16 bytes (2 f16vec4, 1 vec4) against bank conflicts. DC, DVC and
// BC are multiples of 8 (TK and TN are), so every f16vec4 stride and
// offset below is even: 16-byte aligned.
const uint QS = DC / 4u + 2u;   // f16vec4 per staged q or K row
const uint VS = DVC / 4u + 2u;  // f16vec4 per staged V row
const uint PS = BC / 4u + 2u;   // f16vec4 per P row
const uint SS = BC / 4u + 1u;   // vec4 per score row
const uint KVN = BC * (QS > VS ? QS : VS);
// Q_REGS: q is staged once in the K/V tile (before the first K), loaded
// into A fragments, and never read from shared memory again.
// (Only where q, K and V are each one chunk: the fragments are read on
// that path; the host sets QREG nowhere else.)
const bool Q_REGS = QREG != 0u && DC == DP && DVC == DVP;
shared f16vec4 sh_q[Q_REGS ? 2u : ROWS * QS];  // a chunk of q's columns
shared f16vec4 sh_kv[KVN];       // the tile's K (rows of QS), then its V (rows of VS)
shared vec4 sh_s[SROWS * SS];    // scores, masked ones as -inf; then P V blocks, output blocks
shared f16vec4 sh_p[ROWS * PS];  // exp(s - m)
const uint RPP = SG / LPR;  // rows the subgroup's softmax takes at once (divides SMR)
// ONE_CHUNK: K and V are loaded a tile ahead into registers, KL and VL
// 4-vectors a lane.
const bool ONE_CHUNK = DC == DP && DVC == DVP;
const uint KL = ONE_CHUNK ? (BC * DC4 + WG - 1u) / WG : 1u;
const uint VL = ONE_CHUNK ? (BC * DVC4 + WG - 1u) / WG : 1u;
const bool O_IN_REGS = OREG == 1u;  // scalars of a known layout
const bool O_ACC = OREG == 2u;      // accumulators (opaque), rescaled by a loaded alpha block
const uint NB = O_IN_REGS || O_ACC ? DVP / TN / (COLS_ ? NSG : 1u) : 1u;  // blocks of O's columns a subgroup owns
const uint OE = O_IN_REGS ? TM * TN / SG : 1u;       // a lane's elements of one block
// Every shared array below is a whole number of 16 bytes as well (the
// scalar ones rounded up to 4 words): the driver chooses where each array
// sits, and NVIDIA's (580, H200, 2026-11-28) placed 4-byte ones before the
// matrix arrays, leaving those 8 bytes off 16 (its reported shared size
// was ours + 8 or + 12) so that every coopMatLoad/Store read or wrote rows
// 8 bytes off: every coopmat self-check failed. With every size a multiple
// of 16, any packing order keeps every array on a 16-byte boundary.
const uint ROWS4 = (ROWS + 3u) / 4u * 4u;
const uint KW = (BC + 31u) / 32u;  // words of a per-key bit mask
shared float sh_o[O_IN_REGS || O_ACC ? 4u : ROWS * DVP];  // unnormalized output rows (scalar code only)
shared float sh_m[ROWS4], sh_l[ROWS4], sh_alpha[ROWS4];
shared uint sh_kseen[(KW + 3u) / 4u * 4u];  // bit j: some row of the work item sees key kt + j
#if USER_MASK != 0
// Attention variants with a mask function: the item's tiles that some row
// sees, [first, last + 1) (the range scan in main; 4 words: 16 bytes).
shared uint sh_urange[4];
#endif

#include "attention_fetch.glsl"
#include "attention_mask.glsl"
#include "attention_store.glsl"

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

// q's columns [c0, c0 + DC) of the item's rows, scaled, f16, zero beyond
// the rows and the head dim.
void stage_q(Item it, Seq sq, uint G, uint row_lim, uint c0) {
  for (uint x = gl_LocalInvocationID.x; x < ROWS * DC4; x += WG) {
    uint rr = x / DC4, cl = x % DC4, c = c0 / 4u + cl, r = it.row0 + rr;
    vec4 q = vec4(0.0);
    if (r < row_lim && c < D4)
      q = fetch_row(QVEC, D, q_texel(sq.q_off + r / G, it.kv_head * G + r % G), c, 2u) * pc.scale;
    if (Q_REGS)
      sh_kv[rr * QS + cl] = f16vec4(q);
    else
      sh_q[rr * QS + cl] = f16vec4(q);
  }
}

// Texel x of the tile's K chunk (key kt + x / DC4, columns c0 + 4 (x %
// DC4)): f16, zero beyond the key range, padding keys and the head dim
// (8-bit caches dequantized into it).
f16vec4 k_texel(Item it, Seq sq, uint kt, uint c0, uint x) {
  uint j = x / DC4, c = c0 / 4u + x % DC4, key = kt + j;
  vec4 k = vec4(0.0);
  if (key < it.k_end && c < D4 && (!uses(F_KEY_VALID) || key_is_valid(sq, key)))
    k = fetch_row(KVEC, D, key_texel(PAGED != 0u, false, sq, it.kv_head, key, KVEC, D), c, 0u) *
        kv_chunk_scale(false, sq, it.kv_head, key, c);
  return f16vec4(k);
}

// Texel x of the tile's V chunk (key kt + x / DVC4, columns v0 + 4 (x %
// DVC4)): f16, zero beyond the key range and the head dim. Keys no row
// sees are loaded too and zeroed where the tile is stored (v_seen).
f16vec4 v_texel(Item it, Seq sq, uint kt, uint v0, uint x) {
  uint j = x / DVC4, c = v0 / 4u + x % DVC4, key = kt + j;
  vec4 v = vec4(0.0);
  if (key < it.k_end && c < DV4)
    v = fetch_row(VVEC, DV, key_texel(PAGED != 0u, true, sq, it.kv_head, key, VVEC, DV), c, 1u) *
        kv_chunk_scale(true, sq, it.kv_head, key, c);
  return f16vec4(v);
}

// Whether some row of the work item sees key kt + j (after the softmax).
bool key_seen(uint j) {
  return ((sh_kseen[j >> 5] >> (j & 31u)) & 1u) != 0u;
}

#if USER_MASK != 0
// Whether a row x of [x0, x1) sees a key of the tile at kt: the
// built-in range, causal and window rules, then the mask function. x is a
// row of the sequence (token x / G, head x % G of the kv head's group),
// or with UHF a token (the function reads no head).
bool rows_see_tile(Item it, Seq sq, uint G, uint x0, uint x1, uint kt, bool causal,
                   bool windowed) {
  for (uint x = x0; x < x1; ++x) {
    const uint head = UHF != 0u ? it.kv_head * G : it.kv_head * G + x % G;
    const int pos = int(sq.u) - int(sq.t) + int(UHF != 0u ? x : x / G);
    bool seen = false;
    [[unroll]] for (uint j = 0u; j < BC; ++j) {
      const uint key = min(kt + j, it.k_end - 1u);
      const bool u = user_allows(sq, head, pos, int(key));
      seen = seen || (u && kt + j < it.k_end && in_view(sq, pos, int(key), causal, windowed));
    }
    if (seen) return true;
  }
  return false;
}
#endif

// Block nb (columns nb * TN .. + TN of the staged V chunk) of this
// subgroup's P V, from a fresh accumulator (never loaded from memory),
// stored into the subgroup's own score rows for its lanes to read.
void pv_block_to_scores(uint r0, uint nb) {
  MAT_C o = MAT_C(0.0);
  for (uint kb = 0u; kb < BC / TK; ++kb) {
    MAT_A a;
    MAT_B b;
    coopMatLoad(a, sh_p, r0 * PS + kb * (TK / 4u), PS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, sh_kv, kb * TK * VS + nb * (TN / 4u), VS, gl_CooperativeMatrixLayoutRowMajor);
    o = coopMatMulAdd(a, b, o);
  }
  coopMatStore(o, sh_s, r0 * SS, SS, gl_CooperativeMatrixLayoutRowMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

// Elements [4c, 4c + 4) of the item's row rr, normalized: a partial row
// and its lse for the combine pass, or the output row (sinks joined) and
// its lse.
void store_row4(Item it, Seq sq, uint G, uint row_lim, uint rr, uint c, vec4 o) {
  const uint r = it.row0 + rr;
  if (r >= row_lim || c >= DV4) return;
  const uint tok = r / G, head = it.kv_head * G + r % G;
  float lse = row_norm(sh_m[rr], sh_l[rr]).y;
  if (it.slot != NO_SLOT) {
    store_part4(it.slot + rr, c, o);
    if (c == 0u) part_lse[it.slot + rr] = lse;
  } else {
    o *= final_row_factor(head, lse);
    store_out4(out_elem(sq.q_off + tok, head), c, o);
    if (c == 0u && (pc.flags & F_WRITE_LSE) != 0u)
      lse_out[(sq.q_off + tok) * pc.num_heads + head - pc.lse_base] = lse;
  }
}

void main() {
  USER_INIT();  // (attention variants: attention_mask.glsl)
  uint id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (id >= pc.n_items) return;  // uniform in the workgroup
  Item it = items[pc.item_base + id];
  Seq sq = seqs[it.seq - pc.seq_base];
  const uint G = pc.num_heads / pc.num_kv_heads;
  const uint lid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, nl = gl_SubgroupSize;
  const uint row_lim = min(sq.t * G, it.row_end);
  const uint r0 = sg * TM;  // this subgroup's first row in the item's tile (COLS: of sh_s)
  // The first of the item's rows this subgroup reads q and P of and owns O
  // of (COLS: all TM, shared), the first of its softmax rows, and its
  // first block of O's columns.
  const uint q0 = COLS_ ? 0u : r0, s0 = COLS_ ? sg * SMR : r0, ob = COLS_ ? sg * NB : 0u;
  const bool causal = (pc.flags & F_CAUSAL) != 0u;
  const bool windowed = (pc.flags & F_WINDOW) != 0u;

  // q once when one chunk holds the head dim; O, m and l cleared.
  if (Q_ONCE) stage_q(it, sq, G, row_lim, 0u);
  // Q_REGS: q, staged in the K/V tile, into this subgroup's A fragments
  // (the tile loop's first barrier comes before K overwrites it).
  MAT_A qf[Q_REGS ? DP / TK : 1u];
  if (Q_REGS) {
    memoryBarrierShared();
    barrier();
    [[unroll]] for (uint kk = 0u; kk < DP / TK; ++kk)
      coopMatLoad(qf[kk], sh_kv, q0 * QS + kk * (TK / 4u), QS, gl_CooperativeMatrixLayoutRowMajor);
  }
  float o_reg[O_IN_REGS ? NB * OE : 1u];  // O_IN_REGS: this lane's elements of every block
  [[unroll]] for (uint x = 0u; x < (O_IN_REGS ? NB * OE : 1u); ++x) o_reg[x] = 0.0;
  MAT_C o_acc[O_ACC ? NB : 1u];  // O_ACC: O's blocks of TN columns
  [[unroll]] for (uint nb = 0u; nb < (O_ACC ? NB : 1u); ++nb) o_acc[nb] = MAT_C(0.0);
  if (!O_IN_REGS && !O_ACC)  // (sh_o is 4 floats otherwise)
    for (uint x = lid; x < ROWS * DVP; x += WG) sh_o[x] = 0.0;
  for (uint x = lid; x < ROWS; x += WG) {
    sh_m[x] = NEG_INF;
    sh_l[x] = 0.0;
  }

  // The keys the tile loop visits: the item's, or with a mask function
  // the tiles from the first to the last that some row sees. The whole
  // workgroup shares the scan: lane lid tests the tiles n = lid (mod WG)
  // for every row of the item (once per token where the function reads no
  // head, UHF), from the front until one is seen, then that class from the
  // top down to it (as attention_tiled.glsl); the workgroup takes the least
  // first and the greatest last. A hidden tile's update is the identity
  // (alpha 1, P 0, its V zeroed), so results are the same bit for bit,
  // batch invariance included; between first and last, the tiles run
  // whole (the function is then applied per pair in the softmax).
  uint k_lo = it.k_begin, k_hi = it.k_end;
#if USER_MASK != 0
  {
    const uint item_tiles = (it.k_end - min(it.k_begin, it.k_end) + BC - 1u) / BC;
    // The item's rows [row0, scan_end); with UHF, x is a token (any head).
    const uint scan_end = min(row_lim, it.row0 + ROWS);
    const uint x0 = UHF != 0u ? it.row0 / G : it.row0;
    const uint x1 = scan_end <= it.row0 ? x0 : UHF != 0u ? (scan_end - 1u) / G + 1u : scan_end;
    uint first = item_tiles;
    for (uint n = lid; n < item_tiles; n += WG) {
      if (rows_see_tile(it, sq, G, x0, x1, it.k_begin + n * BC, causal, windowed)) {
        first = n;
        break;
      }
    }
    uint last = first;
    const uint above = first < item_tiles ? (item_tiles - 1u - first) / WG : 0u;
    for (uint k = above; k > 0u; --k) {  // (tiles first + k WG of the class)
      if (rows_see_tile(it, sq, G, x0, x1, it.k_begin + (first + k * WG) * BC, causal, windowed)) {
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
    if (first < item_tiles) {
      atomicMin(sh_urange[0], first);
      atomicMax(sh_urange[1], last + 1u);
    }
    memoryBarrierShared();
    barrier();
    k_lo = it.k_begin + sh_urange[0] * BC;
    k_hi = min(it.k_end, it.k_begin + sh_urange[1] * BC);
  }
#endif

  // ONE_CHUNK: the first tile's K, ahead (then each tile's V at its start
  // and the next tile's K after this one's is staged).
  f16vec4 kpre[KL], vpre[VL];
  [[unroll]] for (uint i = 0u; i < KL; ++i) {
    const uint x = lid + WG * i;
    kpre[i] = ONE_CHUNK && x < BC * DC4 && k_lo < k_hi
                  ? k_texel(it, sq, k_lo, 0u, x)
                  : f16vec4(0.0);
  }
  [[unroll]] for (uint i = 0u; i < VL; ++i) vpre[i] = f16vec4(0.0);
  for (uint kt = k_lo; kt < k_hi; kt += BC) {
    // 1. S = Q K^T for this subgroup's rows, a chunk of DC head-dim
    // columns at a time.
    // (With chunks, every block's accumulator lives across the chunks;
    // with one chunk each block is stored as soon as it is done.)
    MAT_C sc[BC / TN];
    if (!ONE_CHUNK) {
      [[unroll]] for (uint nb = 0u; nb < BC / TN; ++nb) sc[nb] = MAT_C(0.0);
    }
    if (ONE_CHUNK) {
      // This tile's V, issued now and stored after the softmax.
      [[unroll]] for (uint i = 0u; i < VL; ++i) {
        const uint x = lid + WG * i;
        vpre[i] = x < BC * DVC4 ? v_texel(it, sq, kt, 0u, x) : f16vec4(0.0);
      }
      // Every subgroup is done with the previous tile's V (and q is staged).
      memoryBarrierShared();
      barrier();
      [[unroll]] for (uint i = 0u; i < KL; ++i) {
        const uint x = lid + WG * i;
        if (x < BC * DC4) sh_kv[(x / DC4) * QS + x % DC4] = kpre[i];
      }
      for (uint x = lid; x < KW; x += WG) sh_kseen[x] = 0u;
      memoryBarrierShared();
      barrier();
      // The next tile's K, issued under this tile's math.
      if (kt + BC < k_hi) {
        [[unroll]] for (uint i = 0u; i < KL; ++i) {
          const uint x = lid + WG * i;
          if (x < BC * DC4) kpre[i] = k_texel(it, sq, kt + BC, 0u, x);
        }
      }
      // The scores go to the subgroup's own rows (its lanes read them
      // next), a block as soon as it is done: one accumulator live.
      for (uint nb = 0u; nb < BC / TN; ++nb) {
        MAT_C s = MAT_C(0.0);
        if (Q_REGS) {
          [[unroll]] for (uint kk = 0u; kk < DP / TK; ++kk) {
            MAT_B b;
            coopMatLoad(b, sh_kv, nb * TN * QS + kk * (TK / 4u), QS,
                        gl_CooperativeMatrixLayoutColumnMajor);
            s = coopMatMulAdd(qf[kk], b, s);
          }
        } else {
          // (COLS: every NSG-th TK columns, a partial S.)
          for (uint kk = COLS_ ? sg : 0u; kk < DP / TK; kk += COLS_ ? NSG : 1u) {
            MAT_A a;
            MAT_B b;
            coopMatLoad(a, sh_q, q0 * QS + kk * (TK / 4u), QS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(b, sh_kv, nb * TN * QS + kk * (TK / 4u), QS,
                        gl_CooperativeMatrixLayoutColumnMajor);
            s = coopMatMulAdd(a, b, s);
          }
        }
        coopMatStore(s, sh_s, r0 * SS + nb * (TN / 4u), SS, gl_CooperativeMatrixLayoutRowMajor);
      }
    }
    for (uint c0 = 0u; !ONE_CHUNK && c0 < DP; c0 += DC) {
      // Every subgroup is done with the previous chunk or tile (and q is
      // staged).
      memoryBarrierShared();
      barrier();
      if (!Q_ONCE) stage_q(it, sq, G, row_lim, c0);
      for (uint x = lid; x < BC * DC4; x += WG) sh_kv[(x / DC4) * QS + x % DC4] = k_texel(it, sq, kt, c0, x);
      if (c0 == 0u)
        for (uint x = lid; x < KW; x += WG) sh_kseen[x] = 0u;
      memoryBarrierShared();
      barrier();
      const uint nk = min(DC, DP - c0) / TK;  // the last chunk may be narrower
      [[unroll]] for (uint nb = 0u; nb < BC / TN; ++nb) {
        for (uint kk = COLS_ ? sg : 0u; kk < nk; kk += COLS_ ? NSG : 1u) {
          MAT_A a;
          MAT_B b;
          coopMatLoad(a, sh_q, q0 * QS + kk * (TK / 4u), QS, gl_CooperativeMatrixLayoutRowMajor);
          coopMatLoad(b, sh_kv, nb * TN * QS + kk * (TK / 4u), QS,
                      gl_CooperativeMatrixLayoutColumnMajor);
          sc[nb] = coopMatMulAdd(a, b, sc[nb]);
        }
      }
    }
    // The scores go to the subgroup's own rows: its lanes read them next
    // (COLS: every subgroup's lanes read every partial).
    if (!ONE_CHUNK) {
      [[unroll]] for (uint nb = 0u; nb < BC / TN; ++nb)
        coopMatStore(sc[nb], sh_s, r0 * SS + nb * (TN / 4u), SS, gl_CooperativeMatrixLayoutRowMajor);
    }
    if (COLS_) {
      memoryBarrierShared();
      barrier();
    } else {
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }

    // 2. LPR lanes a row (each every LPR-th key of the tile; max and sum
    // by shuffles among them): visibility, transforms, online softmax, P.
    for (uint i0 = 0u; i0 < SMR; i0 += RPP) {  // uniform: the shuffles need every lane
      const uint i = i0 + lane / LPR, sub = lane % LPR;
      uint rr = s0 + i, r = it.row0 + rr;
      bool ok = r < row_lim;
      uint rc = ok ? r : it.row0;
      uint tok = rc / G, head = it.kv_head * G + rc % G;
      int pos = int(sq.u) - int(sq.t) + int(tok);
      float m_old = sh_m[rr], bm = m_old;
      uint seen[KW];  // keys this lane sees, one atomic per word below
      [[unroll]] for (uint w = 0u; w < KW; ++w) seen[w] = 0u;
      // A tile this row sees whole (every key in the range, no causal,
      // window, chunk or span edge inside it: each is monotone or an
      // interval in the key, so the first and last key decide, as in
      // attention_tiled.glsl; no mask or padding compiled in) skips the
      // per-pair tests: only tiles that cross an edge evaluate them.
      bool whole = ok && kt + BC <= it.k_end && !uses(F_MASK_BOOL) && !uses(F_MASK_ADD) &&
                   !uses(F_KEY_VALID) && tree_free(sq, kt + BC);
      if (whole)
        whole = in_view(sq, pos, int(kt), causal, windowed) &&
                in_view(sq, pos, int(kt + BC - 1u), causal, windowed);
      // F_TREE: the row's tree bits of the tile, 32 keys a word.
      uint tbits[(BC + 31u) / 32u];
      [[unroll]] for (uint w = 0u; w < (BC + 31u) / 32u; ++w)
        tbits[w] = uses(F_TREE) && !whole ? tree_bits(sq, tok, kt + 32u * w) : ~0u;
      for (uint j = sub; j < BC; j += LPR) {
        uint key = kt + j, kc = min(key, it.k_end - 1u);
        float s = sh_s[rr * SS + j / 4u][j % 4u];
        // (COLS: the partials of the other subgroups' head-dim columns; the
        // sum goes back into the first, read below by this lane only.)
        for (uint k = 1u; COLS_ && k < NSG; ++k) s += sh_s[(k * TM + rr) * SS + j / 4u][j % 4u];
        if (uses(F_SOFTCAP)) s = soft_capped(s);
        if (uses(F_ALIBI)) s += alibi_bias(head, pos, int(key));
        bool v = whole;
        if (!whole) {
          v = ok && key < it.k_end && in_view(sq, pos, int(key), causal, windowed);
          if (uses(F_KEY_VALID)) v = v && key_is_valid(sq, kc);
          if (uses(F_MASK_BOOL)) v = v && mask_allows(mask_index(sq, tok, kc));
          if (uses(F_TREE)) {
            uint tb = 0u;  // (constant indices: a runtime one goes to NAK's local memory)
            [[unroll]] for (uint w = 0u; w < (BC + 31u) / 32u; ++w) tb = (j >> 5) == w ? tbits[w] : tb;
            v = v && ((tb >> (j & 31u)) & 1u) != 0u;
          }
          if (uses(F_MASK_ADD)) {
            float a = mask_bias(mask_index(sq, tok, kc));
            v = v && a != NEG_INF;
            s += a;
          }
        }
#if USER_MASK != 0
        v = v && user_allows(sq, head, pos, int(key));
#endif
#if USER_SCORE != 0
        s = user_score(sq, head, pos, int(key), s);
        v = v && s != NEG_INF;
#endif
        s = v ? s : NEG_INF;
        // (Constant indices only: a runtime index put seen[] in NAK's
        // local memory.)
        [[unroll]] for (uint w = 0u; w < KW; ++w) seen[w] |= v && (j >> 5) == w ? 1u << (j & 31u) : 0u;
        sh_s[rr * SS + j / 4u][j % 4u] = s;
        bm = max(bm, s);
      }
      for (uint o = LPR / 2u; o > 0u; o /= 2u) bm = max(bm, subgroupShuffleXor(bm, o));
      [[unroll]] for (uint w = 0u; w < KW; ++w) {
        if (seen[w] != 0u) atomicOr(sh_kseen[w], seen[w]);
      }
      // Nothing visible yet: subtract 0, not -inf, so every p is exp(-inf) = 0.
      float base = bm == NEG_INF ? 0.0 : bm;
      float alpha = exp(m_old - base), sum = 0.0;
      for (uint j = sub; j < BC; j += LPR) {
        float16_t p = float16_t(exp(sh_s[rr * SS + j / 4u][j % 4u] - base));
        sh_p[rr * PS + j / 4u][j % 4u] = p;
        sum += float(p);  // the sum of what P V multiplies
      }
      for (uint o = LPR / 2u; o > 0u; o /= 2u) sum += subgroupShuffleXor(sum, o);
      if (sub == 0u) {
        sh_l[rr] = sh_l[rr] * alpha + sum;
        sh_m[rr] = bm;
        sh_alpha[rr] = alpha;
      }
    }
    // Every row's seen keys are in the mask (and this subgroup's P and
    // alpha are written).
    memoryBarrierShared();
    barrier();

    // 3. O = O * alpha + P V, a chunk of DVC columns of V at a time: the
    // tile's V rows that some row sees (others are 0: memory a hidden key
    // points at may hold anything, NaN included, and P V would multiply it
    // by 0).
    if (O_IN_REGS) {
      [[unroll]] for (uint k = 0u; k < OE; ++k) {
        const float a = sh_alpha[r0 + (lane + SG * k) / TN];
        [[unroll]] for (uint nb = 0u; nb < NB; ++nb) o_reg[nb * OE + k] *= a;
      }
    } else if (O_ACC) {
      // Accumulators are opaque: each row's alpha goes into a TM x TN
      // block (every column of row i alpha_i) in the subgroup's own score
      // rows (free: P is made), loaded as an accumulator of the same
      // layout as O's, and multiplied element by element.
      for (uint x = lane; x < TM * TN; x += nl) {
        const uint i = x / TN, c = x % TN;
        sh_s[(r0 + i) * SS + c / 4u][c % 4u] = sh_alpha[q0 + i];
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      MAT_C al;
      coopMatLoad(al, sh_s, r0 * SS, SS, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint nb = 0u; nb < NB; ++nb) o_acc[nb] = o_acc[nb] * al;
    } else {
      for (uint x = lane; x < TM * DVP; x += nl) sh_o[r0 * DVP + x] *= sh_alpha[r0 + x / DVP];
    }
    for (uint v0 = 0u; v0 < DVP; v0 += DVC) {
      if (v0 != 0u) {  // every subgroup is done with the previous chunk
        memoryBarrierShared();
        barrier();
      }
      // K's place in the tile is free: every subgroup passed the softmax's
      // barrier after its Q K^T.
      if (ONE_CHUNK) {
        [[unroll]] for (uint i = 0u; i < VL; ++i) {
          const uint x = lid + WG * i, j = x / DVC4;
          if (x < BC * DVC4) sh_kv[j * VS + x % DVC4] = key_seen(j) ? vpre[i] : f16vec4(0.0);
        }
      } else {
        for (uint x = lid; x < BC * DVC4; x += WG) {
          const uint j = x / DVC4;
          sh_kv[j * VS + x % DVC4] = key_seen(j) ? v_texel(it, sq, kt, v0, x) : f16vec4(0.0);
        }
      }
      memoryBarrierShared();
      barrier();
      if (O_ACC) {  // one chunk (DVC == DVP): P V straight into O, no round trip
        for (uint kb = 0u; kb < BC / TK; ++kb) {
          MAT_A a;
          coopMatLoad(a, sh_p, q0 * PS + kb * (TK / 4u), PS, gl_CooperativeMatrixLayoutRowMajor);
          [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
            MAT_B b;
            coopMatLoad(b, sh_kv, kb * TK * VS + (ob + nb) * (TN / 4u), VS,
                        gl_CooperativeMatrixLayoutRowMajor);
            o_acc[nb] = coopMatMulAdd(a, b, o_acc[nb]);
          }
        }
      } else if (O_IN_REGS) {  // one chunk (DVC == DVP): every block's index is known
        [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
          pv_block_to_scores(r0, nb);
          [[unroll]] for (uint k = 0u; k < OE; ++k) {
            const uint e = lane + SG * k, c = e % TN;
            o_reg[nb * OE + k] += sh_s[(r0 + e / TN) * SS + c / 4u][c % 4u];
          }
          subgroupMemoryBarrierShared();  // read before the next block is stored
          subgroupBarrier();
        }
      } else {
        const uint nn = min(DVC, DVP - v0) / TN;  // the last chunk may be narrower
        for (uint nb = 0u; nb < nn; ++nb) {
          pv_block_to_scores(r0, nb);
          for (uint x = lane; x < TM * TN; x += nl) {
            const uint i = x / TN, c = x % TN;
            sh_o[(r0 + i) * DVP + v0 + nb * TN + c] += sh_s[(r0 + i) * SS + c / 4u][c % 4u];
          }
          subgroupMemoryBarrierShared();
          subgroupBarrier();
        }
      }
    }
  }
  memoryBarrierShared();
  barrier();

  // Normalized rows, lse, spread over the subgroup's lanes: from O's
  // registers a block at a time through the subgroup's score rows (a
  // constant count of vec4 a lane, so the block loop unrolls and o_reg
  // stays in registers: NAK put it in local memory when a runtime-bounded
  // loop sat inside), or from shared memory.
  if (O_ACC) {
    // BP blocks at a time through the subgroup's score rows (BC/4 + 1
    // vec4 a row), in a loop that is not unrolled: o_acc's indices stay
    // constant (an unrolled loop over the blocks, no loop inside it: NAK
    // put o_acc in local memory when a subgroup-strided loop sat inside
    // the unrolled one).
    const uint B4 = TN / 4u, BP = BC / TN, W4 = BP * B4;
    for (uint p = 0u; p < (NB + BP - 1u) / BP; ++p) {
      [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
        if (nb / BP == p)
          coopMatStore(o_acc[nb], sh_s, r0 * SS + (nb % BP) * B4, SS,
                       gl_CooperativeMatrixLayoutRowMajor);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint w4 = min(W4, NB * B4 - p * W4);  // vec4 columns of this pass
      for (uint x = lane; x < TM * w4; x += nl) {
        const uint i = x / w4, rr = q0 + i, c = x % w4;
        store_row4(it, sq, G, row_lim, rr, ob * B4 + p * W4 + c,
                   sh_s[(r0 + i) * SS + c] * row_norm(sh_m[rr], sh_l[rr]).x);
      }
      subgroupMemoryBarrierShared();  // stored before the next pass overwrites the rows
      subgroupBarrier();
    }
  } else if (O_IN_REGS) {
    const uint B4 = TN / 4u;  // vec4 columns of a block
    [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
      [[unroll]] for (uint k = 0u; k < OE; ++k) {
        const uint e = lane + SG * k, rr = r0 + e / TN, c = e % TN;
        sh_s[rr * SS + c / 4u][c % 4u] = o_reg[nb * OE + k] * row_norm(sh_m[rr], sh_l[rr]).x;
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint i = 0u; i < (TM * B4 + SG - 1u) / SG; ++i) {
        const uint x = lane + SG * i, rr = r0 + x / B4;
        if (x < TM * B4) store_row4(it, sq, G, row_lim, rr, nb * B4 + x % B4, sh_s[rr * SS + x % B4]);
      }
      subgroupMemoryBarrierShared();  // stored before the next block overwrites the rows
      subgroupBarrier();
    }
  } else {
    for (uint x = lane; x < TM * DV4; x += nl) {
      const uint rr = r0 + x / DV4, c = x % DV4, o0 = rr * DVP + 4u * c;
      const vec4 o = vec4(sh_o[o0], sh_o[o0 + 1u], sh_o[o0 + 2u], sh_o[o0 + 3u]);
      store_row4(it, sq, G, row_lim, rr, c, o * row_norm(sh_m[rr], sh_l[rr]).x);
    }
  }
}

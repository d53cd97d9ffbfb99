// The `coopmat` attention family: shaders/attention_coopmat.comp. Q K^T and
// P V as cooperative-matrix products (VK_KHR_cooperative_matrix: tensor
// cores), NSG subgroups per workgroup each owning TM rows, K/V tiles of BC
// keys staged in shared memory as f16 a chunk of head-dim columns at a
// time (all of them unless MLA-sized dims need chunks), softmax and O in
// f32 through shared memory. Built only with -DVKATTN_COOPMAT=ON; the
// matrix shape comes from the device (core/coopmat.h); f16 K/V only (other
// dtypes decline, and the variant chooser hands them to `tiled`, logged).
//
// Budget (reasoned, not measured: no GPU has run this shader yet), for an
// NVIDIA GPU's 16x16x16 shape, 32-lane subgroups, 48 KiB of shared memory
// per workgroup, d = dv = 128, f16 K/V, the table's NSG 4 and BC 32:
//   - shared memory (coopmat_shared_bytes): at NSG 4 the arrays need about
//     115 KB (the P V product chunk and O, 64 rows x 128 f32 each, are two
//     thirds of it), so the fit loop in variant.cpp halves NSG to 1: 16 rows,
//     one subgroup, about 42 KB a workgroup, 5 workgroups (5 subgroups) per
//     228 KB SM, limited by shared memory, not registers;
//   - registers per lane: S for BC/TN = 2 accumulators (16 f32), one A and
//     one B fragment (16 f16 lanes' worth, 8 registers), the P V
//     accumulator (8), and the softmax scalars: about 64;
//   - loads in flight per lane: the K and V staging loops issue one 16-byte
//     fetch per iteration, BC x DC / 4 / WG = 32 per tile, a few in flight
//     (no double buffering);
//   - matrix work per shared byte: per tile 2 x 16 x 32 x 128 MACs over
//     16 KB of staged K/V plus the A/B fragment reads (q 4 KB, P 1 KB, the
//     products 2 KB): about 5 MACs per shared byte, far below what tensor
//     cores need to be busy, so the first GPU run is expected to show this
//     layout shared-memory bound. What would change it: O in accumulators
//     instead of shared memory, DVC chunks narrower than 128 (sh_pv), and
//     the keys-per-subgroup layout (ggml cm1: 4 subgroups x 16 keys).
#include <algorithm>

#include "core/pipeline.h"
#include "ops/attention/family.h"

namespace vkattn {

namespace {

const KernelLayout kCoopmatLayout{"attention_coopmat", fwd_bindings(), sizeof(FwdPush),
                                  /*full_subgroups=*/true};

// attention_coopmat.comp's specialization constants, in constant_id order.
struct CoopmatSpec {
  FwdSpecHead head;     // 0-11, shape = NSG: subgroups
  uint32_t tm, tn, tk;  // 12-14 TM, TN, TK
  uint32_t dc, dvc;     // 15-16 DC, DVC: head-dim columns staged at a time
};
static_assert(sizeof(CoopmatSpec) == 17 * 4, "attention_coopmat.comp has 17 constants");

uint32_t round_up(uint32_t x, uint32_t m) {
  return (x + m - 1) / m * m;
}

// The head dims padded to the matrix shape (DP, DVP) and the columns of
// each staged at a time (DC, DVC; the variant's chunks, 0 = all).
struct CoopmatDims {
  uint32_t dp, dvp, dc, dvc;
};

CoopmatDims coopmat_dims(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  CoopmatDims d{};
  d.dp = round_up(cfg.head_dim, std::max<uint32_t>(v.coopmat_k, 1));
  d.dvp = round_up(cfg.head_dim_v, std::max<uint32_t>(v.coopmat_n, 1));
  d.dc = v.head_chunk == 0 ? d.dp : std::min(v.head_chunk, d.dp);
  d.dvc = v.head_chunk_v == 0 ? d.dvp : std::min(v.head_chunk_v, d.dvp);
  return d;
}

std::string coopmat_declines(const DeviceCaps& caps, const FwdConfig& cfg) {
  if (!coopmat_built()) return "vkattn was built without -DVKATTN_COOPMAT=ON";
  if (!caps.coopmat.usable()) return caps.coopmat.missing();
  // K/V tiles are f16: f16 caches, and 8-bit ones dequantized into them.
  if (cfg.kv_dtype == VKATTN_BF16 || cfg.kv_dtype == VKATTN_F32)
    return std::string("no ") + (cfg.kv_dtype == VKATTN_BF16 ? "bf16" : "f32") +
           " matrix type for K/V (f16 only)";
  const AttentionVariant& v = cfg.var;
  const CoopmatShape s{v.coopmat_m, v.coopmat_n, v.coopmat_k};
  bool offered = false;
  for (const CoopmatShape& o : caps.coopmat.f16_shapes)
    offered |= o.m == s.m && o.n == s.n && o.k == s.k;
  if (!offered) return "the device offers no " + describe_shapes({s}) + " f16 shape";
  if (s.m == 0 || s.k % 8 != 0 || s.n % 8 != 0)
    return "matrix shape " + describe_shapes({s}) + " (N and K must be multiples of 8)";
  if (v.tile_keys == 0 || v.tile_keys % s.n != 0 || v.tile_keys % s.k != 0)
    return "tile of " + std::to_string(v.tile_keys) + " keys is not a multiple of N and K";
  const CoopmatDims d = coopmat_dims(cfg);
  if (d.dc % s.k != 0 || d.dvc % s.n != 0)
    return "head-dim chunks " + std::to_string(d.dc) + "/" + std::to_string(d.dvc) +
           " are not multiples of K/N";
  if (caps.subgroup_size == 0 || v.wg != v.subgroups * caps.subgroup_size)
    return "the workgroup must be whole subgroups";
  if (std::string why = exceeds_workgroup(caps, v.wg); !why.empty()) return why;
  return exceeds_shared_memory(caps, kCoopmatFamily.shared_bytes(cfg));
}

// attention_coopmat.comp's shared arrays: a chunk of q and of the K tile's
// columns and one of V's (f16), scores (f32), P (f16), a P V product chunk
// (f32), O (f32, all DVP columns), m, l, alpha per row, and a seen bit per
// key.
uint64_t coopmat_shared_bytes(const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const CoopmatDims d = coopmat_dims(cfg);
  const uint64_t rows = uint64_t(v.subgroups) * v.coopmat_m, bc = v.tile_keys;
  // Rows of 4-vectors padded by 16 bytes (attention_coopmat.comp QS, VS,
  // PS: 2 f16vec4; SS, OS: 1 vec4).
  const uint64_t qs = (d.dc / 4 + 2) * 8, vs = (d.dvc / 4 + 2) * 8, ps = (bc / 4 + 2) * 8;
  const uint64_t ss = (bc / 4 + 1) * 16, os = (d.dvc / 4 + 1) * 16;
  return rows * qs + bc * qs + bc * vs + rows * ss + rows * ps + rows * os + rows * d.dvp * 4 +
         rows * 12 + (bc + 31) / 32 * 4;
}

const Pipeline& coopmat_pipeline(Pipelines& pipes, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const CoopmatDims d = coopmat_dims(cfg);
  const CoopmatSpec spec{fwd_spec_head(cfg, v.subgroups, v.tile_keys),
                         v.coopmat_m,
                         v.coopmat_n,
                         v.coopmat_k,
                         d.dc,
                         d.dvc};
  return pipes.get(kCoopmatLayout, spec_words(spec), coopmat_shared_bytes(cfg));
}

}  // namespace

bool coopmat_built() {
  return find_shader(kCoopmatLayout.shader) != nullptr;
}

const AttentionFamilyDesc kCoopmatFamily{AttentionFamily::kCoopmat, "coopmat", coopmat_declines,
                                         coopmat_shared_bytes, coopmat_pipeline};

}  // namespace vkattn

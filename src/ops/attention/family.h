// Attention kernel families and how a call picks one. Every family reads
// the same plan (ops/attention/plan.h) through the same 15 bindings and the
// same push constants (FwdPush), so one host routine binds a pass
// (ops/attention/record.cpp); a family owns its shader, binding layout,
// named specialization constants, shared-memory need and the list of what
// it declines. Families today:
//   lanes  ops/attention/families/lanes.cpp, shaders/attention_fwd.comp: each lane
//          owns R rows in registers, no cross-lane traffic (lavapipe).
//   tiled  ops/attention/families/tiled.cpp, shaders/attention_tiled{,_smem}.comp:
//          L lanes share a row, K/V tiles staged in shared memory (GPUs;
//          the GPU default).
//   decode ops/attention/families/decode.cpp, shaders/attention_decode{,_smem}.comp:
//          flash-decoding for tiles of at most kDecodeMaxTokens tokens:
//          every lane holds the tile's rows, a key row over LPK lanes with
//          16-byte loads, a tile loaded ahead (GPUs' decode default).
//   coopmat ops/attention/families/coopmat.cpp, shaders/attention_coopmat.comp:
//          Q K^T and P V on cooperative matrices (tensor cores), f16 K/V;
//          built with -DVKATTN_COOPMAT=ON, forced with
//          VKATTN_ATTN_KERNEL=coopmat, killed with VKATTN_DISABLE_COOPMAT=1.
// choose_attention_variant() (ops/attention/variant.h) settles the family
// with the rest of the variant, before the plan is built (the plan's tile
// shape depends on it): a family that declines a call hands it on
// (coopmat to tiled, tiled to lanes), with the reason in
// AttentionVariant::fallback. VKATTN_LOG=kernels
// prints the family of every recorded dispatch and every fallback.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/kernel_options.h"
#include "core/pipeline.h"
#include "ops/attention/devices.h"
#include "ops/attention/plan.h"
#include "ops/attention/variant.h"
#include "vkattn/vkattn.h"

namespace vkattn {

// What a forward pipeline is specialized on: the variant and the call's
// head dims, dtypes, fetch widths and transforms.
struct FwdConfig {
  AttentionVariant var;
  uint32_t head_dim = 0, head_dim_v = 0;
  vkattn_dtype q_dtype = VKATTN_F32, kv_dtype = VKATTN_F32;
  uint32_t qvec = 0, kvec = 0, vvec = 0;  // texel kinds: 0 one element, 1 four, 2 eight 16-bit
  bool paged = false;
  uint32_t features = 0;  // transforms compiled in (kFlag* bits of kCompiledFlags)
  // An attention variant's user functions (ops/attention/user_functions.h):
  // the pipeline is the family's shader with them spliced in; null: none.
  const RuntimeModule* user = nullptr;
  // The variant defines vkattn_mask_mod: the families' range scans and tile
  // bits, and their shared arrays (the *_shared_bytes estimates).
  bool user_mask = false;
  // lanes, tiled, decode: rows per evaluation of the variant's mask function
  // (UEV of attention_fwd.comp, attention_tiled.glsl, attention_decode.glsl): gcd(H / Hkv, a lane's
  // rows) when the function reads no head (a lane's rows are then runs of one token's heads),
  // else 1.
  uint32_t user_rows = 1;
  // The variant's mask function provably reads no head
  // (mask_source_reads_head): tiled's and coopmat's range scans (UHF)
  // evaluate it once per token.
  bool user_head_free = false;
  // decode: the tiles ahead a pass touches its listed rows (attention_decode.glsl
  // TA): the variant's, for passes with top-k lists; 0 otherwise.
  uint32_t touch_ahead() const { return (features & kFlagTopk) ? var.touch_ahead : 0u; }
};

// Push constants of every family's forward shader (the shaders declare the
// same block; 128 bytes). Row strides: q, k and v in their texels, out in
// elements (token, then head).
struct FwdPush {
  uint32_t n_items, num_heads, num_kv_heads, flags;
  float scale, softcap;
  int32_t window_left;
  uint32_t mask_dtype;
  uint32_t item_base, page_size, k_page_tx, k_layer_tx, v_page_tx, v_layer_tx;
  uint32_t q_base, k_base, v_base, out_base, lse_base, mask_base, seq_base, table_base,
      key_valid_base;
  uint32_t q_tok, q_head, k_tok, k_head, v_tok, v_head, out_tok, out_head;
  uint32_t scale_base;  // fp8 caches: the layer's first entry of the scale table
};
static_assert(sizeof(FwdPush) == 128, "push constants mirror the shaders");
static_assert(sizeof(FwdPush) <= 128, "push constants fit every device");

// The bindings of every family's forward shader, in this order: q, k, v
// (texel views), out, lse, items, seqs, mask, alibi, key_valid, partial
// rows, partial lse, block table, sinks, 8-bit cache scales, tree words,
// top-k lists.
const std::vector<BindingKind>& fwd_bindings();

// A named specialization struct (one 32-bit field per constant_id, in
// order) as the words Pipelines::get takes.
template <class Spec>
std::vector<uint32_t> spec_words(const Spec& spec) {
  static_assert(std::is_standard_layout_v<Spec> && sizeof(Spec) % 4 == 0,
                "one 32-bit word per constant_id");
  const auto* w = reinterpret_cast<const uint32_t*>(&spec);
  return std::vector<uint32_t>(w, w + sizeof(Spec) / 4);
}

// The specialization constants every attention family's shader shares
// (attention_fwd.comp, attention_tiled.glsl, attention_coopmat.comp),
// constant_ids 0-11, in order (each family's own follow from id 12).
struct FwdSpecHead {
  uint32_t wg;          // 0  WG
  uint32_t shape;       // 1  lanes: R rows per lane; tiled: R rows per row group;
                        //    coopmat: NSG subgroups
  uint32_t keys;        // 2  lanes: BK keys per block; tiled, coopmat: BC keys per tile
  uint32_t head_dim;    // 3  D
  uint32_t head_dim_v;  // 4  DV
  uint32_t q_dtype;     // 5  QDT
  uint32_t kv_dtype;    // 6  KDT
  uint32_t kvec;        // 7  KVEC
  uint32_t vvec;        // 8  VVEC
  uint32_t qvec;        // 9  QVEC
  uint32_t paged;       // 10 PAGED
  uint32_t features;    // 11 FEATURES
};
FwdSpecHead fwd_spec_head(const FwdConfig& cfg, uint32_t shape, uint32_t keys);

// A config to ask a family about (declines, shared_bytes) before a call's
// plan exists: the variant, head dims and K/V dtype, and whether the call's
// attention variant has a mask function (FwdConfig::user_mask).
FwdConfig probe_config(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                       vkattn_dtype kv_dtype, bool user_mask = false);

// Device limits every family's declines() checks: why a workgroup of `wg`
// lanes or `bytes` of shared memory does not fit; empty if it does.
std::string exceeds_workgroup(const DeviceCaps& caps, uint32_t wg);
std::string exceeds_shared_memory(const DeviceCaps& caps, uint64_t bytes);

struct AttentionFamilyDesc {
  AttentionFamily id;
  const char* name;
  // Why this family cannot serve `cfg` on this device; empty if it can.
  std::string (*declines)(const DeviceCaps& caps, const FwdConfig& cfg);
  // Shared memory of one workgroup, bytes.
  uint64_t (*shared_bytes)(const FwdConfig& cfg);
  const Pipeline& (*pipeline)(Pipelines& pipes, const FwdConfig& cfg);
};

// The families (each defined in its own file).
extern const AttentionFamilyDesc kLanesFamily;    // ops/attention/families/lanes.cpp
extern const AttentionFamilyDesc kTiledFamily;    // ops/attention/families/tiled.cpp
extern const AttentionFamilyDesc kCoopmatFamily;  // ops/attention/families/coopmat.cpp
extern const AttentionFamilyDesc kDecodeFamily;   // ops/attention/families/decode.cpp

// The decode family serves calls whose sequences have at most this many
// query tokens each (decodes, speculative verification, short tails).
constexpr uint32_t kDecodeMaxTokens = 8;
// The rows a batch-invariant call's prefill part is planned for (its
// variant is the one a call of very long sequences gets).
constexpr uint32_t kInvariantPrefillRows = 1u << 20;

// The decode family's shape for a call whose largest tile has max_rows
// rows (families/decode.cpp): lanes per key row, workgroup, keys per tile
// and rows per tile from the device table and the forced options.
void configure_decode(AttentionVariant& v, const DeviceCaps& caps, const AttentionDefaults& dev,
                      const KernelOptions& forced, uint32_t head_dim, uint32_t head_dim_v,
                      uint32_t max_rows);
// Keys one decode work item may take within lavapipe's loop cap; `lists`:
// a top-k item's, whose list is compacted first (attention_decode.glsl).
uint32_t decode_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                         bool lists = false);
// The families that run top-k lists (desc->topk_indices): attention_decode.glsl
// and attention_fwd.comp gather a tile's keys one at a time.
inline bool serves_topk(AttentionFamily f) {
  return f == AttentionFamily::kDecode || f == AttentionFamily::kLanes;
}
// Top-k: the list slots one decode item compacts into shared memory
// (attention_decode.glsl TOPK_ITEM_SLOTS) and reads.
constexpr uint32_t kTopkItemSlots = 1024;
// The slots a top-k item of variant v takes: kTopkItemSlots, fewer under
// lavapipe's loop cap.
uint32_t decode_topk_item_slots(const AttentionVariant& v, const DeviceCaps& caps,
                                uint32_t head_dim, uint32_t head_dim_v);

// This build embeds the coopmat shader (-DVKATTN_COOPMAT=ON).
bool coopmat_built();
// Whether attention_coopmat.comp can stage q (rows x dc) once through its
// K/V tile (bc keys of dc or dvc columns) for q's fragments in registers.
bool coopmat_q_staging_fits(uint32_t rows, uint32_t bc, uint32_t dc, uint32_t dvc);

// Keys one work item of the tiled kernel may take within lavapipe's loop
// cap (core/loop_budget.h); mask_scans: with the range scans of a variant's
// mask function (attention_tiled.glsl).
uint32_t tiled_max_keys(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                        bool mask_scans = false);

const AttentionFamilyDesc& attention_family(AttentionFamily family);

}  // namespace vkattn

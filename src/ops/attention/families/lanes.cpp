// The `lanes` attention family: shaders/attention_fwd.comp. Each lane owns
// R rows of a tile (q and f32 accumulators in registers) and walks keys in
// blocks of BK; lanes never talk except in decode mode's optional
// shared-memory merge. Built for lavapipe, where one subgroup is one
// workgroup and cross-lane traffic costs more than it saves; correct on
// every device.
#include "ops/attention/family.h"

namespace vkattn {

namespace {

const KernelLayout kLanesLayout{"attention_fwd", fwd_bindings(), sizeof(FwdPush)};

// attention_fwd.comp's specialization constants, in constant_id order.
struct LanesSpec {
  FwdSpecHead head;       // 0-11, shape = R: rows per lane, keys = BK: keys per block
  uint32_t unroll_d;      // 12 UNROLL_D
  uint32_t decode_merge;  // 13 SMEM_MERGE
  uint32_t user_rows;     // 14 UEV (FwdConfig::user_rows)
};
static_assert(sizeof(LanesSpec) == 15 * 4, "attention_fwd.comp has 15 constants");

// lanes serves every call: its one device limit, the workgroup size, is
// checked where the variant is chosen (ops/attention/variant.cpp).
std::string lanes_declines(const DeviceCaps&, const FwdConfig&) {
  return {};
}

// The decode merge's m, l and accumulators of every lane's R rows
// (attention_fwd.comp sh_ml, sh_acc); one element of each when it is off.
uint64_t lanes_shared_bytes(const FwdConfig& cfg) {
  const uint64_t rows = cfg.var.decode_merge ? uint64_t(cfg.var.wg) * cfg.var.rows : 1;
  return rows * (8 + ((cfg.head_dim_v + 3) / 4) * 16);
}

const Pipeline& lanes_pipeline(Pipelines& pipes, const FwdConfig& cfg) {
  const AttentionVariant& v = cfg.var;
  const LanesSpec spec{fwd_spec_head(cfg, v.rows, v.block_keys), v.unroll_d ? 1u : 0u,
                       v.decode_merge ? 1u : 0u, cfg.user_rows};
  return pipes.get(kLanesLayout, spec_words(spec), lanes_shared_bytes(cfg), cfg.user);
}

}  // namespace

const AttentionFamilyDesc kLanesFamily{AttentionFamily::kLanes, "lanes", lanes_declines,
                                       lanes_shared_bytes, lanes_pipeline};

}  // namespace vkattn

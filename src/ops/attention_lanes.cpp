// The `lanes` attention family: shaders/attention_fwd.comp. Each lane owns
// R rows of a tile (q and f32 accumulators in registers) and walks keys in
// blocks of BK; lanes never talk except in decode mode's optional
// shared-memory merge. Built for lavapipe, where one subgroup is one
// workgroup and cross-lane traffic costs more than it saves; correct on
// every device.
#include "ops/attention_family.h"

namespace vkattn {

namespace {

const KernelLayout kLanesLayout{"attention_fwd", fwd_bindings(), sizeof(FwdPush)};

// attention_fwd.comp's specialization constants, in constant_id order.
struct LanesSpec {
  uint32_t wg;            // 0  WG: lanes per workgroup
  uint32_t rows;          // 1  R: rows per lane
  uint32_t block_keys;    // 2  BK: keys per online-softmax block
  uint32_t head_dim;      // 3  D
  uint32_t head_dim_v;    // 4  DV
  uint32_t q_dtype;       // 5  QDT
  uint32_t kv_dtype;      // 6  KDT
  uint32_t kvec;          // 7  KVEC
  uint32_t vvec;          // 8  VVEC
  uint32_t unroll_d;      // 9  UNROLL_D
  uint32_t qvec;          // 10 QVEC
  uint32_t paged;         // 11 PAGED
  uint32_t decode_merge;  // 12 SMEM_MERGE
  uint32_t features;      // 13 FEATURES
};
static_assert(sizeof(LanesSpec) == 14 * 4, "attention_fwd.comp has 14 constants");

// lanes serves every call: its one device limit, the workgroup size, is
// checked where the variant is chosen (ops/attention_variant.cpp).
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
  const LanesSpec spec{v.wg,
                       v.rows,
                       v.block_keys,
                       cfg.head_dim,
                       cfg.head_dim_v,
                       static_cast<uint32_t>(cfg.q_dtype),
                       static_cast<uint32_t>(cfg.kv_dtype),
                       cfg.kvec,
                       cfg.vvec,
                       v.unroll_d ? 1u : 0u,
                       cfg.qvec,
                       cfg.paged ? 1u : 0u,
                       v.decode_merge ? 1u : 0u,
                       cfg.features};
  return pipes.get(kLanesLayout, spec_words(spec));
}

}  // namespace

const AttentionFamilyDesc kLanesFamily{AttentionFamily::kLanes, "lanes", lanes_declines,
                                       lanes_shared_bytes, lanes_pipeline};

}  // namespace vkattn

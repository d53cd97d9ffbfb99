#include "ops/attention/family.h"

#include "core/error.h"

namespace vkattn {

namespace {
// Every registered family.
const AttentionFamilyDesc* const kFamilies[] = {&kLanesFamily, &kTiledFamily, &kCoopmatFamily,
                                                &kDecodeFamily};
}  // namespace

const AttentionFamilyDesc& attention_family(AttentionFamily family) {
  for (const AttentionFamilyDesc* f : kFamilies)
    if (f->id == family) return *f;
  fail(VKATTN_ERROR_INTERNAL, "attention family ", static_cast<uint32_t>(family),
       " is not registered");
}

const std::vector<BindingKind>& fwd_bindings() {
  using B = BindingKind;
  static const std::vector<BindingKind> bindings = {
      B::kUniformTexel,  B::kUniformTexel,  B::kUniformTexel,  B::kStorageBuffer, B::kStorageBuffer,
      B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer,
      B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer,
      B::kStorageBuffer, B::kStorageBuffer};
  return bindings;
}

FwdSpecHead fwd_spec_head(const FwdConfig& cfg, uint32_t shape, uint32_t keys) {
  return {cfg.var.wg,
          shape,
          keys,
          cfg.head_dim,
          cfg.head_dim_v,
          static_cast<uint32_t>(cfg.q_dtype),
          static_cast<uint32_t>(cfg.kv_dtype),
          cfg.kvec,
          cfg.vvec,
          cfg.qvec,
          cfg.paged ? 1u : 0u,
          cfg.features};
}

FwdConfig probe_config(const AttentionVariant& v, uint32_t head_dim, uint32_t head_dim_v,
                       vkattn_dtype kv_dtype, bool user_mask) {
  FwdConfig cfg;
  cfg.var = v;
  cfg.head_dim = head_dim, cfg.head_dim_v = head_dim_v, cfg.kv_dtype = kv_dtype;
  cfg.user_mask = user_mask;
  return cfg;
}

std::string exceeds_workgroup(const DeviceCaps& caps, uint32_t wg) {
  if (wg <= caps.max_workgroup_invocations) return {};
  return "workgroup of " + std::to_string(wg) + " lanes exceeds the device's " +
         std::to_string(caps.max_workgroup_invocations);
}

std::string exceeds_shared_memory(const DeviceCaps& caps, uint64_t bytes) {
  if (bytes <= caps.max_shared_memory) return {};
  return "needs " + std::to_string(bytes) + " bytes of shared memory, the device has " +
         std::to_string(caps.max_shared_memory);
}

}  // namespace vkattn

#include "ops/attention_family.h"

#include "core/error.h"

namespace vkattn {

namespace {
// Every registered family.
const AttentionFamilyDesc* const kFamilies[] = {&kLanesFamily, &kTiledFamily, &kCoopmatFamily};
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
      B::kStorageBuffer, B::kStorageBuffer, B::kStorageBuffer};
  return bindings;
}

}  // namespace vkattn

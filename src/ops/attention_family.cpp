#include "ops/attention_family.h"

#include <cstdio>

#include "core/error.h"

namespace vkattn {

namespace {
// Registry order: the fallback order.
const AttentionFamilyDesc* const kFamilies[] = {&kLanesFamily, &kTiledFamily};
}  // namespace

const AttentionFamilyDesc& attention_family(AttentionFamily family) {
  for (const AttentionFamilyDesc* f : kFamilies)
    if (f->id == family) return *f;
  fail(VKATTN_ERROR_INTERNAL, "attention family ", static_cast<uint32_t>(family),
       " is not registered");
}

const AttentionFamilyDesc& pick_attention_family(const DeviceCaps& caps, const FwdConfig& cfg,
                                                 bool log) {
  const AttentionFamilyDesc& wanted = attention_family(cfg.var.family);
  std::string why = wanted.declines(caps, cfg);
  if (why.empty()) return wanted;
  for (const AttentionFamilyDesc* f : kFamilies) {
    if (f == &wanted || !f->declines(caps, cfg).empty()) continue;
    if (log)
      std::fprintf(stderr, "vkattn: attention fallback from %s to %s: %s\n", wanted.name, f->name,
                   why.c_str());
    return *f;
  }
  fail(VKATTN_ERROR_INTERNAL, "no attention kernel family serves this call (", wanted.name, ": ",
       why, ")");
}

}  // namespace vkattn

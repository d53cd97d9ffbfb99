// A call's plan made ready for recording: the plan (ops/attention_plan.h),
// its schedule (ops/attention_schedule.h), the kernel variant, the texel
// widths, and their device copy (items, combine items, sequences and block
// tables in one host-visible buffer). Paged calls keep it in a buffer of
// their own, reused by every layer of the step; other calls put it in the
// open batch's host ring.
#pragma once

#include <memory>

#include "core/binding_window.h"
#include "core/context.h"
#include "ops/attention.h"
#include "ops/attention_plan.h"
#include "ops/attention_schedule.h"
#include "ops/attention_variant.h"

namespace vkattn {

// Plan data regions start at this alignment (any device's storage offset
// alignment divides it).
constexpr uint64_t kRegionAlign = 256;

// Flags whose transforms are compiled into a forward kernel only when a
// call uses them (its FEATURES specialization constant).
constexpr uint32_t kCompiledFlags =
    kFlagSoftcap | kFlagAlibi | kFlagMaskBool | kFlagMaskAdd | kFlagKeyValid;

inline uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// The view format of texel kind `kind` (0 = one element, 1 = four
// elements, 2 = eight 16-bit elements) of dtype dt.
VkFormat texel_format(vkattn_dtype dt, uint32_t kind);

struct PreparedPlan {
  Plan plan;
  Schedule sched;
  AttentionVariant var;
  CallUnits units;
  uint32_t qvec = 0, kvec = 0, vvec = 0;
  Region items, combine, seqs, table;
};

std::shared_ptr<PreparedPlan> prepare_plan(Context& ctx, const AttentionCall& c);

}  // namespace vkattn

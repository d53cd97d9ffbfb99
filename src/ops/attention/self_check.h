// Self-check at first use (issue P2): the first time a context is about to
// record an attention pipeline (family + specialization constants) that has
// not been checked on this device, driver and build of vkattn, it runs that
// pipeline on a small known-answer problem of the same specialization (the
// call's head dims, dtypes, texel widths, paged or not, transforms compiled
// in; two sequences of a few query rows whose keys span two tiles and a
// ragged tail, plus a short one) on a private context (Context::checker():
// never the caller's command buffer, never after the caller's recorded
// work), and compares it with the host reference (src/reference) compiled
// into the library. Results are kept per device (core/check_records.h).
//
// A pipeline that fails is never used: the call's variant is chosen again
// on the next family (coopmat -> tiled -> lanes, lanes -> tiled, decode ->
// the table's family, then the other), which must pass its own check; when
// none is left the call fails with VKATTN_ERROR_UNSUPPORTED naming the
// failed checks. VKATTN_LOG=kernels prints "attention fallback from <a> to
// <b>: self-check failed (max err <e>)"; without it one line per process
// and pipeline says "vkattn: self-check failed: family=<a> ...".
//
// VKATTN_SELF_CHECK=0 turns checks off. In external mode (the caller's
// command buffer) an unchecked pipeline runs unchecked, logged once.
// VKATTN_FAULT_KERNEL=<family> compiles that family's kernels with wrong
// outputs (kFeatureFault), so the checks can be watched catching them.
#pragma once

#include <functional>
#include <string>

#include "core/check_records.h"
#include "core/context.h"
#include "ops/attention/attention.h"
#include "ops/attention/family.h"

namespace vkattn {

struct PreparedPlan;
class KvCache;

// FwdConfig::features bit of VKATTN_FAULT_KERNEL (attention_store.glsl
// FAULT_OUTPUT).
constexpr uint32_t kFeatureFault = 0x40000000u;
// ... and of VKATTN_FAULT_ODD_STORES (attention_store.glsl FAULT_ODD).
constexpr uint32_t kFeatureFaultOdd = 0x20000000u;

// Keys [0, u) of sequence `id` in layer 0 of an 8-bit cache as attention
// reads them (codes x scales), into k [u, Hkv, d] and v [u, Hkv, dv]: the
// reference of a check (and of vkattn_tune) over a cache.
void read_dequantized(KvCache& cache, int64_t id, uint32_t u, float* k, float* v);

// Runs the check of the pipeline `cfg` (for a call like `c`) now, on ctx's
// checker context, and returns what it found (not recorded anywhere).
CheckRecords::Entry run_self_check(Context& ctx, const AttentionCall& c, const FwdConfig& cfg);

// The recorded result of `cfg`'s pipeline, running its check first when it
// has none (or skipping it: checks off, external mode).
CheckRecords::Entry self_check(Context& ctx, const AttentionCall& c, const FwdConfig& cfg);

// Settles pp.var on a family whose pipeline for `c` passed its check:
// `rechoose(options)` chooses pp.var (and its texel widths) again with a
// family forced in `options` (`base`, the options pp.var was chosen with,
// plus that family). Throws UNSUPPORTED when every family failed.
void settle_checked_variant(Context& ctx, const AttentionCall& c, PreparedPlan& pp,
                            const KernelOptions& base,
                            const std::function<void(const KernelOptions&)>& rechoose);

// vkattn_context_self_check: the checks a call with this descriptor,
// dtypes, paged or not, and `query_tokens` query tokens per sequence would
// run, run now (before external mode). Throws UNSUPPORTED as that call
// would.
void self_check_up_front(Context& ctx, const vkattn_attention_desc* desc, vkattn_dtype q_dtype,
                         vkattn_dtype kv_dtype, uint32_t paged, uint32_t query_tokens);

// vkattn_context_self_check_counts: the pipelines of `family` recorded
// as passed and failed on this device, driver and build.
void self_check_counts(Context& ctx, uint32_t family, uint32_t* passed, uint32_t* failed);

}  // namespace vkattn

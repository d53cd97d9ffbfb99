// Tuning on the user's own GPU (issue P3): the shape classes calls are
// tuned by, and vkattn_tune, which measures the candidate kernel
// configurations of every family the device can run on a class's problem
// and records the fastest in the device's tuning file (core/tuning_file.h).
//
// A class is what decides a call's kernel configuration: prefill or decode
// (every sequence at most kDecodeMaxTokens query tokens), head dims, GQA
// group, q and K/V dtypes, paged or not, and the longest sequence's keys
// rounded down to a power of two (at least 64: calls with 2048 to 4095
// keys share the class tuned at 2048; a decode over 4096 cached tokens has
// 4097 keys and finds the class tuned at 4096). In a
// batch-invariant context (VKATTN_CONTEXT_BATCH_INVARIANT) the class never
// depends on the batch: the keys are left out and the part (decode-shaped
// sequences or the others) decides prefill or decode.
//
// choose_variant (ops/attention/prepare.cpp) applies a class's tuned
// options before the device table unless the environment forces a kernel
// choice; VKATTN_LOG=kernels says source=tuned, source=table or source=env.
#pragma once

#include <string>

#include "core/context.h"
#include "ops/attention/attention.h"
#include "ops/attention/prepare.h"
#include "vkattn/vkattn.h"

namespace vkattn {

// The class key of a call's part ("decode/d128/dv128/g4/q=f16/kv=f16/paged/k2048"),
// from the part's own sequences; a batch-invariant context's part has one
// class without a key count ("/inv").
std::string tune_class(const AttentionCall& c, PlanPart part, bool invariant);

// vkattn_tune (ops/attention/tune.cpp): desc checked by the entry point.
void run_tuning(Context& ctx, const vkattn_tune_desc& desc);
// The default cases' names (vkattn-bench's), nullptr past the last.
const char* tune_case_name(uint32_t index);

}  // namespace vkattn

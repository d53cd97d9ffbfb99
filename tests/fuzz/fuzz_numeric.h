// Operations of the fuzzer (fuzz_api.cpp) for issue E4, each self-contained
// and checked on its own (fuzz_numeric.cpp):
//   - numeric_edges: a dense call with extreme-but-finite scales and
//     logits (q and k scaled by powers of two, every product and the
//     scaled score finite in f32) and NaN/inf in K rows and NaN in V rows
//     that some queries see: every out element and lse must be NaN exactly
//     where the f64 reference's is, -inf exactly where it is, finite
//     elsewhere;
//   - tuning_entry: a tuning file holding one entry with arbitrary knob
//     values (0, 1, huge, in range; unknown kernels) for the class of the
//     call made next, on a context created over the same device after it
//     (so it loads the file): the call must succeed and match the
//     reference (an entry is a suggestion: what the device cannot run is
//     ignored).
//   - variant_call: a dense call with an attention variant drawn from a
//     small set of sources (documents over I32 ids drawn from the input,
//     a stride mask with a score function, scores of -inf and NaN),
//     against the reference given the same functions on the host.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include "vkattn/vkattn.h"

namespace vkattn_fuzz {

void numeric_edges(FuzzedDataProvider& in, vkattn_context* ctx);
void tuning_entry(FuzzedDataProvider& in, vkattn_context* ctx);
void variant_call(FuzzedDataProvider& in, vkattn_context* ctx);
// Destroys the variants variant_call made (before their contexts go).
void release_variants();

}  // namespace vkattn_fuzz

// Operations of the fuzzer (fuzz_api.cpp) at the edges issue E3 found
// broken, each self-contained and checked on its own (fuzz_edges.cpp):
//   - a step's layers with q and out as views at per-layer offsets of one
//     activation buffer, equal bit for bit to the same layers on dense
//     tensors;
//   - merge and attention into 16-bit outputs with an odd element count
//     (views, and wrapped ranges of a tensor's buffer) next to data of the
//     caller's that must keep its bits;
//   - external-mode sequences: a command buffer of the context's device
//     recorded through vkattn_context_begin/end_external, then flushes,
//     unrelated work and reads before the command buffer is submitted or
//     its semaphore signalled from the host; nothing may hang.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include "vkattn/vkattn.h"

namespace vkattn_fuzz {

void step_view_layers(FuzzedDataProvider& in, vkattn_context* ctx);
void odd_16bit_tails(FuzzedDataProvider& in, vkattn_context* ctx);
void external_sequence(FuzzedDataProvider& in, vkattn_context* ctx);

}  // namespace vkattn_fuzz

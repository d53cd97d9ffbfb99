// What the device table picks, in words: shared by vkattn-bench (--variants
// and each case's "kernel:" line) and vkattn-info. Uses vkattn's internals
// (link vkattn_internal).
#pragma once

#include <cstdint>
#include <string>

#include "vkattn/vkattn.h"

namespace vkattn_tools {

// The kernel (family and its parameters) an attention call with head dims
// d (q/k) and dv (v), at most max_rows query rows per (sequence, kv head)
// and f16 K/V gets on ctx's device, with VKATTN_ATTN_* forcing applied;
// group: query heads per kv head (max_rows / group query tokens).
std::string kernel_choice(vkattn_context* ctx, uint32_t d, uint32_t dv, uint32_t max_rows,
                          uint32_t group = 1);

// The device table's row for ctx's device: default family, each family's
// parameters, why (several lines).
std::string device_table_row(vkattn_context* ctx);

// The shapes both tools report, in order.
struct ReportShape {
  const char* what;
  uint32_t d, rows, group;
};
extern const ReportShape kReportShapes[4];

}  // namespace vkattn_tools

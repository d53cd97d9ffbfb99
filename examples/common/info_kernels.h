/* vkattn-info's view of the device table (C++ over vkattn's internals,
 * info_kernels.cpp; called from the C tool, which prints text or JSON). */
#ifndef VKATTN_INFO_KERNELS_H_
#define VKATTN_INFO_KERNELS_H_

#include <stdint.h>

#include "vkattn/vkattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table's row for ctx's device (several lines, each ending in '\n'). */
const char* vkattn_info_table_row(vkattn_context* ctx);
/* The report shapes: how many, what each is, and the kernel it gets on
 * ctx's device (VKATTN_ATTN_* forcing applies). */
uint32_t vkattn_info_shape_count(void);
const char* vkattn_info_shape_name(uint32_t i);
const char* vkattn_info_shape_kernel(vkattn_context* ctx, uint32_t i);
/* The strings returned stay valid until the next call of the same function. */

#ifdef __cplusplus
}
#endif

#endif /* VKATTN_INFO_KERNELS_H_ */

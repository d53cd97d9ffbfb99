/* vkattn-info's report of the kernels the device table picks (C++ over
 * vkattn's internals, info_kernels.cpp; called from the C tool). */
#ifndef VKATTN_INFO_KERNELS_H_
#define VKATTN_INFO_KERNELS_H_

#include "vkattn/vkattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prints the table's row for ctx's device and the kernel each report shape
 * gets: as text, or (json nonzero) as a JSON object
 * {"row": "...", "shapes": [{"shape": "...", "kernel": "..."}]}. */
void vkattn_info_print_kernels(vkattn_context* ctx, int json);

#ifdef __cplusplus
}
#endif

#endif /* VKATTN_INFO_KERNELS_H_ */

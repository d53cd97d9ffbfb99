/* The public header compiles as strict C99 with every warning an error. */
#include "vkattn/vkattn.h"

int vkattn_header_c99_check(void);
int vkattn_header_c99_check(void) {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  return (int)sizeof(d) + (int)VKATTN_SUCCESS + (int)vkattn_version();
}

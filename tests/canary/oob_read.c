/* Canary for AddressSanitizer (tools/canaries.sh): the caller passes a
 * source buffer shorter than the nbytes it claims; the library's copy reads
 * past its end. The ASan build must report a heap-buffer-overflow. */
#include <stdio.h>
#include <stdlib.h>

#include "vkattn/vkattn.h"

int main(void) {
  vkattn_context* ctx = NULL;
  vkattn_tensor* t = NULL;
  int64_t n = 256;
  float* src = malloc(100 * sizeof(float)); /* 256 claimed below */
  if (!src || vkattn_context_create(NULL, &ctx) ||
      vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &t)) {
    fprintf(stderr, "canary setup failed: %s\n", vkattn_last_error());
    return 2;
  }
  for (int i = 0; i < 100; ++i) src[i] = (float)i;
  vkattn_tensor_write(t, src, 256 * sizeof(float));
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
  free(src);
  return 0;
}

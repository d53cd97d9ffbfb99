/* Canary for LeakSanitizer (tools/canaries.sh): a tensor is never
 * destroyed. The ASan build must report vkattn's allocations as leaked. */
#include <stdio.h>

#include "vkattn/vkattn.h"

int main(void) {
  vkattn_context* ctx = NULL;
  vkattn_tensor* t = NULL;
  int64_t n = 1024;
  if (vkattn_context_create(NULL, &ctx) || vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &t)) {
    fprintf(stderr, "canary setup failed: %s\n", vkattn_last_error());
    return 2;
  }
  vkattn_context_destroy(ctx); /* the tensor keeps the context's memory alive: leaked */
  return 0;
}

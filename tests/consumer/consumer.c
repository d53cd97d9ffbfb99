/* Builds against an installed vkattn and does a tensor round trip. */
#include <stdio.h>
#include <string.h>

#include <vkattn/vkattn.h>

int main(void) {
  vkattn_context* ctx = NULL;
  vkattn_tensor* t = NULL;
  int64_t n = 4;
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  if (vkattn_context_create(NULL, &ctx) != VKATTN_SUCCESS ||
      vkattn_tensor_create(ctx, VKATTN_F32, 1, &n, &t) != VKATTN_SUCCESS ||
      vkattn_tensor_write(t, x, sizeof(x)) != VKATTN_SUCCESS ||
      vkattn_tensor_read(t, y, sizeof(y)) != VKATTN_SUCCESS) {
    fprintf(stderr, "consumer: %s\n", vkattn_last_error());
    return 1;
  }
  vkattn_tensor_destroy(t);
  vkattn_context_destroy(ctx);
  if (memcmp(x, y, sizeof(x)) != 0) return 1;
  printf("consumer ok, vkattn %u\n", vkattn_version());
  return 0;
}

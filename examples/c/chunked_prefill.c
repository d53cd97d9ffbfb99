/* chunked_prefill: one prompt of 892 tokens fed to a paged KV cache in
 * chunks of 64, 73, 128, 256 and 1024 tokens (1024 = the whole prompt at
 * once), then 16 decode steps. Every chunking must give the same outputs:
 * the program prints the largest difference to one-shot prefill per chunk
 * size and the pages in use.
 *
 *   ./build/examples/chunked_prefill          (VKATTN_DEVICE picks a device)
 *
 * The "model" is synthetic: the q/k/v of token p in layer l are a fixed
 * pseudo-random function of (p, l), as a real model's would be of the
 * prompt, so chunking cannot change them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkattn/vkattn.h"

enum { LAYERS = 2, H = 8, HKV = 2, D = 64, PROMPT = 892, DECODE = 16, PAGE = 16 };
enum { TOTAL = PROMPT + DECODE };

static void check(vkattn_status s, const char* what) {
  if (s != VKATTN_SUCCESS) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, vkattn_last_error(), vkattn_status_string(s));
    exit(1);
  }
}

/* A value in [-1, 1) from (kind, layer, token, index): a small hash. */
static float value(uint32_t kind, uint32_t layer, uint32_t tok, uint32_t i) {
  uint32_t x = kind * 0x9e3779b9u ^ layer * 0x85ebca6bu ^ tok * 0xc2b2ae35u ^ i * 0x27d4eb2fu;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return (float)(x >> 8) / (float)(1u << 23) - 1.0f;
}

static void fill(float* dst, uint32_t kind, uint32_t layer, int first, int n, int width) {
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < width; ++i) dst[t * width + i] = value(kind, layer, first + t, i);
}

/* Runs the prompt in chunks of `chunk`, then DECODE single-token steps;
 * out receives the last layer's outputs of every token [TOTAL, H, D]. */
static void run(vkattn_context* ctx, int chunk, float* out, uint32_t* pages_used) {
  vkattn_kv_cache_desc cd;
  vkattn_kv_cache_desc_init(&cd);
  cd.num_layers = LAYERS;
  cd.num_kv_heads = HKV;
  cd.head_dim = D;
  cd.page_size = PAGE;
  cd.num_pages = (TOTAL + PAGE - 1) / PAGE;
  cd.dtype = VKATTN_F16;
  vkattn_kv_cache* cache;
  check(vkattn_kv_cache_create(ctx, &cd, &cache), "vkattn_kv_cache_create");

  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H;
  ad.num_kv_heads = HKV;
  ad.head_dim = D;
  ad.causal = 1;

  float* q = malloc(sizeof(float) * chunk * H * D);
  float* k = malloc(sizeof(float) * chunk * HKV * D);
  float* v = malloc(sizeof(float) * chunk * HKV * D);
  const int64_t seq = 1;
  for (int done = 0; done < TOTAL;) {
    int32_t n = done < PROMPT ? (PROMPT - done < chunk ? PROMPT - done : chunk) : 1;
    int64_t qs[3] = {n, H, D}, ks[3] = {n, HKV, D};
    vkattn_tensor *tq, *tk, *tv, *to;
    check(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &tq), "vkattn_tensor_create");
    check(vkattn_tensor_create(ctx, VKATTN_F32, 3, ks, &tk), "vkattn_tensor_create");
    check(vkattn_tensor_create(ctx, VKATTN_F32, 3, ks, &tv), "vkattn_tensor_create");
    check(vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &to), "vkattn_tensor_create");
    vkattn_step* step;
    check(vkattn_step_begin(cache, 1, &seq, &n, &step), "vkattn_step_begin");
    for (uint32_t l = 0; l < LAYERS; ++l) {
      fill(q, 0, l, done, n, H * D);
      fill(k, 1, l, done, n, HKV * D);
      fill(v, 2, l, done, n, HKV * D);
      check(vkattn_tensor_write(tq, q, sizeof(float) * n * H * D), "vkattn_tensor_write");
      check(vkattn_tensor_write(tk, k, sizeof(float) * n * HKV * D), "vkattn_tensor_write");
      check(vkattn_tensor_write(tv, v, sizeof(float) * n * HKV * D), "vkattn_tensor_write");
      check(vkattn_step_append(step, l, tk, tv), "vkattn_step_append");
      check(vkattn_step_attention(step, l, &ad, tq, to), "vkattn_step_attention");
    }
    check(vkattn_step_commit(step), "vkattn_step_commit");
    check(vkattn_tensor_read(to, out + (int64_t)done * H * D, sizeof(float) * n * H * D),
          "vkattn_tensor_read");
    vkattn_tensor_destroy(tq);
    vkattn_tensor_destroy(tk);
    vkattn_tensor_destroy(tv);
    vkattn_tensor_destroy(to);
    done += n;
  }
  uint32_t free_pages = 0;
  check(vkattn_kv_cache_num_free_pages(cache, &free_pages), "vkattn_kv_cache_num_free_pages");
  *pages_used = cd.num_pages - free_pages;
  vkattn_kv_cache_destroy(cache);
  free(q), free(k), free(v);
}

int main(int argc, char** argv) {
  if (argc > 1) { /* it takes no argument */
    fprintf(stderr, "usage: chunked_prefill (no arguments; got \"%s\")\n", argv[1]);
    return 2;
  }
  vkattn_context_desc cdesc;
  vkattn_context_desc_init(&cdesc);
  vkattn_context* ctx;
  check(vkattn_context_create(&cdesc, &ctx), "vkattn_context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  check(vkattn_context_get_device_info(ctx, &info), "vkattn_context_get_device_info");
  printf("device: %s\n", info.name);
  printf(
      "prompt %d tokens + %d decode steps; %d layers, %d/%d heads, d %d, f16 cache, "
      "%d tokens per page\n",
      PROMPT, DECODE, LAYERS, H, HKV, D, PAGE);

  float* one_shot = malloc(sizeof(float) * TOTAL * H * D);
  float* out = malloc(sizeof(float) * TOTAL * H * D);
  uint32_t pages = 0;
  run(ctx, 1024, one_shot, &pages);
  printf("chunk 1024 (one shot): reference, %u pages in use\n", pages);
  const int chunks[] = {64, 73, 128, 256};
  double worst = 0;
  for (int c = 0; c < 4; ++c) {
    run(ctx, chunks[c], out, &pages);
    double diff = 0;
    for (int64_t i = 0; i < (int64_t)TOTAL * H * D; ++i) {
      double e = fabs((double)out[i] - one_shot[i]);
      if (!(e <= diff)) diff = e; /* NaN counts as the worst */
    }
    printf("chunk %4d: max |out - one-shot| = %.3g over prompt and decodes, %u pages in use\n",
           chunks[c], diff, pages);
    if (!(diff <= worst)) worst = diff;
  }
  free(one_shot), free(out);
  vkattn_context_destroy(ctx);
  if (!(worst <= 1e-4)) {
    printf("FAILED: chunked prefill differs from one-shot prefill by %.3g\n", worst);
    return 1;
  }
  printf("ok\n");
  return 0;
}

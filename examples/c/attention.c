/* attention: causal sliding-window attention over a packed batch of three
 * sequences of different lengths (no padding), on the default device,
 * checked against a few lines of plain C.
 *
 *   ./build/examples/attention            (VKATTN_DEVICE picks a device)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkattn/vkattn.h"

enum { H = 8, HKV = 2, D = 64, WINDOW = 127, BATCH = 3 };

static void die(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, vkattn_last_error());
  exit(1);
}

/* Plain C reference: bottom-right causal + window, one (token, head) row. */
static void reference_row(const float* q, const float* k, const float* v, int t, int u, int i,
                          int h, float* out) {
  const int kh = h / (H / HKV);
  const int pos = u - t + i;
  double m = -INFINITY, l = 0, acc[D] = {0};
  for (int j = 0; j <= pos && j < u; ++j) {
    if (pos - j > WINDOW) continue;
    double s = 0;
    for (int e = 0; e < D; ++e) s += (double)q[(i * H + h) * D + e] * k[(j * HKV + kh) * D + e];
    s /= sqrt((double)D);
    double mn = s > m ? s : m, a = exp(m - mn), p = exp(s - mn);
    l = l * a + p;
    for (int e = 0; e < D; ++e) acc[e] = acc[e] * a + p * v[(j * HKV + kh) * D + e];
    m = mn;
  }
  for (int e = 0; e < D; ++e) out[e] = l > 0 ? (float)(acc[e] / l) : 0.0f;
}

int main(int argc, char** argv) {
  if (argc > 1) { /* it takes no argument */
    fprintf(stderr, "usage: attention (no arguments; got \"%s\")\n", argv[1]);
    return 2;
  }
  const int t[BATCH] = {300, 1, 57};    /* queries: a prompt, a decode, a chunk */
  const int u[BATCH] = {300, 500, 200}; /* keys: cached + new tokens */
  int32_t cu_q[BATCH + 1] = {0}, cu_k[BATCH + 1] = {0};
  for (int b = 0; b < BATCH; ++b) cu_q[b + 1] = cu_q[b] + t[b], cu_k[b + 1] = cu_k[b] + u[b];
  const int64_t tq = cu_q[BATCH], tk = cu_k[BATCH];

  float* q = malloc(sizeof(float) * tq * H * D);
  float* k = malloc(sizeof(float) * tk * HKV * D);
  float* v = malloc(sizeof(float) * tk * HKV * D);
  float* out = malloc(sizeof(float) * tq * H * D);
  srand(1);
  for (int64_t i = 0; i < tq * H * D; ++i) q[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int64_t i = 0; i < tk * HKV * D; ++i) k[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int64_t i = 0; i < tk * HKV * D; ++i) v[i] = (float)rand() / RAND_MAX - 0.5f;

  vkattn_context_desc cd;
  vkattn_context_desc_init(&cd);
  cd.flags = VKATTN_CONTEXT_PROFILING;
  vkattn_context* ctx;
  if (vkattn_context_create(&cd, &ctx)) die("vkattn_context_create");
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  vkattn_context_get_device_info(ctx, &info);

  int64_t qs[3] = {tq, H, D}, ks[3] = {tk, HKV, D};
  vkattn_tensor *tq_, *tk_, *tv_, *to_;
  if (vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &tq_) ||
      vkattn_tensor_create(ctx, VKATTN_F32, 3, ks, &tk_) ||
      vkattn_tensor_create(ctx, VKATTN_F32, 3, ks, &tv_) ||
      vkattn_tensor_create(ctx, VKATTN_F32, 3, qs, &to_))
    die("vkattn_tensor_create");
  if (vkattn_tensor_write(tq_, q, sizeof(float) * tq * H * D) ||
      vkattn_tensor_write(tk_, k, sizeof(float) * tk * HKV * D) ||
      vkattn_tensor_write(tv_, v, sizeof(float) * tk * HKV * D))
    die("vkattn_tensor_write");

  vkattn_attention_desc desc;
  vkattn_attention_desc_init(&desc);
  desc.num_heads = H;
  desc.num_kv_heads = HKV;
  desc.head_dim = D;
  desc.causal = 1;
  desc.window_left = WINDOW; /* HF sliding_window = 128 */
  if (vkattn_attention_varlen(ctx, &desc, BATCH, cu_q, cu_k, tq_, tk_, tv_, to_))
    die("vkattn_attention_varlen");
  if (vkattn_context_synchronize(ctx)) die("vkattn_context_synchronize");
  uint64_t ns = 0;
  vkattn_context_last_gpu_time(ctx, &ns);
  if (vkattn_tensor_read(to_, out, sizeof(float) * tq * H * D)) die("vkattn_tensor_read");

  double max_err = 0;
  float row[D];
  for (int b = 0; b < BATCH; ++b)
    for (int i = 0; i < t[b]; ++i)
      for (int h = 0; h < H; ++h) {
        reference_row(q + (int64_t)cu_q[b] * H * D, k + (int64_t)cu_k[b] * HKV * D,
                      v + (int64_t)cu_k[b] * HKV * D, t[b], u[b], i, h, row);
        for (int e = 0; e < D; ++e) {
          double err = fabs(row[e] - out[((int64_t)(cu_q[b] + i) * H + h) * D + e]);
          if (err > max_err) max_err = err;
        }
      }

  printf("device: %s\n", info.name);
  printf(
      "packed batch: 3 sequences (t, u) = (300, 300), (1, 500), (57, 200); q [%lld, %d, %d], "
      "k/v [%lld, %d, %d], f32\n",
      (long long)tq, H, D, (long long)tk, HKV, D);
  printf("causal, window_left %d, GQA %d:%d\n", WINDOW, H, HKV);
  printf(
      "max |vkattn - reference| = %.3g, GPU time %.3f ms (timestamps; the pipeline is\n"
      "compiled at the first call, before recording, and cached on disk)\n",
      max_err, ns * 1e-6);
  vkattn_tensor_destroy(tq_);
  vkattn_tensor_destroy(tk_);
  vkattn_tensor_destroy(tv_);
  vkattn_tensor_destroy(to_);
  vkattn_context_destroy(ctx);
  free(q), free(k), free(v), free(out);
  if (max_err > 1e-4) {
    printf("FAILED: error above 1e-4\n");
    return 1;
  }
  printf("ok\n");
  return 0;
}

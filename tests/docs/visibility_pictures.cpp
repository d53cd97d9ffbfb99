// Prints docs/guide/attention.md's visibility pictures, drawn by
// src/reference: each rule runs the reference with equal scores and one-hot
// values (v_j = e_j), so out[i][j] > 0 exactly where query i sees key j.
// ctest docs.visibility_pictures checks that the guide holds this output.
#include <cstdio>
#include <string>
#include <vector>

#include "reference/attention_ref.h"

namespace {

struct Picture {
  const char* title;
  int t, u;
  bool causal;
  int left, right, chunk;
  int span_lo = 0, span_hi = 0;    // one bidirectional span, [lo, hi) (none when empty)
  const uint32_t* tree = nullptr;  // a speculative tree's t words (t <= 32), or none
};

// A draft tree of 6 nodes: 0 the root, 1 and 2 its children, 3 and 4
// children of 1, 5 a child of 2; each row holds its ancestors and itself.
const uint32_t kTree[6] = {0x01, 0x03, 0x05, 0x0b, 0x13, 0x25};

void draw(const Picture& pic) {
  const int t = pic.t, u = pic.u;
  vkattn::ref::AttentionParams p;
  p.num_heads = p.num_kv_heads = 1, p.head_dim = 1, p.head_dim_v = u;
  p.causal = pic.causal, p.window_left = pic.left, p.window_right = pic.right;
  p.chunk_size = pic.chunk;
  const int32_t span_indptr[2] = {0, 1}, spans[2] = {pic.span_lo, pic.span_hi};
  if (pic.span_hi > pic.span_lo) p.span_indptr = span_indptr, p.spans = spans;
  const int32_t tree_indptr[2] = {0, t};
  if (pic.tree) p.tree_indptr = tree_indptr, p.tree_mask = pic.tree;
  std::vector<float> q(t, 0.0f), k(u, 0.0f), v(size_t(u) * u, 0.0f), out(size_t(t) * u);
  for (int j = 0; j < u; ++j) v[size_t(j) * u + j] = 1.0f;
  const int32_t cu_q[2] = {0, t}, cu_k[2] = {0, u};
  vkattn::ref::attention_varlen(p, 1, cu_q, cu_k, q.data(), k.data(), v.data(), out.data(),
                                nullptr);
  std::printf("    %s\n", pic.title);
  for (int i = 0; i < t; ++i) {
    std::string row;
    for (int j = 0; j < u; ++j) row += out[size_t(i) * u + j] > 0 ? " x" : " .";
    std::printf("    pos %3d %s\n", u - t + i, row.c_str());
  }
  std::printf("\n");
}

}  // namespace

int main() {
  const Picture pics[] = {
      {"causal, window_left 2, window_right -1 (sliding window of 3)", 6, 10, true, 2, -1, 0},
      {"window_left 2, window_right 1, not causal (two-sided window)", 6, 10, false, 2, 1, 0},
      {"causal, chunk_size 4 (Llama 4 local layers)", 6, 10, true, -1, -1, 4},
      {"chunk_size 4, not causal (t > u: positions -2 and -1 see nothing)", 6, 4, false, -1, -1, 4},
      {"causal, one span [3, 7) (Gemma 3: an image's 4 tokens see each other)", 10, 10, true, -1,
       -1, 0, 3, 7},
      {"causal, window_left 1, span [3, 7) (the span widens the window)", 10, 10, true, 1, -1, 0, 3,
       7},
      {"causal, a 6-node draft tree over 4 cached keys (1, 2 children of 0; 3, 4 of 1; 5 of 2)", 6,
       10, true, -1, -1, 0, 0, 0, kTree},
  };
  for (const Picture& p : pics) draw(p);
  return 0;
}

// Rotary position embedding (RoPE) in double: the inverse frequencies of
// Hugging Face transformers' rope types (default, linear, llama3, yarn;
// modeling_rope_utils.py) and the rotation itself. The library computes
// its cos/sin tables with rope_inv_freq (ops/rope.cpp); the tests rotate
// with rope_apply.
#pragma once

#include <cstdint>
#include <vector>

namespace vkattn::ref {

struct RopeParams {
  bool interleaved = false;  // GPT-J pairs (2i, 2i + 1); else NeoX halves (i, i + rd / 2)
  int rotary_dim = 0;        // rd, even
  int rotary_offset = 0;     // first rotated element of a row
  double theta = 10000.0;
  int scaling = 0;  // 0 none, 1 linear, 2 llama3, 3 yarn (vkattn_rope_scaling)
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double original_max_position = 0;                      // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  double attention_factor = 0;                           // 0: HF's default for the type
  bool truncate = true;                                  // yarn correction range
};

// rd / 2 inverse frequencies; *attention_factor gets the factor cos and
// sin are multiplied by (1 unless yarn).
std::vector<double> rope_inv_freq(const RopeParams& p, double* attention_factor);

// Rotates rows of x [n, heads, dim] in place; row i is at position pos[i].
void rope_apply(const RopeParams& p, int64_t n, int heads, int dim, const int64_t* pos, float* x);

}  // namespace vkattn::ref

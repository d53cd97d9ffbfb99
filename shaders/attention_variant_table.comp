// An attention variant's (user functions') results over a list of pairs:
// the self-check's table (ops/attention/variant_table.h). Compiled at run
// time only, by src/ops/attention/user_functions.cpp with the user's
// source spliced in (USER_FUNCTIONS, USER_MASK, USER_SCORE), never at
// build time: the self-check of a variant pipeline compares that pipeline
// with the reference given this table, so a splice the families get wrong
// (their defines, their call sites) shows as a wrong result.
//
// Budget: one pair per lane, two loads and two stores of its own plus what
// the user's functions read; run once per checked pipeline over a few
// thousand pairs, so occupancy and bandwidth do not matter.
#version 450

layout(local_size_x = 64) in;

// The parameters' binding follows this shader's two (vkattn_user.glsl).
#define VKATTN_USER_BINDING 2
#include "vkattn_user.glsl"

#ifndef USER_MASK
#define USER_MASK 0
#endif
#ifndef USER_SCORE
#define USER_SCORE 0
#endif

// Five words a pair: seq, head, q_pos, k_pos (as uint) and the score's bits.
layout(std430, binding = 0) readonly buffer Pairs {
  uint pairs[];
};
// Two words a pair: 1 where vkattn_mask_mod shows the key (1 without one),
// and the bits of vkattn_score_mod's result (the score without one).
layout(std430, binding = 1) writeonly buffer Results {
  uint results[];
};

layout(push_constant) uniform Push {
  uint count;
} pc;

void main() {
  vkattn_user_init();
  const uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * 64u;
  if (i >= pc.count) return;
  const uint seq = pairs[5u * i], head = pairs[5u * i + 1u];
  const int q_pos = int(pairs[5u * i + 2u]), k_pos = int(pairs[5u * i + 3u]);
  const float score = uintBitsToFloat(pairs[5u * i + 4u]);
#if USER_MASK != 0
  results[2u * i] = vkattn_mask_mod(seq, head, q_pos, k_pos) ? 1u : 0u;
#else
  results[2u * i] = 1u;
#endif
#if USER_SCORE != 0
  results[2u * i + 1u] = floatBitsToUint(vkattn_score_mod(score, seq, head, q_pos, k_pos));
#else
  results[2u * i + 1u] = floatBitsToUint(score);
#endif
}

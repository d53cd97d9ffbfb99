// An attention variant's (user functions') results over a list of pairs,
// computed on the device by shaders/attention_variant_table.comp: what
// the self-check's reference uses instead of a host copy of the user's
// GLSL (ops/attention/self_check.cpp), so that a variant pipeline whose
// splice goes wrong fails its check.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace vkattn {

class Context;
class Tensor;
class UserFunctions;

struct UserPair {
  uint32_t seq, head;
  int32_t q_pos, k_pos;
  float score;  // the score handed to vkattn_score_mod
};

struct UserTable {
  std::vector<uint8_t> shown;  // per pair: vkattn_mask_mod's result (1 without one)
  std::vector<float> score;    // per pair: vkattn_score_mod's result (the score without one)
};

// Runs the table kernel on ctx (its own recorder; waits for the result)
// with the variant's parameter tensors (null: an unused slot), packed as
// for a call (ops/attention/user_params.h).
UserTable evaluate_user_functions(const std::shared_ptr<Context>& ctx, const UserFunctions& user,
                                  Tensor* const (&params)[4], const std::vector<UserPair>& pairs);

}  // namespace vkattn

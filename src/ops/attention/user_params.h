// An attention variant's (user functions') parameters as every shader
// that splices them reads them (vkattn_user.glsl, ops/attention/
// user_functions.cpp): one host slice holding an 8-word header (each
// slot's first word, then its element count) and the elements, copied
// from the tensors (views packed). The families' calls (record.cpp) and
// the self-check's table of the functions (variant_table.cpp) pack them
// here.
#pragma once

#include <utility>
#include <vector>

#include "core/binding_window.h"

namespace vkattn {

class Buffer;
class Context;
class Tensor;

struct UserParamsCopy {
  BoundBuffer bound;  // the slice, for the shader's parameter binding
  Buffer* dst = nullptr;
  std::vector<std::pair<Tensor*, std::vector<VkBufferCopy>>> copies;
};

// The slice for params[0..3] (null: an unused slot); UNSUPPORTED past one
// storage binding of the device. Nothing is recorded yet:
// record_user_params_copies records the copies, before the dispatch.
UserParamsCopy pack_user_params(Context& ctx, Tensor* const (&params)[4]);
void record_user_params_copies(Context& ctx, const UserParamsCopy& p);

}  // namespace vkattn

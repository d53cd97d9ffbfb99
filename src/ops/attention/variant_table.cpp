#include "ops/attention/variant_table.h"

#include <cstring>

#include "core/binding_window.h"
#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention/user_functions.h"
#include "ops/attention/user_params.h"

namespace vkattn {

namespace {

const KernelLayout kTableLayout{
    kTableShader, {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer}, 4};

std::shared_ptr<Tensor> words_tensor(const std::shared_ptr<Context>& ctx, size_t words) {
  const int64_t n = static_cast<int64_t>(words);
  return std::make_shared<Tensor>(ctx, VKATTN_I32, 1, &n);
}

}  // namespace

UserTable evaluate_user_functions(const std::shared_ptr<Context>& ctx, const UserFunctions& user,
                                  Tensor* const (&params)[4], const std::vector<UserPair>& pairs) {
  UserTable t;
  if (pairs.empty()) return t;
  const size_t n = pairs.size();
  std::vector<uint32_t> in(5 * n);
  for (size_t i = 0; i < n; ++i) {
    const UserPair& p = pairs[i];
    in[5 * i] = p.seq, in[5 * i + 1] = p.head;
    in[5 * i + 2] = static_cast<uint32_t>(p.q_pos), in[5 * i + 3] = static_cast<uint32_t>(p.k_pos);
    std::memcpy(&in[5 * i + 4], &p.score, 4);
  }
  auto pairs_t = words_tensor(ctx, in.size());
  auto results_t = words_tensor(ctx, 2 * n);
  pairs_t->write(in.data());
  const DeviceCaps& caps = ctx->device().caps();
  for (const auto* x : {pairs_t.get(), results_t.get()})
    if (x->nbytes() > caps.max_storage_buffer_range)
      fail(VKATTN_ERROR_INTERNAL, "the self-check's variant table does not fit one binding");
  const UserParamsCopy packed = pack_user_params(*ctx, params);
  Recorder& rec = ctx->recorder();
  for (const auto* x : {pairs_t.get(), results_t.get()}) rec.use(x->buffer());
  record_user_params_copies(*ctx, packed);
  auto whole = [](const Tensor& x) {
    BoundBuffer b;
    b.buffer = x.buffer(), b.offset = x.byte_offset(), b.range = x.nbytes();
    return b;
  };
  Pipelines& pipes = ctx->pipelines();
  const Pipeline& p = pipes.get(kTableLayout, {}, 0, &user);
  const uint32_t count = static_cast<uint32_t>(n);
  pipes.dispatch(rec, p, {whole(*pairs_t), whole(*results_t), packed.bound}, &count, sizeof(count),
                 (n + 63) / 64);
  std::vector<uint32_t> out(2 * n);
  results_t->read(out.data());
  t.shown.resize(n), t.score.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.shown[i] = out[2 * i] != 0;
    std::memcpy(&t.score[i], &out[2 * i + 1], 4);
  }
  return t;
}

}  // namespace vkattn

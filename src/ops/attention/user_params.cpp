#include "ops/attention/user_params.h"

#include <algorithm>
#include <cstring>

#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention/prepare.h"

namespace vkattn {

UserParamsCopy pack_user_params(Context& ctx, Tensor* const (&params)[4]) {
  const DeviceCaps& caps = ctx.device().caps();
  uint64_t words = 8;
  uint32_t header[8] = {};
  for (uint32_t s = 0; s < 4; ++s) {
    const Tensor* t = params[s];
    const uint64_t n = t ? uint64_t(t->numel()) : 0;
    header[s] = static_cast<uint32_t>(std::min<uint64_t>(words, UINT32_MAX));
    header[4 + s] = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
    words += n;
  }
  if (words * 4 > caps.max_storage_buffer_range || words > UINT32_MAX)
    fail(VKATTN_ERROR_UNSUPPORTED, "desc->variant_params: ", words * 4,
         " bytes of parameters, more than one storage binding of this device (",
         caps.max_storage_buffer_range, ")");
  UserParamsCopy out;
  HostSlice sl = ctx.recorder().alloc_host(round_up(words * 4, 16));
  std::memset(sl.host, 0, sl.size);
  std::memcpy(sl.host, header, sizeof(header));
  out.dst = sl.buffer;
  for (uint32_t s = 0; s < 4; ++s) {
    Tensor* t = params[s];
    if (!t || t->numel() == 0) continue;
    out.copies.emplace_back(t, t->copy_regions(sl.offset + uint64_t(header[s]) * 4, true));
  }
  uint64_t start = 0;
  out.bound =
      storage_window(caps, Region{nullptr, sl.buffer, sl.offset, sl.size}, 0, words * 4, &start);
  if (start != 0) fail(VKATTN_ERROR_INTERNAL, "variant parameters bound from byte ", start);
  return out;
}

void record_user_params_copies(Context& ctx, const UserParamsCopy& p) {
  for (const auto& [t, regions] : p.copies)
    ctx.recorder().copy_buffer(*t->buffer(), *p.dst, regions);
}

}  // namespace vkattn

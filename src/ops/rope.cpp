#include "ops/rope.h"

#include <algorithm>
#include <cmath>

#include "core/abi.h"
#include "core/binding_window.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/loop_budget.h"
#include "ops/attention/check.h"
#include "ops/packed_views.h"

namespace vkattn {

namespace {

const KernelLayout kRopeLayout{
    "rope",
    {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
    40};

struct RopePush {
  uint32_t rows, heads, dim, rd, off, gptj, dt, x_skip, out_skip, copy;
};
static_assert(sizeof(RopePush) == 40, "push constants mirror rope.comp");

}  // namespace

Rope::Rope(const vkattn_rope_desc* in, uint32_t head_dim) {
  const vkattn_rope_desc d =
      read_desc(in, kRopeDescSizes, &vkattn_rope_desc_init, "rope", "vkattn_rope_desc_init");
  for (uint32_t r : d.reserved) require(r == 0, "rope->reserved must be 0");
  require(d.layout <= VKATTN_ROPE_GPTJ, "rope->layout ", d.layout, " is unknown");
  require(d.rotary_offset < head_dim, "rope->rotary_offset ", d.rotary_offset,
          " is not below the head dim ", head_dim);
  rd_ = d.rotary_dim ? d.rotary_dim : (head_dim - d.rotary_offset) / 2 * 2;
  require(rd_ >= 2 && rd_ % 2 == 0, "rope->rotary_dim ", d.rotary_dim, " must be even and >= 2");
  require(uint64_t(d.rotary_offset) + rd_ <= head_dim, "rope->rotary_offset ", d.rotary_offset,
          " + rotary_dim ", rd_, " exceeds the head dim ", head_dim);
  require(std::isfinite(d.theta) && d.theta > 1.0f, "rope->theta must be > 1");
  require(d.scaling <= VKATTN_ROPE_SCALING_YARN, "rope->scaling ", d.scaling, " is unknown");
  require(std::isfinite(d.attention_factor) && d.attention_factor >= 0.0f,
          "rope->attention_factor must be >= 0 (0 = the scaling's default)");
  ref::RopeParams p;
  p.interleaved = d.layout == VKATTN_ROPE_GPTJ;
  p.rotary_dim = int(rd_), p.rotary_offset = int(d.rotary_offset), p.theta = d.theta;
  p.scaling = int(d.scaling), p.factor = d.factor, p.attention_factor = d.attention_factor;
  if (d.scaling != VKATTN_ROPE_SCALING_NONE)
    require(std::isfinite(d.factor) && d.factor > 0.0f, "rope->factor must be > 0");
  if (d.scaling == VKATTN_ROPE_SCALING_LLAMA3 || d.scaling == VKATTN_ROPE_SCALING_YARN)
    require(d.original_max_position >= 1, "rope->original_max_position must be set (>= 1) for ",
            d.scaling == VKATTN_ROPE_SCALING_YARN ? "YARN" : "LLAMA3");
  if (d.scaling == VKATTN_ROPE_SCALING_LLAMA3)
    require(std::isfinite(d.low_freq_factor) && std::isfinite(d.high_freq_factor) &&
                d.low_freq_factor > 0.0f && d.high_freq_factor > d.low_freq_factor,
            "rope: LLAMA3 needs 0 < low_freq_factor < high_freq_factor");
  if (d.scaling == VKATTN_ROPE_SCALING_YARN)
    require(std::isfinite(d.beta_fast) && std::isfinite(d.beta_slow) && d.beta_fast > 0.0f &&
                d.beta_slow > 0.0f,
            "rope: YARN needs beta_fast and beta_slow > 0");
  p.low_freq_factor = d.low_freq_factor, p.high_freq_factor = d.high_freq_factor;
  p.original_max_position = d.original_max_position;
  p.beta_fast = d.beta_fast, p.beta_slow = d.beta_slow, p.truncate = d.yarn_truncate != 0;
  off_ = d.rotary_offset;
  gptj_ = p.interleaved;
  host_alloc_point();
  inv_freq_ = ref::rope_inv_freq(p, &factor_);
}

void Rope::fill(float* dst, int64_t pos) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = double(pos) * inv_freq_[i];
    dst[2 * i] = static_cast<float>(std::cos(a) * factor_);
    dst[2 * i + 1] = static_cast<float>(std::sin(a) * factor_);
  }
}

void record_rope(Context& ctx, const vkattn_rope_desc* desc, uint32_t batch,
                 const int32_t* cu_seqlens, const int32_t* start_positions, Tensor* x,
                 Tensor* out) {
  require(x && out, "x and out must not be NULL");
  require_same_context(ctx, x, "x");
  require_same_context(ctx, out, "out");
  require(is_float(x->dtype()), "x must be f32, f16 or bf16, got ", dtype_name(x->dtype()));
  require(x->ndim() == 3, "x must be [total, heads, head_dim], got ", shape_str(*x));
  const int64_t total = x->dim(0), heads = x->dim(1), dim = x->dim(2);
  require(dim >= 1 && dim <= VKATTN_MAX_HEAD_DIM, "x's head dim ", dim, " is not in 1..",
          VKATTN_MAX_HEAD_DIM);
  require(heads >= 1 && heads <= 65536, "x's head count ", heads, " is not in 1..65536");
  require(out->dtype() == x->dtype(), "out must have x's dtype");
  require_shape(*out, "out", {total, heads, dim});
  const bool in_place =
      out == x || (out->buffer() == x->buffer() && out->byte_offset() == x->byte_offset() &&
                   out->contiguous() && x->contiguous());
  require(in_place || !elements_overlap(out, x), "out must be x itself or not overlap it");
  require(!self_overlapping(*out), "out is a view whose elements overlap");
  const Rope rope(desc, uint32_t(dim));
  check_prefix_sums("cu_seqlens", batch, cu_seqlens, total, "x");
  require(start_positions != nullptr || batch == 0, "start_positions is NULL");
  for (uint32_t b = 0; b < batch; ++b)
    require(start_positions[b] >= 0, "start_positions[", b, "] is negative");
  Recorder& rec = ctx.recorder();
  rec.check_alive();
  if (total == 0) return;
  host_alloc_point();
  std::vector<int64_t> pos(total);
  for (uint32_t b = 0; b < batch; ++b)
    for (int32_t i = cu_seqlens[b]; i < cu_seqlens[b + 1]; ++i)
      pos[i] = int64_t(start_positions[b]) + (i - cu_seqlens[b]);

  PackedViews packed(ctx);
  Tensor* xp = packed.input(x);
  Tensor* op = in_place ? xp : packed.output(out);
  if (in_place && xp != x) packed.output(x);  // the same temporary, copied back
  const DeviceCaps& caps = ctx.device().caps();
  const uint64_t es = dtype_size(x->dtype());
  const uint64_t tok_bytes = uint64_t(heads) * dim * es, half = rope.rotary_dim() / 2;
  const uint64_t limit = storage_window_limit(caps);
  if (tok_bytes > limit)
    fail(VKATTN_ERROR_UNSUPPORTED, "one token's rows (", tok_bytes,
         " bytes) exceed one storage binding");
  const uint64_t max_groups = uint64_t(caps.max_workgroup_count[0]) *
                              std::min<uint32_t>(caps.max_workgroup_count[1], 65535);
  // Tokens per dispatch: x/out windows and the table within one binding,
  // one invocation per row within the grid.
  uint64_t chunk = std::min({limit / tok_bytes, limit / (half * 8), max_groups * 64 / heads});
  chunk = std::max<uint64_t>(1, std::min<uint64_t>(chunk, 1u << 20));
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kRopeLayout, {});
  std::vector<PreparedDispatch> prepared;
  for (int64_t t0 = 0; t0 < total; t0 += int64_t(chunk)) {
    const int64_t t1 = std::min<int64_t>(total, t0 + int64_t(chunk));
    HostSlice s = rec.alloc_host((t1 - t0) * half * 8);
    float* tab = reinterpret_cast<float*>(s.host);
    for (int64_t t = t0; t < t1; ++t) rope.fill(tab + (t - t0) * half * 2, pos[t]);
    BoundBuffer tb;
    tb.raw = s.buffer, tb.offset = s.offset, tb.range = s.size;
    uint64_t xs = 0, os = 0;
    const uint64_t lo = t0 * tok_bytes, hi = t1 * tok_bytes;
    BoundBuffer xb = storage_window(caps, Region::whole(xp->buffer()), lo, hi, &xs);
    BoundBuffer ob = storage_window(caps, Region::whole(op->buffer()), lo, hi, &os);
    const uint64_t rows = uint64_t(t1 - t0) * heads;
    RopePush push{static_cast<uint32_t>(rows),
                  static_cast<uint32_t>(heads),
                  static_cast<uint32_t>(dim),
                  rope.rotary_dim(),
                  rope.offset(),
                  rope.interleaved() ? 1u : 0u,
                  static_cast<uint32_t>(x->dtype()),
                  static_cast<uint32_t>((lo - xs) / es),
                  static_cast<uint32_t>((lo - os) / es),
                  xp == op ? 0u : 1u};
    prepared.push_back(pipes.prepare(rec, p, {xb, ob, tb}, &push, sizeof(push), (rows + 63) / 64));
  }
  packed.record_inputs();
  for (const PreparedDispatch& pd : prepared) pipes.record(rec, pd);
  packed.record_outputs();
}

}  // namespace vkattn

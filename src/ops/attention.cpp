#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/attention_plan.h"
#include "ops/attention_variant.h"
#include "ops/kv_cache.h"

namespace vkattn {

namespace {

const KernelLayout kFwdLayout{
    "attention_fwd",
    {BindingKind::kUniformTexel, BindingKind::kUniformTexel, BindingKind::kUniformTexel,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer},
    56};

const KernelLayout kCombineLayout{
    "attention_combine",
    {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
    24};

const KernelLayout kMergeLayout{
    "attention_merge",
    {BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer,
     BindingKind::kStorageBuffer, BindingKind::kStorageBuffer, BindingKind::kStorageBuffer},
    16};

struct FwdPush {
  uint32_t n_items, num_heads, num_kv_heads, flags;
  float scale, softcap;
  int32_t window_left;
  uint32_t mask_dtype;
  uint32_t item_base, page_size, k_page_tx, k_layer_tx, v_page_tx, v_layer_tx;
};
struct CombinePush {
  uint32_t n_items, num_heads, num_kv_heads, flags, tile_rows, dv;
};
struct MergePush {
  uint32_t rows, dv, words, has_lse_out;
};
static_assert(sizeof(FwdPush) == 56 && sizeof(CombinePush) == 24 && sizeof(MergePush) == 16,
              "push constants mirror the shaders");

bool is_float(vkattn_dtype dt) {
  return dt == VKATTN_F32 || dt == VKATTN_F16 || dt == VKATTN_BF16;
}

std::string shape_str(const Tensor& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.dim(i));
  return s + "]";
}

// Requires `t` to have exactly `want` as its shape.
void require_shape(const Tensor& t, const char* name, std::initializer_list<int64_t> want) {
  bool ok = t.ndim() == want.size();
  uint32_t i = 0;
  for (int64_t w : want) ok = ok && t.dim(i++) == w;
  if (!ok) {
    std::string w = "[";
    i = 0;
    for (int64_t x : want) w += (i++ ? ", " : "") + std::to_string(x);
    fail(VKATTN_ERROR_INVALID_ARGUMENT, name, " has shape ", shape_str(t), ", expected ", w, "]");
  }
}

void require_same_context(Context& ctx, const Tensor* t, const char* name) {
  if (t && &t->context() != &ctx)
    fail(VKATTN_ERROR_INVALID_ARGUMENT, name, " belongs to another context");
}

bool same_memory(const Tensor* a, const Tensor* b) {
  return a && b && a->buffer() && a->buffer() == b->buffer();
}

// Checks the dtypes and the shapes that do not depend on the layout.
void check_tensors(Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  const bool paged = c.step != nullptr;
  if (paged)
    require(c.q && c.out, "q and out must not be NULL");
  else
    require(c.q && c.k && c.v && c.out, "q, k, v and out must not be NULL");
  for (auto [t, n] : {std::pair<Tensor*, const char*>{c.q, "q"},
                      {c.k, "k"},
                      {c.v, "v"},
                      {c.out, "out"},
                      {c.lse, "desc->lse"},
                      {c.mask, "desc->mask"},
                      {c.alibi, "desc->alibi_slopes"}})
    require_same_context(ctx, t, n);
  require(is_float(c.q->dtype()), "q must be f32, f16 or bf16, got ", dtype_name(c.q->dtype()));
  require(c.out->dtype() == c.q->dtype(), "out must have q's dtype ", dtype_name(c.q->dtype()),
          ", got ", dtype_name(c.out->dtype()));
  if (!paged) require(c.k->dtype() == c.v->dtype(), "k and v must share a dtype");
  const vkattn_dtype kv = c.kv_dtype();
  require(kv == c.q->dtype() || kv == VKATTN_F16 || kv == VKATTN_BF16,
          paged ? "the cache dtype must be q's dtype or f16/bf16, got "
                : "k/v must have q's dtype or f16/bf16, got ",
          dtype_name(kv));
  for (const Tensor* in : {c.q, c.k, c.v})
    require(!same_memory(c.out, in) && !same_memory(c.lse, in),
            "out and lse must not alias q, k or v");
  if (d.alibi_slopes) {
    require(c.alibi->dtype() == VKATTN_F32, "alibi_slopes must be f32");
    require_shape(*c.alibi, "alibi_slopes", {d.num_heads});
  }
  if (c.lse) require(c.lse->dtype() == VKATTN_F32, "lse must be f32");
  if (d.mask_type == VKATTN_MASK_NONE) {
    require(!c.mask, "desc->mask is set but mask_type is VKATTN_MASK_NONE");
  } else {
    require(c.mask != nullptr, "mask_type is set but desc->mask is NULL");
    if (d.mask_type == VKATTN_MASK_BOOL)
      require(c.mask->dtype() == VKATTN_U8, "a BOOL mask must be u8, got ",
              dtype_name(c.mask->dtype()));
    else
      require(is_float(c.mask->dtype()), "an ADDITIVE mask must be f32, f16 or bf16, got ",
              dtype_name(c.mask->dtype()));
  }
}

// Bindings and indices are 32-bit and bounded by the device's ranges.
void check_limits(Context& ctx, const AttentionCall& c) {
  const DeviceCaps& caps = ctx.device().caps();
  for (const Tensor* t : {c.q, c.out, c.lse, c.mask, c.alibi})
    if (t && t->nbytes() > caps.max_storage_buffer_range)
      fail(VKATTN_ERROR_UNSUPPORTED, "a tensor of ", t->nbytes(),
           " bytes exceeds the device's maxStorageBufferRange ", caps.max_storage_buffer_range);
  for (const Tensor* t : {c.q, c.k, c.v})
    if (t && static_cast<uint64_t>(t->numel()) > caps.max_texel_buffer_elements)
      fail(VKATTN_ERROR_UNSUPPORTED, "q/k/v of ", t->numel(),
           " elements exceed the device's maxTexelBufferElements ", caps.max_texel_buffer_elements);
}

void check_prefix_sums(const char* name, uint32_t batch, const int32_t* cu, int64_t total) {
  require(cu != nullptr, name, " is NULL");
  require(cu[0] == 0, name, "[0] is ", cu[0], ", must be 0");
  for (uint32_t b = 0; b < batch; ++b)
    require(cu[b + 1] >= cu[b], name, " decreases at ", b + 1, " (", cu[b], " -> ", cu[b + 1], ")");
  require(cu[batch] == total, name, "[", batch, "] is ", cu[batch],
          ", must equal the tensor's first dim ", total);
}

// Texel width: 0 = one element, 1 = four elements, 2 = eight 16-bit elements.
uint32_t texel_kind(vkattn_dtype dt, uint32_t dim, bool scalar) {
  if (scalar || dim % 4 != 0) return 0;
  return (dt != VKATTN_F32 && dim % 8 == 0) ? 2 : 1;
}

VkFormat texel_format(vkattn_dtype dt, uint32_t kind) {
  if (kind == 2) return VK_FORMAT_R32G32B32A32_UINT;
  if (dt == VKATTN_F32) return kind ? VK_FORMAT_R32G32B32A32_UINT : VK_FORMAT_R32_UINT;
  return kind ? VK_FORMAT_R32G32_UINT : VK_FORMAT_R16_UINT;
}

uint64_t texel_bytes(VkFormat f) {
  switch (f) {
    case VK_FORMAT_R32G32B32A32_UINT:
      return 16;
    case VK_FORMAT_R32G32_UINT:
      return 8;
    case VK_FORMAT_R32_UINT:
      return 4;
    default:
      return 2;
  }
}

// A texel view of a whole buffer (a tensor's, or a pool buffer).
BoundBuffer texel_view(const std::shared_ptr<Buffer>& buf, vkattn_dtype dt, uint32_t kind) {
  VkFormat f = texel_format(dt, kind);
  uint64_t tb = texel_bytes(f);
  BoundBuffer b;
  b.buffer = buf;
  b.format = f;
  b.range = buf->size() / tb * tb;
  return b;
}

// A texel view of a whole tensor, or of the dummy buffer when it is empty.
BoundBuffer texel_binding(Context& ctx, const Tensor& t, uint32_t kind) {
  return texel_view(t.buffer() ? t.buffer() : ctx.dummy(), t.dtype(), kind);
}

BoundBuffer storage(Context& ctx, const Tensor* t) {
  BoundBuffer b;
  b.buffer = (t && t->buffer()) ? t->buffer() : ctx.dummy();
  return b;
}

// Copies host data into the open batch's ring; the bound range is padded to
// whole 16-byte words so a shader's uint/uvec4 view covers every byte.
BoundBuffer host_upload(Recorder& rec, const void* data, uint64_t bytes) {
  const uint64_t padded = (bytes + 15) / 16 * 16;
  HostSlice s = rec.alloc_host(padded);
  if (bytes) std::memcpy(s.host, data, bytes);
  std::memset(s.host + bytes, 0, s.size - bytes);
  BoundBuffer b;
  b.raw = s.buffer;
  b.offset = s.offset;
  b.range = s.size;
  return b;
}

}  // namespace

namespace {
// The descriptor and layout-independent checks both entry points share.
AttentionCall start_call(Context& ctx, const vkattn_attention_desc* desc, Tensor* q, Tensor* k,
                         Tensor* v, Tensor* out) {
  AttentionCall c;
  c.desc = check_attention_desc(desc);
  c.q = q, c.k = k, c.v = v, c.out = out;
  c.lse = desc->lse ? desc->lse->impl.get() : nullptr;
  c.mask = desc->mask ? desc->mask->impl.get() : nullptr;
  c.alibi = desc->alibi_slopes ? desc->alibi_slopes->impl.get() : nullptr;
  check_tensors(ctx, c);
  return c;
}
}  // namespace

vkattn_attention_desc check_attention_desc(const vkattn_attention_desc* desc) {
  require(desc != nullptr, "desc is NULL");
  require(desc->struct_size == sizeof(vkattn_attention_desc), "desc->struct_size is ",
          desc->struct_size, ", expected ", sizeof(vkattn_attention_desc),
          " (call vkattn_attention_desc_init)");
  vkattn_attention_desc d = *desc;
  for (uint32_t r : d.reserved) require(r == 0, "desc->reserved must be 0");
  require(d.num_heads >= 1, "desc->num_heads must be >= 1");
  require(d.num_kv_heads >= 1, "desc->num_kv_heads must be >= 1");
  require(d.num_heads % d.num_kv_heads == 0, "num_heads ", d.num_heads,
          " is not a multiple of num_kv_heads ", d.num_kv_heads);
  require(d.head_dim >= 1 && d.head_dim <= 256, "desc->head_dim ", d.head_dim, " is not in 1..256");
  require(d.head_dim_v <= 256, "desc->head_dim_v ", d.head_dim_v, " is not in 0..256");
  if (d.head_dim_v == 0) d.head_dim_v = d.head_dim;
  require(std::isfinite(d.scale), "desc->scale must be finite");
  if (d.scale == 0.0f) d.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  require(d.causal <= 1, "desc->causal must be 0 or 1");
  require(d.window_left >= -1, "desc->window_left ", d.window_left, " is invalid (-1 = none)");
  require(std::isfinite(d.softcap) && d.softcap >= 0.0f, "desc->softcap must be >= 0");
  require(d.mask_type <= VKATTN_MASK_ADDITIVE, "desc->mask_type ", d.mask_type, " is unknown");
  return d;
}

AttentionCall make_varlen_call(Context& ctx, const vkattn_attention_desc* desc, uint32_t batch,
                               const int32_t* cu_q, const int32_t* cu_k, Tensor* q, Tensor* k,
                               Tensor* v, Tensor* out) {
  AttentionCall c = start_call(ctx, desc, q, k, v, out);
  const auto& d = c.desc;
  require(q->ndim() == 3, "q must be [total_q, H, d], got ", shape_str(*q));
  require(k->ndim() == 3, "k must be [total_k, Hkv, d], got ", shape_str(*k));
  const int64_t tq = q->dim(0), tk = k->dim(0);
  require_shape(*q, "q", {tq, d.num_heads, d.head_dim});
  require_shape(*k, "k", {tk, d.num_kv_heads, d.head_dim});
  require_shape(*v, "v", {tk, d.num_kv_heads, d.head_dim_v});
  require_shape(*out, "out", {tq, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {tq, d.num_heads});
  check_prefix_sums("cu_seqlens_q", batch, cu_q, tq);
  check_prefix_sums("cu_seqlens_k", batch, cu_k, tk);
  c.batch = batch;
  c.cu_q.assign(cu_q, cu_q + batch + 1);
  c.cu_k.assign(cu_k, cu_k + batch + 1);
  if (c.mask) {
    int64_t want = 0;
    for (uint32_t b = 0; b < batch; ++b)
      want += static_cast<int64_t>(cu_q[b + 1] - cu_q[b]) * (cu_k[b + 1] - cu_k[b]);
    require_shape(*c.mask, "mask (1-D, sum of t_b * u_b)", {want});
  }
  check_limits(ctx, c);
  return c;
}

AttentionCall make_padded_call(Context& ctx, const vkattn_attention_desc* desc, Tensor* q,
                               Tensor* k, Tensor* v, const int32_t* key_mask, Tensor* out) {
  AttentionCall c = start_call(ctx, desc, q, k, v, out);
  const auto& d = c.desc;
  require(q->ndim() == 4, "q must be [B, Sq, H, d], got ", shape_str(*q));
  require(k->ndim() == 4, "k must be [B, Sk, Hkv, d], got ", shape_str(*k));
  const int64_t B = q->dim(0), sq = q->dim(1), sk = k->dim(1);
  require_shape(*q, "q", {B, sq, d.num_heads, d.head_dim});
  require_shape(*k, "k", {B, sk, d.num_kv_heads, d.head_dim});
  require_shape(*v, "v", {B, sk, d.num_kv_heads, d.head_dim_v});
  require_shape(*out, "out", {B, sq, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {B, sq, d.num_heads});
  if (c.mask) require_shape(*c.mask, "mask", {B, sq, sk});
  require(B * sq < INT32_MAX && B * sk < INT32_MAX, "too many tokens");
  c.batch = static_cast<uint32_t>(B);
  c.cu_q.resize(B + 1);
  c.cu_k.resize(B + 1);
  for (int64_t b = 0; b <= B; ++b) {
    c.cu_q[b] = static_cast<int32_t>(b * sq);
    c.cu_k[b] = static_cast<int32_t>(b * sk);
  }
  if (key_mask) {
    c.key_valid.resize(B * sk);
    for (int64_t i = 0; i < B * sk; ++i) {
      require(key_mask[i] == 0 || key_mask[i] == 1, "key_mask[", i, "] is ", key_mask[i],
              ", must be 0 or 1");
      c.key_valid[i] = static_cast<uint8_t>(key_mask[i]);
    }
  }
  check_limits(ctx, c);
  return c;
}

vkattn_dtype AttentionCall::kv_dtype() const {
  return step ? step->cache().desc().dtype : k->dtype();
}

AttentionCall make_paged_call(Context& ctx, const vkattn_attention_desc* desc, Step& step,
                              uint32_t layer, Tensor* q, Tensor* out) {
  AttentionCall c;
  c.step = &step;
  c.layer = layer;
  c.desc = check_attention_desc(desc);
  c.q = q, c.out = out;
  c.lse = desc->lse ? desc->lse->impl.get() : nullptr;
  c.mask = desc->mask ? desc->mask->impl.get() : nullptr;
  c.alibi = desc->alibi_slopes ? desc->alibi_slopes->impl.get() : nullptr;
  const auto& d = c.desc;
  const vkattn_kv_cache_desc& cd = step.cache().desc();
  require(step.is_open(), "the step is no longer open");
  require(layer < cd.num_layers, "layer ", layer, " is not below num_layers ", cd.num_layers);
  require(d.num_kv_heads == cd.num_kv_heads && d.head_dim == cd.head_dim &&
              d.head_dim_v == cd.head_dim_v,
          "desc (Hkv ", d.num_kv_heads, ", d ", d.head_dim, ", dv ", d.head_dim_v,
          ") does not match the cache (Hkv ", cd.num_kv_heads, ", d ", cd.head_dim, ", dv ",
          cd.head_dim_v, ")");
  check_tensors(ctx, c);
  const int64_t n = step.total_new();
  require_shape(*q, "q", {n, d.num_heads, d.head_dim});
  require_shape(*out, "out", {n, d.num_heads, d.head_dim_v});
  if (c.lse) require_shape(*c.lse, "lse", {n, d.num_heads});
  require(n == 0 || step.appended(layer), "layer ", layer,
          " has not been appended in this step (call vkattn_step_append first)");
  c.batch = static_cast<uint32_t>(step.seqs().size());
  c.cu_q.assign(1, 0);
  c.cu_k.assign(1, 0);
  int64_t mask_elems = 0;
  for (const StepSeq& sq : step.seqs()) {
    c.cu_q.push_back(c.cu_q.back() + sq.t);
    require(static_cast<int64_t>(c.cu_k.back()) + sq.len + sq.t <= INT32_MAX,
            "the step's sequences hold more than INT32_MAX tokens");
    c.cu_k.push_back(c.cu_k.back() + sq.len + sq.t);
    mask_elems += static_cast<int64_t>(sq.t) * (sq.len + sq.t);
  }
  if (c.mask) require_shape(*c.mask, "mask (1-D, sum of t_b * (len_b + t_b))", {mask_elems});
  check_limits(ctx, c);
  return c;
}

namespace {

// A plan and its device copy: items, sequences, combine list and (paged)
// block tables in one host-visible buffer.
// Paged calls keep it in a buffer of their own, reused by every layer of
// the step; other calls put it in the open batch's host ring.
struct PreparedPlan {
  Plan plan;
  AttentionVariant var;
  std::shared_ptr<Buffer> data;  // paged
  Buffer* raw = nullptr;         // ring slice of the open batch
  uint64_t base = 0;
  uint64_t items_off = 0, seqs_off = 0, combine_off = 0, table_off = 0, table_bytes = 16;
  std::vector<uint32_t> buffer_items;  // items per pool buffer (one entry when unpaged)

  BoundBuffer bind(uint64_t off, uint64_t bytes) const {
    BoundBuffer b;
    b.buffer = data;
    b.raw = raw;
    b.offset = base + off;
    b.range = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
    return b;
  }
};

std::shared_ptr<PreparedPlan> prepare_plan(Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  auto pp = std::make_shared<PreparedPlan>();
  const uint32_t group = d.num_heads / d.num_kv_heads;
  uint32_t max_rows = 0;
  for (uint32_t b = 0; b < c.batch; ++b)
    max_rows =
        std::max<uint32_t>(max_rows, static_cast<uint32_t>(c.cu_q[b + 1] - c.cu_q[b]) * group);
  pp->var = choose_attention_variant(ctx.device(), d.head_dim, d.head_dim_v, max_rows);
  const AttentionVariant& var = pp->var;
  PlanShape shape{group,           d.num_kv_heads, d.causal != 0,    d.window_left,
                  var.tile_rows(), var.rows,       var.wg,           var.decode_min_keys,
                  var.max_keys,    var.max_slots,  var.target_items, var.min_split_keys};

  std::vector<uint32_t> table;
  std::vector<std::vector<KeySegment>> segments;
  if (c.step) {
    // Block tables of local pages; keys cut where the pool buffer changes.
    const KvCache& cache = c.step->cache();
    const uint32_t ps = cache.desc().page_size;
    segments.resize(c.batch);
    for (uint32_t b = 0; b < c.batch; ++b) {
      const StepSeq& sq = c.step->seqs()[b];
      const uint32_t u = static_cast<uint32_t>(sq.len + sq.t);
      const uint32_t n_pages = (u + ps - 1) / ps;
      for (uint32_t i = 0; i < n_pages; ++i) {
        uint32_t page = sq.pages[i], buf = cache.buffer_of(page);
        table.push_back(cache.local_page(page));
        auto& seg = segments[b];
        uint32_t k0 = i * ps, k1 = std::min(u, k0 + ps);
        if (!seg.empty() && seg.back().buffer == buf)
          seg.back().end = k1;
        else
          seg.push_back({k0, k1, buf});
      }
    }
  }
  pp->plan = build_plan(shape, c.batch, c.cu_q.data(), c.cu_k.data(), c.step ? &segments : nullptr);
  Plan& plan = pp->plan;
  if (c.step) {
    // Block-table offsets per sequence.
    uint32_t off = 0;
    const uint32_t ps = c.step->cache().desc().page_size;
    for (uint32_t b = 0; b < c.batch; ++b) {
      plan.seqs[b].k_off = off;
      off += (plan.seqs[b].u + ps - 1) / ps;
    }
    pp->buffer_items.assign(c.step->cache().buffers().size(), 0);
    for (const PlanItem& it : plan.items) ++pp->buffer_items[it.buffer];
  } else {
    pp->buffer_items.assign(1, static_cast<uint32_t>(plan.items.size()));
  }
  if (plan.items.empty()) return pp;

  const uint64_t align = std::max<uint64_t>(16, ctx.device().caps().min_storage_offset_alignment);
  auto up = [&](uint64_t x) { return (x + align - 1) / align * align; };
  pp->items_off = 0;
  pp->seqs_off = up(plan.items.size() * sizeof(PlanItem));
  pp->combine_off = pp->seqs_off + up(plan.seqs.size() * sizeof(PlanSeq));
  pp->table_off = pp->combine_off + up(std::max<size_t>(1, plan.combine.size()) * sizeof(PlanItem));
  pp->table_bytes = std::max<uint64_t>(16, table.size() * 4);
  const uint64_t bytes = pp->table_off + up(pp->table_bytes);
  uint8_t* m = nullptr;
  if (c.step) {
    pp->data = std::make_shared<Buffer>(ctx.device(), bytes, true);
    m = pp->data->mapped();
  } else {
    HostSlice s = ctx.recorder().alloc_host(bytes);
    pp->raw = s.buffer;
    pp->base = s.offset;
    m = s.host;
  }
  std::memset(m, 0, bytes);
  std::memcpy(m + pp->items_off, plan.items.data(), plan.items.size() * sizeof(PlanItem));
  std::memcpy(m + pp->seqs_off, plan.seqs.data(), plan.seqs.size() * sizeof(PlanSeq));
  if (!plan.combine.empty())
    std::memcpy(m + pp->combine_off, plan.combine.data(), plan.combine.size() * sizeof(PlanItem));
  if (!table.empty()) std::memcpy(m + pp->table_off, table.data(), table.size() * 4);
  return pp;
}

}  // namespace

void record_attention(Context& ctx, const AttentionCall& c) {
  const auto& d = c.desc;
  const int64_t total_q = c.q->dim(0);
  if (total_q == 0 || c.batch == 0) return;

  // The plan: built once per step and shape, reused by every layer.
  std::shared_ptr<PreparedPlan> pp;
  if (c.step) {
    std::vector<uint32_t> key = {d.num_heads, d.causal, static_cast<uint32_t>(d.window_left)};
    auto& slot = c.step->plans[key];
    if (!slot) slot = prepare_plan(ctx, c);
    pp = std::static_pointer_cast<PreparedPlan>(slot);
  } else {
    pp = prepare_plan(ctx, c);
  }
  const Plan& plan = pp->plan;
  const AttentionVariant& var = pp->var;
  if (plan.items.empty()) return;

  uint32_t flags = 0;
  if (d.causal) flags |= kFlagCausal;
  if (d.window_left >= 0) flags |= kFlagWindow;
  if (d.softcap > 0.0f) flags |= kFlagSoftcap;
  if (c.alibi) flags |= kFlagAlibi;
  if (d.mask_type == VKATTN_MASK_BOOL) flags |= kFlagMaskBool;
  if (d.mask_type == VKATTN_MASK_ADDITIVE) flags |= kFlagMaskAdd;
  if (!c.key_valid.empty()) flags |= kFlagKeyValid;
  if (c.lse) flags |= kFlagWriteLse;

  // Partial results of split key ranges, in the context's scratch buffer.
  const uint64_t part_rows = plan.part_rows;
  const uint64_t part_o_bytes = part_rows * d.head_dim_v * 4;
  const uint64_t part_bytes = ((part_o_bytes + 255) / 256) * 256 + part_rows * 4;
  if (part_bytes > ctx.device().caps().max_storage_buffer_range)
    fail(VKATTN_ERROR_UNSUPPORTED, "split-KV partials need ", part_bytes,
         " bytes, above the device's range");
  BoundBuffer part_o = storage(ctx, nullptr), part_l = storage(ctx, nullptr);
  if (plan.part_rows) {
    auto scratch = ctx.scratch(part_bytes);
    part_o.buffer = scratch;
    part_o.range = std::max<uint64_t>(part_o_bytes, 4);
    part_l.buffer = scratch;
    part_l.offset = (part_o_bytes + 255) / 256 * 256;
    part_l.range = part_rows * 4;
  }

  const vkattn_dtype kv_dt = c.kv_dtype();
  const uint32_t kvec = texel_kind(kv_dt, d.head_dim, var.scalar_fetch);
  const uint32_t vvec = texel_kind(kv_dt, d.head_dim_v, var.scalar_fetch);
  const uint32_t qvec = texel_kind(c.q->dtype(), d.head_dim, var.scalar_fetch);
  std::vector<uint32_t> spec = {var.wg,
                                var.rows,
                                var.block_keys,
                                d.head_dim,
                                d.head_dim_v,
                                static_cast<uint32_t>(c.q->dtype()),
                                static_cast<uint32_t>(kv_dt),
                                kvec,
                                vvec,
                                var.unroll_d ? 1u : 0u,
                                qvec,
                                c.step ? 1u : 0u};
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& fwd = pipes.get(kFwdLayout, spec);
  const Pipeline* combine = plan.combine.empty()
                                ? nullptr
                                : &pipes.get(kCombineLayout, {static_cast<uint32_t>(c.q->dtype())});

  Recorder& rec = ctx.recorder();
  BoundBuffer items = pp->bind(pp->items_off, plan.items.size() * sizeof(PlanItem));
  BoundBuffer seqs = pp->bind(pp->seqs_off, plan.seqs.size() * sizeof(PlanSeq));
  BoundBuffer table = pp->bind(pp->table_off, pp->table_bytes);
  BoundBuffer key_valid = c.key_valid.empty()
                              ? storage(ctx, nullptr)
                              : host_upload(rec, c.key_valid.data(), c.key_valid.size());
  FwdPush push{
      0,       d.num_heads, d.num_kv_heads, flags,
      d.scale, d.softcap,   d.window_left,  c.mask ? static_cast<uint32_t>(c.mask->dtype()) : 0u};
  if (c.step) {
    const KvCache& cache = c.step->cache();
    // Page and layer offsets in texels (both are multiples of 16 bytes).
    auto tx = [&](uint64_t bytes, uint32_t kind) {
      return static_cast<uint32_t>(bytes / texel_bytes(texel_format(kv_dt, kind)));
    };
    push.page_size = cache.desc().page_size;
    push.k_page_tx = tx(cache.page_bytes(), kvec);
    push.k_layer_tx = tx(cache.k_layer_offset(c.layer), kvec);
    push.v_page_tx = tx(cache.page_bytes(), vvec);
    push.v_layer_tx = tx(cache.v_layer_offset(c.layer), vvec);
  }
  // One dispatch per pool buffer that holds keys of the step (one when the
  // pool is one buffer, and for unpaged calls).
  uint32_t base = 0;
  for (size_t b = 0; b < pp->buffer_items.size(); ++b) {
    const uint32_t n = pp->buffer_items[b];
    if (n == 0) continue;
    push.n_items = n;
    push.item_base = base;
    base += n;
    BoundBuffer kt, vt;
    if (c.step) {
      const auto& buf = c.step->cache().buffers()[b];
      kt = texel_view(buf, kv_dt, kvec);
      vt = texel_view(buf, kv_dt, vvec);
    } else {
      kt = texel_binding(ctx, *c.k, kvec);
      vt = texel_binding(ctx, *c.v, vvec);
    }
    pipes.dispatch(
        rec, fwd,
        {texel_binding(ctx, *c.q, qvec), kt, vt, storage(ctx, c.out), storage(ctx, c.lse), items,
         seqs, storage(ctx, c.mask), storage(ctx, c.alibi), key_valid, part_o, part_l, table},
        &push, sizeof(push), n);
  }
  if (combine) {
    BoundBuffer citems = pp->bind(pp->combine_off, plan.combine.size() * sizeof(PlanItem));
    CombinePush cp{static_cast<uint32_t>(plan.combine.size()),
                   d.num_heads,
                   d.num_kv_heads,
                   flags,
                   var.tile_rows(),
                   d.head_dim_v};
    pipes.dispatch(rec, *combine,
                   {storage(ctx, c.out), storage(ctx, c.lse), citems, seqs, part_o, part_l}, &cp,
                   sizeof(cp), plan.combine.size());
  }
}

void record_attention_merge(Context& ctx, Tensor* out_a, Tensor* lse_a, Tensor* out_b,
                            Tensor* lse_b, Tensor* out, Tensor* lse) {
  require(out_a && lse_a && out_b && lse_b && out,
          "out_a, lse_a, out_b, lse_b and out must not be NULL");
  for (auto [t, n] : {std::pair<Tensor*, const char*>{out_a, "out_a"},
                      {lse_a, "lse_a"},
                      {out_b, "out_b"},
                      {lse_b, "lse_b"},
                      {out, "out"},
                      {lse, "lse"}})
    require_same_context(ctx, t, n);
  require(out_a->ndim() == 3, "out_a must be [n, H, dv], got ", shape_str(*out_a));
  const int64_t n = out_a->dim(0), H = out_a->dim(1), dv = out_a->dim(2);
  require(is_float(out_a->dtype()), "out_a must be f32, f16 or bf16");
  require(out_b->dtype() == out_a->dtype() && out->dtype() == out_a->dtype(),
          "out_a, out_b and out must share a dtype");
  require_shape(*out_b, "out_b", {n, H, dv});
  require_shape(*out, "out", {n, H, dv});
  for (auto [t, nm] :
       {std::pair<Tensor*, const char*>{lse_a, "lse_a"}, {lse_b, "lse_b"}, {lse, "lse"}}) {
    if (!t) continue;
    require(t->dtype() == VKATTN_F32, nm, " must be f32");
    require_shape(*t, nm, {n, H});
  }
  require(!same_memory(out, lse_a) && !same_memory(out, lse_b) && !same_memory(lse, out_a) &&
              !same_memory(lse, out_b),
          "outputs alias inputs of another kind");
  const DeviceCaps& caps = ctx.device().caps();
  for (const Tensor* t : {out_a, out_b, out})
    if (t->nbytes() > caps.max_storage_buffer_range)
      fail(VKATTN_ERROR_UNSUPPORTED, "a tensor of ", t->nbytes(),
           " bytes exceeds maxStorageBufferRange");
  const uint64_t rows = static_cast<uint64_t>(n) * H;
  const uint64_t elems = rows * dv;
  if (rows == 0) return;
  require(elems < (1ull << 32), "too many elements");

  const uint32_t dt = static_cast<uint32_t>(out->dtype());
  const uint64_t words = dt == VKATTN_F32 ? elems : (elems + 1) / 2;
  Pipelines& pipes = ctx.pipelines();
  const Pipeline& p = pipes.get(kMergeLayout, {dt});
  Recorder& rec = ctx.recorder();
  // The lse output is read by other invocations' rows: when it aliases an
  // input lse it is written to scratch first and copied afterwards.
  const bool lse_alias = lse && (same_memory(lse, lse_a) || same_memory(lse, lse_b));
  BoundBuffer lse_out = storage(ctx, lse);
  if (lse_alias) {
    lse_out = BoundBuffer{};
    lse_out.buffer = ctx.scratch(rows * 4);
    lse_out.range = rows * 4;
  }
  if (elems == 0 && !lse) return;
  MergePush push{static_cast<uint32_t>(rows), static_cast<uint32_t>(dv),
                 static_cast<uint32_t>(words), lse ? 1u : 0u};
  pipes.dispatch(rec, p,
                 {storage(ctx, out_a), storage(ctx, lse_a), storage(ctx, out_b),
                  storage(ctx, lse_b), storage(ctx, out), lse_out},
                 &push, sizeof(push), (std::max(words, rows) + 63) / 64);
  if (lse_alias) {
    rec.use(lse->buffer());
    rec.barrier();
    VkBufferCopy region{0, 0, rows * 4};
    vkCmdCopyBuffer(rec.cmd(), lse_out.buffer->handle(), lse->buffer()->handle(), 1, &region);
  }
}

}  // namespace vkattn

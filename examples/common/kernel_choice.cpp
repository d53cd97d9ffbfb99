// vkattn-bench's and vkattn-info's view of the device table
// (kernel_choice.h).
#include "common/kernel_choice.h"

#include <cstdio>

#include "api/handles.h"
#include "core/buffer.h"
#include "core/device.h"
#include "ops/attention/devices.h"
#include "ops/attention/prepare.h"
#include "ops/attention/variant.h"

namespace vkattn_tools {

const ReportShape kReportShapes[4] = {{"prefill, d 128 (1024 tokens x 4 GQA heads)", 128, 4096, 4},
                                      {"prefill, d 64", 64, 4096, 4},
                                      {"prefill, d 256", 256, 4096, 4},
                                      {"decode, d 128, 4 GQA heads", 128, 4, 4}};

namespace {

// A memory type in words: its index and property flags.
std::string memory_words(const vkattn::Device& dev, uint32_t type) {
  if (type == UINT32_MAX) return "none";
  const VkMemoryPropertyFlags f = dev.memory_type_flags(type);
  std::string w;
  auto add = [&](VkMemoryPropertyFlags bit, const char* name) {
    if (f & bit) w += std::string(w.empty() ? "" : "+") + name;
  };
  add(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device-local");
  add(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "host-visible");
  add(VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "cached");
  return w + " (type " + std::to_string(type) + ")";
}

// Which memory each kind of vkattn's buffers gets on ctx's device: probes
// of 4 KiB made as the library makes them.
std::string memory_row(vkattn_context* ctx) {
  vkattn::Context& c = *ctx->impl;
  vkattn::Device& dev = c.device();
  vkattn::Buffer data(dev, 4096, false), ring(dev, 4096, true), scales(dev, 4096, true, true, true);
  const bool plans = vkattn::plan_on_device(c);
  return "  memory: tensors, caches and scratch " + memory_words(dev, data.memory_type()) +
         "; rings and staging " + memory_words(dev, ring.memory_type()) + "; fp8 scale tables " +
         memory_words(dev, scales.memory_type()) + "; attention plans and page tables " +
         (plans ? "copied to device-local memory" : "in host-visible memory") +
         " (VKATTN_PLAN_MEMORY=" + (plans ? "device" : "host") + ")\n";
}

}  // namespace

std::string device_table_row(vkattn_context* ctx) {
  const vkattn::Device& dev = ctx->impl->device();
  std::string exts;
  for (const char* e : dev.enabled_extensions()) exts += std::string(exts.empty() ? "" : ", ") + e;
  // The device extensions vkattn enabled (or, on an adopted device, uses),
  // and whether VKATTN_LOG=stats can print the compiler's statistics.
  return vkattn::describe_attention_defaults(dev) +
         "  device extensions: " + (exts.empty() ? "none" : exts) +
         "; pipeline statistics (VKATTN_LOG=stats): " + (dev.caps().pipeline_stats ? "yes" : "no") +
         "\n" + memory_row(ctx);
}

std::string kernel_choice(vkattn_context* ctx, uint32_t d, uint32_t dv, uint32_t max_rows,
                          uint32_t group) {
  // As for f16 K/V (8-bit caches take the same variant).
  vkattn::AttentionVariant v = vkattn::choose_attention_variant(
      ctx->impl->device(), ctx->impl->options(), d, dv, max_rows, VKATTN_F16, group);
  const std::string order =
      v.static_chunks > 1
          ? "items balanced over " + std::to_string(v.static_chunks) + " thread chunks"
          : std::string("items heaviest first");
  char s[400];
  if (v.family == vkattn::AttentionFamily::kCoopmat) {
    std::snprintf(s, sizeof(s),
                  "coopmat: %ux%ux%u f16 matrices, %u subgroups of %u lanes (%u rows), keys/tile "
                  "%u, head-dim columns staged at a time %u (q/k) and %u (v), %s",
                  v.coopmat_m, v.coopmat_n, v.coopmat_k, v.subgroups, v.lanes_per_row,
                  v.tile_rows(), v.tile_keys, v.head_chunk, v.head_chunk_v, order.c_str());
    return s;
  }
  if (v.family == vkattn::AttentionFamily::kDecode) {
    std::snprintf(
        s, sizeof(s),
        "decode: wg %u, %u lanes per key row, %u rows/tile (%u a lane), keys/tile %u, key sums by "
        "%s, paged: %u block-table entries in shared memory, splits for %u workgroups, no split "
        "below %u keys, %s%s%s",
        v.wg, v.lanes_per_row, v.rows, v.rows / std::max(v.row_splits, 1u), v.tile_keys,
        v.subgroup_ops ? "subgroup shuffles" : "shared memory", v.page_window, v.target_items,
        v.min_split_keys, order.c_str(), v.fallback.empty() ? "" : "; fallback from ",
        v.fallback.c_str());
    return s;
  }
  if (v.family == vkattn::AttentionFamily::kTiled) {
    std::snprintf(s, sizeof(s),
                  "tiled: wg %u, %u lanes per row, rows/group %u, keys/tile %u, row sums by %s, "
                  "%s math%s, %s%s%s",
                  v.wg, v.lanes_per_row, v.rows, v.tile_keys,
                  v.subgroup_ops ? "subgroup shuffles" : "shared memory",
                  v.f16_math ? "f16" : "f32", v.double_buffer ? ", double-buffered" : "",
                  order.c_str(), v.fallback.empty() ? "" : "; fallback from ", v.fallback.c_str());
    return s;
  }
  std::snprintf(
      s, sizeof(s),
      "lanes: wg %u, rows/lane %u, keys/block %u, d loops %s, decode from %u keys, %s%s%s", v.wg,
      v.rows, v.block_keys, v.unroll_d ? "unrolled" : "iterated", v.decode_min_keys, order.c_str(),
      v.fallback.empty() ? "" : "; fallback from ", v.fallback.c_str());
  return s;
}

}  // namespace vkattn_tools

// Pins the size and every field offset of the public structs: a change
// that moves a field fails to compile (the ABI check in CI catches it too,
// from the other side). Appending a field under the growth rule (src/api/
// abi.h) adds lines here and a size to abi.h. LP64 layouts.
#include <cstddef>
#include <cstdint>

#include "core/abi.h"
#include "vkattn/vkattn.h"

#if UINTPTR_MAX == UINT64_MAX

#define VKATTN_PIN(T, field, offset) \
  static_assert(offsetof(T, field) == (offset), #T "." #field " moved: the ABI changed")

static_assert(sizeof(vkattn_context_desc) == 16, "vkattn_context_desc size");
VKATTN_PIN(vkattn_context_desc, struct_size, 0);
VKATTN_PIN(vkattn_context_desc, device_index, 4);
VKATTN_PIN(vkattn_context_desc, flags, 8);
VKATTN_PIN(vkattn_context_desc, reserved, 12);

static_assert(sizeof(vkattn_attention_desc) == 176, "vkattn_attention_desc size");
VKATTN_PIN(vkattn_attention_desc, struct_size, 0);
VKATTN_PIN(vkattn_attention_desc, num_heads, 4);
VKATTN_PIN(vkattn_attention_desc, num_kv_heads, 8);
VKATTN_PIN(vkattn_attention_desc, head_dim, 12);
VKATTN_PIN(vkattn_attention_desc, head_dim_v, 16);
VKATTN_PIN(vkattn_attention_desc, scale, 20);
VKATTN_PIN(vkattn_attention_desc, causal, 24);
VKATTN_PIN(vkattn_attention_desc, window_left, 28);
VKATTN_PIN(vkattn_attention_desc, softcap, 32);
VKATTN_PIN(vkattn_attention_desc, mask_type, 36);
VKATTN_PIN(vkattn_attention_desc, alibi_slopes, 40);
VKATTN_PIN(vkattn_attention_desc, mask, 48);
VKATTN_PIN(vkattn_attention_desc, lse, 56);
VKATTN_PIN(vkattn_attention_desc, reserved, 64);
VKATTN_PIN(vkattn_attention_desc, sinks, 80);
VKATTN_PIN(vkattn_attention_desc, window_right, 88);
VKATTN_PIN(vkattn_attention_desc, chunk_size, 92);
VKATTN_PIN(vkattn_attention_desc, span_indptr, 96);
VKATTN_PIN(vkattn_attention_desc, spans, 104);
VKATTN_PIN(vkattn_attention_desc, tree_indptr, 112);
VKATTN_PIN(vkattn_attention_desc, tree_mask, 120);
VKATTN_PIN(vkattn_attention_desc, topk_indices, 128);
VKATTN_PIN(vkattn_attention_desc, variant, 136);
VKATTN_PIN(vkattn_attention_desc, variant_params, 144);
static_assert(sizeof(vkattn_variant_desc) == 32, "vkattn_variant_desc size");
VKATTN_PIN(vkattn_variant_desc, struct_size, 0);
VKATTN_PIN(vkattn_variant_desc, source, 8);
VKATTN_PIN(vkattn_variant_desc, param_dtypes, 16);

static_assert(sizeof(vkattn_kv_cache_desc) == 52, "vkattn_kv_cache_desc size");
VKATTN_PIN(vkattn_kv_cache_desc, struct_size, 0);
VKATTN_PIN(vkattn_kv_cache_desc, num_layers, 4);
VKATTN_PIN(vkattn_kv_cache_desc, num_kv_heads, 8);
VKATTN_PIN(vkattn_kv_cache_desc, head_dim, 12);
VKATTN_PIN(vkattn_kv_cache_desc, head_dim_v, 16);
VKATTN_PIN(vkattn_kv_cache_desc, page_size, 20);
VKATTN_PIN(vkattn_kv_cache_desc, num_pages, 24);
VKATTN_PIN(vkattn_kv_cache_desc, dtype, 28);
VKATTN_PIN(vkattn_kv_cache_desc, reserved, 32);
VKATTN_PIN(vkattn_kv_cache_desc, flags, 48);

static_assert(sizeof(vkattn_device_info) == 824, "vkattn_device_info size");
VKATTN_PIN(vkattn_device_info, struct_size, 0);
VKATTN_PIN(vkattn_device_info, name, 4);
VKATTN_PIN(vkattn_device_info, driver_name, 260);
VKATTN_PIN(vkattn_device_info, driver_info, 516);
VKATTN_PIN(vkattn_device_info, vendor_id, 772);
VKATTN_PIN(vkattn_device_info, device_id, 776);
VKATTN_PIN(vkattn_device_info, device_type, 780);
VKATTN_PIN(vkattn_device_info, api_version, 784);
VKATTN_PIN(vkattn_device_info, driver_version, 788);
VKATTN_PIN(vkattn_device_info, subgroup_size, 792);
VKATTN_PIN(vkattn_device_info, max_shared_memory, 796);
VKATTN_PIN(vkattn_device_info, max_buffer_range, 800);
VKATTN_PIN(vkattn_device_info, supports_f16, 808);
VKATTN_PIN(vkattn_device_info, supports_16bit_storage, 812);
VKATTN_PIN(vkattn_device_info, supports_bf16, 816);

// The newest shipped size of each struct (the last in its list) is this build's.
static_assert(vkattn::kContextDescSizes[0] == sizeof(vkattn_context_desc), "sizes list");
static_assert(vkattn::kAttentionDescSizes[4] == sizeof(vkattn_attention_desc), "sizes list");
static_assert(vkattn::kVariantDescSizes[0] == sizeof(vkattn_variant_desc), "sizes list");
static_assert(vkattn::kKvCacheDescSizes[1] == sizeof(vkattn_kv_cache_desc), "sizes list");
static_assert(vkattn::kDeviceInfoSizes[0] == sizeof(vkattn_device_info), "sizes list");

static_assert(sizeof(vkattn_rope_desc) == 72, "vkattn_rope_desc size");
VKATTN_PIN(vkattn_rope_desc, struct_size, 0);
VKATTN_PIN(vkattn_rope_desc, layout, 4);
VKATTN_PIN(vkattn_rope_desc, rotary_dim, 8);
VKATTN_PIN(vkattn_rope_desc, rotary_offset, 12);
VKATTN_PIN(vkattn_rope_desc, theta, 16);
VKATTN_PIN(vkattn_rope_desc, scaling, 20);
VKATTN_PIN(vkattn_rope_desc, factor, 24);
VKATTN_PIN(vkattn_rope_desc, low_freq_factor, 28);
VKATTN_PIN(vkattn_rope_desc, high_freq_factor, 32);
VKATTN_PIN(vkattn_rope_desc, original_max_position, 36);
VKATTN_PIN(vkattn_rope_desc, beta_fast, 40);
VKATTN_PIN(vkattn_rope_desc, beta_slow, 44);
VKATTN_PIN(vkattn_rope_desc, attention_factor, 48);
VKATTN_PIN(vkattn_rope_desc, yarn_truncate, 52);
VKATTN_PIN(vkattn_rope_desc, reserved, 56);
static_assert(vkattn::kRopeDescSizes[0] == sizeof(vkattn_rope_desc), "sizes list");

static_assert(sizeof(vkattn_vulkan_desc) == 80, "vkattn_vulkan_desc size");
VKATTN_PIN(vkattn_vulkan_desc, struct_size, 0);
VKATTN_PIN(vkattn_vulkan_desc, queue_family_index, 4);
VKATTN_PIN(vkattn_vulkan_desc, instance, 8);
VKATTN_PIN(vkattn_vulkan_desc, physical_device, 16);
VKATTN_PIN(vkattn_vulkan_desc, device, 24);
VKATTN_PIN(vkattn_vulkan_desc, queue, 32);
VKATTN_PIN(vkattn_vulkan_desc, api_version, 40);
VKATTN_PIN(vkattn_vulkan_desc, enabled_extension_count, 44);
VKATTN_PIN(vkattn_vulkan_desc, get_instance_proc_addr, 48);
VKATTN_PIN(vkattn_vulkan_desc, enabled_features, 56);
VKATTN_PIN(vkattn_vulkan_desc, enabled_extensions, 64);
VKATTN_PIN(vkattn_vulkan_desc, flags, 72);
VKATTN_PIN(vkattn_vulkan_desc, reserved, 76);

static_assert(sizeof(vkattn_tune_desc) == 64, "vkattn_tune_desc size");
VKATTN_PIN(vkattn_tune_desc, struct_size, 0);
VKATTN_PIN(vkattn_tune_desc, seconds, 8);
VKATTN_PIN(vkattn_tune_desc, num_cases, 16);
VKATTN_PIN(vkattn_tune_desc, cases, 24);
VKATTN_PIN(vkattn_tune_desc, progress, 32);
VKATTN_PIN(vkattn_tune_desc, user, 40);
VKATTN_PIN(vkattn_tune_desc, reserved, 48);
static_assert(vkattn::kTuneDescSizes[0] == sizeof(vkattn_tune_desc), "sizes list");

#endif

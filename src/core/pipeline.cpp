#include "core/pipeline.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <utility>

#include "core/buffer.h"
#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/log_once.h"
#include "core/platform.h"
#include "core/recorder.h"

namespace vkattn {

namespace {
VkDescriptorType descriptor_type(BindingKind k) {
  return k == BindingKind::kStorageBuffer ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                          : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
}
}  // namespace

// Pipeline::module of a runtime module's pipeline: its name, kept for the
// process (a handful per variant; the logs and self-check keys print it).
static const char* pipelines_module_name(const std::string& name) {
  static std::mutex m;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(m);
  return names.insert(name).first->c_str();
}

uint64_t build_id() {
  static const uint64_t id = [] {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, 64-bit
    auto mix = [&](uint32_t w) {
      for (int i = 0; i < 4; ++i) h = (h ^ ((w >> (8 * i)) & 0xffu)) * 1099511628211ull;
    };
    mix((VKATTN_VERSION_MAJOR << 20) | (VKATTN_VERSION_MINOR << 10) | VKATTN_VERSION_PATCH);
    size_t n = 0;
    const ShaderBlob* all = all_shaders(&n);
    for (size_t i = 0; i < n; ++i) {
      for (const char* c = all[i].name; *c; ++c) mix(static_cast<uint8_t>(*c));
      for (size_t w = 0; w < all[i].count; ++w) mix(all[i].words[w]);
    }
    const GlslText* text = all_glsl(&n);
    for (size_t i = 0; i < n; ++i)
      for (const char* c = text[i].text; *c; ++c) mix(static_cast<uint8_t>(*c));
    return h;
  }();
  return id;
}

Pipelines::Pipelines(Device& device) : device_(device) {
  log_compile_ = log_enabled(kLogCompile);
  if (log_enabled(kLogStats)) {
    log_stats_ = device.caps().pipeline_stats;
    if (!log_stats_ && first_time(std::string("no-stats:") + device.info().name))
      logf(VKATTN_LOG_INFO,
           "stats: device \"%s\" gives no pipeline statistics "
           "(VK_KHR_pipeline_executable_properties with pipelineExecutableInfo; on an adopted "
           "device its creator must enable both)",
           device.info().name);
  }
  allow_full_subgroups_ = env_switch("VKATTN_FULL_SUBGROUPS", true);
  std::vector<char> data;
  std::string path = cache_path();
  if (!path.empty()) {
    std::ifstream f(path, std::ios::binary);
    if (f) data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  // A stale or foreign blob is ignored by the driver; retry empty if it errs.
  const VolkDeviceTable& vk = device.vk();
  if (vk.vkCreatePipelineCache(device.handle(), &ci, vk_allocator(), &cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    check_vk(vk.vkCreatePipelineCache(device.handle(), &ci, vk_allocator(), &cache_),
             "vkCreatePipelineCache");
  }
}

std::string Pipelines::cache_path() const {
  // VKATTN_PIPELINE_CACHE_DIR="" turns the disk cache off.
  const std::string dir = cache_dir();
  if (dir.empty()) return "";
  const auto& info = device_.info();
  char name[128];
  std::snprintf(name, sizeof(name), "/pipelines-%04x-%04x-%08x.bin", info.vendor_id, info.device_id,
                info.driver_version);
  return dir + name;
}

Pipelines::~Pipelines() {
  VkDevice dev = device_.handle();
  const VolkDeviceTable& vk = device_.vk();
  std::string path = cache_path();
  size_t n = 0;
  if (!path.empty() && !pipelines_.empty() &&
      vk.vkGetPipelineCacheData(dev, cache_, &n, nullptr) == VK_SUCCESS && n) {
    std::vector<char> data(n);
    if (vk.vkGetPipelineCacheData(dev, cache_, &n, data.data()) == VK_SUCCESS) {
      // A cache that cannot be written (a read-only folder) costs the
      // next process its compiles, nothing else: one line per process.
      std::string why;
      if (!write_file_atomically(path, std::string(data.data(), n), &why) &&
          first_time("pipeline cache " + path))
        log(VKATTN_LOG_WARNING, "cannot write the pipeline cache: ", why);
    }
  }
  for (auto& kv : pipelines_) {
    vk.vkDestroyPipeline(dev, kv.second.pipeline, vk_allocator());
    vk.vkDestroyPipelineLayout(dev, kv.second.pipeline_layout, vk_allocator());
    vk.vkDestroyDescriptorSetLayout(dev, kv.second.set_layout, vk_allocator());
  }
  vk.vkDestroyPipelineCache(dev, cache_, vk_allocator());
}

const Pipeline& Pipelines::get(const KernelLayout& family_layout, const std::vector<uint32_t>& spec,
                               uint64_t shared_bytes, const RuntimeModule* runtime) {
  const std::string name =
      runtime ? std::string(family_layout.shader) + "#" + runtime->key() : family_layout.shader;
  auto key = std::make_pair(name, spec);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;

  // (A runtime module may build a shader that has no build-time SPIR-V:
  // the self-check's table of a variant, shaders/attention_variant_table.comp.)
  const ShaderBlob* blob = find_shader(family_layout.shader);
  if (!blob && !runtime)
    fail(VKATTN_ERROR_INTERNAL, "shader ", family_layout.shader, " is not embedded");
  bool soft_f16 = false;
  if (blob && device_.caps().soft_f16)  // (a shader without the variant converts no f16)
    if (const ShaderBlob* soft = find_shader(std::string(family_layout.shader) + "_soft_f16"))
      blob = soft, soft_f16 = true;
  // A runtime module: its SPIR-V, and the family's layout plus its binding.
  std::vector<uint32_t> runtime_words;
  const KernelLayout* layout_ptr = &family_layout;
  if (runtime) {
    runtime_words = runtime->spirv(family_layout.shader, soft_f16);
    std::unique_ptr<KernelLayout>& l = runtime_layouts_[family_layout.shader];
    if (!l) {
      l = std::make_unique<KernelLayout>(family_layout);
      l->bindings.push_back(BindingKind::kStorageBuffer);
    }
    layout_ptr = l.get();
  }
  const KernelLayout& layout = *layout_ptr;
  VkDevice dev = device_.handle();
  const VolkDeviceTable& vk = device_.vk();
  host_alloc_point();
  Pipeline p;
  p.layout = &layout;
  p.module = runtime ? pipelines_module_name(name) : blob->name;
  p.spec = spec;
  std::vector<VkDescriptorSetLayoutBinding> binds;
  for (uint32_t i = 0; i < layout.bindings.size(); ++i)
    binds.push_back(
        {i, descriptor_type(layout.bindings[i]), 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = static_cast<uint32_t>(binds.size());
  dl.pBindings = binds.data();
  VkShaderModule module = VK_NULL_HANDLE;
  try {
    check_vk(vk.vkCreateDescriptorSetLayout(dev, &dl, vk_allocator(), &p.set_layout),
             "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, layout.push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p.set_layout;
    pl.pushConstantRangeCount = layout.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &pr;
    {
      NoFaultScope scope(NoFaultScope::kDriverBug);  // core/faults.h
      check_vk(vk.vkCreatePipelineLayout(dev, &pl, vk_allocator(), &p.pipeline_layout),
               "vkCreatePipelineLayout");
    }
    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = runtime ? runtime_words.size() * 4 : blob->count * 4;
    sm.pCode = runtime ? runtime_words.data() : blob->words;
    check_vk(vk.vkCreateShaderModule(dev, &sm, vk_allocator(), &module), "vkCreateShaderModule");
    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < spec.size(); ++i) entries.push_back({i, i * 4u, 4});
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4,
                            spec.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
    // Full subgroups of the reported size (VUID-RuntimeSpirv-
    // OpTypeCooperativeMatrixKHR-10770 asks for full subgroups before
    // SPIR-V 1.6; the matrix shapes were queried for that size).
    const DeviceCaps& caps = device_.caps();
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rs{
        VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
    if (layout.full_subgroups && allow_full_subgroups_) {
      if (caps.full_subgroups) {
        ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
        p.full_subgroups = true;
      }
      if (caps.subgroup_size_control && caps.subgroup_size) {
        rs.requiredSubgroupSize = caps.subgroup_size;
        ci.stage.pNext = &rs;
        p.required_subgroup_size = caps.subgroup_size;
      }
    }
    ci.layout = p.pipeline_layout;
    if (log_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    const auto t0 = std::chrono::steady_clock::now();
    check_vk(vk.vkCreateComputePipelines(dev, cache_, 1, &ci, vk_allocator(), &p.pipeline),
             "vkCreateComputePipelines");
    std::string sp;  // (the logs' text of the specialization constants)
    if (log_stats_ || log_compile_)
      for (uint32_t v : spec) sp += (sp.empty() ? "" : ",") + std::to_string(v);
    if (log_stats_) capture_stats(p, sp, shared_bytes);
    if (log_compile_) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      logf(VKATTN_LOG_INFO, "compile %s [%s]%s%s %.0f ms", p.module, sp.c_str(),
           p.full_subgroups ? " full-subgroups" : "",
           p.required_subgroup_size
               ? (" subgroup-size " + std::to_string(p.required_subgroup_size)).c_str()
               : "",
           ms);
    }
    vk.vkDestroyShaderModule(dev, module, vk_allocator());
    module = VK_NULL_HANDLE;
    return pipelines_.emplace(key, p).first->second;
  } catch (...) {
    if (module) vk.vkDestroyShaderModule(dev, module, vk_allocator());
    if (p.pipeline) vk.vkDestroyPipeline(dev, p.pipeline, vk_allocator());
    if (p.pipeline_layout) vk.vkDestroyPipelineLayout(dev, p.pipeline_layout, vk_allocator());
    if (p.set_layout) vk.vkDestroyDescriptorSetLayout(dev, p.set_layout, vk_allocator());
    throw;
  }
}

// One line per executable: the driver's statistics under its own names,
// then vkattn's own count of the workgroup's shared memory where the
// family gave it. A driver that fails the queries leaves no line (the
// pipeline itself is fine).
void Pipelines::capture_stats(Pipeline& p, const std::string& spec_text, uint64_t shared_bytes) {
  const VolkDeviceTable& vk = device_.vk();
  if (!vk.vkGetPipelineExecutablePropertiesKHR || !vk.vkGetPipelineExecutableStatisticsKHR) return;
  VkDevice dev = device_.handle();
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p.pipeline;
  uint32_t n = 0;
  if (vk.vkGetPipelineExecutablePropertiesKHR(dev, &pi, &n, nullptr) != VK_SUCCESS) return;
  std::vector<VkPipelineExecutablePropertiesKHR> exes(
      n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  if (vk.vkGetPipelineExecutablePropertiesKHR(dev, &pi, &n, exes.data()) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p.pipeline;
    ei.executableIndex = e;
    uint32_t m = 0;
    if (vk.vkGetPipelineExecutableStatisticsKHR(dev, &ei, &m, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(
        m, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (vk.vkGetPipelineExecutableStatisticsKHR(dev, &ei, &m, st.data()) != VK_SUCCESS) continue;
    ExecutableStats es{exes[e].name, {}};
    char buf[64];
    for (uint32_t i = 0; i < m; ++i) {
      switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          std::snprintf(buf, sizeof(buf), "%u", st[i].value.b32 ? 1u : 0u);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(st[i].value.i64));
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(st[i].value.u64));
          break;
        default:
          std::snprintf(buf, sizeof(buf), "%g", st[i].value.f64);
          break;
      }
      es.values.emplace_back(st[i].name, buf);
    }
    if (shared_bytes) es.values.emplace_back("Shared memory bytes", std::to_string(shared_bytes));
    std::string line =
        std::string(p.layout->shader) + " [" + spec_text + "] " + es.executable + ":";
    for (size_t i = 0; i < es.values.size(); ++i)
      line += (i ? "; " : " ") + es.values[i].first + "=" + es.values[i].second;
    logf(VKATTN_LOG_INFO, "stats %s", line.c_str());
    p.stats.push_back(std::move(es));
  }
}

std::vector<const Pipeline*> Pipelines::take_dispatched() {
  return std::exchange(dispatched_, {});
}

PreparedDispatch Pipelines::prepare(Recorder& rec, const Pipeline& p,
                                    const std::vector<BoundBuffer>& bound, const void* push,
                                    uint32_t push_bytes, uint64_t groups) {
  const KernelLayout& layout = *p.layout;
  if (bound.size() != layout.bindings.size())
    fail(VKATTN_ERROR_INTERNAL, layout.shader, ": ", bound.size(), " bindings given, ",
         layout.bindings.size(), " declared");
  if (push_bytes > sizeof(PreparedDispatch::push))
    fail(VKATTN_ERROR_INTERNAL, layout.shader, ": push constants of ", push_bytes, " bytes");
  PreparedDispatch d;
  d.pipeline = &p;
  if (log_stats_ && std::find(dispatched_.begin(), dispatched_.end(), &p) == dispatched_.end())
    dispatched_.push_back(&p);
  if (groups == 0) return d;
  const DeviceCaps& caps = device_.caps();
  const uint32_t max_x = caps.max_workgroup_count[0];
  uint64_t gy = (groups + max_x - 1) / max_x;
  if (gy > caps.max_workgroup_count[1])
    fail(VKATTN_ERROR_INTERNAL, layout.shader, ": ", groups, " workgroups exceed the device grid");

  // On the stack: this runs for every dispatch of every layer.
  if (bound.size() > kMaxBindings)
    fail(VKATTN_ERROR_INTERNAL, layout.shader, ": more than ", kMaxBindings, " bindings");
  std::array<VkDescriptorBufferInfo, kMaxBindings> infos{};
  std::array<VkBufferView, kMaxBindings> views{};
  std::array<VkWriteDescriptorSet, kMaxBindings> writes{};
  for (size_t i = 0; i < bound.size(); ++i) {
    const BoundBuffer& b = bound[i];
    Buffer* buf = b.buffer ? b.buffer.get() : b.raw;
    if (!buf) fail(VKATTN_ERROR_INTERNAL, layout.shader, ": binding ", i, " is empty");
    uint64_t range = b.range ? b.range : buf->size() - b.offset;
    if (b.offset + range > buf->size())
      fail(VKATTN_ERROR_INTERNAL, layout.shader, ": binding ", i, " [", b.offset, ", ",
           b.offset + range, ") is outside its buffer of ", buf->size(), " bytes");
    if (layout.bindings[i] == BindingKind::kStorageBuffer) {
      if (range > caps.max_storage_buffer_range || b.offset % caps.min_storage_offset_alignment)
        fail(VKATTN_ERROR_INTERNAL, layout.shader, ": storage binding ", i, " of ", range,
             " bytes at ", b.offset, " breaks the device's limits");
      infos[i] = {buf->handle(), b.offset, range};
    } else {
      const uint64_t texel = texel_format_bytes(b.format);
      if (range / texel > caps.max_texel_buffer_elements ||
          b.offset % caps.min_texel_offset_alignment)
        fail(VKATTN_ERROR_INTERNAL, layout.shader, ": texel binding ", i, " of ", range / texel,
             " texels at ", b.offset, " breaks the device's limits");
      views[i] = buf->view(b.format, b.offset, range);
    }
  }
  d.set = rec.descriptor_set(p.set_layout);
  for (size_t i = 0; i < bound.size(); ++i) {
    VkWriteDescriptorSet& w = writes[i];
    w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = d.set;
    w.dstBinding = static_cast<uint32_t>(i);
    w.descriptorCount = 1;
    w.descriptorType = descriptor_type(layout.bindings[i]);
    if (layout.bindings[i] == BindingKind::kStorageBuffer)
      w.pBufferInfo = &infos[i];
    else
      w.pTexelBufferView = &views[i];
    if (bound[i].buffer) rec.use(bound[i].buffer);
  }
  device_.vk().vkUpdateDescriptorSets(device_.handle(), static_cast<uint32_t>(bound.size()),
                                      writes.data(), 0, nullptr);
  if (push_bytes) std::memcpy(d.push, push, push_bytes);
  d.push_bytes = push_bytes;
  d.gx = static_cast<uint32_t>(gy > 1 ? max_x : groups);
  d.gy = static_cast<uint32_t>(gy);
  return d;
}

void Pipelines::record(Recorder& rec, const PreparedDispatch& d) {
  if (d.gx == 0) return;
  const VolkDeviceTable& vk = device_.vk();
  rec.barrier();
  VkCommandBuffer c = rec.cmd();
  const Pipeline& p = *d.pipeline;
  vk.vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vk.vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline_layout, 0, 1, &d.set, 0,
                             nullptr);
  if (d.push_bytes)
    vk.vkCmdPushConstants(c, p.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d.push_bytes,
                          d.push);
  vk.vkCmdDispatch(c, d.gx, d.gy, 1);
  rec.after_command();
}

void Pipelines::dispatch(Recorder& rec, const Pipeline& p, const std::vector<BoundBuffer>& bound,
                         const void* push, uint32_t push_bytes, uint64_t groups) {
  record(rec, prepare(rec, p, bound, push, push_bytes, groups));
}

uint64_t texel_format_bytes(VkFormat f) {
  switch (f) {
    case VK_FORMAT_R32G32B32A32_UINT:
    case VK_FORMAT_R32G32B32A32_SFLOAT:
      return 16;
    case VK_FORMAT_R32G32_UINT:
      return 8;
    case VK_FORMAT_R32_UINT:
    case VK_FORMAT_R32_SFLOAT:
      return 4;
    case VK_FORMAT_R16_UINT:
      return 2;
    case VK_FORMAT_R8_UINT:
      return 1;
    default:
      fail(VKATTN_ERROR_INTERNAL, "texel format ", static_cast<int>(f), " is not used by vkattn");
  }
}

}  // namespace vkattn

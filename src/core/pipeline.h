// Compute pipelines built from the embedded SPIR-V, cached by (shader,
// specialization constants). A KernelLayout is the one description of a
// shader's bindings from which both the descriptor-set layout and the
// descriptor writes are made, so they cannot disagree.
#pragma once

#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vkattn {

class Device;
class Buffer;
class Recorder;

enum class BindingKind : uint8_t { kStorageBuffer, kUniformTexel };

// Bindings of one kernel at most (the attention families' have 17).
constexpr size_t kMaxBindings = 20;

struct KernelLayout {
  const char* shader;  // name of shaders/<name>.comp
  std::vector<BindingKind> bindings;
  uint32_t push_bytes;
  // Created with full subgroups of the device's reported subgroup size
  // where the device enabled subgroup size control (the coopmat family:
  // the size its matrix shapes were queried for); VKATTN_FULL_SUBGROUPS=0
  // turns it off (a variant the GPU campaign compares).
  bool full_subgroups = false;
};

// One executable's compiler statistics (VKATTN_LOG=stats): the driver's
// names and values (as text), then vkattn's own "Shared memory bytes".
struct ExecutableStats {
  std::string executable;
  std::vector<std::pair<std::string, std::string>> values;
};

struct Pipeline {
  const KernelLayout* layout = nullptr;
  // The embedded module it was made from: layout->shader, or its
  // <shader>_soft_f16 variant on a device that needs it (DeviceCaps::soft_f16).
  const char* module = nullptr;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  std::vector<uint32_t> spec;  // its specialization constants (what a self-check is keyed by)
  // Created requiring full subgroups / this subgroup size (0: neither).
  uint32_t required_subgroup_size = 0;
  bool full_subgroups = false;
  // Its self-check result once known (ops/attention/self_check.h; 0: not
  // yet looked up), so a call does not look it up again.
  mutable uint32_t check_status = 0;
  mutable double check_max_err = 0;
  // VKATTN_LOG=stats: its executables' statistics (Pipelines::take_dispatched).
  std::vector<ExecutableStats> stats;
};

// What one binding points at. For texel bindings `format` is the view format
// and offset/range are in bytes.
struct BoundBuffer {
  std::shared_ptr<Buffer> buffer;  // kept alive by the recorder
  Buffer* raw = nullptr;           // used when `buffer` is null: ring memory of the open batch
  uint64_t offset = 0;
  uint64_t range = 0;  // 0 = to the end
  VkFormat format = VK_FORMAT_UNDEFINED;
};

// A dispatch with everything acquired (descriptor set written, buffers kept
// alive): recording it cannot fail.
struct PreparedDispatch {
  const Pipeline* pipeline = nullptr;
  VkDescriptorSet set = VK_NULL_HANDLE;
  uint8_t push[128] = {};
  uint32_t push_bytes = 0;
  uint32_t gx = 0, gy = 0;  // 0: nothing to dispatch
};

// A pipeline's shader made at run time rather than embedded: attention
// variants (user functions, ops/attention/user_functions.h) compile a
// family's GLSL with the user's functions spliced in. key() tells their
// pipelines apart; spirv() gives (or throws why not) the module of
// shader `shader` (a shaders/<name>.comp), `soft_f16` its _soft_f16 form.
// Its pipelines have one storage binding more than their layout (the
// user functions' parameters, binding = layout.bindings.size()).
class RuntimeModule {
 public:
  virtual ~RuntimeModule() = default;
  virtual const std::string& key() const = 0;
  virtual std::vector<uint32_t> spirv(const std::string& shader, bool soft_f16) const = 0;
};

class Pipelines {
 public:
  explicit Pipelines(Device& device);
  ~Pipelines();  // saves the VkPipelineCache
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  // Specialization constant i gets constant_id i. `shared_bytes`: the
  // workgroup's shared memory as its family computes it (0: not given),
  // printed beside the driver's statistics (NVK reports none).
  // `runtime`: the shader is runtime->spirv(layout.shader, ...) instead of
  // the embedded one, and the pipeline's layout has its extra binding.
  const Pipeline& get(const KernelLayout& layout, const std::vector<uint32_t>& spec,
                      uint64_t shared_bytes = 0, const RuntimeModule* runtime = nullptr);

  // VKATTN_LOG=stats: every pipeline dispatched since the last call, in
  // first-dispatch order (their `stats`); the bench records each case's.
  // Empty without VKATTN_LOG=stats or where the device gives no statistics.
  std::vector<const Pipeline*> take_dispatched();

  // Acquires what a dispatch of `groups` workgroups needs (descriptor set,
  // texel views, keep-alive of the bound buffers): everything that can
  // fail. Groups spill into a 2-D grid above maxComputeWorkGroupCount[0];
  // the shader gets the flat id from gl_WorkGroupID.x + gl_WorkGroupID.y *
  // gl_NumWorkGroups.x and must ignore ids >= its item count. Every storage
  // binding must fit maxStorageBufferRange and every texel binding
  // maxTexelBufferElements (ops split their work so they do; a violation is
  // an internal error, never a GPU access out of range).
  PreparedDispatch prepare(Recorder& rec, const Pipeline& p, const std::vector<BoundBuffer>& bound,
                           const void* push, uint32_t push_bytes, uint64_t groups);
  // Records barrier + bind + push + dispatch; cannot fail.
  void record(Recorder& rec, const PreparedDispatch& d);
  // prepare + record, for ops that record one dispatch.
  void dispatch(Recorder& rec, const Pipeline& p, const std::vector<BoundBuffer>& bound,
                const void* push, uint32_t push_bytes, uint64_t groups);

 private:
  std::string cache_path() const;
  Device& device_;
  // VKATTN_LOG=compile: one stderr line per pipeline created (shader,
  // specialization constants, milliseconds in vkCreateComputePipelines).
  bool log_compile_ = false;
  // VKATTN_LOG=stats on a device that offers pipeline statistics.
  bool log_stats_ = false;
  std::vector<const Pipeline*> dispatched_;  // since take_dispatched (log_stats_ only)
  void capture_stats(Pipeline& p, const std::string& spec_text, uint64_t shared_bytes);
  bool allow_full_subgroups_ = true;  // VKATTN_FULL_SUBGROUPS (default 1)
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<std::pair<std::string, std::vector<uint32_t>>, Pipeline> pipelines_;
  // The layouts of runtime modules' pipelines (a family's plus one storage
  // binding), by shader name: Pipeline::layout points here.
  std::map<std::string, std::unique_ptr<KernelLayout>> runtime_layouts_;
};

// Bytes per texel of the view formats vkattn binds.
uint64_t texel_format_bytes(VkFormat f);

// Embedded SPIR-V (generated at build time from shaders/*.comp).
struct ShaderBlob {
  const char* name;
  const uint32_t* words;
  size_t count;
};
const ShaderBlob* find_shader(const std::string& name);
// Every embedded shader.
const ShaderBlob* all_shaders(size_t* count);
// The GLSL text of the attention shaders and their includes (by file name:
// "attention_fwd.comp", "attention_mask.glsl"), generated at build time by
// cmake/embed_glsl.cmake: what attention variants compile at run time.
struct GlslText {
  const char* name;
  const char* text;
};
const GlslText* all_glsl(size_t* count);
// This build of vkattn: a hash of every embedded SPIR-V word, every
// embedded GLSL text and the version, so a changed kernel is never taken
// for a checked one.
uint64_t build_id();

}  // namespace vkattn

// Attention variants (user functions; the public vkattn_variant): the
// user's GLSL vkattn_mask_mod / vkattn_score_mod, checked at creation with
// probe compiles and spliced into a family's shader at its first use
// (shaders/include/attention_mask.glsl includes "vkattn_user.glsl", which
// this file writes: the parameters' binding, their accessors, then the
// source under `#line 1`). Not to be confused with the kernel variants
// (ops/attention/variant.h, AttentionVariant: tile shapes and families).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/pipeline.h"
#include "vkattn/vkattn.h"

namespace vkattn {

class Context;
class GlslCompiler;

// The self-check's table of a variant's functions (ops/attention/variant_table.h).
constexpr const char* kTableShader = "attention_variant_table";

// Whether a source's vkattn_mask_mod may read its head argument: false
// only when the text proves it cannot (every definition's body never
// names its second parameter). Then every head of a token gets the same
// answer, and the lanes family evaluates it once per token of a GQA
// group's rows (FwdConfig::user_rows). Conservative: true for a source
// with any preprocessor line (a macro could name the parameter), a
// parameter list not read as four plain parameters, or no definition.
bool mask_source_reads_head(const std::string& source);

class UserFunctions : public RuntimeModule {
 public:
  // Checks and probes desc (throws INVALID_ARGUMENT / UNSUPPORTED as the
  // header says).
  UserFunctions(std::shared_ptr<Context> ctx, const vkattn_variant_desc& desc);

  Context& context() const { return *ctx_; }
  // param_dtypes[s] (0: slot s unused).
  uint32_t slot_dtype(uint32_t s) const { return dtypes_[s]; }
  // The source defines vkattn_mask_mod (the families skip what it hides).
  bool has_mask() const { return mask_; }
  // ... vkattn_score_mod.
  bool has_score() const { return score_; }
  // vkattn_mask_mod may read its head argument (false: every head of a
  // token gets the same answer, which the source's text proves; see
  // mask_reads_head in user_functions.cpp).
  bool mask_reads_head() const { return mask_reads_head_; }
  // The loaded compiler knows GL_KHR_cooperative_matrix (the coopmat
  // family can take variant calls).
  bool compiler_knows_coopmat() const;

  // RuntimeModule: "u<hash of source and param_dtypes>"; the family
  // shader's SPIR-V with these functions (memoized, and cached on disk
  // beside the pipeline cache; VKATTN_LOG=compile logs a compile).
  const std::string& key() const override { return key_; }
  std::vector<uint32_t> spirv(const std::string& shader, bool soft_f16) const override;

 private:
  std::string user_include() const;
  bool compile(const std::string& name, const std::string& main_text,
               const std::vector<std::pair<std::string, std::string>>& defines,
               std::vector<uint32_t>* words, std::string* log) const;
  std::shared_ptr<Context> ctx_;
  const GlslCompiler* compiler_ = nullptr;
  std::string source_;
  uint32_t dtypes_[4] = {0, 0, 0, 0};
  bool mask_ = false, score_ = false;
  bool mask_reads_head_ = true;
  bool fault_ = false;  // VKATTN_FAULT_USER (core/kernel_options.h)
  std::string key_;
  // What #include resolves to: the embedded shaders' files and
  // "vkattn_user.glsl" (user_include()), made once.
  std::map<std::string, std::string> includes_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint32_t>> compiled_;  // by shader (+ "_soft_f16")
};

}  // namespace vkattn

// The C handle of a variant (api/handles.h has the others): here, beside
// its object, as core/tensor.h keeps vkattn_tensor.
struct vkattn_variant {
  std::shared_ptr<vkattn::UserFunctions> impl;
};

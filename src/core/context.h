// The C++ side of vkattn_context: one device, its recorder and pipelines.
// Everything created from a context holds a shared_ptr to it, so handles can
// be destroyed in any order.
#pragma once

#include <memory>
#include <mutex>

#include "core/check_records.h"
#include "core/device.h"
#include "core/kernel_options.h"
#include "core/pipeline.h"
#include "core/recorder.h"
#include "core/tuning_file.h"

namespace vkattn {

class Context {
 public:
  Context(int32_t device_index, bool validation, bool profile);
  // On a device vkattn adopted (Device::adopt).
  Context(std::shared_ptr<Device> device, bool profile);
  // A private context of a parent's: the parent's device, pipelines,
  // check records and tuning file, its own recorder, scratch and
  // submissions (never ordered after the parent's recorded work, never
  // counted by VKATTN_FAULT_DEVICE_LOST). kChecker: where self-checks run
  // (ops/attention/self_check.h; never checked itself); kTuner: where
  // vkattn_tune measures (ops/attention/tune.h; GPU timestamps, calls
  // self-checked, tuned choices never applied).
  enum class Role { kChecker, kTuner };
  Context(Context& parent, Role role);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device& device() { return *device_; }
  Recorder& recorder() { return *recorder_; }
  Pipelines& pipelines() { return *pipelines_; }
  // The self-check results of this device (core/check_records.h), loaded
  // at first use; shared with the checker context.
  CheckRecords& check_records();
  // The context self-checks run on, created at first use.
  const std::shared_ptr<Context>& checker();
  bool is_checker() const { return is_checker_; }
  // The tuner's context measures the device table's choice: it never
  // applies tuned choices itself.
  bool is_tuner() const { return is_tuner_; }
  // The tuned kernel choices of this device (core/tuning_file.h), loaded
  // when the context is created.
  TuningFile& tuning() { return *tuning_; }
  // The tuner's own context (ops/attention/tune.h) switches options per
  // candidate.
  void set_options(const KernelOptions& o) { options_ = o; }
  // Kernel choices forced through the environment, read at creation.
  const KernelOptions& options() const { return options_; }
  // VKATTN_CONTEXT_BATCH_INVARIANT, set once at creation.
  void set_batch_invariant() { options_.batch_invariant = true; }

  // A small buffer bound where a kernel's optional input is absent.
  const std::shared_ptr<Buffer>& dummy() { return dummy_; }
  // Device scratch of at least `bytes`, reused across calls: every command
  // is ordered after the previous one (Recorder::barrier), so reuse is safe;
  // growing replaces it while recorded work keeps the old one alive.
  std::shared_ptr<Buffer> scratch(uint64_t bytes);

  // What the last recorded attention call ran (vkattn-bench prints it):
  // query-row tiles, work items (tiles cut into key splits), forward
  // passes, and combine items merging split partials.
  struct AttentionStats {
    uint64_t tiles = 0, items = 0, passes = 0, combine_items = 0;
  };
  AttentionStats last_attention;

 private:
  KernelOptions options_ = KernelOptions::from_env();
  bool is_checker_ = false;
  bool is_tuner_ = false;
  // Destroyed in reverse: the recorder waits for the GPU first.
  std::shared_ptr<Device> device_;
  std::shared_ptr<Pipelines> pipelines_;
  std::shared_ptr<CheckRecords> checks_;
  std::shared_ptr<TuningFile> tuning_;
  std::unique_ptr<Recorder> recorder_;
  std::shared_ptr<Buffer> dummy_;
  std::shared_ptr<Buffer> scratch_;
  std::shared_ptr<Context> checker_;  // destroyed first: its work drains on its own recorder
};

}  // namespace vkattn

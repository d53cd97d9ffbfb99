#include "core/context.h"

namespace vkattn {

Context::Context(int32_t device_index, bool validation, bool profile)
    : device_(Device::create(device_index, validation)),
      pipelines_(std::make_shared<Pipelines>(*device_)),
      tuning_(std::make_shared<TuningFile>(*device_)),
      recorder_(std::make_unique<Recorder>(*device_, profile)),
      dummy_(std::make_shared<Buffer>(*device_, texel_buffer_bytes(256), false)) {
  dummy_->stub = true;
}

Context::Context(std::shared_ptr<Device> device, bool profile)
    : device_(std::move(device)),
      pipelines_(std::make_shared<Pipelines>(*device_)),
      tuning_(std::make_shared<TuningFile>(*device_)),
      recorder_(std::make_unique<Recorder>(*device_, profile)),
      dummy_(std::make_shared<Buffer>(*device_, texel_buffer_bytes(256), false)) {
  dummy_->stub = true;
}

Context::Context(Context& parent, Role role)
    : options_(parent.options_),
      is_checker_(role == Role::kChecker),
      is_tuner_(role == Role::kTuner),
      device_(parent.device_),
      pipelines_(parent.pipelines_),
      checks_((parent.check_records(), parent.checks_)),
      tuning_(parent.tuning_),
      recorder_(std::make_unique<Recorder>(*device_, /*profile=*/role == Role::kTuner,
                                           /*inject_faults=*/false)),
      dummy_(std::make_shared<Buffer>(*device_, texel_buffer_bytes(256), false)) {
  dummy_->stub = true;
  // Its dispatches are not the caller's (self_check and tune log their own).
  options_.log_kernels = false;
  if (role == Role::kChecker) options_.batch_invariant = false;
}

CheckRecords& Context::check_records() {
  if (!checks_) checks_ = std::make_shared<CheckRecords>(*device_);
  return *checks_;
}

const std::shared_ptr<Context>& Context::checker() {
  if (!checker_) checker_ = std::make_shared<Context>(*this, Role::kChecker);
  return checker_;
}

std::shared_ptr<Buffer> Context::scratch(uint64_t bytes) {
  if (!scratch_ || scratch_->size() < bytes) {
    uint64_t size = 1ull << 20;
    while (size < bytes) size *= 2;
    scratch_ = std::make_shared<Buffer>(*device_, size, false);
  }
  return scratch_;
}

Context::~Context() = default;

}  // namespace vkattn

#include "core/context.h"

namespace vkattn {

Context::Context(int32_t device_index, bool validation, bool profile)
    : device_(Device::create(device_index, validation)),
      pipelines_(std::make_unique<Pipelines>(*device_)),
      recorder_(std::make_unique<Recorder>(*device_, profile)),
      dummy_(std::make_shared<Buffer>(*device_, texel_buffer_bytes(256), false)) {
  dummy_->stub = true;
}

Context::Context(std::shared_ptr<Device> device, bool profile)
    : device_(std::move(device)),
      pipelines_(std::make_unique<Pipelines>(*device_)),
      recorder_(std::make_unique<Recorder>(*device_, profile)),
      dummy_(std::make_shared<Buffer>(*device_, texel_buffer_bytes(256), false)) {
  dummy_->stub = true;
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

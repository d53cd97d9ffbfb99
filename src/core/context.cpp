#include "core/context.h"

namespace vkattn {

Context::Context(int32_t device_index, bool validation)
    : device_(Device::create(device_index, validation)),
      pipelines_(std::make_unique<Pipelines>(*device_)),
      recorder_(std::make_unique<Recorder>(*device_)) {}

Context::~Context() = default;

}  // namespace vkattn

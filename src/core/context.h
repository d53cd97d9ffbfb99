// The C++ side of vkattn_context: one device, its recorder and pipelines.
// Everything created from a context holds a shared_ptr to it, so handles can
// be destroyed in any order.
#pragma once

#include <memory>

#include "core/device.h"
#include "core/pipeline.h"
#include "core/recorder.h"

namespace vkattn {

class Context {
 public:
  Context(int32_t device_index, bool validation);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device& device() { return *device_; }
  Recorder& recorder() { return *recorder_; }
  Pipelines& pipelines() { return *pipelines_; }

 private:
  // Destroyed in reverse: the recorder waits for the GPU first.
  std::shared_ptr<Device> device_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<Recorder> recorder_;
};

}  // namespace vkattn

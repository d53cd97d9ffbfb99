#include "core/submitter.h"

#include <algorithm>
#include <vector>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"

namespace vkattn {

namespace {
constexpr size_t kMaxInFlight = 8;
}

Submitter::Submitter(Device& device, std::function<void(std::unique_ptr<Batch>)> recycle)
    : device_(device), recycle_(std::move(recycle)) {
  lose_at_submission_ = env_u64("VKATTN_FAULT_DEVICE_LOST", 0);
}

void Submitter::check_alive() const {
  if (lost_) fail(VKATTN_ERROR_DEVICE_LOST, lost_why_, "; the context can only be destroyed");
}

void Submitter::set_lost(const std::string& why) {
  lost_ = true;
  lost_why_ = why;
}

void Submitter::submit(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value,
                       VkSemaphore signal, uint64_t signal_value) {
  ++submissions_;
  VkResult r;
  if (lose_at_submission_ && submissions_ == lose_at_submission_) {
    r = VK_ERROR_DEVICE_LOST;  // injected: the batch is not submitted
  } else {
    // Waits: the caller's semaphore, and work recorded into callers'
    // command buffers that may not have completed (it wrote what this
    // batch may read).
    std::vector<VkSemaphore> waits;
    std::vector<uint64_t> wait_values;
    std::vector<VkPipelineStageFlags> stages;
    if (wait) waits.push_back(wait), wait_values.push_back(wait_value);
    for (const auto& f : in_flight_)
      if (f->external) waits.push_back(f->semaphore), wait_values.push_back(f->value);
    stages.assign(waits.size(), VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ti.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
    ti.pWaitSemaphoreValues = wait_values.data();
    ti.signalSemaphoreValueCount = signal ? 1 : 0;
    ti.pSignalSemaphoreValues = &signal_value;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    if (!waits.empty() || signal) si.pNext = &ti;
    si.waitSemaphoreCount = static_cast<uint32_t>(waits.size());
    si.pWaitSemaphores = waits.data();
    si.pWaitDstStageMask = stages.data();
    si.signalSemaphoreCount = signal ? 1 : 0;
    si.pSignalSemaphores = &signal;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b->cmd;
    NoFaultScope scope(NoFaultScope::kSubmit);
    r = device_.vk().vkQueueSubmit(device_.queue(), 1, &si, b->fence);
  }
  if (r == VK_ERROR_DEVICE_LOST) {
    set_lost(lose_at_submission_ == submissions_
                 ? "the device was lost (injected at submission " + std::to_string(submissions_) +
                       " by VKATTN_FAULT_DEVICE_LOST)"
                 : std::string("the device was lost (vkQueueSubmit)"));
    retire(std::move(b));
    check_alive();
  }
  // Any other failure (out of memory): the batch stays pending, whole, and
  // is submitted first by the next flush or op.
  check_vk(r, "vkQueueSubmit");
  submitted_any_ = true;
  in_flight_.push_back(std::move(b));
  ++next_serial_;
  if (in_flight_.size() > kMaxInFlight) wait_oldest();
}

void Submitter::add_external(std::unique_ptr<Batch> b) {
  in_flight_.push_back(std::move(b));
  submitted_any_ = true;
  ++next_serial_;
}

bool Submitter::complete(const Batch& b) const {
  if (!b.external) return device_.vk().vkGetFenceStatus(device_.handle(), b.fence) == VK_SUCCESS;
  uint64_t v = 0;
  return device_.vk().vkGetSemaphoreCounterValue(device_.handle(), b.semaphore, &v) == VK_SUCCESS &&
         v >= b.value;
}

void Submitter::retire(std::unique_ptr<Batch> b) {
  const VolkDeviceTable& vk = device_.vk();
  VkDevice dev = device_.handle();
  completed_serial_ = std::max(completed_serial_, b->serial);
  if (b->timestamps && b->begun && !lost_) {
    uint64_t ts[2];
    if (vk.vkGetQueryPoolResults(dev, b->timestamps, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
      last_gpu_ns_ =
          static_cast<uint64_t>((ts[1] - ts[0]) * double(device_.caps().timestamp_period_ns));
  }
  if (!b->external) vk.vkResetFences(dev, 1, &b->fence);
  recycle_(std::move(b));
}

void Submitter::wait_oldest() {
  auto b = std::move(in_flight_.front());
  in_flight_.pop_front();
  VkResult r;
  if (b->external) {
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores = &b->semaphore;
    wi.pValues = &b->value;
    r = device_.vk().vkWaitSemaphores(device_.handle(), &wi, UINT64_MAX);
  } else {
    r = device_.vk().vkWaitForFences(device_.handle(), 1, &b->fence, VK_TRUE, UINT64_MAX);
  }
  if (r != VK_SUCCESS) {
    in_flight_.push_front(std::move(b));
    if (r == VK_ERROR_DEVICE_LOST) {
      set_lost("the device was lost (vkWaitForFences)");
      check_alive();
    }
    check_vk(r, "vkWaitForFences");
  }
  retire(std::move(b));
}

void Submitter::poll() {
  while (!in_flight_.empty() && complete(*in_flight_.front())) wait_oldest();
}

void Submitter::wait_through(uint64_t serial) {
  while (!in_flight_.empty() && in_flight_.front()->serial <= serial) wait_oldest();
  completed_serial_ = std::max(completed_serial_, std::min(serial, next_serial_ - 1));
}

void Submitter::wait_all() {
  while (!in_flight_.empty()) wait_oldest();
  completed_serial_ = next_serial_ - 1;
}

void Submitter::drain(bool external_open) {
  try {
    while (!in_flight_.empty() && (!in_flight_.front()->external || complete(*in_flight_.front())))
      wait_oldest();
  } catch (...) {
  }
  if (!in_flight_.empty() || external_open || lost_)
    device_.vk().vkDeviceWaitIdle(device_.handle());
}

}  // namespace vkattn

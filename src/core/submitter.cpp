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

Submitter::Submitter(Device& device, std::function<void(std::unique_ptr<Batch>)> recycle,
                     bool inject_faults)
    : device_(device), recycle_(std::move(recycle)) {
  lose_at_submission_ = inject_faults ? env_number("VKATTN_FAULT_DEVICE_LOST", 0) : 0;
}

void Submitter::check_alive() const {
  if (lost_) fail(VKATTN_ERROR_DEVICE_LOST, lost_why_, "; the context can only be destroyed");
}

void Submitter::set_lost(const std::string& why) {
  lost_ = true;
  lost_why_ = why;
}

bool Submitter::shares(const Batch& b, const Batch& other) {
  for (const auto& buf : b.keep)
    if (!buf->stub && other.touched.count(buf.get())) return true;
  return false;
}

bool Submitter::uses_pending_caller_work(const Batch& b) const {
  for (const auto& f : in_flight_)
    if (f->external && !complete(*f) && shares(b, *f)) return true;
  return false;
}

void Submitter::submit(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value,
                       VkSemaphore signal, uint64_t signal_value) {
  check_alive();
  const bool semaphores = wait != VK_NULL_HANDLE || signal != VK_NULL_HANDLE;
  if (!semaphores) {
    pump();
    bool hold = uses_pending_caller_work(*b);
    for (const auto& d : deferred_) hold = hold || shares(*b, *d);
    if (hold) {
      // Held back until the caller's work it uses (or held-back work it
      // shares a buffer with) can go first.
      b->touched.clear();
      for (const auto& buf : b->keep) b->touched.insert(buf.get());
      deferred_.push_back(std::move(b));
      ++next_serial_;
      return;
    }
  } else {
    // The caller orders its own work against this submission: everything
    // held back goes first, waiting for the caller's work on the GPU.
    while (!deferred_.empty()) submit_deferred(deferred_.begin());
  }
  submit_now(b, wait, wait_value, signal, signal_value);
  ++next_serial_;
  limit_in_flight();
}

Submitter::Queue::iterator Submitter::submit_deferred(Queue::iterator it) {
  try {
    submit_now(*it, VK_NULL_HANDLE, 0, VK_NULL_HANDLE, 0);
  } catch (...) {
    if (!*it) deferred_.erase(it);  // recycled (device lost)
    throw;
  }
  return deferred_.erase(it);
}

void Submitter::pump() {
  // In serial order; one that shares a buffer with an earlier held-back
  // batch waits for that one.
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    bool runnable = !uses_pending_caller_work(**it);
    for (auto e = deferred_.begin(); runnable && e != it; ++e) runnable = !shares(**it, **e);
    it = runnable ? submit_deferred(it) : std::next(it);
  }
}

void Submitter::submit_now(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value,
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
    b->external_deps.clear();
    for (const auto& f : in_flight_) {
      if (!f->external || complete(*f)) continue;
      bool shares = false;
      for (const auto& buf : b->keep)
        shares = shares || (!buf->stub && f->touched.count(buf.get()));
      if (!shares) continue;
      waits.push_back(f->semaphore), wait_values.push_back(f->value);
      b->external_deps.push_back(f->serial);
    }
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
}

void Submitter::limit_in_flight() {
  if (in_flight_.size() <= kMaxInFlight) return;
  poll();
  while (in_flight_.size() > kMaxInFlight) {
    auto it = in_flight_.begin();
    while (it != in_flight_.end() && ((*it)->external || blocked(**it))) ++it;
    if (it == in_flight_.end()) return;  // all wait for the caller: no host wait
    wait_batch(it);
  }
}

bool Submitter::busy(uint64_t serial) const {
  if (serial >= next_serial_) return true;  // the open batch
  for (const Queue* q : {&in_flight_, &deferred_})
    for (const auto& f : *q)
      if (f->serial == serial) return true;
  return false;
}

bool Submitter::blocked(const Batch& b) const {
  for (uint64_t s : b.external_deps)
    for (const auto& f : in_flight_)
      if (f->serial == s && !complete(*f)) return true;
  return false;
}

void Submitter::add_external(std::unique_ptr<Batch> b) {
  b->touched.clear();
  for (const auto& buf : b->keep) b->touched.insert(buf.get());
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
  if (b->timestamps && b->begun && !lost_) {
    uint64_t ts[2];
    if (vk.vkGetQueryPoolResults(dev, b->timestamps, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
      last_gpu_ns_ =
          static_cast<uint64_t>((ts[1] - ts[0]) * double(device_.caps().timestamp_period_ns));
  }
  if (!b->external) vk.vkResetFences(dev, 1, &b->fence);
  b->touched.clear();
  b->external_deps.clear();
  recycle_(std::move(b));
}

void Submitter::wait_batch(Queue::iterator it) {
  Batch& b = **it;
  VkResult r;
  if (b.external) {
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores = &b.semaphore;
    wi.pValues = &b.value;
    r = device_.vk().vkWaitSemaphores(device_.handle(), &wi, UINT64_MAX);
  } else {
    r = device_.vk().vkWaitForFences(device_.handle(), 1, &b.fence, VK_TRUE, UINT64_MAX);
  }
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_DEVICE_LOST) {
      set_lost("the device was lost (vkWaitForFences)");
      check_alive();
    }
    check_vk(r, "vkWaitForFences");
  }
  std::unique_ptr<Batch> done = std::move(*it);
  in_flight_.erase(it);
  retire(std::move(done));
}

void Submitter::poll() {
  pump();
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (!complete(**it)) {
      ++it;
      continue;
    }
    std::unique_ptr<Batch> done = std::move(*it);
    it = in_flight_.erase(it);
    retire(std::move(done));
  }
}

void Submitter::release_deferred(uint64_t serial) {
  // Held back for the caller's work: wait for that work on the host (the
  // caller has submitted it, as vkattn.h asks before such a wait), then
  // submit. Only batch `serial` (UINT64_MAX: every batch) is waited for;
  // held-back batches it does not depend on stay held.
  auto held = [&] {
    for (const auto& d : deferred_)
      if (serial == UINT64_MAX || d->serial == serial) return true;
    return false;
  };
  while (held()) {
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if ((*it)->external && !complete(**it)) {
        wait_batch(it);
        it = in_flight_.begin();
      } else {
        ++it;
      }
    }
    pump();
  }
}

void Submitter::wait_for(uint64_t serial) {
  release_deferred(serial);
  for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it) {
    if ((*it)->serial != serial) continue;
    wait_batch(it);
    break;
  }
  poll();
}

void Submitter::wait_all() {
  release_deferred(UINT64_MAX);
  while (!in_flight_.empty()) wait_batch(in_flight_.begin());
}

void Submitter::drain(bool external_open) {
  try {
    poll();  // submits what no longer waits for the caller; the rest is dropped
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if ((*it)->external || blocked(**it)) {
        ++it;
        continue;
      }
      wait_batch(it);
      it = in_flight_.begin();
    }
  } catch (...) {
  }
  if (!in_flight_.empty() || external_open || lost_)
    device_.vk().vkDeviceWaitIdle(device_.handle());
}

}  // namespace vkattn

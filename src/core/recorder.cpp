#include "core/recorder.h"

#include <algorithm>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"

namespace vkattn {

namespace {
constexpr uint64_t kChunkSize = 4ull << 20;  // ring chunk
constexpr uint32_t kSetsPerPool = 256;
constexpr size_t kMaxInFlight = 8;

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

Recorder::Recorder(Device& device, bool profile)
    : device_(device), profile_(profile && device.caps().timestamp_period_ns > 0) {
  lose_at_submission_ = env_u64("VKATTN_FAULT_DEVICE_LOST", 0);
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = device.queue_family();
  // Recording allocates from the pool's allocator, and Vulkan reports its
  // failures only at vkEndCommandBuffer: not an injection point.
  check_vk(device.vk().vkCreateCommandPool(device.handle(), &ci, vk_allocator_uncounted(), &pool_),
           "vkCreateCommandPool");
}

void Recorder::drain() {
  try {
    if (!external()) flush();
    while (!in_flight_.empty() && (!in_flight_.front()->external || complete(*in_flight_.front())))
      wait_oldest();
  } catch (...) {
  }
  if (!in_flight_.empty() || external() || lost_) device_.vk().vkDeviceWaitIdle(device_.handle());
}

Recorder::~Recorder() {
  drain();
  for (auto& b : in_flight_) {
    if (b->external) b->cmd = VK_NULL_HANDLE;  // the caller's
    destroy_batch(*b);
  }
  if (open_ && open_->external) open_->cmd = VK_NULL_HANDLE;
  for (auto& b : spare_) destroy_batch(*b);
  if (open_) destroy_batch(*open_);
  const VolkDeviceTable& vk = device_.vk();
  for (auto p : spare_pools_) vk.vkDestroyDescriptorPool(device_.handle(), p, vk_allocator());
  vk.vkDestroyCommandPool(device_.handle(), pool_, vk_allocator_uncounted());
}

void Recorder::destroy_batch(Batch& b) {
  const VolkDeviceTable& vk = device_.vk();
  VkDevice dev = device_.handle();
  for (auto p : b.pools) vk.vkDestroyDescriptorPool(dev, p, vk_allocator());
  b.pools.clear();
  if (b.fence) vk.vkDestroyFence(dev, b.fence, vk_allocator());
  b.fence = VK_NULL_HANDLE;
  if (b.timestamps) vk.vkDestroyQueryPool(dev, b.timestamps, vk_allocator());
  b.timestamps = VK_NULL_HANDLE;
  if (b.cmd) vk.vkFreeCommandBuffers(dev, pool_, 1, &b.cmd);
  b.cmd = VK_NULL_HANDLE;
}

void Recorder::check_alive() const {
  if (lost_) fail(VKATTN_ERROR_DEVICE_LOST, lost_why_, "; the context can only be destroyed");
}

void Recorder::set_lost(const std::string& why) {
  lost_ = true;
  lost_why_ = why;
}

std::unique_ptr<Recorder::Batch> Recorder::take_batch() {
  std::unique_ptr<Batch> b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
  } else {
    b = std::make_unique<Batch>();
    const VolkDeviceTable& vk = device_.vk();
    try {
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.commandPool = pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      check_vk(vk.vkAllocateCommandBuffers(device_.handle(), &ai, &b->cmd),
               "vkAllocateCommandBuffers");
      VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      check_vk(vk.vkCreateFence(device_.handle(), &fi, vk_allocator(), &b->fence), "vkCreateFence");
      if (profile_) {
        VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qi.queryCount = 2;
        check_vk(vk.vkCreateQueryPool(device_.handle(), &qi, vk_allocator(), &b->timestamps),
                 "vkCreateQueryPool");
      }
    } catch (...) {
      destroy_batch(*b);
      throw;
    }
  }
  b->serial = next_serial_;
  return b;
}

VkCommandBuffer Recorder::cmd() {
  check_alive();
  // A batch whose submission failed goes first, ahead of anything new.
  if (open_ && open_->ended) submit_open();
  if (!open_) {
    poll();
    open_ = take_batch();
  }
  if (!open_->begun) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check_vk(device_.vk().vkBeginCommandBuffer(open_->cmd, &bi), "vkBeginCommandBuffer");
    open_->begun = true;
    needs_barrier_ = submitted_any_;
    if (open_->timestamps) {
      device_.vk().vkCmdResetQueryPool(open_->cmd, open_->timestamps, 0, 2);
      device_.vk().vkCmdWriteTimestamp(open_->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                       open_->timestamps, 0);
    }
  }
  return open_->cmd;
}

void Recorder::use(const std::shared_ptr<Buffer>& b) {
  if (!b) return;
  cmd();
  open_->keep.push_back(b);
  b->last_use = open_->serial;
}

void Recorder::full_barrier(VkCommandBuffer c) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_UNIFORM_READ_BIT;
  device_.vk().vkCmdPipelineBarrier(
      c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr,
      0, nullptr);
}

void Recorder::barrier() {
  VkCommandBuffer c = cmd();
  // In a caller's command buffer every command is fenced off: the caller's
  // own commands may sit anywhere between vkattn's.
  if (needs_barrier_ || open_->external) full_barrier(c);
  // The command that follows writes something the next one may read.
  needs_barrier_ = true;
}

void Recorder::after_command() {
  if (external()) full_barrier(open_->cmd);
}

void Recorder::copy_buffer(const Buffer& src, const Buffer& dst, const VkBufferCopy* regions,
                           size_t count) {
  if (count == 0) return;
  barrier();
  // Regions that continue each other become one; at most kCopyRegions per
  // command (the validation layer checks region pairs for overlap, and a
  // page-per-region copy of a long sequence can hold tens of thousands).
  // A fixed array: nothing here may allocate (and so fail).
  VkBufferCopy merged[kCopyRegions];
  uint32_t n = 0;
  auto flush = [&] {
    if (n) device_.vk().vkCmdCopyBuffer(open_->cmd, src.handle(), dst.handle(), n, merged);
    n = 0;
  };
  for (size_t i = 0; i < count; ++i) {
    const VkBufferCopy& r = regions[i];
    if (r.size == 0) continue;
    if (n) {
      VkBufferCopy& last = merged[n - 1];
      if (last.srcOffset + last.size == r.srcOffset && last.dstOffset + last.size == r.dstOffset) {
        last.size += r.size;
        continue;
      }
      if (n == kCopyRegions) flush();
    }
    merged[n++] = r;
  }
  flush();
  after_command();
}

HostSlice Recorder::alloc_host(uint64_t size) {
  cmd();
  const DeviceCaps& caps = device_.caps();
  uint64_t align =
      std::max<uint64_t>({caps.min_storage_offset_alignment, caps.min_texel_offset_alignment, 64});
  size = std::max<uint64_t>(size, 4);
  Batch& b = *open_;
  uint64_t off = align_up(b.chunk_offset, align);
  if (b.chunks.empty() || off + size > b.chunks.back()->size()) {
    std::unique_ptr<Buffer> chunk;
    if (size <= kChunkSize && !spare_chunks_.empty()) {
      chunk = std::move(spare_chunks_.back());
      spare_chunks_.pop_back();
    } else {
      chunk = std::make_unique<Buffer>(device_, std::max(size, kChunkSize), true);
    }
    b.chunks.push_back(std::move(chunk));
    off = 0;
  }
  Buffer* chunk = b.chunks.back().get();
  b.chunk_offset = off + size;
  return HostSlice{chunk, off, chunk->mapped() + off, size};
}

VkDescriptorPool Recorder::new_pool() {
  if (!spare_pools_.empty()) {
    VkDescriptorPool p = spare_pools_.back();
    spare_pools_.pop_back();
    return p;
  }
  VkDescriptorPoolSize sizes[] = {
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8},
      {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kSetsPerPool * 8},
      {VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, kSetsPerPool * 4},
      {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kSetsPerPool * 2},
  };
  VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  ci.maxSets = kSetsPerPool;
  ci.poolSizeCount = sizeof(sizes) / sizeof(sizes[0]);
  ci.pPoolSizes = sizes;
  VkDescriptorPool p;
  check_vk(device_.vk().vkCreateDescriptorPool(device_.handle(), &ci, vk_allocator(), &p),
           "vkCreateDescriptorPool");
  return p;
}

VkDescriptorSet Recorder::descriptor_set(VkDescriptorSetLayout layout) {
  cmd();
  Batch& b = *open_;
  for (;;) {
    if (b.pool_used == 0 || b.pool_used > b.pools.size()) {
      if (b.pools.empty()) {
        b.pools.reserve(4);
        b.pools.push_back(new_pool());
      }
      b.pool_used = 1;
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = b.pools[b.pool_used - 1];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult r = device_.vk().vkAllocateDescriptorSets(device_.handle(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      check_vk(r, "vkAllocateDescriptorSets");
    if (b.pool_used == b.pools.size()) {
      b.pools.reserve(b.pools.size() + 1);  // a failed push_back must not leak the pool
      b.pools.push_back(new_pool());
    }
    ++b.pool_used;
  }
}

void Recorder::flush() {
  check_alive();
  if (external())
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "the context records into a caller's command buffer (vkattn_context_begin_external): "
         "nothing can be submitted or waited for until vkattn_context_end_external");
  if (!open_ || !open_->begun) return;
  if (!open_->ended) flush_end();
  submit_open();
}

void Recorder::flush_end() {
  Batch& b = *open_;
  {
    const VolkDeviceTable& vk = device_.vk();
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk.vkCmdPipelineBarrier(b.cmd,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    if (b.timestamps)
      vk.vkCmdWriteTimestamp(b.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b.timestamps, 1);
    VkResult r = vk.vkEndCommandBuffer(b.cmd);
    if (r != VK_SUCCESS) {
      // The recorded commands are gone: nothing recorded since the last
      // submission can be trusted to run, so the context is unusable.
      set_lost("vkEndCommandBuffer failed (VkResult " + std::to_string(r) +
               "): work recorded since the last submission was lost");
      check_alive();
    }
    b.ended = true;
  }
}

void Recorder::submit_open(VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
                           uint64_t signal_value) {
  Batch& b = *open_;
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
    si.pCommandBuffers = &b.cmd;
    NoFaultScope scope(NoFaultScope::kSubmit);
    r = device_.vk().vkQueueSubmit(device_.queue(), 1, &si, b.fence);
  }
  if (r == VK_ERROR_DEVICE_LOST) {
    set_lost(lose_at_submission_ == submissions_
                 ? "the device was lost (injected at submission " + std::to_string(submissions_) +
                       " by VKATTN_FAULT_DEVICE_LOST)"
                 : std::string("the device was lost (vkQueueSubmit)"));
    retire(b);
    spare_.push_back(std::move(open_));
    check_alive();
  }
  // Any other failure (out of memory): the batch stays pending, whole, and
  // is submitted first by the next flush or op.
  check_vk(r, "vkQueueSubmit");
  submitted_any_ = true;
  in_flight_.push_back(std::move(open_));
  ++next_serial_;
  if (in_flight_.size() > kMaxInFlight) wait_oldest();
}

void Recorder::retire(Batch& b) {
  const VolkDeviceTable& vk = device_.vk();
  VkDevice dev = device_.handle();
  completed_serial_ = std::max(completed_serial_, b.serial);
  if (b.timestamps && b.begun && !lost_) {
    uint64_t ts[2];
    if (vk.vkGetQueryPoolResults(dev, b.timestamps, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
      last_gpu_ns_ =
          static_cast<uint64_t>((ts[1] - ts[0]) * double(device_.caps().timestamp_period_ns));
  }
  b.keep.clear();
  for (auto& c : b.chunks)
    if (c->size() == kChunkSize) spare_chunks_.push_back(std::move(c));
  b.chunks.clear();
  b.chunk_offset = 0;
  for (auto p : b.pools) {
    vk.vkResetDescriptorPool(dev, p, 0);
    spare_pools_.push_back(p);
  }
  b.pools.clear();
  b.pool_used = 0;
  if (b.external) return;  // the command buffer is the caller's; no fence
  if (b.begun) vk.vkResetCommandBuffer(b.cmd, 0);
  vk.vkResetFences(dev, 1, &b.fence);
  b.begun = false;
  b.ended = false;
}

bool Recorder::complete(const Batch& b) {
  if (!b.external) return device_.vk().vkGetFenceStatus(device_.handle(), b.fence) == VK_SUCCESS;
  uint64_t v = 0;
  return device_.vk().vkGetSemaphoreCounterValue(device_.handle(), b.semaphore, &v) == VK_SUCCESS &&
         v >= b.value;
}

void Recorder::release_external(std::unique_ptr<Batch> b) {
  b->cmd = VK_NULL_HANDLE;  // the caller's
  destroy_batch(*b);
}

void Recorder::wait_oldest() {
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
  retire(*b);
  if (b->external)
    release_external(std::move(b));
  else
    spare_.push_back(std::move(b));
}

void Recorder::poll() {
  while (!in_flight_.empty() && complete(*in_flight_.front())) wait_oldest();
}

void Recorder::flush_with(VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
                          uint64_t signal_value) {
  check_alive();
  if (external())
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "the context records into a caller's command buffer (vkattn_context_begin_external)");
  cmd();  // the open batch, empty or not: the semaphores need a submission
  if (!open_->ended) flush_end();
  submit_open(wait, wait_value, signal, signal_value);
}

void Recorder::begin_external(VkCommandBuffer c) {
  flush();  // vkattn's own pending work first (rejects a second begin)
  if (open_) spare_.push_back(std::move(open_));  // taken but never begun
  auto b = std::make_unique<Batch>();
  b->serial = next_serial_;
  b->cmd = c;
  b->begun = true;
  b->external = true;
  open_ = std::move(b);
  needs_barrier_ = true;
}

void Recorder::end_external(VkSemaphore semaphore, uint64_t value) {
  if (!external()) fail(VKATTN_ERROR_INVALID_ARGUMENT, "the context is not in external mode");
  open_->semaphore = semaphore;
  open_->value = value;
  in_flight_.push_back(std::move(open_));
  submitted_any_ = true;
  ++next_serial_;
}

void Recorder::wait_for(uint64_t serial) {
  check_alive();
  if (!busy(serial)) return;
  if (open_ && open_->serial <= serial) {
    if (open_->begun) {
      flush();
    } else {
      return;  // nothing was recorded in the open batch
    }
  }
  while (!in_flight_.empty() && in_flight_.front()->serial <= serial) wait_oldest();
  completed_serial_ = std::max(completed_serial_, std::min(serial, next_serial_ - 1));
}

void Recorder::synchronize() {
  flush();
  while (!in_flight_.empty()) wait_oldest();
  completed_serial_ = next_serial_ - 1;
}

}  // namespace vkattn

#include "core/recorder.h"

#include <algorithm>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "core/faults.h"

namespace vkattn {

namespace {
constexpr uint64_t kChunkSize = 4ull << 20;        // ring chunk
constexpr uint64_t kDeviceChunkSize = 1ull << 20;  // device ring chunk
constexpr uint32_t kSetsPerPool = 256;

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

Recorder::Recorder(Device& device, bool profile, bool inject_faults)
    : device_(device),
      profile_(profile && device.caps().timestamp_period_ns > 0),
      submitter_(
          device, [this](std::unique_ptr<Batch> b) { recycle(std::move(b)); }, inject_faults) {
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
  } catch (...) {
  }
  submitter_.drain(external());
}

Recorder::~Recorder() {
  drain();
  for (auto& b : submitter_.release_all()) {
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

std::unique_ptr<Batch> Recorder::take_batch() {
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
  b->serial = submitter_.next_serial();
  return b;
}

VkCommandBuffer Recorder::cmd() {
  check_alive();
  // A batch whose submission failed goes first, ahead of anything new.
  if (open_ && open_->ended) submit_open();
  if (!open_) {
    submitter_.poll();
    open_ = take_batch();
  }
  if (!open_->begun) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check_vk(device_.vk().vkBeginCommandBuffer(open_->cmd, &bi), "vkBeginCommandBuffer");
    open_->begun = true;
    needs_barrier_ = submitter_.submitted_any();
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

Recorder::Carved Recorder::carve(std::vector<std::unique_ptr<Buffer>>& chunks, uint64_t& fill,
                                 std::vector<std::unique_ptr<Buffer>>& spares, uint64_t chunk_size,
                                 bool host_visible, uint64_t size) {
  const DeviceCaps& caps = device_.caps();
  const uint64_t align =
      std::max<uint64_t>({caps.min_storage_offset_alignment, caps.min_texel_offset_alignment, 64});
  size = std::max<uint64_t>(size, 4);
  uint64_t off = align_up(fill, align);
  if (chunks.empty() || off + size > chunks.back()->size()) {
    std::unique_ptr<Buffer> chunk;
    if (size <= chunk_size && !spares.empty()) {
      chunk = std::move(spares.back());
      spares.pop_back();
    } else {
      // Ring chunks are metadata: never charged to VKATTN_DEVICE_MEMORY_LIMIT.
      chunk = std::make_unique<Buffer>(device_, std::max(size, chunk_size), host_visible, false);
    }
    chunks.push_back(std::move(chunk));
    off = 0;
  }
  fill = off + size;
  return {chunks.back().get(), off, size};
}

HostSlice Recorder::alloc_host(uint64_t size) {
  cmd();
  Batch& b = *open_;
  const Carved c = carve(b.chunks, b.chunk_offset, spare_chunks_, kChunkSize, true, size);
  return HostSlice{c.chunk, c.offset, c.chunk->mapped() + c.offset, c.size};
}

DeviceSlice Recorder::alloc_device(uint64_t size) {
  cmd();
  Batch& b = *open_;
  const Carved c = carve(b.device_chunks, b.device_chunk_offset, spare_device_chunks_,
                         kDeviceChunkSize, false, size);
  return DeviceSlice{c.chunk, c.offset, c.size};
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

void Recorder::reject_external() const {
  if (external())
    fail(VKATTN_ERROR_INVALID_ARGUMENT,
         "the context records into a caller's command buffer (vkattn_context_begin_external): "
         "nothing can be submitted or waited for until vkattn_context_end_external");
}

void Recorder::flush() {
  check_alive();
  reject_external();
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
      submitter_.set_lost("vkEndCommandBuffer failed (VkResult " + std::to_string(r) +
                          "): work recorded since the last submission was lost");
      check_alive();
    }
    b.ended = true;
  }
}

void Recorder::submit_open(VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
                           uint64_t signal_value) {
  submitter_.submit(open_, wait, wait_value, signal, signal_value);
}

void Recorder::recycle(std::unique_ptr<Batch> b) {
  const VolkDeviceTable& vk = device_.vk();
  VkDevice dev = device_.handle();
  b->keep.clear();
  // Both rings' chunks of the standard size become spares.
  auto keep = [](std::vector<std::unique_ptr<Buffer>>& chunks, uint64_t& fill,
                 std::vector<std::unique_ptr<Buffer>>& spares, uint64_t chunk_size) {
    for (auto& c : chunks)
      if (c->size() == chunk_size) spares.push_back(std::move(c));
    chunks.clear();
    fill = 0;
  };
  keep(b->chunks, b->chunk_offset, spare_chunks_, kChunkSize);
  keep(b->device_chunks, b->device_chunk_offset, spare_device_chunks_, kDeviceChunkSize);
  for (auto p : b->pools) {
    vk.vkResetDescriptorPool(dev, p, 0);
    spare_pools_.push_back(p);
  }
  b->pools.clear();
  b->pool_used = 0;
  if (b->external) {  // the command buffer is the caller's; nothing else to keep
    b->cmd = VK_NULL_HANDLE;
    destroy_batch(*b);
    return;
  }
  if (b->begun) vk.vkResetCommandBuffer(b->cmd, 0);
  b->begun = false;
  b->ended = false;
  spare_.push_back(std::move(b));
}

void Recorder::flush_with(VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
                          uint64_t signal_value) {
  check_alive();
  reject_external();
  cmd();  // the open batch, empty or not: the semaphores need a submission
  if (!open_->ended) flush_end();
  submit_open(wait, wait_value, signal, signal_value);
}

void Recorder::begin_external(VkCommandBuffer c) {
  flush();  // vkattn's own pending work first (rejects a second begin)
  if (open_) spare_.push_back(std::move(open_));  // taken but never begun
  auto b = std::make_unique<Batch>();
  b->serial = submitter_.next_serial();
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
  submitter_.add_external(std::move(open_));
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
  submitter_.wait_for(serial);
}

void Recorder::synchronize() {
  flush();
  submitter_.wait_all();
}

}  // namespace vkattn

#include "core/recorder.h"

#include <algorithm>

#include "core/device.h"
#include "core/error.h"

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
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = device.queue_family();
  check_vk(vkCreateCommandPool(device.handle(), &ci, nullptr, &pool_), "vkCreateCommandPool");
}

Recorder::~Recorder() {
  try {
    synchronize();
  } catch (...) {
    vkDeviceWaitIdle(device_.handle());
  }
  VkDevice dev = device_.handle();
  auto destroy = [&](Batch& b) {
    for (auto p : b.pools) vkDestroyDescriptorPool(dev, p, nullptr);
    if (b.fence) vkDestroyFence(dev, b.fence, nullptr);
    if (b.timestamps) vkDestroyQueryPool(dev, b.timestamps, nullptr);
  };
  for (auto& b : in_flight_) destroy(*b);
  for (auto& b : spare_) destroy(*b);
  if (open_) destroy(*open_);
  for (auto p : spare_pools_) vkDestroyDescriptorPool(dev, p, nullptr);
  vkDestroyCommandPool(dev, pool_, nullptr);
}

std::unique_ptr<Recorder::Batch> Recorder::take_batch() {
  std::unique_ptr<Batch> b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
  } else {
    b = std::make_unique<Batch>();
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check_vk(vkAllocateCommandBuffers(device_.handle(), &ai, &b->cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check_vk(vkCreateFence(device_.handle(), &fi, nullptr, &b->fence), "vkCreateFence");
    if (profile_) {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 2;
      check_vk(vkCreateQueryPool(device_.handle(), &qi, nullptr, &b->timestamps),
               "vkCreateQueryPool");
    }
  }
  b->serial = next_serial_;
  return b;
}

VkCommandBuffer Recorder::cmd() {
  if (!open_) {
    poll();
    open_ = take_batch();
  }
  if (!open_->begun) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check_vk(vkBeginCommandBuffer(open_->cmd, &bi), "vkBeginCommandBuffer");
    open_->begun = true;
    needs_barrier_ = submitted_any_;
    if (open_->timestamps) {
      vkCmdResetQueryPool(open_->cmd, open_->timestamps, 0, 2);
      vkCmdWriteTimestamp(open_->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, open_->timestamps, 0);
    }
  }
  return open_->cmd;
}

void Recorder::use(const std::shared_ptr<Buffer>& b) {
  if (!b) return;
  cmd();
  b->last_use = open_->serial;
  open_->keep.push_back(b);
}

void Recorder::keep(std::shared_ptr<void> object) {
  cmd();
  open_->keep.push_back(std::move(object));
}

void Recorder::barrier() {
  VkCommandBuffer c = cmd();
  if (needs_barrier_) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                       VK_ACCESS_UNIFORM_READ_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                         1, &mb, 0, nullptr, 0, nullptr);
  }
  // The command that follows writes something the next one may read.
  needs_barrier_ = true;
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
  check_vk(vkCreateDescriptorPool(device_.handle(), &ci, nullptr, &p), "vkCreateDescriptorPool");
  return p;
}

VkDescriptorSet Recorder::descriptor_set(VkDescriptorSetLayout layout) {
  cmd();
  Batch& b = *open_;
  for (;;) {
    if (b.pool_used == 0 || b.pool_used > b.pools.size()) {
      if (b.pools.empty()) b.pools.push_back(new_pool());
      b.pool_used = 1;
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = b.pools[b.pool_used - 1];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult r = vkAllocateDescriptorSets(device_.handle(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      check_vk(r, "vkAllocateDescriptorSets");
    if (b.pool_used == b.pools.size()) b.pools.push_back(new_pool());
    ++b.pool_used;
  }
}

void Recorder::flush() {
  if (!open_ || !open_->begun) return;
  Batch& b = *open_;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  if (b.timestamps)
    vkCmdWriteTimestamp(b.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b.timestamps, 1);
  check_vk(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  VkResult r = vkQueueSubmit(device_.queue(), 1, &si, b.fence);
  if (r != VK_SUCCESS) {
    // The batch never ran: release it so nothing waits for it forever.
    retire(b);
    spare_.push_back(std::move(open_));
    ++next_serial_;
    check_vk(r, "vkQueueSubmit");
  }
  submitted_any_ = true;
  in_flight_.push_back(std::move(open_));
  ++next_serial_;
  if (in_flight_.size() > kMaxInFlight) wait_oldest();
}

void Recorder::retire(Batch& b) {
  VkDevice dev = device_.handle();
  completed_serial_ = std::max(completed_serial_, b.serial);
  if (b.timestamps && b.begun) {
    uint64_t ts[2];
    if (vkGetQueryPoolResults(dev, b.timestamps, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
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
    vkResetDescriptorPool(dev, p, 0);
    spare_pools_.push_back(p);
  }
  b.pools.clear();
  b.pool_used = 0;
  if (b.begun) vkResetCommandBuffer(b.cmd, 0);
  vkResetFences(dev, 1, &b.fence);
  b.begun = false;
}

void Recorder::wait_oldest() {
  auto b = std::move(in_flight_.front());
  in_flight_.pop_front();
  VkResult r = vkWaitForFences(device_.handle(), 1, &b->fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) {
    in_flight_.push_front(std::move(b));
    check_vk(r, "vkWaitForFences");
  }
  retire(*b);
  spare_.push_back(std::move(b));
}

void Recorder::poll() {
  while (!in_flight_.empty() &&
         vkGetFenceStatus(device_.handle(), in_flight_.front()->fence) == VK_SUCCESS)
    wait_oldest();
}

void Recorder::wait_for(uint64_t serial) {
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

// The engine of the interop tests: a Vulkan instance (validation layer
// on, a messenger of its own that counts messages), a device with or
// without timeline semaphores, and the engine's own buffers, semaphores,
// command buffers and compute kernel (tests/shaders/engine_scale.comp),
// all made with volk. Shared by test_external_device.cpp and
// test_engine_edges.cpp.
#pragma once

#include <volk.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "test_util.h"

namespace vkattn_test {

inline uint32_t g_messages = 0;

inline VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                 VkDebugUtilsMessageTypeFlagsEXT,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                 void*) {
  const char* msg = data && data->pMessage ? data->pMessage : "";
  if (data && data->messageIdNumber == 0 && std::strncmp(msg, "VK_ERROR_", 9) == 0) return VK_FALSE;
  ++g_messages;
  std::fprintf(stderr, "test validation: %s\n", msg);
  return VK_FALSE;
}

#define VK_OK(x) ASSERT_EQ((x), VK_SUCCESS) << #x

// The engine: instance, device (with or without timeline semaphores), queue.
class Engine : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(volkInitialize(), VK_SUCCESS);
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_2;
    const char* layer = "VK_LAYER_KHRONOS_validation";
    const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mci.pfnUserCallback = &on_message;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pNext = &mci;
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &ext;
    VK_OK(vkCreateInstance(&ci, nullptr, &instance));
    volkLoadInstanceOnly(instance);
    VK_OK(vkCreateDebugUtilsMessengerEXT(instance, &mci, nullptr, &messenger));
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, &physical);
    ASSERT_TRUE(r == VK_SUCCESS || r == VK_INCOMPLETE);
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> fams(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, fams.data());
    for (family = 0; family < nf; ++family)
      if (fams[family].queueFlags & VK_QUEUE_COMPUTE_BIT) break;
    ASSERT_LT(family, nf);
    device = make_device(true, &table);
    table.vkGetDeviceQueue(device, family, 0, &queue);
    g_messages = 0;
  }
  void TearDown() override {
    if (device) {
      table.vkDeviceWaitIdle(device);
      if (scale_pipeline) table.vkDestroyPipeline(device, scale_pipeline, nullptr);
      if (scale_layout) table.vkDestroyPipelineLayout(device, scale_layout, nullptr);
      if (scale_set_layout) table.vkDestroyDescriptorSetLayout(device, scale_set_layout, nullptr);
      if (scale_module) table.vkDestroyShaderModule(device, scale_module, nullptr);
      if (descriptor_pool) table.vkDestroyDescriptorPool(device, descriptor_pool, nullptr);
      for (VkBuffer b : buffers) table.vkDestroyBuffer(device, b, nullptr);
      for (VkDeviceMemory m : memories) table.vkFreeMemory(device, m, nullptr);
      if (pool) table.vkDestroyCommandPool(device, pool, nullptr);
      for (VkSemaphore s : semaphores) table.vkDestroySemaphore(device, s, nullptr);
      table.vkDestroyDevice(device, nullptr);
    }
    if (messenger) vkDestroyDebugUtilsMessengerEXT(instance, messenger, nullptr);
    if (instance) vkDestroyInstance(instance, nullptr);
    EXPECT_EQ(g_messages, 0u);
  }

  VkDevice make_device(bool timeline, VolkDeviceTable* t) {
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
    f12.timelineSemaphore = timeline ? VK_TRUE : VK_FALSE;
    features.pNext = &f12;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &q;
    VkDevice d = VK_NULL_HANDLE;
    EXPECT_EQ(vkCreateDevice(physical, &dci, nullptr, &d), VK_SUCCESS);
    volkLoadDeviceTable(t, d);
    return d;
  }

  vkattn_vulkan_desc desc_for(VkDevice d, VkQueue q) {
    vkattn_vulkan_desc v;
    vkattn_vulkan_desc_init(&v);
    v.instance = instance;
    v.physical_device = physical;
    v.device = d;
    v.queue = q;
    v.queue_family_index = family;
    v.api_version = VK_API_VERSION_1_2;
    v.get_instance_proc_addr = reinterpret_cast<void*>(vkGetInstanceProcAddr);
    v.enabled_features = &features;
    return v;
  }

  // A buffer with its own memory (host-visible where `host`).
  VkBuffer buffer(VkDeviceSize size, VkBufferUsageFlags usage, bool host, void** mapped) {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = size;
    bci.usage = usage;
    VkBuffer b = VK_NULL_HANDLE;
    EXPECT_EQ(table.vkCreateBuffer(device, &bci, nullptr, &b), VK_SUCCESS);
    VkMemoryRequirements req;
    table.vkGetBufferMemoryRequirements(device, b, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(physical, &mp);
    const VkMemoryPropertyFlags want =
        host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
             : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = 0;
    while (type < mp.memoryTypeCount && (!(req.memoryTypeBits & (1u << type)) ||
                                         (mp.memoryTypes[type].propertyFlags & want) != want))
      ++type;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    VkDeviceMemory m = VK_NULL_HANDLE;
    EXPECT_EQ(table.vkAllocateMemory(device, &mai, nullptr, &m), VK_SUCCESS);
    EXPECT_EQ(table.vkBindBufferMemory(device, b, m, 0), VK_SUCCESS);
    if (mapped) EXPECT_EQ(table.vkMapMemory(device, m, 0, VK_WHOLE_SIZE, 0, mapped), VK_SUCCESS);
    buffers.push_back(b);
    memories.push_back(m);
    return b;
  }

  VkSemaphore timeline_semaphore() {
    VkSemaphoreTypeCreateInfo ti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    si.pNext = &ti;
    VkSemaphore s = VK_NULL_HANDLE;
    EXPECT_EQ(table.vkCreateSemaphore(device, &si, nullptr, &s), VK_SUCCESS);
    semaphores.push_back(s);
    return s;
  }

  VkCommandBuffer begin_commands() {
    if (!pool) {
      VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
      pci.queueFamilyIndex = family;
      EXPECT_EQ(table.vkCreateCommandPool(device, &pci, nullptr, &pool), VK_SUCCESS);
    }
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer c = VK_NULL_HANDLE;
    EXPECT_EQ(table.vkAllocateCommandBuffers(device, &ai, &c), VK_SUCCESS);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    EXPECT_EQ(table.vkBeginCommandBuffer(c, &bi), VK_SUCCESS);
    return c;
  }

  void submit(VkCommandBuffer c, VkSemaphore signal, uint64_t value) {
    VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &value;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.pNext = &ti;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &c;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &signal;
    EXPECT_EQ(table.vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
  }

  void wait(VkSemaphore s, uint64_t value) {
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores = &s;
    wi.pValues = &value;
    EXPECT_EQ(table.vkWaitSemaphores(device, &wi, UINT64_MAX), VK_SUCCESS);
  }

  // The engine's own kernel (tests/shaders/engine_scale.comp): x *= factor
  // over a buffer, recorded with the engine's own pipeline and descriptors.
  void record_scale(VkCommandBuffer c, VkBuffer buf, uint32_t n, float factor) {
    if (!scale_pipeline) {
      std::ifstream f(ENGINE_SCALE_SPV, std::ios::binary);
      std::vector<char> code((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      ASSERT_FALSE(code.empty()) << ENGINE_SCALE_SPV;
      VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
      mi.codeSize = code.size();
      mi.pCode = reinterpret_cast<const uint32_t*>(code.data());
      VK_OK(table.vkCreateShaderModule(device, &mi, nullptr, &scale_module));
      VkDescriptorSetLayoutBinding b{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                     VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
      VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
      li.bindingCount = 1;
      li.pBindings = &b;
      VK_OK(table.vkCreateDescriptorSetLayout(device, &li, nullptr, &scale_set_layout));
      VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 8};
      VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
      pli.setLayoutCount = 1;
      pli.pSetLayouts = &scale_set_layout;
      pli.pushConstantRangeCount = 1;
      pli.pPushConstantRanges = &pr;
      VK_OK(table.vkCreatePipelineLayout(device, &pli, nullptr, &scale_layout));
      VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
      ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
      ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
      ci.stage.module = scale_module;
      ci.stage.pName = "main";
      ci.layout = scale_layout;
      VK_OK(
          table.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &ci, nullptr, &scale_pipeline));
      VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8};
      VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      dpi.maxSets = 8;
      dpi.poolSizeCount = 1;
      dpi.pPoolSizes = &ps;
      VK_OK(table.vkCreateDescriptorPool(device, &dpi, nullptr, &descriptor_pool));
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = descriptor_pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &scale_set_layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VK_OK(table.vkAllocateDescriptorSets(device, &ai, &set));
    VkDescriptorBufferInfo bi{buf, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &bi;
    table.vkUpdateDescriptorSets(device, 1, &w, 0, nullptr);
    table.vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, scale_pipeline);
    table.vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, scale_layout, 0, 1, &set, 0,
                                  nullptr);
    struct {
      uint32_t n;
      float factor;
    } push{n, factor};
    table.vkCmdPushConstants(c, scale_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, &push);
    table.vkCmdDispatch(c, (n + 63) / 64, 1, 1);
  }

  // The engine's own barrier between its transfers and its dispatches.
  void engine_barrier(VkCommandBuffer c) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                       VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    table.vkCmdPipelineBarrier(
        c, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
        VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
        nullptr, 0, nullptr);
  }

  VkShaderModule scale_module = VK_NULL_HANDLE;
  VkDescriptorSetLayout scale_set_layout = VK_NULL_HANDLE;
  VkPipelineLayout scale_layout = VK_NULL_HANDLE;
  VkPipeline scale_pipeline = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;

  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VolkDeviceTable table{};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkCommandPool pool = VK_NULL_HANDLE;
  std::vector<VkBuffer> buffers;
  std::vector<VkDeviceMemory> memories;
  std::vector<VkSemaphore> semaphores;
};

inline constexpr uint32_t kUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;

}  // namespace vkattn_test

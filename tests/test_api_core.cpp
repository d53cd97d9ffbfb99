// Errors, version, devices, contexts and tensors (API.md "Errors, version,
// devices" and "Context and tensors").
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "test_util.h"

using namespace vkattn_test;

TEST(Status, StringsAndVersion) {
  EXPECT_STREQ(vkattn_status_string(VKATTN_SUCCESS), "success");
  EXPECT_STREQ(vkattn_status_string(VKATTN_ERROR_CACHE_FULL), "kv cache full");
  EXPECT_STREQ(vkattn_status_string(static_cast<vkattn_status>(12345)), "unknown status");
  EXPECT_EQ(vkattn_version(),
            VKATTN_VERSION_MAJOR * 10000u + VKATTN_VERSION_MINOR * 100u + VKATTN_VERSION_PATCH);
  // Explicit values are part of the ABI.
  EXPECT_EQ(VKATTN_ERROR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(VKATTN_ERROR_INTERNAL, 8);
}

TEST(Status, LastErrorIsThreadLocal) {
  EXPECT_INVALID(vkattn_device_count(nullptr), "out is NULL");
  std::string other;
  std::thread t([&] {
    other = vkattn_last_error();  // nothing failed on this thread yet
    vkattn_tensor_write(nullptr, nullptr, 0);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(vkattn_last_error()).find("vkattn_device_count"), std::string::npos);
}

TEST(Devices, EnumerateWithoutContext) {
  uint32_t n = 0;
  ASSERT_EQ(vkattn_device_count(&n), VKATTN_SUCCESS);
  ASSERT_GE(n, 1u) << "tests need a Vulkan device (lavapipe: mesa-vulkan-drivers)";
  for (uint32_t i = 0; i < n; ++i) {
    vkattn_device_info info;
    vkattn_device_info_init(&info);
    ASSERT_EQ(vkattn_device_get_info(i, &info), VKATTN_SUCCESS) << vkattn_last_error();
    EXPECT_EQ(info.struct_size, sizeof(info));
    EXPECT_GT(std::strlen(info.name), 0u);
    EXPECT_GE(info.api_version, (1u << 22) | (2u << 12));
    EXPECT_GT(info.max_shared_memory, 0u);
    EXPECT_GT(info.max_buffer_range, 0u);
  }
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  EXPECT_INVALID(vkattn_device_get_info(n, &info), "out of range");
  EXPECT_INVALID(vkattn_device_get_info(0, nullptr), "NULL");
}

TEST(Context, DescriptorRules) {
  vkattn_context_desc d;
  std::memset(&d, 0, sizeof(d));
  vkattn_context* ctx = reinterpret_cast<vkattn_context*>(0x1);
  EXPECT_INVALID(vkattn_context_create(&d, &ctx), "struct_size");
  EXPECT_EQ(ctx, reinterpret_cast<vkattn_context*>(0x1)) << "output touched on failure";
  vkattn_context_desc_init(&d);
  EXPECT_EQ(d.device_index, -1);
  d.flags = 0x80;
  EXPECT_INVALID(vkattn_context_create(&d, &ctx), "unknown flags");
  vkattn_context_desc_init(&d);
  d.device_index = 1000;
  EXPECT_INVALID(vkattn_context_create(&d, &ctx), "out of range");
  vkattn_context_desc_init(&d);
  d.device_index = -2;
  EXPECT_INVALID(vkattn_context_create(&d, &ctx), "device_index");
  vkattn_context_desc_init(&d);
  d.reserved = 1;
  EXPECT_INVALID(vkattn_context_create(&d, &ctx), "reserved");
  EXPECT_INVALID(vkattn_context_create(nullptr, nullptr), "out is NULL");
  EXPECT_INVALID(vkattn_context_flush(nullptr), "ctx is NULL");
  EXPECT_INVALID(vkattn_context_synchronize(nullptr), "ctx is NULL");
  uint32_t n;
  EXPECT_INVALID(vkattn_context_validation_messages(nullptr, &n), "ctx is NULL");
  vkattn_context_destroy(nullptr);
  vkattn_tensor_destroy(nullptr);
}

TEST(Context, DefaultsAndDeviceInfo) {
  vkattn_context* ctx = nullptr;
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_device_info a, b;
  vkattn_device_info_init(&a);
  vkattn_device_info_init(&b);
  ASSERT_EQ(vkattn_context_get_device_info(ctx, &a), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_device_get_info(0, &b), VKATTN_SUCCESS);
  EXPECT_GT(a.subgroup_size, 0u);
  uint32_t msgs = 99;
  ASSERT_EQ(vkattn_context_validation_messages(ctx, &msgs), VKATTN_SUCCESS);
  EXPECT_EQ(msgs, 0u);
  EXPECT_EQ(vkattn_context_flush(ctx), VKATTN_SUCCESS);
  EXPECT_EQ(vkattn_context_synchronize(ctx), VKATTN_SUCCESS);
  vkattn_context_destroy(ctx);
}

TEST(Context, EnvDeviceSelection) {
  vkattn_device_info first;
  vkattn_device_info_init(&first);
  ASSERT_EQ(vkattn_device_get_info(0, &first), VKATTN_SUCCESS);
  std::string part(first.name, std::min<size_t>(4, std::strlen(first.name)));
  for (auto& c : part) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const char* old = std::getenv("VKATTN_DEVICE");
  std::string saved = old ? old : "";
  vkattn_context* ctx = nullptr;
  set_env("VKATTN_DEVICE", part.c_str());  // case-insensitive name substring
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS) << vkattn_last_error();
  vkattn_device_info got;
  vkattn_device_info_init(&got);
  vkattn_context_get_device_info(ctx, &got);
  EXPECT_STREQ(got.name, first.name);
  vkattn_context_destroy(ctx);
  set_env("VKATTN_DEVICE", "0");
  ASSERT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_SUCCESS);
  vkattn_context_destroy(ctx);
  set_env("VKATTN_DEVICE", "no such device, surely");
  EXPECT_EQ(vkattn_context_create(nullptr, &ctx), VKATTN_ERROR_NO_DEVICE);
  EXPECT_NE(std::strstr(vkattn_last_error(), "matches no device"), nullptr);
  set_env("VKATTN_DEVICE", "77");
  EXPECT_INVALID(vkattn_context_create(nullptr, &ctx), "out of range");
  if (old)
    set_env("VKATTN_DEVICE", saved.c_str());
  else
    unset_env("VKATTN_DEVICE");
}

// Context and tensors destroyed in every order, with work pending.
TEST(Context, DestroyOrderIsFree) {
  for (int order = 0; order < 3; ++order) {
    vkattn_context* ctx = make_context();
    ASSERT_NE(ctx, nullptr);
    int64_t shape[2] = {3, 5};
    vkattn_tensor *a = nullptr, *b = nullptr;
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F32, 2, shape, &a), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_F16, 2, shape, &b), VKATTN_SUCCESS);
    std::vector<float> x(15, 1.5f);
    ASSERT_EQ(vkattn_tensor_write(a, x.data(), 60), VKATTN_SUCCESS);
    std::vector<uint16_t> h(15, 0x3c00);
    ASSERT_EQ(vkattn_tensor_write(b, h.data(), 30), VKATTN_SUCCESS);
    EXPECT_EQ(validation_messages(ctx), 0u);
    if (order == 0) {
      vkattn_context_destroy(ctx);
      vkattn_tensor_destroy(a);
      // A tensor outliving its context's handle still works.
      std::vector<uint16_t> back(15);
      EXPECT_EQ(vkattn_tensor_read(b, back.data(), 30), VKATTN_SUCCESS);
      EXPECT_EQ(back, h);
      vkattn_tensor_destroy(b);
    } else if (order == 1) {
      vkattn_tensor_destroy(b);
      vkattn_context_destroy(ctx);
      vkattn_tensor_destroy(a);
    } else {
      vkattn_tensor_destroy(a);
      vkattn_tensor_destroy(b);
      vkattn_context_destroy(ctx);
    }
  }
}

TEST(Context, ManyInARow) {
  for (int i = 0; i < 12; ++i) {
    vkattn_context* ctx = make_context();
    ASSERT_NE(ctx, nullptr);
    int64_t n = 100 + i;
    vkattn_tensor* t = nullptr;
    ASSERT_EQ(vkattn_tensor_create(ctx, VKATTN_I32, 1, &n, &t), VKATTN_SUCCESS);
    std::vector<int32_t> x(n), y(n);
    for (int64_t j = 0; j < n; ++j) x[j] = static_cast<int32_t>(j * 7 - i);
    ASSERT_EQ(vkattn_tensor_write(t, x.data(), n * 4), VKATTN_SUCCESS);
    ASSERT_EQ(vkattn_tensor_read(t, y.data(), n * 4), VKATTN_SUCCESS);
    EXPECT_EQ(x, y);
    EXPECT_EQ(validation_messages(ctx), 0u);
    vkattn_tensor_destroy(t);
    vkattn_context_destroy(ctx);
  }
}

// E defect 1: destroying a validation context after another instance was
// created (a second context, or device enumeration) crashed through a NULL
// debug-utils pointer that the newer instance had loaded into volk's
// globals. Every order of create and destroy, with and without validation.
TEST(Context, ValidationContextOutlivesOtherInstances) {
  for (int order = 0; order < 4; ++order) {
    vkattn_context* a = make_context();  // validation on
    ASSERT_NE(a, nullptr);
    vkattn_context* b = nullptr;
    if (order % 2 == 0) {
      ASSERT_EQ(vkattn_context_create(nullptr, &b), VKATTN_SUCCESS) << vkattn_last_error();
    } else {
      uint32_t n = 0;
      ASSERT_EQ(vkattn_device_count(&n), VKATTN_SUCCESS);
      vkattn_device_info info;
      vkattn_device_info_init(&info);
      ASSERT_EQ(vkattn_device_get_info(0, &info), VKATTN_SUCCESS);
    }
    int64_t n = 64;
    vkattn_tensor* t = nullptr;
    ASSERT_EQ(vkattn_tensor_create(a, VKATTN_F32, 1, &n, &t), VKATTN_SUCCESS);
    std::vector<float> x(64, 2.5f), y(64);
    ASSERT_EQ(vkattn_tensor_write(t, x.data(), 256), VKATTN_SUCCESS);
    if (order < 2) {
      vkattn_context_destroy(a);  // the crash: before the fix, here
      vkattn_context_destroy(b);
    } else {
      vkattn_context_destroy(b);
      vkattn_context_destroy(a);
    }
    ASSERT_EQ(vkattn_tensor_read(t, y.data(), 256), VKATTN_SUCCESS) << vkattn_last_error();
    EXPECT_EQ(x, y);
    vkattn_tensor_destroy(t);
  }
}

// ... and from several threads at once: contexts with and without
// validation created, used and destroyed concurrently, while other threads
// enumerate devices.
TEST(Context, ConcurrentCreationAcrossThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([i, &failures] {
      for (int round = 0; round < 3; ++round) {
        if (i >= 4) {
          uint32_t n = 0;
          if (vkattn_device_count(&n) != VKATTN_SUCCESS || n == 0) ++failures;
          continue;
        }
        vkattn_context_desc d;
        vkattn_context_desc_init(&d);
        d.flags = (i + round) % 2 ? validation_flag() : 0;
        vkattn_context* ctx = nullptr;
        if (vkattn_context_create(&d, &ctx) != VKATTN_SUCCESS) {
          ++failures;
          continue;
        }
        int64_t n = 256;
        vkattn_tensor* t = nullptr;
        std::vector<int32_t> x(n), y(n);
        for (int64_t j = 0; j < n; ++j) x[j] = static_cast<int32_t>(j * (i + 1) + round);
        if (vkattn_tensor_create(ctx, VKATTN_I32, 1, &n, &t) != VKATTN_SUCCESS ||
            vkattn_tensor_write(t, x.data(), n * 4) != VKATTN_SUCCESS ||
            vkattn_tensor_read(t, y.data(), n * 4) != VKATTN_SUCCESS || x != y)
          ++failures;
        uint32_t msgs = 0;
        vkattn_context_validation_messages(ctx, &msgs);
        if (msgs) ++failures;
        vkattn_context_destroy(ctx);
        vkattn_tensor_destroy(t);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

class Tensors : public ContextTest {};

TEST_F(Tensors, RoundTripEveryDtypeAndOddSizes) {
  std::mt19937 rng(7);
  const vkattn_dtype dtypes[] = {VKATTN_F32, VKATTN_F16, VKATTN_BF16, VKATTN_U8, VKATTN_I32};
  const std::vector<std::vector<int64_t>> shapes = {
      {1}, {3}, {7, 1}, {5, 3, 1}, {2, 3, 5, 7}, {1, 1, 1, 1}, {4097}, {13, 17, 3}};
  for (auto dt : dtypes) {
    for (const auto& shape : shapes) {
      vkattn_tensor* t = tensor(dt, shape);
      ASSERT_NE(t, nullptr);
      size_t n = vkattn_tensor_nbytes(t);
      size_t numel = 1;
      for (auto d : shape) numel *= static_cast<size_t>(d);
      EXPECT_EQ(n, numel * vkattn_dtype_size(dt));
      EXPECT_EQ(vkattn_tensor_dtype(t), dt);
      EXPECT_EQ(vkattn_tensor_ndim(t), shape.size());
      for (uint32_t i = 0; i < shape.size(); ++i) EXPECT_EQ(vkattn_tensor_shape(t, i), shape[i]);
      EXPECT_EQ(vkattn_tensor_shape(t, static_cast<uint32_t>(shape.size())), -1);
      std::vector<uint8_t> x(n), y(n, 0xAB);
      for (auto& b : x) b = static_cast<uint8_t>(rng());
      ASSERT_EQ(vkattn_tensor_write(t, x.data(), n), VKATTN_SUCCESS) << vkattn_last_error();
      ASSERT_EQ(vkattn_tensor_read(t, y.data(), n), VKATTN_SUCCESS) << vkattn_last_error();
      EXPECT_EQ(x, y);
    }
  }
}

TEST_F(Tensors, ZeroSized) {
  for (auto shape : std::vector<std::vector<int64_t>>{{0}, {3, 0}, {0, 4, 5}, {2, 2, 0, 2}}) {
    vkattn_tensor* t = tensor(VKATTN_F32, shape);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(vkattn_tensor_nbytes(t), 0u);
    EXPECT_EQ(vkattn_tensor_write(t, nullptr, 0), VKATTN_SUCCESS);
    EXPECT_EQ(vkattn_tensor_read(t, nullptr, 0), VKATTN_SUCCESS);
    float dummy;
    EXPECT_INVALID(vkattn_tensor_write(t, &dummy, 4), "nbytes");
  }
}

// Writes after recorded-but-unsubmitted writes stay in stream order.
TEST_F(Tensors, WritesAreStreamOrdered) {
  int64_t n = 1000;
  vkattn_tensor* t = tensor(VKATTN_F32, {n});
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 3.0f), y(n);
  ASSERT_EQ(vkattn_tensor_write(t, a.data(), n * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(t, b.data(), n * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_write(t, c.data(), n * 4), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(t, y.data(), n * 4), VKATTN_SUCCESS);
  EXPECT_EQ(y, c);
  // Many writes without a read in between stay in one or a few submissions.
  for (int i = 0; i < 50; ++i) {
    std::fill(a.begin(), a.end(), static_cast<float>(i));
    ASSERT_EQ(vkattn_tensor_write(t, a.data(), n * 4), VKATTN_SUCCESS);
  }
  ASSERT_EQ(vkattn_context_flush(ctx), VKATTN_SUCCESS);
  ASSERT_EQ(vkattn_tensor_read(t, y.data(), n * 4), VKATTN_SUCCESS);
  EXPECT_EQ(y, a);
}

TEST_F(Tensors, BadInput) {
  int64_t shape[4] = {2, 3, 4, 5};
  vkattn_tensor* t = reinterpret_cast<vkattn_tensor*>(0x1);
  EXPECT_INVALID(vkattn_tensor_create(nullptr, VKATTN_F32, 1, shape, &t), "ctx is NULL");
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 1, shape, nullptr), "out is NULL");
  EXPECT_INVALID(vkattn_tensor_create(ctx, static_cast<vkattn_dtype>(0), 1, shape, &t), "dtype");
  EXPECT_INVALID(vkattn_tensor_create(ctx, static_cast<vkattn_dtype>(99), 1, shape, &t), "dtype");
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 0, shape, &t), "ndim");
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 5, shape, &t), "ndim");
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 1, nullptr, &t), "shape");
  int64_t neg[2] = {3, -1};
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 2, neg, &t), "negative");
  int64_t huge[3] = {int64_t(1) << 40, int64_t(1) << 40, 16};
  EXPECT_INVALID(vkattn_tensor_create(ctx, VKATTN_F32, 3, huge, &t), "too large");
  EXPECT_EQ(t, reinterpret_cast<vkattn_tensor*>(0x1)) << "output touched on failure";

  vkattn_tensor* ok = tensor(VKATTN_F16, {4});
  uint16_t buf[4] = {1, 2, 3, 4};
  EXPECT_INVALID(vkattn_tensor_write(ok, buf, 6), "nbytes");
  EXPECT_INVALID(vkattn_tensor_write(ok, nullptr, 8), "src is NULL");
  EXPECT_INVALID(vkattn_tensor_write(nullptr, buf, 8), "tensor is NULL");
  EXPECT_INVALID(vkattn_tensor_read(ok, buf, 10), "nbytes");
  EXPECT_INVALID(vkattn_tensor_read(ok, nullptr, 8), "dst is NULL");
  EXPECT_INVALID(vkattn_tensor_read(nullptr, buf, 8), "tensor is NULL");
  EXPECT_EQ(vkattn_tensor_nbytes(nullptr), 0u);
  EXPECT_EQ(vkattn_tensor_ndim(nullptr), 0u);
  EXPECT_EQ(vkattn_tensor_shape(nullptr, 0), -1);
  EXPECT_EQ(vkattn_tensor_dtype(nullptr), 0);
}

// The ABI growth rule (vkattn.h "ABI stability"): descriptors with an
// unknown struct_size are rejected; output structs are written up to the
// caller's struct_size, never past it.
TEST(Abi, StructSizeRule) {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  EXPECT_EQ(d.struct_size, sizeof(d));
  vkattn_context* ctx = nullptr;
  for (uint32_t bad : {0u, 4u, 15u, 17u, 4096u}) {
    d.struct_size = bad;
    EXPECT_INVALID(vkattn_context_create(&d, &ctx), "struct_size");
  }
  EXPECT_EQ(ctx, nullptr);

  // A caller whose struct is larger (a newer header) gets this release's
  // struct, and struct_size says how much was written.
  struct Bigger {
    vkattn_device_info info;
    uint8_t future[64];
  } big;
  std::memset(&big, 0xAB, sizeof(big));
  big.info.struct_size = sizeof(big);
  ASSERT_EQ(vkattn_device_get_info(0, &big.info), VKATTN_SUCCESS) << vkattn_last_error();
  EXPECT_EQ(big.info.struct_size, sizeof(vkattn_device_info));
  for (uint8_t b : big.future) ASSERT_EQ(b, 0xAB) << "written past this release's struct";
  // An unknown smaller size (no release shipped it) is rejected, untouched.
  vkattn_device_info small;
  std::memset(&small, 0xCD, sizeof(small));
  small.struct_size = 100;
  EXPECT_INVALID(vkattn_device_get_info(0, &small), "struct_size");
  EXPECT_EQ(static_cast<uint8_t>(small.name[0]), 0xCD);
  vkattn_device_info zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_INVALID(vkattn_device_get_info(0, &zero), "vkattn_device_info_init");
}

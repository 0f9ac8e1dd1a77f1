// Tensors and views: shapes, strides, blocks, explicit copies.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/tensor.hpp"

using optimus::Shape;
using optimus::Tensor;

TEST_CASE("Tensor is zeroed, row-major, and copies only on clone()") {
  Tensor<double> t(Shape{3, 4});
  CHECK(t.numel() == 12);
  CHECK(t.bytes() == 96);
  for (std::int64_t e = 0; e < t.numel(); ++e) CHECK(t.data()[e] == 0.0);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  auto v = t.view();
  CHECK(v.stride(0) == 4);
  CHECK(v.stride(1) == 1);
  v(2, 3) = 5.0;
  CHECK(t.data()[11] == 5.0);
  Tensor<double> c = t.clone();
  c.data()[11] = 6.0;
  CHECK(t.data()[11] == 5.0);
  Tensor<double> moved = std::move(c);
  CHECK(moved.data()[11] == 6.0);
}

TEST_CASE("blocks are strided windows and out-of-range blocks are refused") {
  Tensor<float> t(Shape{4, 6});
  auto v = t.view();
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 6; ++c) v(r, c) = static_cast<float>(10 * r + c);
  auto b = v.block(1, 2, 2, 3);
  CHECK(b.shape() == Shape{2, 3});
  CHECK(b(0, 0) == 12.0f);
  CHECK(b(1, 2) == 24.0f);
  CHECK_FALSE(b.is_contiguous());
  CHECK_THROWS_WITH_AS(v.block(3, 0, 2, 1), doctest::Contains("outside a view of shape [4, 6]"), optimus::Error);
  CHECK_THROWS_AS(Shape({-1, 2}), optimus::Error);
}

namespace {

// Host memory that calls itself a device: shows where a tensor placed on a device gets and returns its bytes.
class CountingDeviceMemory final : public optimus::DeviceMemory {
 public:
  optimus::Device device() const override { return optimus::Device::cuda; }
  void* allocate(std::size_t bytes) override {
    ++allocations;
    return std::malloc(bytes);
  }
  void release(void* p) noexcept override {
    ++releases;
    std::free(p);
  }
  void zero(void* p, std::size_t bytes) override {
    ++zeroes;
    std::memset(p, 0, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    ++copies;
    std::memcpy(dst, src, bytes);
  }
  int allocations = 0, releases = 0, zeroes = 0, copies = 0;
};

}  // namespace

TEST_CASE("a tensor placed on a device takes its memory there, clones there, returns it, and is counted") {
  CountingDeviceMemory device;
  optimus::MemoryTracker tracker;
  {
    optimus::Tensor<float> t(optimus::Shape{3, 4}, {&tracker, optimus::MemoryKind::activations, &device});
    CHECK(t.device() == optimus::Device::cuda);
    CHECK(t.view().device() == optimus::Device::cuda);
    CHECK(optimus::TensorView<const float>(t.view()).device() == optimus::Device::cuda);
    CHECK(device.allocations == 1);
    CHECK(device.zeroes == 1);
    CHECK(tracker.current(optimus::MemoryKind::activations) == 48);
    const optimus::Tensor<float> c = t.clone();
    CHECK(c.device() == optimus::Device::cuda);
    CHECK(device.allocations == 2);
    CHECK(device.copies == 1);
    CHECK(device.zeroes == 1);  // a clone is copied over, not zeroed first
    optimus::Tensor<float> moved = std::move(t);
    CHECK(moved.device() == optimus::Device::cuda);
    CHECK(device.releases == 0);
  }
  CHECK(device.releases == 2);
  CHECK(tracker.current(optimus::MemoryKind::activations) == 0);
  const optimus::Tensor<float> host(optimus::Shape{2});
  CHECK(host.device() == optimus::Device::cpu);
  CHECK(host.device_memory() == nullptr);
}

TEST_CASE("shapes whose element count overflows are refused naming the shape (they used to wrap)") {
  const auto message = [](auto make) {
    try {
      make();
    } catch (const optimus::Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  const std::int64_t side = 3037000500;  // side^2 > 2^63: the product went negative
  CHECK(message([&] { optimus::Shape{side, side}; }) ==
        "shape [3037000500, 3037000500] has more than 1152921504606846976 elements (2^60: its byte count would "
        "overflow)");
  const std::int64_t half = std::int64_t{1} << 31;  // 2^62 elements: 2^64 bytes of f32 wrapped to 0
  CHECK(message([&] { optimus::Tensor<float>(optimus::Shape{half, half}); }).find("shape [2147483648, 2147483648]") ==
        0);
  CHECK(optimus::Shape{std::int64_t{1} << 30, 1 << 30}.numel() == optimus::Shape::kMaxElements);  // the limit itself
  CHECK(message([&] { optimus::Shape{1 << 20, 1 << 20, 1 << 20, 2}; }).find("has more than") != std::string::npos);
}

// Memory accounting: tensors count their bytes by kind from construction to destruction.
#include <doctest/doctest.h>

#include <cstdlib>  // __GLIBC__ (features.h)

#include "optimus/core/host_allocator.hpp"
#include "optimus/core/tensor.hpp"

using optimus::MemoryKind;
using optimus::MemoryTracker;
using optimus::Shape;
using optimus::Tensor;

TEST_CASE("tensors are counted by kind, current and peak, through moves and resets") {
  MemoryTracker m;
  {
    Tensor<float> a(Shape{10, 10}, {&m, MemoryKind::activations});
    CHECK(m.current(MemoryKind::activations) == 400);
    Tensor<double> p(Shape{3}, {&m, MemoryKind::parameters});
    CHECK(m.current_total() == 424);
    Tensor<float> moved = std::move(a);
    CHECK(m.current(MemoryKind::activations) == 400);  // a move does not count twice
    Tensor<float> copy = moved.clone();
    CHECK(m.current(MemoryKind::activations) == 800);
    moved.reset();
    CHECK(m.current(MemoryKind::activations) == 400);
    CHECK(moved.numel() == 0);
  }
  CHECK(m.current_total() == 0);
  CHECK(m.peak(MemoryKind::activations) == 800);
  CHECK(m.peak_total() == 824);
  m.reset_peaks();
  CHECK(m.peak_total() == 0);
  Tensor<float> untracked(Shape{5});
  CHECK(m.current_total() == 0);
}

TEST_CASE("bytes are counted by place: device and host separately, and together") {
  MemoryTracker m;
  m.allocate(MemoryKind::optimizer, optimus::MemoryPlace::host, 100);
  m.allocate(MemoryKind::optimizer, optimus::MemoryPlace::device, 30);
  m.allocate(MemoryKind::parameters, optimus::MemoryPlace::device, 7);
  CHECK(m.current(MemoryKind::optimizer) == 130);
  CHECK(m.current(MemoryKind::optimizer, optimus::MemoryPlace::host) == 100);
  CHECK(m.current_total(optimus::MemoryPlace::device) == 37);
  m.release(MemoryKind::optimizer, optimus::MemoryPlace::host, 100);
  m.allocate(MemoryKind::optimizer, optimus::MemoryPlace::device, 50);  // device 87, host 0; together 87
  CHECK(m.peak(MemoryKind::optimizer, optimus::MemoryPlace::host) == 100);
  CHECK(m.peak(MemoryKind::optimizer, optimus::MemoryPlace::device) == 80);
  CHECK(m.peak(MemoryKind::optimizer) == 130);  // both places at once, not the sum of each place's peak (180)
  CHECK(m.peak_total(optimus::MemoryPlace::device) == 87);
  CHECK(m.peak_total() == 137);
  m.reset_peaks();
  CHECK(m.peak_total(optimus::MemoryPlace::host) == 0);
  CHECK(m.peak(MemoryKind::optimizer) == 80);
}

// A sanitizer's allocator replaces glibc's and refuses mallopt (GCC defines __SANITIZE_ADDRESS__, clang has the feature).
#if defined(__SANITIZE_ADDRESS__)
#define OPTIMUS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OPTIMUS_TEST_ASAN 1
#endif
#endif

TEST_CASE("retain_freed_host_memory sets glibc's malloc where the C library is glibc") {
#if defined(__GLIBC__) && !defined(OPTIMUS_TEST_ASAN)
  CHECK(optimus::retain_freed_host_memory());
#else
  CHECK_FALSE(optimus::retain_freed_host_memory());
#endif
}

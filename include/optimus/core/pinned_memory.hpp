// Page-locked host memory for tensors: PinnedHostMemory is a DeviceMemory whose blocks come from a device runtime's
// allocate_pinned (cudaHostAlloc on a GPU). Its tensors are host tensors — their views say Device::cpu and host code
// reads and writes them directly — that the device's copy engines read and write asynchronously, without a staging
// copy: where offloaded state (optimizer moments, spilled blocks) lives in host memory. A tracker counts them as host
// bytes (MemoryPlace::host). PinnedMemoryPool is the same with a cache, for tensors made and dropped at every step
// (offloaded activations): a steady step then allocates no page-locked memory after its first.
#pragma once

#include <cstddef>

#include "optimus/core/caching_allocator.hpp"
#include "optimus/core/device_memory.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

class PinnedHostMemory final : public DeviceMemory {
 public:
  // `device` must outlive this memory and every tensor allocated from it.
  explicit PinnedHostMemory(DeviceRuntime& device) : device_(&device) {}

  Device device() const override { return Device::cpu; }
  void* allocate(std::size_t bytes) override { return device_->allocate_pinned(bytes); }
  // Waits for the device's work first (as cudaFreeHost does).
  void release(void* p) noexcept override { device_->release_pinned(p); }
  void zero(void* p, std::size_t bytes) override;
  // Host memory: the caller orders it after any device copy still writing it.
  void copy(void* dst, const void* src, std::size_t bytes) override;

  DeviceRuntime& runtime() const { return *device_; }

 private:
  DeviceRuntime* device_;
};

class PinnedMemoryPool final : public DeviceMemory {
 public:
  // `device` must outlive the pool; the pool must outlive its tensors. Not thread-safe: one per rank.
  explicit PinnedMemoryPool(DeviceRuntime& device);

  Device device() const override { return Device::cpu; }
  void* allocate(std::size_t bytes) override { return cache_.allocate(bytes); }
  // Keeps the block for reuse at once: whoever hands it out again orders its copies after those still reading or
  // writing it (the spill does, through the compute stream's order).
  void release(void* p) noexcept override { cache_.release(p); }
  void zero(void* p, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;

  const CachingAllocator::Stats& stats() const { return cache_.stats(); }

 private:
  CachingAllocator cache_;
};

}  // namespace optimus

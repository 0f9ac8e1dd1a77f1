// Device memory for tensors, on any accelerator (optimus/core/device_runtime.hpp: a GPU or the simulated device):
//
//   DeviceAllocator   a CachingAllocator over the runtime's raw memory: a training step that repeats its
//                     allocations makes no raw allocation after its first run (stats().raw_allocations stays constant)
//                     and an out-of-memory error names the request and what the device has free.
//   PinnedStaging     copies between pageable host memory and the device through two page-locked buffers, chunk by
//                     chunk, the host's memcpy of one buffer overlapping the DMA of the other.
//   DeviceMemoryPool  DeviceMemory (what a Tensor allocates from) on one rank's stream: zeroing is ordered on the
//                     stream, copies are too and complete before they return, and released blocks are poisoned in the
//                     stream's order (the simulated device then reads NaN from a stale block). Every kernel that uses
//                     its tensors must run on that stream, or wait for it: a released block is handed out again in
//                     stream order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "optimus/core/caching_allocator.hpp"
#include "optimus/core/device_memory.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

class DeviceAllocator {
 public:
  // `device` must outlive the allocator.
  explicit DeviceAllocator(DeviceRuntime& device);
  void* allocate(std::size_t bytes) { return cache_.allocate(bytes); }
  // Returns the block's size (its size class), 0 for an unknown pointer.
  std::size_t release(void* p) noexcept { return cache_.release(p); }
  const CachingAllocator::Stats& stats() const { return cache_.stats(); }
  DeviceRuntime& device() const { return *device_; }

 private:
  DeviceRuntime* device_;
  CachingAllocator cache_;
};

// One user at a time (a rank's DeviceMemoryPool). Every copy is complete when copy() returns.
class PinnedStaging {
 public:
  PinnedStaging(DeviceRuntime& device, std::size_t chunk_bytes) : device_(&device), chunk_(chunk_bytes) {}
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  // dst <- src on `stream`, staged when one side is pageable host memory and the other device memory, direct
  // otherwise (device to device, page-locked host memory).
  void copy(void* dst, const void* src, std::size_t bytes, DeviceStream& stream);
  // Page-locked allocations so far: 2 after the first staged copy, and no more (tests assert it).
  int pinned_allocations() const { return allocations_; }

 private:
  void ensure_buffers();
  void stage_up(char* dst, const char* src, std::size_t bytes, DeviceStream& stream);
  void stage_down(char* dst, const char* src, std::size_t bytes, DeviceStream& stream);

  DeviceRuntime* device_;
  std::size_t chunk_;
  void* buffers_[2] = {nullptr, nullptr};
  std::unique_ptr<DeviceEvent> drained_[2];  // the buffer's last DMA is complete
  int allocations_ = 0;
};

class DeviceMemoryPool final : public DeviceMemory {
 public:
  // `device` and `stream` (one of its streams: the rank's compute stream) must outlive the pool.
  static constexpr std::size_t kStagingChunk = std::size_t{1} << 20;
  DeviceMemoryPool(DeviceRuntime& device, DeviceStream& stream)
      : allocator_(device), stream_(&stream), staging_(device, kStagingChunk) {}

  Device device() const override { return allocator_.device().device(); }
  void* allocate(std::size_t bytes) override { return allocator_.allocate(bytes); }
  void release(void* p) noexcept override;
  void zero(void* p, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;

  DeviceAllocator& allocator() { return allocator_; }
  const DeviceAllocator& allocator() const { return allocator_; }
  DeviceRuntime& runtime() const { return allocator_.device(); }
  DeviceStream& stream() const { return *stream_; }
  const PinnedStaging& staging() const { return staging_; }

 private:
  DeviceAllocator allocator_;
  DeviceStream* stream_;
  PinnedStaging staging_;
};

}  // namespace optimus

// The CUDA runtime as objects (no globals): error checks, device discovery, streams, events, and the
// caching device allocator. This header is about the CUDA backend, so it includes cuda_runtime.h.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "optimus/core/caching_allocator.hpp"
#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"
#include "optimus/cuda/check.hpp"

namespace optimus::cuda {

// Number of usable CUDA devices; 0 (never an error) when there is no driver or no GPU.
int device_count() noexcept;
// Why device_count() is 0, for skip messages ("no CUDA driver", "no device", ...); empty if devices exist.
std::string unavailable_reason();

// Throws optimus::Error "CUDA device N does not exist (M devices; why)" unless 0 <= device < device_count().
void require_device(int device);

// Whether kernels can use `p` (device or managed memory); false for host memory, also memory CUDA does not know.
bool is_device_pointer(const void* p);

// A stream of its own on the current device. Move-only; destroying it synchronizes (and logs errors).
class Stream {
 public:
  Stream();
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  ~Stream();

  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing, for ordering one stream after another.
class Event {
 public:
  explicit Event(bool timing = false);
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void wait_on(cudaStream_t stream) const;  // `stream` waits for this event
  bool done() const;                        // query, never blocks
  float elapsed_ms(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Copies between pageable host memory and the device through two page-locked (pinned) host buffers of
// `chunk_bytes`, allocated with cudaMallocHost on first use and kept: chunk by chunk, the host memcpy of one buffer
// overlaps the DMA of the other, on `stream`. Other copies (device to device, pinned host memory, host to host) go
// directly. Every copy is complete when copy() returns. One user at a time (a rank's DeviceMemoryPool).
class PinnedStaging {
 public:
  explicit PinnedStaging(std::size_t chunk_bytes = std::size_t{1} << 20) : chunk_(chunk_bytes) {}
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  void copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
  // cudaMallocHost calls so far: 2 after the first staged copy, and no more (tests assert it).
  int pinned_allocations() const { return allocations_; }

 private:
  void ensure_buffers();

  std::size_t chunk_;
  void* buffers_[2] = {nullptr, nullptr};
  cudaEvent_t drained_[2] = {nullptr, nullptr};  // the buffer's last DMA is complete
  int allocations_ = 0;
};

// Device memory through a CachingAllocator over cudaMalloc/cudaFree: no cudaMalloc in the steady state of a
// training step (stats().raw_allocations stays constant), and an out-of-memory error that names the request
// and cudaMemGetInfo's free and total bytes.
class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device);
  void* allocate(std::size_t bytes) { return cache_.allocate(bytes); }
  void release(void* p) noexcept { cache_.release(p); }
  const CachingAllocator::Stats& stats() const { return cache_.stats(); }
  int device() const { return device_; }

 private:
  int device_;
  CachingAllocator cache_;
};

// DeviceMemory (optimus/core/device_memory.hpp) on one device: tensors placed here take their bytes from a
// DeviceAllocator, so a repeated step makes no cudaMalloc. zero() is ordered on `stream`; copy() is too and
// completes before it returns. Every kernel that uses these tensors must run on `stream` (or wait for it): a
// released block is handed out again in stream order. Copies from or to pageable host memory go through pinned
// staging buffers (PinnedStaging).
class DeviceMemoryPool final : public DeviceMemory {
 public:
  explicit DeviceMemoryPool(int device, cudaStream_t stream = nullptr) : allocator_(device), stream_(stream) {}

  Device device() const override { return Device::cuda; }
  void* allocate(std::size_t bytes) override { return allocator_.allocate(bytes); }
  void release(void* p) noexcept override { allocator_.release(p); }
  void zero(void* p, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;

  DeviceAllocator& allocator() { return allocator_; }
  cudaStream_t stream() const { return stream_; }
  const PinnedStaging& staging() const { return staging_; }

 private:
  DeviceAllocator allocator_;
  cudaStream_t stream_;
  PinnedStaging staging_;
};

}  // namespace optimus::cuda

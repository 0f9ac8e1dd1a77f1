// CUDA runtime objects: devices, streams, events and the caching device allocator.
#include "optimus/cuda/runtime.hpp"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>
#include <utility>

namespace optimus::cuda {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("CUDA reports ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
  }
  return n == 0 ? "no CUDA device" : "";
}

void require_device(int device) {
  OPTIMUS_CHECK(device >= 0 && device < device_count(), "CUDA device ", device, " does not exist (", device_count(),
                " devices; ", unavailable_reason(), ")");
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // a pointer CUDA does not know: host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

Stream::Stream() { OPTIMUS_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ == nullptr) return;
  const cudaError_t s = cudaStreamSynchronize(stream_);
  if (s != cudaSuccess) std::cerr << "optimus: stream failed before destruction: " << cudaGetErrorString(s) << '\n';
  cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  OPTIMUS_CHECK_CUDA(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) { OPTIMUS_CHECK_CUDA(cudaEventRecord(event_, stream)); }

void Event::wait_on(cudaStream_t stream) const { OPTIMUS_CHECK_CUDA(cudaStreamWaitEvent(stream, event_, 0)); }

bool Event::done() const {
  const cudaError_t s = cudaEventQuery(event_);
  if (s == cudaErrorNotReady) return false;
  OPTIMUS_CHECK_CUDA(s);
  return true;
}

float Event::elapsed_ms(const Event& start) const {
  float ms = 0;
  OPTIMUS_CHECK_CUDA(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

namespace {

CachingAllocator::Raw device_raw(int device) {
  return {[device](std::size_t bytes) -> void* {
            void* p = nullptr;
            if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
              cudaGetLastError();  // an out-of-memory error is not sticky; clear it
              return nullptr;
            }
            return p;
          },
          [device](void* p) {
            cudaSetDevice(device);
            cudaFree(p);
          },
          [device] {
            std::size_t free = 0, total = 0;
            std::ostringstream os;
            if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
              os << "device " << device << " has " << free << " bytes free of " << total;
            } else {
              cudaGetLastError();
              os << "device " << device << " free memory unknown";
            }
            return os.str();
          }};
}

}  // namespace

DeviceAllocator::DeviceAllocator(int device)
    : device_(device), cache_(device_raw(device), "CUDA device " + std::to_string(device)) {
  require_device(device);
}

void DeviceMemoryPool::zero(void* p, std::size_t bytes) {
  OPTIMUS_CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, stream_));
}

void DeviceMemoryPool::copy(void* dst, const void* src, std::size_t bytes) { staging_.copy(dst, src, bytes, stream_); }

namespace {

// Host memory CUDA did not page-lock (a pointer it does not know is host memory too).
bool is_pageable(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

}  // namespace

PinnedStaging::~PinnedStaging() {
  for (int b = 0; b < 2; ++b) {
    if (drained_[b] != nullptr) cudaEventDestroy(drained_[b]);
    if (buffers_[b] != nullptr) cudaFreeHost(buffers_[b]);
  }
}

void PinnedStaging::ensure_buffers() {
  for (int b = 0; b < 2; ++b) {
    if (buffers_[b] != nullptr) continue;
    OPTIMUS_CHECK_CUDA(cudaMallocHost(&buffers_[b], chunk_));
    ++allocations_;
    OPTIMUS_CHECK_CUDA(cudaEventCreateWithFlags(&drained_[b], cudaEventDisableTiming));
  }
}

void PinnedStaging::copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const bool to_device = is_device_pointer(dst), from_device = is_device_pointer(src);
  const bool stage_up = to_device && !from_device && is_pageable(src);
  const bool stage_down = from_device && !to_device && is_pageable(dst);
  if (!stage_up && !stage_down) {
    OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream));
    return;
  }
  ensure_buffers();
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  const std::size_t chunks = (bytes + chunk_ - 1) / chunk_;
  auto extent = [&](std::size_t c) { return std::pair{c * chunk_, std::min(chunk_, bytes - c * chunk_)}; };
  if (stage_up) {
    // Fill a buffer once its previous DMA has drained, then send it; the host fills the other meanwhile.
    for (std::size_t c = 0; c < chunks; ++c) {
      const auto [offset, size] = extent(c);
      const std::size_t b = c % 2;
      OPTIMUS_CHECK_CUDA(cudaEventSynchronize(drained_[b]));
      std::memcpy(buffers_[b], in + offset, size);
      OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(out + offset, buffers_[b], size, cudaMemcpyHostToDevice, stream));
      OPTIMUS_CHECK_CUDA(cudaEventRecord(drained_[b], stream));
    }
    OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream));
    return;
  }
  // Down: the DMA of chunk c+1 runs while the host copies chunk c out.
  auto fetch = [&](std::size_t c) {
    const auto [offset, size] = extent(c);
    OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(buffers_[c % 2], in + offset, size, cudaMemcpyDeviceToHost, stream));
    OPTIMUS_CHECK_CUDA(cudaEventRecord(drained_[c % 2], stream));
  };
  fetch(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) fetch(c + 1);
    const auto [offset, size] = extent(c);
    OPTIMUS_CHECK_CUDA(cudaEventSynchronize(drained_[c % 2]));
    std::memcpy(out + offset, buffers_[c % 2], size);
  }
}

}  // namespace optimus::cuda

// CUDA runtime objects: devices, streams, events and the caching device allocator.
#include "optimus/cuda/runtime.hpp"

#include <iostream>
#include <sstream>

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

void DeviceMemoryPool::copy(void* dst, const void* src, std::size_t bytes) {
  OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace optimus::cuda

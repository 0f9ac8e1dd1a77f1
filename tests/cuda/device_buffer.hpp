// A test's device array: allocated from a DeviceAllocator, filled from and read back to host vectors.
#pragma once

#include <vector>

#include "optimus/cuda/runtime.hpp"

namespace optimus::test {

template <class T>
struct DeviceBuffer {
  cuda::DeviceAllocator& alloc;
  T* ptr;
  std::size_t n;
  DeviceBuffer(cuda::DeviceAllocator& a, std::size_t count)
      : alloc(a), ptr(static_cast<T*>(a.allocate(count * sizeof(T)))), n(count) {}
  DeviceBuffer(cuda::DeviceAllocator& a, const std::vector<T>& host) : DeviceBuffer(a, host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { alloc.release(ptr); }
  void upload(const std::vector<T>& host) {
    OPTIMUS_CHECK_CUDA(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    OPTIMUS_CHECK_CUDA(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

}  // namespace optimus::test

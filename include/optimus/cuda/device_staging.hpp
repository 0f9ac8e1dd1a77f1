// The in-process staging area on a GPU (optimus/comm/in_process.hpp): the contributions of a rank's collectives
// are copied into device buffers of a pool of its own, read from there by the other ranks (device to device), and
// reduced there by a kernel in rank order — no host round trip (host buffers, such as a scalar loss, are reduced
// on the host). Copies and reductions run on the rank's stream
// (after the work that wrote its buffers) and complete before they return. cuda::RankDevice::grid sets it.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "optimus/comm/in_process.hpp"
#include "optimus/cuda/kernels.hpp"
#include "optimus/cuda/runtime.hpp"

namespace optimus::cuda {

class DeviceStaging final : public InProcessStaging {
 public:
  // `memory`: the rank's device memory and stream (it must outlive the communication through this staging).
  DeviceStaging(int device, DeviceMemoryPool& memory) : pool_(std::make_shared<Pool>(device)), memory_(&memory) {}

  std::shared_ptr<std::byte> allocate(std::size_t bytes) override {
    std::lock_guard lock(pool_->mu);
    auto* p = static_cast<std::byte*>(pool_->allocator.allocate(bytes));
    // Released by whichever rank finishes with the contribution last; the pool lives as long as its buffers.
    return std::shared_ptr<std::byte>(p, [pool = pool_](std::byte* q) {
      std::lock_guard released(pool->mu);
      pool->allocator.release(q);
    });
  }

  void copy(void* dst, const void* src, std::size_t bytes) override { memory_->copy(dst, src, bytes); }

  void reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) override {
    if (!is_device_pointer(acc)) {  // a host buffer (a scalar such as the loss): reduce on the host
      std::vector<std::byte> staged(count * size_of(dtype));
      memory_->copy(staged.data(), x, staged.size());
      host_->reduce(acc, staged.data(), count, dtype, op);
      return;
    }
    const Combine how = op == ReduceOp::sum ? Combine::sum : op == ReduceOp::max ? Combine::max : Combine::min;
    const auto n = static_cast<std::int64_t>(count);
    if (dtype == DType::f32) {
      combine_into(static_cast<float*>(acc), static_cast<const float*>(x), n, how, memory_->stream());
    } else {
      combine_into(static_cast<double*>(acc), static_cast<const double*>(x), n, how, memory_->stream());
    }
    OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(memory_->stream()));
  }

  // Raw device allocations of the pool (constant once a step has run: the pool caches its buffers).
  std::uint64_t raw_allocations() {
    std::lock_guard lock(pool_->mu);
    return pool_->allocator.stats().raw_allocations;
  }

 private:
  // Other ranks' threads release buffers into it: every use is under `mu`.
  struct Pool {
    explicit Pool(int device) : allocator(device) {}
    std::mutex mu;
    DeviceAllocator allocator;
  };
  std::shared_ptr<Pool> pool_;
  DeviceMemoryPool* memory_;
  std::shared_ptr<InProcessStaging> host_ = host_staging();
};

}  // namespace optimus::cuda

// The in-process staging area on an accelerator (optimus/comm/in_process.hpp): the contributions of a rank's
// collectives are copied into device buffers of a pool of its own, read from there by the other ranks (device to
// device), and reduced there by a kernel in rank order — no host round trip (host buffers, such as a scalar loss, are
// reduced on the host). Copies and reductions run on the rank's stream (after the work that wrote its buffers) and
// complete before they return. RankDevice::grid (optimus/device/rank_device.hpp) sets it; it works on a GPU and on
// the simulated device alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/device_memory_pool.hpp"

namespace optimus {

class DeviceStaging final : public InProcessStaging {
 public:
  // `memory`: the rank's device memory and stream (it must outlive the communication through this staging).
  explicit DeviceStaging(DeviceMemoryPool& memory);

  Device device() const override { return memory_->device(); }
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override { memory_->copy(dst, src, bytes); }
  void reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) override;

  // Raw device allocations of the pool (constant once a step has run: the pool caches its buffers).
  std::uint64_t raw_allocations();

 private:
  // Other ranks' threads release buffers into it: every use is under `mu`.
  struct Pool {
    explicit Pool(DeviceRuntime& device) : allocator(device) {}
    std::mutex mu;
    DeviceAllocator allocator;
    std::map<std::size_t, std::size_t> blocks;  // size class -> raw blocks of it
  };
  std::shared_ptr<Pool> pool_;
  DeviceMemoryPool* memory_;
  std::shared_ptr<InProcessStaging> host_ = host_staging();
};

}  // namespace optimus

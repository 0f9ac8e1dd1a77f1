// How the device suites run their cases: on a target — the simulated device, or a GPU — with in-process ranks that
// share one device (RankDevice::grid: a whole grid on one device, exchanges staged on it), or that each have a device
// of their own (distributed_grid: device communicators, NCCL's or the simulated ones).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::test {

// A device to run on: opens a fresh runtime of device `ordinal` (the simulated device with `sim` options; GPU 0
// whatever the ordinal, the only one a test may count on).
struct DeviceTarget {
  Device kind;
  sim::Options sim;
  std::unique_ptr<DeviceRuntime> open(int ordinal) const;
};

using GridCase = std::function<void(Communicator& world, RankDevice& rank, Grid& grid)>;

// fn on q*q*dp in-process ranks that share one device of `target`, their grid placed on it at GEMM math `math`.
void on_shared_device(const DeviceTarget& target, int q, int dp, ops::GemmMath math, const GridCase& fn);
// fn on q*q*dp in-process ranks with a device each (ordinal = world rank), their grid over device communicators.
void on_own_devices(const DeviceTarget& target, int q, int dp, ops::GemmMath math, const GridCase& fn);

// Where the suites' own tensors live: untracked workspace in `memory` (a device's pool).
inline MemoryTag on(DeviceMemory& memory) { return MemoryTag{.device = &memory}; }

// A host vector on a device: copied into a tensor of `memory` (a device's pool), complete before it returns, ordered
// on the pool's stream (optimus::download copies a device tensor's elements back).
template <class T>
Tensor<T> to_device(const std::vector<T>& host, Shape shape, DeviceMemoryPool& memory) {
  return upload(host.data(), shape, on(memory));
}

}  // namespace optimus::test

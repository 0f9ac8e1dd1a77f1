// The device suites' ranks and devices (device_world.hpp).
#include "device_world.hpp"

#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/cuda/device.hpp"

namespace optimus::test {

std::unique_ptr<DeviceRuntime> DeviceTarget::open(int ordinal) const {
  if (kind == Device::cuda) return open_cuda_device(0);
  sim::Options options = sim;
  options.ordinal = ordinal;
  options.delays.seed += static_cast<std::uint64_t>(ordinal);
  return std::make_unique<sim::Runtime>(options);
}

void on_shared_device(const DeviceTarget& target, int q, int dp, ops::GemmMath math, const GridCase& fn) {
  const std::unique_ptr<DeviceRuntime> device = target.open(0);
  run_in_process(q * q * dp, [&](Communicator& world) {
    RankDevice rank(*device, math);
    Grid grid = rank.grid(world, q);
    fn(world, rank, grid);
  });
}

void on_own_devices(const DeviceTarget& target, int q, int dp, ops::GemmMath math, const GridCase& fn) {
  run_in_process(q * q * dp, [&](Communicator& world) {
    const std::unique_ptr<DeviceRuntime> device = target.open(world.rank());
    RankDevice rank(*device, math);
    Grid grid = distributed_grid(rank, world, q);
    fn(world, rank, grid);
  });
}

}  // namespace optimus::test

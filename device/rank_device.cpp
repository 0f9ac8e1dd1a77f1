// RankDevice and the grids made on it (optimus/device/rank_device.hpp).
#include "optimus/device/rank_device.hpp"

#include <utility>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/cuda/device.hpp"
#include "optimus/sim/collectives.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus {
namespace {

DeviceRuntime& made_current(DeviceRuntime& device) {
  device.make_current();
  return device;
}

}  // namespace

RankDevice::RankDevice(DeviceRuntime& device, ops::GemmMath math)
    : device_(&made_current(device)),
      stream_(device.create_stream()),
      memory_(device, *stream_),
      gemm_(GemmEngine::create(memory_.allocator())),
      math_(math) {}

ops::Queue RankDevice::queue() {
  return ops::Queue{
      .stream = stream_.get(), .gemm = gemm_.get(), .math = math_, .scratch = MemoryTag{.device = &memory_}};
}

Grid RankDevice::grid(Communicator& world, int q) { return grid(world, q, 1); }

void RankDevice::stage_on_device(Communicator& world) {
  // One staging area per rank, whichever worlds use it (a sweep's members each have their own): its pool keeps what
  // is alive at once, not each world's high-water mark.
  if (!staging_) staging_ = std::make_shared<DeviceStaging>(memory_);
  set_in_process_staging(world, staging_);
}

Grid RankDevice::grid(Communicator& world, int q, int pp) {
  stage_on_device(world);
  Grid g = Grid::create(world, q, pp);
  g.place_on(&memory_, queue());
  return g;
}

RankDevice::Allocations RankDevice::raw_allocations() const {
  return {.memory = memory_.allocator().stats().raw_allocations +
                    static_cast<std::uint64_t>(memory_.staging().pinned_allocations()),
          .staging = staging_ ? staging_->raw_allocations() : 0};
}

Grid distributed_grid(RankDevice& rank, Communicator& bootstrap, int q, std::chrono::milliseconds timeout) {
  return distributed_grid(rank, bootstrap, q, 1, timeout);
}

std::unique_ptr<DeviceCommunicator> device_communicator(Communicator& bootstrap, DeviceRuntime& device) {
  const auto native = [](Communicator& b, DeviceRuntime& d) -> std::unique_ptr<DeviceCollectives> {
    switch (d.device()) {
      case Device::sim: return sim::Collectives::create(b, static_cast<sim::Runtime&>(d));
      case Device::cuda: return nccl_collectives(b, d);
      case Device::cpu: break;
    }
    OPTIMUS_FAIL("a device communicator on ", d.name(), ": not an accelerator");
  };
  return DeviceCommunicator::create(bootstrap, device, native);
}

std::unique_ptr<DeviceCommunicator> device_world(RankDevice& rank, Communicator& bootstrap,
                                                 std::chrono::milliseconds timeout) {
  std::unique_ptr<DeviceCommunicator> world = device_communicator(bootstrap, rank.runtime());
  world->set_compute_stream(&rank.stream());
  world->set_timeout(timeout);
  return world;
}

Grid distributed_grid(RankDevice& rank, Communicator& bootstrap, int q, int pp, std::chrono::milliseconds timeout) {
  Grid::check_world_size(bootstrap.size(), q, pp);  // before any device communicator starts
  const std::unique_ptr<DeviceCommunicator> world = device_world(rank, bootstrap, timeout);
  // The grid's communicators are splits of `world` (they inherit its compute stream and timeout) and outlive it.
  Grid grid = Grid::create(*world, q, pp);
  grid.place_on(&rank.memory(), rank.queue());
  return grid;
}

}  // namespace optimus

// One rank's accelerator — a GPU or the simulated device (optimus/core/device_runtime.hpp) — as a grid uses it: its
// compute stream, its memory (a caching pool with pinned staging: optimus/core/device_memory_pool.hpp), its GEMM
// engine (cuBLASLt, or the simulated one) and how its f32 GEMMs compute; and the two ways to build a grid on it:
//
//   RankDevice::grid(world, q[, pp])      an in-process world whose ranks (threads) share one device — a whole grid
//                                         on one GPU, since NCCL refuses two ranks on one device —, their exchanges
//                                         staged on the device (optimus/comm/device_staging.hpp);
//   distributed_grid(rank, bootstrap, q[, pp])
//                                         one rank per device (processes under MPI, or threads), the grid's
//                                         communicators device communicators (NCCL on GPUs, the simulated collectives
//                                         on sim: optimus/comm/device_communicator.hpp) bootstrapped over `bootstrap`.
// With pp, the world is dp x pp x q^2 ranks: a pipeline's stages, as Grid::create(world, q, pp) lays them out.
//
//   optimus::sim::Runtime device(optimus::sim::Options{});   // or: auto gpu = optimus::open_cuda_device(0);
//   optimus::run_in_process(q * q, [&](optimus::Communicator& world) {
//     optimus::RankDevice rank(device, optimus::ops::GemmMath::f32);
//     optimus::Grid grid = rank.grid(world, q);              // matrices made on it live on the device
//     ...
//   });
//
// This module sits above optimus::grid (it makes grids); layers and grids know nothing of it. Declare a RankDevice
// before anything placed on it: it must be destroyed last.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "optimus/comm/device_communicator.hpp"
#include "optimus/comm/device_staging.hpp"
#include "optimus/core/device_memory_pool.hpp"
#include "optimus/core/gemm_engine.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus {

class RankDevice {
 public:
  // Makes `device` current for the calling thread, then creates the stream, memory and GEMM engine on it. `math`: how
  // f32 GEMMs compute (ops::GemmMath). `device` must outlive the RankDevice.
  RankDevice(DeviceRuntime& device, ops::GemmMath math);
  RankDevice(const RankDevice&) = delete;
  RankDevice& operator=(const RankDevice&) = delete;

  // The queue of this rank's work: its stream, GEMM engine and math, scratch in its memory (untracked; a grid's
  // place_on counts its scratch in the grid's tracker instead).
  ops::Queue queue();
  // Makes `world` (in-process) stage its exchanges on this device, then a grid on it placed on this device.
  // Collective over `world`.
  Grid grid(Communicator& world, int q);
  // The same for a pipeline of pp stages (Grid::create(world, q, pp)).
  Grid grid(Communicator& world, int q, int pp);
  // Makes `world` (in-process) and the communicators split from it stage their exchanges on this device, for what
  // builds its own communicators from it (the 1D baseline's groups: megatron::Group, then Group::place_on). Every
  // world staged on one RankDevice shares its one staging area.
  void stage_on_device(Communicator& world);

  DeviceRuntime& runtime() const { return *device_; }
  DeviceStream& stream() const { return *stream_; }
  DeviceMemoryPool& memory() { return memory_; }
  GemmEngine& gemm() { return *gemm_; }
  // Raw allocations so far by this rank's memory pool and page-locked buffers (constant over a steady-state training
  // step), and by its in-process staging area (which grows, doubling, until it holds the most contributions that are
  // alive at once: how many depends on how far the ranks sharing the device run ahead of each other).
  struct Allocations {
    std::uint64_t memory = 0;
    std::uint64_t staging = 0;
  };
  Allocations raw_allocations() const;

 private:
  DeviceRuntime* device_;  // first: made current before the members below are created on it
  std::unique_ptr<DeviceStream> stream_;
  DeviceMemoryPool memory_;
  std::unique_ptr<GemmEngine> gemm_;
  ops::GemmMath math_;
  std::shared_ptr<DeviceStaging> staging_;  // set by grid(): the in-process exchanges of this rank
};

// A device communicator over `bootstrap` on `device`, one rank per bootstrap rank (collective over it): over the
// device's own collectives — NCCL on a GPU, the simulated NCCL on the simulated device — or staged through the host
// where two ranks share one device (DeviceCommunicator::create).
std::unique_ptr<DeviceCommunicator> device_communicator(Communicator& bootstrap, DeviceRuntime& device);

// A grid over device communicators, one rank per device: collective over `bootstrap` (a world of dp*q*q ranks, or
// optimus::Error on every rank before any device communicator starts). The grid is placed on `rank`'s device, its
// communicators ordered after `rank`'s stream and aborting an operation that runs longer than `timeout`.
Grid distributed_grid(RankDevice& rank, Communicator& bootstrap, int q,
                      std::chrono::milliseconds timeout = DeviceCommunicator::kDefaultTimeout);
// The same for a pipeline of pp stages (a world of dp*pp*q*q ranks, Grid::create(world, q, pp)).
Grid distributed_grid(RankDevice& rank, Communicator& bootstrap, int q, int pp, std::chrono::milliseconds timeout);
// The world of device communicators those grids are split from, for what lays out its own (the 1D baseline's groups):
// collective over `bootstrap`, ordered after `rank`'s stream, aborting an operation that runs longer than `timeout`.
// Communicators split from it outlive it.
std::unique_ptr<DeviceCommunicator> device_world(RankDevice& rank, Communicator& bootstrap,
                                                 std::chrono::milliseconds timeout);

}  // namespace optimus

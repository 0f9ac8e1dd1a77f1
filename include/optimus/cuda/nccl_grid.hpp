// A grid across GPUs: one process (MPI rank) per GPU, the grid's row, column, grid and data-parallel
// communicators NCCL ones split from a world bootstrapped over `bootstrap` (DESIGN.md section 3), their
// operations ordered after the rank's compute stream, and the grid placed on the rank's device:
//
//   optimus::Context ctx(argc, argv);                                   // MPI
//   optimus::cuda::RankDevice gpu(local_rank % optimus::cuda::device_count());
//   optimus::Grid grid = optimus::cuda::nccl_grid(gpu, ctx.world(), q);  // collective over the world
//
// Built when NCCL is found (OPTIMUS_WITH_NCCL). The grid, and everything made on it, must not outlive `gpu`.
#pragma once

#include "optimus/comm/nccl_communicator.hpp"
#include "optimus/cuda/rank_device.hpp"

namespace optimus::cuda {

// Collective over `bootstrap`: throws optimus::Error on every rank if its size is not dp*q*q.
inline Grid nccl_grid(RankDevice& gpu, Communicator& bootstrap, int q) {
  Grid::check_world_size(bootstrap.size(), q);  // before NCCL starts
  const std::unique_ptr<NcclCommunicator> world = NcclCommunicator::create(bootstrap, gpu.device.id);
  world->set_compute_stream(gpu.stream.get());
  // The grid's communicators are NCCL splits of `world` (they inherit its compute stream) and outlive it.
  Grid grid = Grid::create(*world, q);
  grid.place_on(&gpu.memory, gpu.queue());
  return grid;
}

}  // namespace optimus::cuda

// The simulated device under mpiexec: one process per device, the grid's communicators the simulated NCCL over MPI
// (distributed_grid). At N = q^2 ranks the device cases at q = sqrt(N); at N = 8, dp = 2 replicas of q = 2.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "../comm/collective_cases.hpp"
#include "../grid/overlap_cases.hpp"
#include "../layers/layer_cases.hpp"
#include "device_cases.hpp"
#include "offload_cases.hpp"
#include "optimus/comm/device_communicator.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/sim/runtime.hpp"
#include "test_world.hpp"

namespace {

using optimus::Grid;
using optimus::RankDevice;

int square_q() {
  const int n = optimus::test::world().size();
  const int q = static_cast<int>(std::lround(std::sqrt(n)));
  return q * q == n ? q : 0;
}

// fn(rank, grid) with this process's simulated device and a grid of q (dp = world / q^2) over the simulated NCCL.
template <class Fn>
void on_device_grid(int q, Fn&& fn) {
  optimus::sim::Runtime device(optimus::sim::Options{.delays = {.max_microseconds = 50, .seed = 1}});
  RankDevice rank(device, optimus::ops::GemmMath::f32);
  Grid grid = optimus::distributed_grid(rank, optimus::test::world(), q);
  fn(rank, grid);
}

}  // namespace

TEST_CASE("device communicators over MPI: every operation, host and device buffers, exact counters") {
  optimus::sim::Runtime device(optimus::sim::Options{});
  const auto comm = optimus::device_communicator(optimus::test::world(), device);
  CHECK(comm->backend() == "sim-nccl");
  optimus::test::check_collectives(*comm);
  optimus::test::check_counters(*comm);
  optimus::test::check_nonblocking(*comm);
}

TEST_CASE("processes that share one device stage their collectives through the host: every operation, exact counters") {
  // Every process names the same device, as processes on one GPU do (NCCL refuses them).
  optimus::sim::Runtime device(optimus::sim::Options{.shared_as = "one GPU"});
  const auto comm = optimus::device_communicator(optimus::test::world(), device);
  CHECK(comm->backend() == (optimus::test::world().size() > 1 ? "mpi-staged" : "sim-nccl"));
  optimus::test::check_collectives(*comm);
  optimus::test::check_counters(*comm);
  optimus::test::check_nonblocking(*comm);
}

TEST_CASE("two processes on one device make every process stage; devices of their own keep the simulated NCCL") {
  const int size = optimus::test::world().size();
  if (size < 4) return;
  const int rank = optimus::test::world().rank();
  // Processes 1 and 2 share a device, the others have their own (no identity, or one of their own).
  const std::string shared = rank == 1 || rank == 2 ? "shared" : rank == 3 ? "mine" : "";
  optimus::sim::Runtime one(optimus::sim::Options{.shared_as = shared});
  CHECK(optimus::device_communicator(optimus::test::world(), one)->backend() == "mpi-staged");
  optimus::sim::Runtime own(optimus::sim::Options{.shared_as = rank == 3 ? "mine" : ""});
  CHECK(optimus::device_communicator(optimus::test::world(), own)->backend() == "sim-nccl");
}

TEST_CASE("a training step of processes sharing one device, staged through the host, equals the host's bit for bit") {
  const int q = square_q();
  if (q == 0) return;
  optimus::sim::Runtime device(
      optimus::sim::Options{.delays = {.max_microseconds = 50, .seed = 3}, .shared_as = "one GPU"});
  RankDevice rank(device, optimus::ops::GemmMath::f32);
  Grid grid = optimus::distributed_grid(rank, optimus::test::world(), q);
  Grid host = Grid::create(optimus::test::world(), q);
  optimus::test::check_step_like_host(grid, host, true);
  optimus::test::check_products_like_host(grid, host, true);
}

TEST_CASE("every device case on a grid of one simulated device per process") {
  const int q = square_q();
  if (q == 0) return;
  on_device_grid(q, [](RankDevice&, Grid& grid) { optimus::test::check_device_grid(grid); });
}

TEST_CASE("a training step on the simulated devices equals the host's bit for bit; steady state; errors") {
  const int q = square_q();
  if (q == 0) return;
  on_device_grid(q, [&](RankDevice& rank, Grid& grid) {
    Grid host = Grid::create(optimus::test::world(), q);
    optimus::test::check_step_like_host(grid, host, true);
    optimus::test::check_products_like_host(grid, host, true);
    optimus::test::check_steady_state(rank, grid);
    optimus::test::check_device_errors(optimus::test::world(), rank, grid);
  });
}

TEST_CASE("dp = 2 replicas of q = 2 on simulated devices: bucketed gradient reduction and training") {
  if (optimus::test::world().size() != 8) return;
  on_device_grid(2, [](RankDevice&, Grid& grid) {
    REQUIRE(grid.dp() == 2);
    optimus::test::check_data_parallel_overlap_on(grid);
    optimus::test::check_f32_training_on(grid);
    Grid host = Grid::create(optimus::test::world(), 2);
    optimus::test::check_step_like_host(grid, host, true);
  });
}

namespace {

// A launch on one simulated device per process, each of `capacity` bytes, the grid over the simulated NCCL.
optimus::test::SimLaunch device_per_process(int q) {
  return [q](std::size_t capacity, const optimus::test::GridCase& fn) {
    optimus::sim::Runtime device(optimus::sim::Options{.capacity = capacity, .delays = {.max_microseconds = 50, .seed = 2}});
    {
      RankDevice rank(device, optimus::ops::GemmMath::f32);
      Grid grid = optimus::distributed_grid(rank, optimus::test::world(), q);
      fn(optimus::test::world(), rank, grid);
    }
    // This process's device is idle (its grid is gone); the totals are over every process's device.
    optimus::Communicator& world = optimus::test::world();
    const optimus::sim::Traffic t = device.traffic();
    const auto sum = [&](std::uint64_t v) {
      return static_cast<std::uint64_t>(world.all_reduce(static_cast<double>(v), optimus::ReduceOp::sum));
    };
    return optimus::test::SimTotals{
        .traffic = {.host_to_device = sum(t.host_to_device), .device_to_host = sum(t.device_to_host),
                    .device_to_device = sum(t.device_to_device)},
        .peak_bytes = static_cast<std::uint64_t>(
            world.all_reduce(static_cast<double>(device.peak_bytes_in_use()), optimus::ReduceOp::max)),
        .ranks_per_device = 1};
  };
}

}  // namespace

TEST_CASE("optimizer offload on one simulated device per process, each with a capacity") {
  if (square_q() == 2) optimus::test::check_optimizer_offload(device_per_process(2));  // np 4
}

TEST_CASE("model spilling on one simulated device per process") {
  if (square_q() == 2) optimus::test::check_model_spill(device_per_process(2));  // np 4
}

TEST_CASE("a spilled, offloaded model's checkpoint resumes in a plain model (a device per process)") {
  if (square_q() == 2) optimus::test::check_spill_checkpoint(device_per_process(2));  // np 4
}

TEST_CASE("a GPT whose parameters exceed each process's simulated device trains spilled") {
  if (square_q() == 2) optimus::test::check_spill_capacity(device_per_process(2));  // np 4
}

// Optimizer offload in-process on one simulated device shared by the grid's ranks (q = 1 and 2), its work delayed at
// random so that a missing event shows (offload_cases.hpp).
#include <doctest/doctest.h>

#include "offload_cases.hpp"
#include "optimus/comm/in_process.hpp"

namespace {

optimus::test::SimLaunch shared_device(int q) {
  return [q](std::size_t capacity, const optimus::test::GridCase& fn) {
    optimus::sim::Runtime device(optimus::sim::Options{.capacity = capacity,
                                                       .delays = {.max_microseconds = 100, .seed = 3}});
    optimus::run_in_process(q * q, [&](optimus::Communicator& world) {
      optimus::RankDevice rank(device, optimus::ops::GemmMath::f32);
      optimus::Grid grid = rank.grid(world, q);
      fn(world, rank, grid);
    });
    return optimus::test::SimTotals{.traffic = device.traffic(), .peak_bytes = device.peak_bytes_in_use()};
  };
}

}  // namespace

TEST_CASE("optimizer offload on one simulated device: q = 1") { optimus::test::check_optimizer_offload(shared_device(1)); }

TEST_CASE("optimizer offload on one simulated device shared by a q = 2 grid") {
  optimus::test::check_optimizer_offload(shared_device(2));
}

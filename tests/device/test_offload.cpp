// Offloading in-process on one simulated device shared by the grid's ranks (q = 1 and 2; dp = 2), its work delayed at
// random so that a missing event shows (offload_cases.hpp): AdamW's moments, the blocks' parameters and activations.
#include <doctest/doctest.h>

#include "offload_cases.hpp"
#include "optimus/comm/in_process.hpp"

namespace {

// q x q x dp ranks sharing one device.
optimus::test::SimLaunch shared_device(int q, int dp) {
  return [q, dp](std::size_t capacity, const optimus::test::GridCase& fn) {
    optimus::sim::Runtime device(optimus::sim::Options{.capacity = capacity,
                                                       .delays = {.max_microseconds = 100, .seed = 3}});
    optimus::run_in_process(q * q * dp, [&](optimus::Communicator& world) {
      optimus::RankDevice rank(device, optimus::ops::GemmMath::f32);
      optimus::Grid grid = rank.grid(world, q);
      fn(world, rank, grid);
    });
    return optimus::test::SimTotals{.traffic = device.traffic(), .peak_bytes = device.peak_bytes_in_use(),
                                    .ranks_per_device = q * q * dp};
  };
}

}  // namespace

TEST_CASE("optimizer offload on one simulated device: q = 1") {
  optimus::test::check_optimizer_offload(shared_device(1, 1));
}

TEST_CASE("optimizer offload on one simulated device shared by a q = 2 grid") {
  optimus::test::check_optimizer_offload(shared_device(2, 1));
}

TEST_CASE("model spilling on one simulated device: q = 1") { optimus::test::check_model_spill(shared_device(1, 1)); }

TEST_CASE("model spilling on grids: q = 2 on one simulated device") {
  optimus::test::check_model_spill(shared_device(2, 1));
}

TEST_CASE("model spilling on grids: two data-parallel replicas (q = 1) sharing one device") {
  optimus::test::check_model_spill(shared_device(1, 2));
}

TEST_CASE("a spilled, offloaded model's checkpoint resumes in a plain model: q = 1 and 2 on one device") {
  optimus::test::check_spill_checkpoint(shared_device(1, 1));
  optimus::test::check_spill_checkpoint(shared_device(2, 1));
}

TEST_CASE("a GPT whose parameters exceed the device trains spilled: q = 1") {
  optimus::test::check_spill_capacity(shared_device(1, 1));
}

TEST_CASE("a GPT whose parameters exceed the device trains spilled: q = 2 on one device") {
  optimus::test::check_spill_capacity(shared_device(2, 1));
}

// Optimizer offload on simulated devices with a capacity (layers/optimizer_offload.hpp): run in-process (ranks sharing
// one device, test_offload) and under MPI (a device per process, test_sim_mpi).
#pragma once

#include <cstddef>
#include <functional>

#include "device_world.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::test {

// What the simulated devices of a launch counted, read once every rank has finished: bytes copied, summed over the
// devices, and the most device memory any of them had allocated at once.
struct SimTotals {
  sim::Traffic traffic;
  std::uint64_t peak_bytes = 0;
};

// How a suite runs a case on fresh simulated devices of `capacity` bytes each: launch(capacity, fn) runs fn on every
// rank of its world, the grid (q x q, dp = 1) placed on the devices, and returns their totals.
using SimLaunch = std::function<SimTotals(std::size_t capacity, const GridCase& fn)>;

// Five AdamW steps of a GPT whose optimizer state dominates its device memory, without offload and with each update
// way: losses and parameters bit for bit; the peak device and host bytes of parameters, gradients and optimizer state
// equal the formulas exactly, and the peak device total moves by exactly the optimizer's change; the bytes copied
// equal the formula (the engine's count, and the device's counters against the run without offload); on devices whose
// capacity lies between what the offloaded run and the plain run hold, the plain run fails with the device's
// out-of-memory error and the offloaded runs train to the same bits. Refusals: a grid on the host, chunk_elements 0.
void check_optimizer_offload(const SimLaunch& sim);

}  // namespace optimus::test

// Offloading on simulated devices with a capacity — AdamW's moments (layers/optimizer_offload.hpp), the blocks'
// parameters, gradients and activations (layers/spill.hpp): run in-process (ranks sharing one device, test_offload)
// and under MPI (a device per process, test_sim_mpi).
#pragma once

#include <cstddef>
#include <functional>

#include "device_world.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::test {

// What the simulated devices of a launch counted, read once every rank has finished: bytes copied, summed over the
// devices, the most device memory any of them had allocated at once, and how many ranks each device served.
struct SimTotals {
  sim::Traffic traffic;
  std::uint64_t peak_bytes = 0;
  int ranks_per_device = 1;
};

// How a suite runs a case on fresh simulated devices of `capacity` bytes each: launch(capacity, fn) runs fn on every
// rank of its world, the grid (q x q, any dp) placed on the devices, and returns their totals.
using SimLaunch = std::function<SimTotals(std::size_t capacity, const GridCase& fn)>;

// Five AdamW steps of a GPT whose optimizer state dominates its device memory, without offload and with each update
// way: losses and parameters bit for bit; the peak device and host bytes of parameters, gradients and optimizer state
// equal the formulas exactly, and the peak device total moves by exactly the optimizer's change; the bytes copied
// equal the formula (the engine's count, and the device's counters against the run without offload); on devices whose
// capacity lies between what the offloaded run and the plain run hold, the plain run fails with the device's
// out-of-memory error and the offloaded runs train to the same bits. Refusals: a grid on the host, chunk_elements 0.
void check_optimizer_offload(const SimLaunch& sim);

// Five AdamW steps of a GPT of several blocks with its blocks spilled (parameters; parameters and activations), under
// recomputation none and full, in micro-batches, with and without optimizer offload: losses and parameters bit for
// bit those of the plain run; peak device and host bytes of every kind equal the formulas (spill.hpp); the spill's
// copies equal its formula, and the devices' counters the spill's and the optimizer's formulas over the plain run's;
// no raw allocation after the first step. Refusals: a grid on the host.
void check_model_spill(const SimLaunch& sim);

// A checkpoint of a spilled model whose optimizer is offloaded (every parameter and moment in host memory but the
// embedding's) loads into a plain model and plain AdamW, which train on to the uninterrupted spilled run's bits.
void check_spill_checkpoint(const SimLaunch& sim);

// A GPT whose parameters alone exceed the devices' capacity: the plain run and optimizer offload fail with the
// device's out-of-memory error; spilled, it trains to the bits of the plain run on unlimited devices.
void check_spill_capacity(const SimLaunch& sim);

}  // namespace optimus::test

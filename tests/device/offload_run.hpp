// The offload suites' training run (offload_cases.cpp, spill_cases.cpp): a GPT trained a few AdamW steps on a launch
// of simulated devices, with what each rank measured.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "offload_cases.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::test {

struct OffloadSetup {
  GptConfig config;
  std::int64_t batch = 0;  // sequences per replica
  std::int64_t micro_batches = 1;
  Recompute recompute = Recompute::none;
  Spill spill = Spill::none;
  std::optional<OptimizerOffload> offload;
  int steps = 5;
  ops::GemmMath math = ops::GemmMath::f32;  // the grid's (bf16: activations saved in bf16)
};

struct OffloadRun {
  std::vector<double> losses;
  std::map<std::string, GlobalMatrix> parameters;
  std::map<std::string, GlobalMatrix> first_gradients;  // after the first step's backward
  double evaluation = 0;                                 // the trained model's evaluate() of the batch
  GlobalMatrix logits;                                   // and its logits() of it
  // On the reporting rank (this process's first): local elements of all parameters, of those on the device (not a
  // spilled block's), of one block, of one block's weight matrices, of wte.
  std::int64_t local_parameters = 0, device_parameters = 0, block_parameters = 0, block_weights = 0, wte = 0;
  int ranks = 0;                       // in the world
  std::int64_t block_tensors = 0;      // parameter tensors per block
  MemoryTracker memory;                // the reporting rank's, peaks over the training steps
  TransferBytes moved;                 // the reporting rank's optimizer offload engine's, over the steps
  TransferBytes spilled;               // the reporting rank's spill's, over the steps
  sim::Traffic step_traffic;           // copies of all devices during the steps (a shared device counted once)
  std::uint64_t device_bytes = 0;      // the most raw device memory any device had allocated at once
  bool steady = false;                 // no raw allocation (device pool, page-locked activations) after step 1
};

// Trains `s` on fresh devices of `capacity` bytes (throws what the training throws, e.g. the device's out-of-memory
// error).
OffloadRun train_offloaded(const SimLaunch& sim, const OffloadSetup& s, std::size_t capacity);

// Losses and every parameter bit for bit.
void check_same_training(const OffloadRun& got, const OffloadRun& expected);

// The grid side q of the launch's grids.
int launch_q(const SimLaunch& sim);

}  // namespace optimus::test

// optimus-bench offload's measurement of one run: a GPT trained on a q x q grid of in-process ranks sharing one fresh
// device (the simulated device, or GPU 0), in one offload mode, with what the slowest rank took and what rank 0 held
// and moved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/programs/device_choice.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::bench {

struct OffloadSetup {
  DeviceChoice choice;  // the device, its capacity and copy bandwidth (simulated device)
  GptConfig config;
  std::int64_t batch = 0;  // sequences per step (one micro-batch)
  std::int64_t chunk = 0;  // elements per offloaded optimizer chunk
  OffloadUpdate update = OffloadUpdate::host;
  int warmup = 0, iters = 0;
  // Where the last timed forward + backward's device work goes as a Chrome trace (simulated device; empty: nowhere).
  std::string trace;
};

struct OffloadMeasured {
  // Medians over the timed steps of the slowest rank: the forward and backward, and AdamW's step.
  double train_s = 0, update_s = 0;
  // The forward and the backward apart (mode none only, where they are timed apart).
  double forward_s = 0, backward_s = 0;
  ModelShards shards;                  // rank 0's
  std::int64_t block_activations = 0;  // bytes one block saves per rank (block_saved_bytes, no recomputation)
  std::int64_t block_tensors = 0;      // parameter tensors per block
  MemoryTracker memory;                // rank 0's, peaks over the timed steps
  TransferBytes moved;                 // per step by rank 0's offload engines (optimizer and spill)
  sim::Traffic traffic;                // per step: the device's copies, all ranks (simulated device)
  std::uint64_t device_peak = 0;       // the most device memory allocated at once (simulated device)
  // The share of the spill's copies' time during the last timed forward + backward that the compute streams overlapped
  // (from the simulated device's timeline of that step; 0 when nothing was spilled, or on a GPU).
  double overlap = 0;
};

// Runs `s.warmup + s.iters` steps of `s.config` on a q x q grid in `mode`; throws what training throws (the device's
// out-of-memory error when it does not fit).
OffloadMeasured run_offload(const OffloadSetup& s, int q, Offload mode);

}  // namespace optimus::bench

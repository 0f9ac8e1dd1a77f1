// Internal to the pipeline module: the schedules made by list scheduling (the wave and ZB-H1).
#pragma once

#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline::detail {

// Fills schedule.ops (its kind, S, v, m and split_backward set) by playing the schedule out with unit costs
// (F = 1, B = 2; split: F = B_input = B_weight = 1), each stage, whenever it is free, starting the first of:
//   1. a ready backward (B, or B_input), the deepest chunk first (the longest way left to the first stage);
//   2. a ready forward, the lowest micro-batch first (deepest chunk among equals);
//   3. the oldest waiting B_weight (split schedules).
// What may run is limited as 1F1B limits it, virtual stage by virtual stage:
//   wave: each virtual stage u runs the operations of 1F1B on a pipeline of U virtual stages (U-u-1 forwards, then
//         one forward and one backward in turn, then the backwards), and the stage interleaves its chunks' lists;
//   ZB-H1: a forward waits while S-s micro-batches are in flight (forwarded, input gradient not computed) or S weight
//         gradients wait on the stage.
// Each chunk's forwards and backwards go in micro-batch order. docs/pipeline.md says how this follows Hanayo's wave
// and ZB-H1 and where it departs.
void list_schedule(Schedule& schedule);

}  // namespace optimus::pipeline::detail

// train_gpt's first step, checked: one fp64 training step of the model as train_gpt lays it out (a pipeline of one
// stage or more) against the plain reference (optimus/reference/gpt.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "gpt_data.hpp"
#include "training_loop.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/pipeline/schedule.hpp"
#include "optimus/plan/place.hpp"

namespace optimus::apps {

// The blocks of the check's model: one per virtual stage under a pipeline (every stage's chunks one block each), else
// min(layers, 2).
std::int64_t checked_layers(const GptConfig& config, const pipeline::Schedule& schedule);

// A step's batch: this replica's `batch` sequences, and every replica's in replica order (the global batch, which the
// reference trains on).
struct CheckBatch {
  const Batch& mine;  // [batch, s]
  const Batch& all;   // [batch * replicas, s]
  std::int64_t batch = 0;
};

// Collective over `world` (every rank of `place`: 2D grids or the 1D baseline's groups): the largest relative error,
// norm-wise per tensor, over the loss and every parameter gradient of one step of `config`'s model through the
// pipeline `schedule` (its stages the place's) against the reference, the same on every rank; each stage's gradients
// are compared on its first holder (grid rank 0, group rank 0) of replica 0.
double reference_check(Communicator& world, const plan::Place& place, const GptConfig& config, const CheckBatch& b,
                       const pipeline::Schedule& schedule);

// train_gpt's check, collective over `world`: one training step of the setup's model shape with checked_layers blocks on
// the host place (a grid, or the 1D baseline's groups) against the fp64 reference on rank 0, with step 0's global
// batch of the training data (every replica's setup.batch sequences, in replica order, as draw_step draws them);
// prints the error on rank 0 and throws the same optimus::Error on every rank past 1e-10. Resets the place's memory
// peaks after (the run reports training's).
void check_first_step(Communicator& world, const plan::Place& host, const Setup& setup,
                      const pipeline::Schedule& schedule);

}  // namespace optimus::apps

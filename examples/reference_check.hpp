// train_gpt's first step, checked: one fp64 training step of the model as train_gpt lays it out (a pipeline of one
// stage or more) against the plain reference (optimus/reference/gpt.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "optimus/core/gpt_config.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::examples {

// A step's batch: this replica's `batch` sequences, and every replica's in replica order (the global batch, which the
// reference trains on).
struct CheckBatch {
  const std::vector<int>& tokens;
  const std::vector<int>& targets;
  const std::vector<int>& all_tokens;
  const std::vector<int>& all_targets;
  std::int64_t batch = 0;
};

// Collective over `world` (every rank of `grid`): the largest relative error, norm-wise per tensor, over the loss and
// every parameter gradient of one step of `config`'s model through the pipeline `schedule` (grid.pp() =
// schedule.stages) against the reference, the same on every rank; each stage's gradients are compared on its grid
// rank 0 of replica 0.
double reference_check(Communicator& world, const Grid& grid, const GptConfig& config, const CheckBatch& b,
                       const pipeline::Schedule& schedule);
// The 1D baseline through `schedule` (one stage or more) on `group` (megatron::Group::pipeline_stage): each stage's
// gradients are compared on its group rank 0 of replica 0.
double reference_check(Communicator& world, const megatron::Group& group, const GptConfig& config,
                       const CheckBatch& b, const pipeline::Schedule& schedule);

}  // namespace optimus::examples

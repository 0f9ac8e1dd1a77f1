// The pipeline GPT's bitwise cases, run in-process (test_pipeline) and under mpiexec (test_pipeline_mpi): one step of
// pp = 1's Gpt2D::train_step, then the same step through a schedule, the loss on every rank and every gradient of
// every stage compared bit for bit; then AdamW across the stages (the norm and the updated parameters) and the updated
// model's evaluation and logits, bit for bit too.
#pragma once

#include <cstdint>
#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::test {

struct PipelineCase {
  int dp, stages, q;
  pipeline::Kind kind;
  int chunks;
  std::int64_t layers;
  int micro_batches;
};

// pp = 1's loss and gradients for the case, f64 and f32, computed in-process on dp*q*q threads.
struct PipelineReference;
std::shared_ptr<const PipelineReference> pipeline_reference(const PipelineCase& c);

// On `world` of dp*stages*q*q ranks, f64 and f32, against `expected`.
void check_pipeline_gpt(Communicator& world, const PipelineCase& c, const PipelineReference& expected);

}  // namespace optimus::test

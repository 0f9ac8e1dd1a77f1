// The pipeline GPT's bitwise cases, run in-process (test_pipeline) and under mpiexec (test_pipeline_mpi): one step of
// pp = 1's train_step (the model on one stage), then the same step through a schedule, the loss on every rank and every gradient of
// every stage compared bit for bit; then AdamW across the stages (the norm and the updated parameters) and the updated
// model's evaluation and logits, bit for bit too.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/recompute.hpp"
#include "optimus/layers/spill.hpp"
#include "optimus/pipeline/dynamic_order.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::test {

// The pipeline's blocks save under `recompute` and its GEMMs run in `math` (f32 values only; f64 ignores it); pp = 1
// runs the same math without recomputation, which changes no bit, on the CPU. With `on_sim`, each rank of the pipeline
// computes on its own simulated device (distributed_grid: its messages between stages on the device communicators,
// which match by order, not tag) with random delays: the simulated device promises the CPU's bits; there AdamW's
// moments may be offloaded (`offload_optimizer`) and each stage's blocks spilled (`spill`: every chunk through its own
// two slots), which promise the same bits again. `order`: the pipeline's execution (dynamic: message-driven, which
// the sim's delays reorder), the same bits again, and activation bytes within the static order's peak.
struct PipelineCase {
  int dp, stages, q;
  pipeline::Kind kind;
  int chunks;
  std::int64_t layers;
  int micro_batches;
  Recompute recompute = Recompute::none;
  ops::GemmMath math = ops::GemmMath::f32;
  bool on_sim = false;
  bool offload_optimizer = false;  // on_sim only
  Spill spill = Spill::none;       // on_sim only
  pipeline::Order order = pipeline::Order::static_order;  // Gpt::set_execution
};

// The 1D (Megatron) baseline through a pipeline: `stages` stages, each a group of p ranks (world stages*p), against the
// whole Gpt1D on p ranks with the same micro-batches (2 sequences each).
struct Pipeline1DCase {
  int stages = 2, p = 1;
  pipeline::Kind kind = pipeline::Kind::one_f_one_b;
  int chunks = 1;
  std::int64_t layers = 2;
  int micro_batches = 4;
  Recompute recompute = Recompute::none;  // the pipeline's blocks'; pp = 1 saves everything
  pipeline::Order order = pipeline::Order::static_order;
};

// pp = 1's loss and gradients for the case, f64 and f32, computed in-process on dp*q*q threads (1D: p threads).
struct PipelineReference;
std::shared_ptr<const PipelineReference> pipeline_reference(const PipelineCase& c);

// pp = 1's results for a suite's cases, each computed once per shape (dp, q, layers, micro-batches, GEMM math): a case's
// schedule, recomputation, device and offload do not change them.
class PipelineReferences {
 public:
  const PipelineReference& of(const PipelineCase& c);

 private:
  std::map<std::tuple<int, int, std::int64_t, int, int>, std::shared_ptr<const PipelineReference>> made_;
};

// On `world` of dp*stages*q*q ranks, f64 and f32, against `expected`.
void check_pipeline_gpt(Communicator& world, const PipelineCase& c, const PipelineReference& expected);

std::shared_ptr<const PipelineReference> pipeline_reference(const Pipeline1DCase& c);
// The same comparisons (but the logits and the memory prediction, which are the 2D model's) on stages*p ranks.
void check_pipeline_gpt(Communicator& world, const Pipeline1DCase& c, const PipelineReference& expected);

}  // namespace optimus::test

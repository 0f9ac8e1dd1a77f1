// A layout: how a GPT is laid out on the ranks of a job and how one training step runs — the point the planner
// (planner.hpp) chooses in the space
//   dp x pp x {2D: a q x q grid | 1D: a tensor-parallel group of t} x schedule x chunks x micro-batches x offload
// with one recomputation policy per transformer block. ranks = dp * pp * tp, tp = q^2 (2D) or t (1D).
//
// Optimus runs every layout (model/gpt.hpp, built by build.hpp's build_gpt); runnable() leaves out offloading without a
// device (meaningless) and a pipeline's offload (the memory model does not count it yet), saying which.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/grid/mesh.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/layers/recompute.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::plan {

using optimus::TensorParallel;  // optimus/grid/mesh.hpp: 2D or 1D, and name_of it

struct Layout {
  TensorParallel tensor = TensorParallel::two_d;
  int tp = 1;                                             // ranks per stage: q*q (2D) or t (1D)
  int dp = 1;                                             // data-parallel replicas
  int pp = 1;                                             // pipeline stages
  pipeline::Kind schedule = pipeline::Kind::one_f_one_b;  // pp > 1
  int chunks = 1;                                         // model chunks per stage (interleaved, wave)
  int micro_batches = 1;                                  // per replica and step
  Offload offload = Offload::none;
  std::vector<Recompute> recompute;  // [layers]: each block's policy

  bool two_d() const { return tensor == TensorParallel::two_d; }
  int q() const;  // the grid side (2D); 1 for 1D
  // The ranks a layer's heads and wte's vocabulary rows are split over: q (2D) or tp (1D).
  int head_parts() const { return tensor == TensorParallel::one_d ? tp : q(); }
  int ranks() const { return dp * pp * tp; }
  // Block `layer`'s recomputation (none where the layout names no policies).
  Recompute recompute_of(std::int64_t layer) const {
    return recompute.empty() ? Recompute::none : recompute[static_cast<std::size_t>(layer)];
  }
};

// What the run trains: the model, the global batch (sequences per step over all replicas) and the precision.
struct Workload {
  GptConfig config;
  std::int64_t global_batch = 0;   // sequences per step
  std::int64_t seq = 0;            // tokens per sequence (<= config.max_seq)
  std::int64_t element_bytes = 4;  // t: bytes of a parameter and of an activation element (4: f32, 8: f64)
  std::int64_t saved_bytes = 4;    // e: bytes of a saved activation element (2 under bf16 GEMMs with f32 values)
};

// The layout's schedule: its kind on its stages, chunks and micro-batches; pp = 1: the whole model on one stage
// (pipeline::one_stage). Throws optimus::Error where the schedule refuses them.
pipeline::Schedule schedule_of(const Layout& layout);

// "2D q=2 dp=2 pp=2 1f1b m=4 offload=none recompute=none*2" — one line naming every choice.
std::string describe(const Layout& layout);
// The ranks as a pipeline runs them: "dp 1 x pp 2 x q 2 x q 2", "pp 2 x p 4 (1D stages)".
std::string describe_ranks(const Layout& layout);
// The recomputation policies run-length encoded: "none*6,full*2".
std::string describe_recompute(const std::vector<Recompute>& policies);

// Empty when Optimus can run the layout on the cluster's kind of rank (with a device or not); else what is missing.
std::string runnable(const Layout& layout, bool has_device);

// Empty when the layout fits the workload's shapes: ranks, divisibility of heads, hidden, ffn, the vocabulary and the
// batch (per replica and micro-batch), the schedule's rules; else why not, naming the values.
std::string shape_error(const Layout& layout, const Workload& workload);

}  // namespace optimus::plan

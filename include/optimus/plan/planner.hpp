// optimus-plan's library call: the fastest layouts (layout.hpp) of a workload that fit a cluster (cluster.hpp), found
// as Galvatron does (docs/planner.md):
//   1. enumerate dp x pp x {2D q | 1D t} x schedule x chunks x micro-batches x offload, every product of dp, pp and the
//      stage's ranks equal to the GPU count, the shapes' divisibility rules (layout.hpp's shape_error) kept;
//   2. prune: a layout whose model states alone (parameters, gradients, optimizer: memory_model.hpp) exceed the device
//      is rejected before anything else; an offload mode is tried only where the layout without it does not fit or
//      must recompute (offload only pays for memory); micro-batch counts are the divisors of the replica's batch up to
//      Request::max_micro_batches;
//   3. recomputation per block by Galvatron's dynamic programme (recompute_dp.hpp) on each stage under what the device
//      has left, a block holding its saved bytes times the micro-batches in flight on its stage;
//   4. the step time of what remains (time_model.hpp); plans sorted by it, each with the reason it ranks where it does.
// Memory and time come from the formulas the trackers and the benches check (memory_model.hpp, time_model.hpp).
//
// Nothing fits: Result::infeasible names the least device memory per rank that some layout of these GPUs would need,
// and the smallest GPU count (up to 4x the request) for which a layout fits; a GPU count that admits no layout at all
// (no dp x pp x tp satisfies the shapes) says which rule fails and the nearest counts that admit one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "optimus/plan/cluster.hpp"
#include "optimus/plan/layout.hpp"
#include "optimus/plan/memory_model.hpp"
#include "optimus/plan/time_model.hpp"

namespace optimus::plan {

// How far a plan is: the candidate layouts checked against the model's shapes so far (total 0: not known yet), then
// the layouts evaluated of all that passed.
struct Progress {
  enum class Phase { enumerating, evaluating };
  Phase phase = Phase::enumerating;
  std::int64_t done = 0;
  std::int64_t total = 0;
};

struct Request {
  Workload workload;
  Cluster cluster;
  std::optional<TensorParallel> only;  // restrict to 2D or to 1D layouts
  std::optional<int> dp, pp;           // fix the replicas or the stages (e.g. dp = pp = 1: tensor parallelism alone)
  bool runnable_only = false;          // only what Optimus runs on the cluster's kind of rank (layout.hpp)
  int max_micro_batches = 64;
  int max_chunks = 4;  // interleaved and wave: v in 2 .. max_chunks
  // Called for each candidate layout as the layouts are enumerated (the pipelines' shapes are checked, which takes a
  // while for thousands of stages), then for each layout evaluated: a long plan's progress. Empty: none.
  std::function<void(const Progress&)> progress = {};
};

struct Plan {
  Layout layout;
  MemoryPrediction memory;  // the stage with the most device memory
  StepPrediction time;
  double recompute_seconds = 0;  // of time.pipeline: the recomputation's share
  std::string runnable;          // empty, or what Optimus lacks to run it (layout.hpp's runnable)
  std::string why;               // why it ranks where it does (filled by plan())
};

struct Rejected {
  Layout layout;
  std::string why;
};

struct Result {
  std::vector<Plan> plans;          // the feasible ones, fastest first
  std::vector<Rejected> rejected;   // the layouts memory rules out, and why
  std::int64_t enumerated = 0;      // layouts that satisfy the shapes
  std::int64_t pruned_states = 0;   // rejected: model states exceed the device
  std::int64_t pruned_memory = 0;   // rejected: no recomputation fits the activations
  std::int64_t pruned_offload = 0;  // offload modes not tried (the layout fits without)
  std::int64_t not_runnable = 0;    // left out by Request::runnable_only
  std::string infeasible;           // when plans is empty: why, and what would work
};

// Throws optimus::Error for an invalid request (validate(cluster), the GptConfig's own rules, batch or seq < 1).
Result plan(const Request& request);

// The best plan of a result, the fastest one Optimus runs, or nullopt.
std::optional<Plan> best_runnable(const Result& result);

// The plan's recomputation for one layout under the budget (steps 3 and 4): nullopt when nothing fits.
std::optional<Plan> evaluate(const Layout& layout, const Request& request);

}  // namespace optimus::plan

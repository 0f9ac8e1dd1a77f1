// Running a plan on real ranks (optimus-bench plan, which checks the planner against measurements): the layout's GPT
// built as train_gpt builds it — model/gpt.hpp's Gpt2D or Gpt1D with the layout's stages, schedule (one stage at
// pp = 1), micro-batches, replicas and recomputation per block — on CPU ranks in f32 (T = float), AdamW after every
// step, a few steps of random tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/plan/layout.hpp"
#include "optimus/plan/memory_model.hpp"

namespace optimus::plan {

struct Measured {
  double step_seconds = 0;  // the median over the timed steps of the slowest rank's step (forward, backward, AdamW)
  KindBytes device, host;   // this rank's peaks by kind over the whole run (its memory tracker); on CPU ranks
                            // `device` is the rank's own memory (the plan's device memory) and `host` is empty
  int stage = 0;            // this rank's pipeline stage
  double loss = 0;          // the last step's loss
  double call_participants = 0;  // per timed step, over this rank's collective calls on communicators of two ranks
                                 // or more (its grid's, or its 1D group's), the sum of their sizes (the counters)
};

// n token ids in [0, vocab), element i drawn by CounterRng(seed, 0) at (i, 0): the same ids on any layout (the runs'
// batches here and optimus-bench pipeline's).
std::vector<int> random_ids(std::int64_t n, std::int64_t vocab, std::uint64_t seed);

// Whether run_plan runs `layout` with `workload`: the layout runnable on CPU ranks (layout.hpp's runnable), a shape it
// divides (shape_error) and an f32 workload (element and saved bytes 4).
bool runs_on_cpu(const Layout& layout, const Workload& workload);

// Collective over `world` (world.size() == layout.ranks()): `warmup` untimed steps, then `steps` timed ones. The
// layout and workload must be ones runs_on_cpu accepts; optimus::Error naming what is wrong otherwise.
Measured run_plan(Communicator& world, const Layout& layout, const Workload& workload, int warmup, int steps);

// The layout's collective calls in one step, each counted once per participant (the sum over all ranks of
// Measured::call_participants): one step run on layout.ranks() in-process ranks, as run_plan runs it. The counts
// depend on the layout and the model's layers, not on the sizes. The same requirements as run_plan.
double count_call_participants(const Layout& layout, const Workload& workload);

}  // namespace optimus::plan

// optimus::sweep — many models trained at once for model selection (HYDRA, Nagrecha and Kumar): the schedule of a
// sweep's shard runs on its slots, as data, and its simulator (docs/design.md, "Sweeps").
//
// A member's training step is a chain of shard runs — forward shards 0..S-1, then backward S-1..0 (a shard's optimizer
// step right after its backward, its gradients then whole) — run in that order, each on any slot, one run at a time
// per slot. A shard's state lives in host memory and is copied into the slot before it computes; a slot holds two
// shards (double buffering), so the copy of its next run overlaps its current compute: it may start once the
// current run has started computing.
//
// The slot that can start computing first (the lower index on a tie) takes the next run: the scheduler picks a member
// whose next run could start computing by then (none: the one that is ready first), and the run's copy starts as soon
// as the slot's other buffer is free. Among those members
//   lrtf        : Sharded-LRTF, the one with the longest remaining training time (its remaining runs' compute);
//   round_robin : the next after the one chosen last, in member order;
// ties go to the lower member index. With the runtime's placement (ShardPlacement::slot_per_shard below) the runs
// follow the runtime's rules instead: a step's ends (ShardCosts::end) run on every shard's slot after its last
// backward, and lrtf counts the remaining training time in whole steps (steps left times the member's step compute),
// between equal ones preferring the member with the most of its step's runs done on the slot (then the lower index).
// The baseline HYDRA compares against:
//   model_parallel : one member at a time (the next one's first copy after the last one's last run), shard k always on
//                    slot k mod D, no micro-batches: its runs one after another, only the copies overlapping;
//   pipeline       : one member at a time, its shards grouped into min(S, D) consecutive stages (stage p: shards
//                    [p*S/P, (p+1)*S/P)), one per slot, resident (no copies: the model fits the slots together), each
//                    step a GPipe or 1F1B pipeline (optimus/pipeline) of m micro-batches, a micro-batch's forward and
//                    backward costing 1/m of the whole batch's, then every stage's ends at once (simulate_pipeline).
// The timeline is a prediction: the runtime (runtime.hpp) applies the same rules as inputs arrive, and optimus-bench
// sweep measures it beside this. Moving boundary activations between slots is not modelled.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "optimus/pipeline/schedule.hpp"

namespace optimus::sweep {

// One shard of a member on a slot, in seconds: its forward; its backward (HYDRA's: with its optimizer step); moving its
// state into the slot (and what it changed back out); its part of the step's end (the runtime's: the stages' sums and
// the optimizer's update, which run on each slot after the step's last backward — simulate with the runtime's
// placement and model parallelism run it so, HYDRA's placement adds it to the shard's backward).
struct ShardCosts {
  double forward = 0, backward = 0, copy = 0, end = 0;
};

// A member as the scheduler sees it: its shards in model order and its training steps.
struct MemberWork {
  std::string name;
  std::vector<ShardCosts> shards;
  int steps = 1;
};

enum class Scheduler { lrtf, round_robin, model_parallel, pipeline };
// "lrtf", "round-robin", "model-parallel" or "pipeline"; optimus::Error naming the text otherwise.
Scheduler parse_scheduler(std::string_view name);
std::string_view name_of(Scheduler scheduler);

// One shard run: whose, which (step from 0, shard, direction), where, and when its copy began (taking copy_seconds),
// its compute began and ended. A pipeline stage's run covers `shards` shards from `shard`, on one micro-batch.
struct ShardRun {
  int member = 0, step = 0, shard = 0;
  bool backward = false;
  bool step_end = false;  // the shard's part of the step's end (ShardCosts::end)
  int slot = 0;
  double copy_start = 0, start = 0, end = 0;
  double copy_seconds = 0;
  int shards = 1;
  int micro_batch = -1;  // the pipeline baseline's; -1: the whole batch
};

// The runs in the order the scheduler placed them, and when the last one ends.
struct SweepTimeline {
  std::vector<ShardRun> runs;
  double makespan = 0;
};

// The sweep's runs on `slots` slots as `scheduler` places them, with these costs. optimus::Error (naming the member and
// the value) unless slots >= 1, every member has a shard and a step, and every cost is finite and not negative; and for
// Scheduler::pipeline, which takes its schedule (simulate_pipeline).
SweepTimeline simulate(const std::vector<MemberWork>& members, int slots, Scheduler scheduler);
// Where a member's shards may run: on any slot (HYDRA's, simulate above), or shard k always on slot k mod D — the
// runtime's (optimus/sweep/runtime.hpp), where each member is a pipeline of one stage per slot: the slot that can start
// a run first takes one of the members whose next run is its shard, as the scheduler picks. (model_parallel places
// shard k on slot k mod D either way.)
enum class ShardPlacement { any_slot, slot_per_shard };
SweepTimeline simulate(const std::vector<MemberWork>& members, int slots, Scheduler scheduler,
                       ShardPlacement placement);

// The pipeline baseline's schedule: GPipe or 1F1B (HYDRA's baselines), on `micro_batches` micro-batches per step.
struct PipelineBaseline {
  pipeline::Kind kind = pipeline::Kind::one_f_one_b;
  int micro_batches = 1;
};
// The pipeline baseline's runs (a stage's forward or backward of one micro-batch each), members one after another,
// each step's pipeline after the last. optimus::Error as simulate's, and unless the kind is GPipe or 1F1B and
// micro_batches >= 1.
SweepTimeline simulate_pipeline(const std::vector<MemberWork>& members, int slots, PipelineBaseline baseline);

// The timeline drawn `width` characters wide, a line per slot: the member computing (A, B, ... in member order; '#'
// past Z) or '.' idle, then a legend line per member.
std::string gantt(const SweepTimeline& timeline, const std::vector<MemberWork>& members, int slots, int width);

// The timeline as a Chrome trace (chrome://tracing, Perfetto), in microseconds: process 0 the runs, a thread per slot,
// each named "MEMBER F|B shard K step S" ("MEMBER F|B shards K-L micro-batch I step S" for a pipeline stage's); process
// 1 the copies into each slot ("MEMBER copy shard K"), where a run copies.
std::string chrome_trace(const SweepTimeline& timeline, const std::vector<MemberWork>& members);

}  // namespace optimus::sweep

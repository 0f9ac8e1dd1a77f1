// Replays a pipeline schedule (schedule.hpp) with given operation costs: each stage runs its list in order, and an
// operation starts when the stage is free and its dependencies have finished (plus `p2p` when the dependency ran on
// another stage). Gives the makespan, the bubble (the idle fraction of the stages' time), each stage's peak of live
// activations, the messages between stages, and every operation's start and end — with unit costs, the textbook
// numbers:
//   GPipe, 1F1B (F = 1, B = 2):          bubble (S-1) / (m + S-1)
//   interleaved, v chunks (F = 1, B = 2): bubble (S-1) / (v*m + S-1)
//   ZB-H1 (F = B_input = B_weight = 1):   bubble (S-1) / (3m + S-1)
// (docs/pipeline.md gives the wave's). An activation is live from its chunk's F until its backward has finished
// (B, or B_weight when split); 1F1B's stage s peaks at min(S-s, m).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/pipeline/dynamic_order.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline {

// Seconds (or units) per operation on one chunk, and per message between stages.
struct Costs {
  double forward = 1;
  double backward = 2;         // B (split schedules: backward_input + backward_weight)
  double backward_input = 1;
  double backward_weight = 1;
  double p2p = 0;
};

struct Interval {
  double start = 0;
  double end = 0;
};

struct Simulation {
  double makespan = 0;
  double bubble = 0;                          // 1 - (busy time of all stages) / (S * makespan)
  std::vector<int> peak_live;                 // [S]: most chunk activations alive at once
  // [S]: messages between stages — an activation sent forward or a gradient sent back, one per micro-batch and
  // boundary between virtual stages on different stages; on a q x q grid each rank sends its block of each.
  std::vector<int> sends, receives;
  std::vector<std::vector<Interval>> times;   // [S][i]: when stage s ran its i-th operation
};

// Throws optimus::Error (as validate() does) for a schedule that would wait forever.
Simulation simulate(const Schedule& schedule, const Costs& costs);
// The same with each virtual stage's own costs ([U]; a message costs the receiving operation's p2p), as measured by
// optimus-bench pipeline: the end stages' chunks also run the embedding, or ln_f and the head.
Simulation simulate(const Schedule& schedule, const std::vector<Costs>& by_virtual_stage);

// How a replay runs the lists: in order (static) or message-driven (dynamic_order.hpp: each stage, once free, starts
// the allowed operation whose dependencies are done first, the list order breaking ties), each operation's cost
// multiplied by 1 + jitter * jitter_draw(step, stage, i) — the delay a run with the same Execution and step injects.
struct Replay {
  Execution execution;
  std::uint64_t step = 0;
};
// times[s][i] is list entry i's interval, whatever order the replay ran them in.
Simulation simulate(const Schedule& schedule, const std::vector<Costs>& by_virtual_stage, const Replay& replay);

// The cost of `op` under `costs`.
double cost_of(const Costs& costs, Work work);

// One text row per stage with the simulated times drawn to scale, three characters per `unit` of time: an operation
// is its name padded with '-' to its length and a space (cut short if it does not fit), idle time is '.'. For 1F1B, S = 2, m = 2 (F = 1, B = 2, unit 1):
//   stage 0 |F0 F1 ......B0----B1----|
//   stage 1 |...F0 B0----F1 B1----...|
// Used by docs/pipeline.md and optimus-bench pipeline.
std::vector<std::string> chart(const Schedule& schedule, const Simulation& simulation, double unit);

}  // namespace optimus::pipeline

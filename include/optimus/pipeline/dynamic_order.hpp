// Message-driven execution of a pipeline schedule (AxoNN's, docs/pipeline.md "Dynamic execution"): a stage runs any of
// its operations that may run now and whose input has arrived, rather than waiting for the one its list names next.
//
// The schedule's list (schedule.hpp) stays the source of truth; DynamicOrder says which of a stage's operations its
// rules allow now. The executor (model/gpt_stage_run.hpp) runs the first of them, in list order, whose input is here;
// the simulator (simulator.hpp's Replay) the one that can start first, ties in list order. An operation at list index
// i may run once
//   1. every earlier operation of its work and chunk has run (F; B or B_input; B_weight: each chunk takes micro-batches
//      in order, so every gradient — and the last stage's loss — accumulates in pp = 1's order: bitwise the same);
//   2. its own stage's dependency has run: F(k, c) before B(k, c) or B_input(k, c), B_input(k, c) before B_weight;
//   3. for a forward: every backward listed before i has run. So the activations alive are always a subset of those
//      alive after some prefix of the list — never more bytes than the list's peak (memory.hpp), whatever the bytes
//      of each chunk; backwards, which only free, may run early.
// Running the first operation of the list not yet run is always allowed (it satisfies all three), so a stage can
// always fall back on its static order, and the stages together never wait forever where the static schedule does not
// (the operation with the earliest start in the static replay is always allowed and its inputs are always sent).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline {

// static_order: each stage runs its list in order. dynamic: as above.
enum class Order { static_order, dynamic };
// "static", "dynamic" (train_gpt's and optimus-bench pipeline's --execution).
Order parse_order(std::string_view name);
std::string_view name_of(Order order);

// How a pipeline's operations run: their order, and a deterministic delay injected after each operation's compute, for
// measuring (optimus-bench pipeline --jitter): an operation that took d seconds is followed by a wait of
// jitter * jitter_draw(step, stage, i) * d. 0: none.
struct Execution {
  Order order = Order::static_order;
  double jitter = 0;
};

// A draw in [0, 1), the same for the same (step, stage, list index) on every rank and in the simulator.
double jitter_draw(std::uint64_t step, int stage, std::size_t index);

class DynamicOrder {
 public:
  // Throws optimus::Error if `stage` is not one of the schedule's.
  DynamicOrder(const Schedule& schedule, int stage);

  // The list indices (ascending) the rules allow now; empty once every operation has run.
  std::vector<std::size_t> allowed() const;
  bool allows(std::size_t index) const;
  // Records that operation `index` ran; throws optimus::Error naming it unless allowed.
  void ran(std::size_t index);
  bool done() const { return remaining_ == 0; }
  // The next operation not yet run of each kind (F; B or B_input; B_weight) and chunk, allowed or not (ascending):
  // whose inputs a stage receives next, and so posts receives for ahead.
  std::vector<std::size_t> heads() const;
  // The first operation of the list not yet run (the static order's next); the list's size once done.
  std::size_t first_not_run() const;

 private:
  const Schedule* schedule_;
  const std::vector<Op>* ops_;
  int stage_;
  std::vector<bool> run_;                 // [i]
  std::vector<std::size_t> first_of_;     // [class * v + c]: the first index of the class and chunk not yet run
  std::vector<std::size_t> own_;          // [i]: the index of op i's dependency on this stage, or the list's size
  std::size_t first_backward_ = 0;        // the first backward (B, B_input, B_weight) not yet run, or the list's size
  std::size_t remaining_ = 0;
  std::size_t class_of(const Op& op) const;  // 0: F, 1: B or B_input, 2: B_weight
};

}  // namespace optimus::pipeline

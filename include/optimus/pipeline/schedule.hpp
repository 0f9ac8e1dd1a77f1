// Pipeline schedules as data (docs/pipeline.md): which operations each pipeline stage runs, and in which order.
//
// Placement. The model's layers are cut into U = S*v consecutive pieces, the virtual stages u = 0 .. U-1 (u = 0 starts
// with the embedding, u = U-1 ends with ln_f and the head). Each of the S stages holds v of them, its chunks
// c = 0 .. v-1:
//   GPipe, 1F1B, ZB-H1 (v = 1):  u = s
//   interleaved (Megatron):       u = c*S + s                          (every stage's chunk c, then chunk c+1)
//   wave (Hanayo):                u = c*S + s        for even c,
//                                 u = c*S + S-1-s    for odd c          (down the stages, then back up)
// For S = 4, v = 2: interleaved puts u = 0..7 on stages 0 1 2 3 0 1 2 3, the wave on stages 0 1 2 3 3 2 1 0 — so
// in the wave the turn (u = 3 -> 4) stays on stage 3 and the last piece (the head) is on stage 0, with the
// embedding.
//
// Operations. On micro-batches k = 0 .. m-1: F (forward of k on a chunk), B (its whole backward), or, split as in
// zero-bubble pipelines, B_input (the input gradient, which the previous virtual stage waits for) and B_weight (the
// weight gradients, which nobody waits for). Dependencies, for micro-batch k:
//   F(k, u)        after F(k, u-1)                         (the activation, sent from u-1's stage)
//   B(k, u)        after F(k, u) and B(k, u+1)             (the gradient, sent from u+1's stage; u = U-1: the loss)
//   B_weight(k, u) after B_input(k, u)
// Every schedule made here, and every schedule validate() accepts, runs the backward (B, or B_weight) of each chunk
// in micro-batch order 0, 1, ..., m-1: each parameter's gradient is accumulated in the same order as with pp = 1 and
// the same micro-batches, so all schedules give bitwise the same gradients.
//
// Errors: make_schedule refuses sizes below 1, a chunk count the kind does not take (GPipe, 1F1B, ZB-H1: 1; wave: at
// least 2), and for interleaved m not a multiple of S (Megatron's grouping of micro-batches); validate() names the
// stage and the operation that breaks a rule or would wait forever.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optimus::pipeline {

enum class Kind { gpipe, one_f_one_b, interleaved, wave, zero_bubble };

// "gpipe", "1f1b", "interleaved", "wave", "zb" (the names train_gpt --schedule takes).
Kind parse_kind(std::string_view name);
std::string_view name_of(Kind kind);

enum class Work { forward, backward, backward_input, backward_weight };

struct Op {
  Work work = Work::forward;
  int micro_batch = 0;  // k in [0, m)
  int chunk = 0;        // the stage's chunk c in [0, v)
};

struct Schedule {
  Kind kind = Kind::one_f_one_b;
  int stages = 1;          // S
  int chunks = 1;          // v: chunks per stage
  int micro_batches = 1;   // m
  bool split_backward = false;  // B_input and B_weight instead of B
  std::vector<std::vector<Op>> ops;  // [S]: each stage's operations in the order it runs them

  int virtual_stages() const { return stages * chunks; }
  // The virtual stage that stage s's chunk c holds, and back.
  int virtual_stage(int stage, int chunk) const;
  int stage_of(int virtual_stage) const;
  int chunk_of(int virtual_stage) const;
};

struct ScheduleRequest {
  Kind kind = Kind::one_f_one_b;
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;
};

// The schedule of `request`'s kind (docs/pipeline.md shows each at S = 4). Throws optimus::Error naming the value
// that the kind cannot take.
Schedule make_schedule(const ScheduleRequest& request);
// The whole model on one stage in `micro_batches` micro-batches: 1F1B at S = 1 (F(0) B(0) F(1) B(1) ...).
Schedule one_stage(int micro_batches);

// Throws optimus::Error naming the stage and the operation unless: every chunk of every stage runs F once for each
// micro-batch and B once (or B_input and B_weight once), on chunks and micro-batches that exist; each chunk's F and
// its backward (B, or B_weight) run in micro-batch order; and the stages, each running its list in order, never wait
// forever for one another (a dependency on an operation placed later, directly or through other stages).
void validate(const Schedule& schedule);

// "F3.1" (forward of micro-batch 3 on chunk 1), "B0", "b2" (B_input), "w2" (B_weight); the chunk only when v > 1.
std::string describe(const Schedule& schedule, const Op& op);

}  // namespace optimus::pipeline

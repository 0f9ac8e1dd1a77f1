// train_gpt's training: what the run is (Setup, read from the options once), what the loop drives (Trainee: the
// model this rank trains, its AdamW and its saver), and the loop itself.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <optimus/optimus.hpp>

#include "checkpoint_options.hpp"
#include "gpt_data.hpp"
#include "optimus/plan/build.hpp"
#include "run_layout.hpp"
#include "sampling.hpp"

namespace optimus::examples {

// What the run is: its data, its model and how it is laid out and trained, read from the options once.
struct Setup {
  Corpus corpus;
  DataVocab data_vocab;
  GptConfig config;
  RunLayout run;                           // run.layout.recompute is set when the model is built (its depth final)
  pipeline::Schedule schedule;        // run.layout's (plan::schedule_of), checked as the setup is read
  std::optional<plan::Plan> planned;  // --plan auto
  Recompute recompute = Recompute::none;  // every block's, without a plan
  std::int64_t batch = 16;                     // this replica's sequences per step
  int steps = 1200, every = 50;
  double lr = 3e-3;
  std::string gemm;  // --gemm
  ops::GemmMath math = ops::GemmMath::f32;
};

// What the training loop drives: the model (whole on the grid, or this rank's pipeline stage), its AdamW, and how it
// is saved. Each function is collective over the model's ranks.
struct Trainee {
  // zero_grad, then forward and backward of the replica's batch: the batch's mean loss, the same on every rank.
  std::function<double(const std::vector<int>& tokens, const std::vector<int>& targets, std::uint64_t step)> train_step;
  std::function<double(const std::vector<int>& tokens, const std::vector<int>& targets)> evaluate;
  NextLogits next_logits;
  AdamW<float>* optimizer = nullptr;
  std::function<void(int step)> save;  // empty without --save
};

// The loop's view of the model this rank trains (its stage, 2D or 1D): its step, evaluation and next-token logits
// (optimizer and save left to the caller). `model` must outlive the Trainee.
Trainee trainee_of(plan::AnyGpt<float>& model, std::int64_t batch);

// Trains from first_step to setup.steps, printing every setup.every steps; returns the last interval's mean loss (NaN
// if every step of it was skipped) and counts the skipped steps.
// root: whether this rank prints.
double train_loop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, int first_step,
                  bool skip_nonfinite, int& skipped_steps);

}  // namespace optimus::examples

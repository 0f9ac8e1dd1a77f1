// train_gpt's training: what the run is (Setup, read from the options once), what the loop drives (Trainee: the
// model this rank trains, its AdamW and its saver), and the loop itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <optimus/optimus.hpp>

#include "checkpoint_options.hpp"
#include "gpt_data.hpp"
#include "masked_data.hpp"
#include "optimus/plan/build.hpp"
#include "run_layout.hpp"
#include "sampling.hpp"

namespace optimus::apps {

// What the run is: its data, its model and how it is laid out and trained, read from the options once.
struct Setup {
  Corpus corpus;
  DataVocab data_vocab;
  GptConfig config;
  // The training sequences' length: --seq (default 64), or --init's positions. At most config.max_seq, the model's
  // positions: a learned table read from a file stays whole (it is exported as it was read) and a shorter --seq trains
  // on its first rows.
  std::int64_t seq = 64;
  RunLayout run;                           // run.layout.recompute is set when the model is built (its depth final)
  pipeline::Schedule schedule;        // run.layout's (plan::schedule_of), checked as the setup is read
  std::optional<plan::Plan> planned;  // --plan auto
  Recompute recompute = Recompute::none;  // every block's, without a plan
  std::int64_t batch = 16;                     // this replica's sequences per step
  int steps = 1200, every = 50;
  double lr = 3e-3;
  // Whether --resume may name a checkpoint at the run's last step (nothing left to train): a sweep's member that had
  // finished, built again to be exported and evaluated. train_gpt refuses such a resume.
  bool finished_resume = false;
  std::string gemm;  // --gemm
  ops::GemmMath math = ops::GemmMath::f32;
  // --arch bert: BERT's masking of the sequences (masked_data.hpp; its seed the run's, the held-out batches' the next);
  // none: a decoder's next-token windows.
  std::optional<MaskedLmConfig> masking;
};

// The run as the planner's models take it (plan/memory_model.hpp): the model, the global batch (the replica's batch
// times the layout's replicas), the sequences, f32 values and activations saved in f32 (bf16 under --gemm bf16).
plan::Workload workload_of(const Setup& setup);

// Replica `replica`'s batch of step `step`, drawn from `ids` with `seed`: next-token windows (draw_batch), or BERT's
// masked sequences where setup.masking says (draw_masked_batch).
void draw_step(const Setup& setup, const Tokens& ids, std::uint64_t seed, std::uint64_t step, int replica,
               int replicas, Batch& out);

// One training step taken apart (Gpt::TrainStep with an exchanged end, whichever family), for a loop that interleaves
// the operations of several models (optimus-sweep): run_next while not done — ready says, without blocking, whether
// the next operation's input is here —, then finish returns train_step's loss and stage_sums the optimizer's partial
// sums of squares summed over the stages (for AdamW::step_from); neither waits on another stage.
struct StepInFlight {
  std::function<bool()> done, ready;
  std::function<void()> run_next;
  std::function<void()> expire;  // Gpt::TrainStep::expire: throws the watchdog's error for what ready() waits for
  std::function<double()> finish;
  std::function<std::vector<double>()> stage_sums;
};

// What the training loop drives: the model (whole on the grid, or this rank's pipeline stage), its AdamW, and how it
// is saved. Each function is collective over the model's ranks.
struct Trainee {
  // zero_grad, then forward and backward of the replica's batch: the batch's mean loss, the same on every rank.
  std::function<double(const Batch& batch, std::uint64_t step)> train_step;
  // The same step taken apart (zero_grad, then Gpt::begin_step with an exchanged end of `optimizer`'s partials): the
  // batch and the optimizer must outlive it.
  std::function<StepInFlight(const Batch& batch, std::uint64_t step, AdamW<float>& optimizer)> begin_step;
  std::function<double(const Batch& batch)> evaluate;
  NextLogits next_logits;
  AdamW<float>* optimizer = nullptr;
  std::function<void(int step)> save;  // empty without --save
};

// The loop's view of the model this rank trains (its stage, 2D or 1D): its step, evaluation and next-token logits
// (optimizer and save left to the caller). `model` must outlive the Trainee.
Trainee trainee_of(plan::AnyGpt<float>& model, std::int64_t batch);

// A run's steps around their forward and backward, as train_loop trains them and a sweep's member does: prepare sets a
// step's learning rate (warm-up, then cosine decay to a tenth) and draws its batch; complete takes the step's loss —
// the optimizer's step, or the step skipped (skip_nonfinite) or an optimus::Error for a non-finite loss —, prints at
// every setup.every steps and the last (root only, each line after `label`), and saves.
class StepLoop {
 public:
  StepLoop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, bool skip_nonfinite, std::string label);
  void prepare(int step);
  const Batch& batch() const { return batch_; }
  void complete(int step, double loss);
  // The same for an exchanged step (StepInFlight): the optimizer steps from the stages' sums, without a collective over
  // the stages.
  void complete(int step, double loss, const std::vector<double>& stage_sums);
  // The last printed interval's mean loss (NaN if every step of it was skipped), and the steps skipped so far.
  double last_loss() const { return last_loss_; }
  int skipped_steps() const { return skipped_steps_; }

 private:
  const Trainee& t_;
  const Setup& setup_;
  const Grid& grid_;
  bool root_, skip_nonfinite_;
  // complete's body, the optimizer's step being `update` (the global norm before clipping, or NaN).
  void complete_with(int step, double loss, const std::function<double()>& update);

  std::string label_;
  Batch batch_;
  double interval_loss_ = 0;
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();  // none until an interval ends with a trained step
  int interval_steps_ = 0;  // trained since the last print (a resumed run may start mid-interval)
  int skipped_steps_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// Trains from first_step to setup.steps, printing every setup.every steps; returns the last interval's mean loss (NaN
// if every step of it was skipped) and counts the skipped steps.
// root: whether this rank prints.
double train_loop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, int first_step,
                  bool skip_nonfinite, int& skipped_steps);

}  // namespace optimus::apps

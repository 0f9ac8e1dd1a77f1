// optimus::Gpt<Family>: the one GPT of Optimus (GPT-2's or Llama's blocks: BlockConfig), on every layout. Family is
// TwoD<T> (Gpt2D<T>: the 2D layers on q x q grids) or OneD<T> (Gpt1D<T>: the 1D Megatron baseline's layers on
// tensor-parallel groups of p ranks), family.hpp.
// The model is a pipeline (pipeline/schedule.hpp) of S >= 1 stages, each holding its chunks' blocks: the whole model is
// a pipeline of one stage (Gpt(place, config), or pipeline::one_stage(m) for m micro-batches). The place is a Grid made
// by Grid::create(world, q, pp) (2D: dp x pp x q^2 ranks) or a Group made by megatron::Group::pipeline_stage(world, pp,
// replicas) (1D: dp x pp x p ranks), with pp = the schedule's S; with dp > 1 each replica trains on its own batch and
// gradients (and the loss) are averaged over the replicas, which equals one replica on the concatenated batch.
// Parameters start from the shared initialization rule, the same model on every layout, and are named as GPT-2's.
//
// Each stage builds only its chunks' blocks; the stage of virtual stage 0 the embedding, the stage of virtual stage
// U-1 ln_f and the LM head, and both of them wte. train_step runs the stage's operations in the schedule's order:
//   F(k, c): x = the embedding of micro-batch k (u = 0) or the activation received from u-1's stage; the chunk's
//            blocks; then ln_f and the head's loss (u = U-1) or x sent to u+1's stage;
//   B(k, c): dy = the head's and ln_f's backward (u = U-1) or the gradient received from u+1's stage; the blocks'
//            backward in reverse; then the embedding's backward (u = 0) or dx sent to u-1's stage.
//   Split (ZB-H1): B_input(k, c) is B with every weight gradient queued (layers/weight_gradients.hpp) and the
//            embedding's backward left for later; B_weight(k, c) runs the queue, then the embedding's backward.
// Each rank sends its block of a micro-batch's activation (2D: [N/q, h/q]; 1D: the whole replicated [N, h]) to the rank
// of the same place in the other stage over grid().pipe(), tagged by micro-batch, virtual stage and direction: sends
// are non-blocking (waited at the step's end), and the receive of the next operation that needs one is posted before
// the current operation computes, so a transfer overlaps the compute before it (set_execution: or, message-driven,
// the next of every kind). Where the pipe matches messages by order, not tag (device communicators: NCCL has no tags),
// each lane — the activations into a virtual stage, the gradients into it, wte's parts — gets its own communicator (a
// channel, split from the pipe): a send then holds back only its own lane, whose messages come in micro-batch order
// under every order of execution. Consecutive virtual stages on one stage hand the block over without a message. At
// the step's end the head's part of wte's gradient and the embedding's are exchanged between the two end stages and
// summed the same way on both, then every gradient is averaged over the replicas. Losses and gradients are bitwise
// those of one stage's train_step with the same micro-batches (docs/pipeline.md).
//
// Each block saves what its recomputation policy says (set_recompute; none by default), and the model executes as the
// grid handle it is built on says (grid/execution.hpp: GEMM math, SUMMA's overlap, finite checks, timeline; its own,
// whatever other handles of the grid do): with the same policies and math, losses and gradients are bitwise those of
// one stage. Stages compute where their grid lives: on the CPU, or on devices (the grid made by
// RankDevice::grid or distributed_grid with pp stages).
//
// Spilling (Gpt(place, config, schedule, Spill), layers/spill.hpp): each stage spills its own blocks, each chunk's
// through its own two device slots (a stage of v chunks holds up to 2v blocks' parameters on the device); with
// Spill::parameters_and_activations the contexts of every block but a chunk's last go to host memory between a
// micro-batch's F and B. Every public call ends with the blocks home, so an optimizer updates their host memory between
// calls. Under the split backward (zb) B_input queues each block's weight gradients apart, and B_weight brings each
// block back to the device (values and gradients) to run them. Losses and gradients are bitwise those without
// spilling.
//
// Replicas (dp > 1): each block's gradients are summed over the replicas as soon as the stage's last backward of it
// has finished them, in flight while the blocks before it compute (waited at once with Execution::overlap off; a
// spilled block's while it is resident), the embedding's and ln_f's at the step's end, after wte's two parts are summed;
// then every gradient is divided by dp. Execution::check_finite checks the embedding's and ln_f's outputs and the
// head's and ln_f's input gradients (the blocks check their own). plan::build_gpt (plan/build.hpp) builds the model a
// layout describes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "optimus/layers/adamw.hpp"
#include "optimus/layers/head_transform.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/recompute.hpp"
#include "optimus/layers/spill.hpp"
#include "optimus/core/encoder_inputs.hpp"
#include "optimus/model/family.hpp"
#include "optimus/pipeline/dynamic_order.hpp"
#include "optimus/pipeline/partition.hpp"
#include "optimus/pipeline/schedule.hpp"
#include "optimus/pipeline/simulator.hpp"

namespace optimus {
namespace detail {
template <class T>
class SpillCall;  // model/gpt_parts.hpp
}  // namespace detail

// Family: TwoD<T> (Gpt2D<T>, below) or OneD<T> (Gpt1D<T>), family.hpp.
template <class Family>
class Gpt {
  class Step;         // one train_step's run of this stage's operations (model/gpt_stage_run.hpp)
  class WteExchange;  // a step's exchange of wte's gradient parts between the end stages (model/gpt_step.cpp)
  class EndExchange;  // a step's end that never waits on another stage (model/gpt_step.cpp)

 public:
  using T = typename Family::Value;
  using Place = typename Family::Place;
  using Schedule = pipeline::Schedule;
  // What one micro-batch's forward through a one-stage model keeps for its backward.
  using Context = GptContext<T>;
  // This stage's part of sums over the stages, each entry filled by one stage (AdamW::stage_squares).
  using StagePartials = std::function<std::vector<double>()>;

  // place: a Grid made by Grid::create(world, q, pp) (2D), or megatron::Group::pipeline_stage(world, pp, replicas)
  // (1D). Throws optimus::Error unless the place has the schedule's S stages, the schedule validates, and S*v divides
  // config.layers; the config is checked by validate_for_grid (2D: q divides heads, vocab and max_seq; q*q hidden and
  // ffn) or validate_for_group (1D: p divides heads and ffn).
  Gpt(const Place& place, const GptConfig& config, Schedule schedule);
  // The whole model on a place of one stage, one micro-batch per step: Gpt(place, config, pipeline::one_stage(1)).
  Gpt(const Place& place, const GptConfig& config);
  // The same with each stage's blocks spilled as `spill` says (Spill::none: as above); spilling needs the place on a
  // device.
  Gpt(const Place& place, const GptConfig& config, Schedule schedule, Spill spill);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // The replica's batch (b*s ids, row-major [b, s]) in the schedule's m micro-batches; returns the whole batch's mean
  // cross-entropy on every rank (averaged over replicas). Gradients accumulate (zero_grad first) and are averaged over
  // replicas. m must divide the batch, and q each micro-batch.
  double train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                    std::uint64_t step);
  // The same on an encoder's batch (encoder_inputs.hpp: its tokens' types and its sequences' lengths before their
  // padding, checked on every rank against the model and the batch). Every call below has this form too.
  double train_step(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                    std::int64_t batch, std::uint64_t step);
  // One train_step taken apart, for a caller that interleaves the operations of several models on one rank (a sweep's
  // slots, sweep/runtime.hpp): begin_step starts it with train_step's checks; run_next runs this stage's next operation
  // in the schedule's order, waiting for its input — ready() says, without blocking, whether it has arrived —; once
  // done(), finish() ends the step as train_step does (collective over the pipeline and the replicas: wte's two parts,
  // the sums over the replicas, the loss) and returns its value. train_step is begin_step, run_next until done, and
  // finish: the same operations in the same order, so the losses and gradients are bitwise the same however a caller
  // interleaves them. tokens and targets must outlive the step; one step of a model at a time (zero_grad before it,
  // as before train_step). Destroying an unfinished step (after an error) frees its contexts and brings the blocks
  // home; its receives still in flight are waited for, as every Request is, unless the job has failed.
  class TrainStep {
   public:
    TrainStep(TrainStep&&) noexcept;
    TrainStep& operator=(TrainStep&&) = delete;
    ~TrainStep();
    bool done() const;
    bool ready();  // the next operation's input is here (true when it needs none); not after done()
    void run_next();
    // For a caller that polls ready() and keeps its own deadline (the watchdog's timeout): throws the watchdog's
    // error (Request::expire: naming the operation, its communicator and the ranks it waits for) for what the next
    // operation waits for, and marks the job failed. Not after done().
    [[noreturn]] void expire();
    double finish();  // after done(); once
    // An exchanged step's partials summed over the stages (for AdamW::step_from), after finish().
    const std::vector<double>& stage_sums() const;

   private:
    friend class Gpt;
    TrainStep(Gpt& model, const std::vector<int>& tokens, const std::vector<int>& targets,
              const EncoderInputs& inputs, std::int64_t batch, std::uint64_t step, StagePartials partials);
    Gpt* model_;
    std::unique_ptr<detail::SpillCall<T>> spill_;  // declared before the step: destroyed after it
    std::unique_ptr<Step> step_;
    std::unique_ptr<EndExchange> exchange_;  // an exchanged step's end; null for train_step's
    std::vector<double> sums_;               // stage_sums()
  };
  TrainStep begin_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                       std::uint64_t step);
  TrainStep begin_step(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                       std::int64_t batch, std::uint64_t step);
  // A step whose end never waits on another stage, so that a loop interleaving several models' operations across
  // slots keeps computing while the stages' parts travel: after the schedule's operations come three more, run by
  // run_next as the others — (1) once this stage's sends have completed, wte's part sent to the other end stage;
  // (2) once the other part has arrived, the two summed as train_step sums them, then `partials()` (this stage's
  // AdamW::stage_squares, over the summed gradients) sent with this stage's loss part to every other stage; (3) once
  // every other stage's have arrived, their sums. finish() then needs no collective and returns train_step's loss
  // bitwise (one stage holds the loss, and each partial is filled by one stage: the sums are exact), and stage_sums()
  // the partials summed over the stages. One replica only (else optimus::Error).
  TrainStep begin_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                       std::uint64_t step, StagePartials partials);
  TrainStep begin_step(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                       std::int64_t batch, std::uint64_t step, StagePartials partials);

  // A model of one stage and one chunk (else optimus::Error) taken apart: forward fills `saved` with what backward
  // needs and returns the batch's mean cross-entropy (averaged over replicas); backward accumulates every gradient,
  // completes wte's (the head's part added) and averages them over the replicas, each call. Any number of contexts may
  // be alive; train_step runs the same operations per micro-batch.
  double forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                 std::uint64_t step, Context& saved);
  double forward(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                 std::int64_t batch, std::uint64_t step, Context& saved);
  void backward(Context saved);

  // Collective over the pipeline (every stage, and the replicas): the batch's mean cross-entropy without dropout,
  // saving nothing, on every rank. The whole batch (b*s ids) goes through the virtual stages in order, u = 0 .. U-1, as
  // one block: bitwise the whole model's evaluate.
  double evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch);
  double evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                  std::int64_t batch);
  // Collective over the replica's pipeline: logits [b*s, padded vocab] without dropout on the stage that holds the head
  // (schedule().stage_of(U-1)), nothing on the others (1D: whole on every rank of the head's group).
  std::optional<DistMatrix<T>> logits(const std::vector<int>& tokens, std::int64_t batch);
  std::optional<DistMatrix<T>> logits(const std::vector<int>& tokens, const EncoderInputs& inputs, std::int64_t batch);

  // This stage's parameters, by GPT-2 name (wte on both end stages, wpe with the embedding).
  std::vector<ParameterRef<T>> parameters();
  // Where each of parameters() sits in the whole model's parameter list, for AdamW's norm (layers/adamw.hpp):
  // wte on the head's stage is -1 when the embedding's stage also holds it. Collective over the pipeline.
  NormOrder norm_order();
  // Collective over the ranks that hold the stage's tensors: this stage's parameters (or gradients) as full GPT-2
  // tensors.
  std::map<std::string, GlobalMatrix> gather(bool gradients);
  // Full GPT-2 tensors by name (vectors as 1 x n or n x 1) into this stage's parameters; names another stage holds
  // are skipped, names the model does not have and wrong shapes throw. Tensors not named keep their values.
  void load_global(const std::map<std::string, GlobalMatrix>& tensors);
  void zero_grad();
  // What block `layer` (of the whole model's 0 .. layers-1; a no-op where another stage holds it) or every block of
  // this stage saves in training forwards from now on (recompute.hpp). Throws unless 0 <= layer < config().layers.
  void set_recompute(std::int64_t layer, Recompute policy);
  void set_recompute(Recompute policy);

  // How train_step runs this stage's operations (pipeline/dynamic_order.hpp): in the schedule's order (the default),
  // or message-driven — any operation the order's rules allow whose input is here, the list order breaking ties, with
  // receives posted ahead for the next message of every kind; in a stage of several ranks (a q x q grid, a 1D group)
  // the stage's first rank chooses and tells the others, so that every rank runs the same operations in the same
  // order. Either way losses and gradients are bitwise the same, and a stage never holds more activation bytes than
  // its list's order does. Execution::jitter > 0 delays each operation (for measuring: optimus-bench pipeline).
  // Collective over the ranks that hold the stage's tensors (a dynamic order in a stage of several ranks gives them a
  // channel of their own). Not while a step is in flight.
  void set_execution(const pipeline::Execution& execution);
  const pipeline::Execution& execution() const { return execution_; }

  // When each of this stage's operations ran in the last train_step, in seconds since the step began: from the
  // moment its input had arrived (a receive's wait is idle time, not the operation's) to the moment its output was
  // handed on. [i] is the i-th operation of schedule().ops[stage].
  const std::vector<pipeline::Interval>& last_step_times() const { return times_; }

  const GptConfig& config() const { return config_; }
  const Schedule& schedule() const { return schedule_; }
  // Each chunk's spill and what it moved, in chunk order; empty unless spilled.
  std::vector<const BlockSpill<T>*> spills() const;
  const Place& place() const { return place_; }
  // Where the activations live: the stage's grid (2D) or the group's q = 1 grid (1D); stage(), pipe(), memory().
  const Grid& grid() const { return grid_; }

 private:
  struct Chunk;
  struct Saved;
  class ReplicaSums;
  // B_input's queued weight gradients: the head's and ln_f's, then each block's apart ([b]), which B_weight runs in
  // that order (a spilled block's while it is back on the device).
  struct SplitWeights {
    WeightGradients edges;
    std::vector<WeightGradients> blocks;
  };

  // One micro-batch's F on `chunk`: the embedding (u = 0; else x is the input), its blocks, then ln_f and the head's
  // loss, returned (u = U-1; else x holds the output for u + 1). tokens, targets: the micro-batch's, row-major [b, s];
  // the loss is its part of a mean over mean_over tokens.
  double forward_chunk(Chunk& chunk, Context& saved, const Pass& pass, const std::vector<int>& tokens,
                       const std::vector<int>& token_types, const std::vector<int>& targets, std::int64_t batch,
                       std::int64_t mean_over, std::optional<DistMatrix<T>>& x);
  // Its B (`later` null) or B_input (the weight gradients queued in later): dy is the output's gradient from u + 1
  // (none on u = U-1, which starts from the loss). Returns the input's gradient for u - 1, or on u = 0 the embedding's
  // output gradient when its backward waits for B_weight (nothing once the embedding's backward ran). With `sums`,
  // each block's gradients are summed over the replicas as it finishes them.
  std::optional<DistMatrix<T>> backward_chunk(Chunk& chunk, Context& saved, SplitWeights* later,
                                              std::optional<DistMatrix<T>> dy, ReplicaSums* sums);
  // Its B_weight: the queued weight gradients run (each block's while resident); with `sums`, summed over replicas.
  void weight_chunk(Chunk& chunk, SplitWeights& weights, ReplicaSums* sums);
  // The step's end after its last operation (TrainStep::finish): wte's two parts summed, the gradients summed over the
  // replicas; returns the batch's mean loss from this stage's part (u = U-1's stage has it all).
  double finish_step(Step& run, double loss);
  // wte's gradient on a stage holding both the embedding and the head: the head's part added, then zeroed.
  void add_head_wte_grad();
  // Throws unless the model is one stage of one chunk (forward and backward take the whole model apart).
  void check_whole(const char* call) const;
  // What a loss is a mean over: `over` tokens, this replica's (`summed` false: the replicas' means and gradients are
  // then averaged), or the whole batch's predicted ones (`summed`: a masked LM's with several replicas, whose parts
  // and gradients are then summed over the replicas — a replica may predict none of its positions).
  struct Mean {
    std::int64_t over = 0;
    bool summed = false;
  };
  // A loss part held by the head's stage: summed over the stages, then averaged (or, mean.summed, summed) over the
  // replicas (no collective over one stage or one replica: on a device grid it would stage the host scalar through
  // device memory).
  double mean_over_model(double part, const Mean& mean) const;
  // The mean of a loss over `targets` (this replica's): over all of them, or over the predicted ones where some are
  // math::kIgnoredTarget (a masked LM's) — with several replicas, the whole batch's predicted ones (summed: one
  // all-reduce of two counts over the replicas, every step with dp > 1). Throws, naming `call`, where none of the
  // batch's is predicted.
  Mean predicted_tokens(const std::vector<int>& targets, const char* call) const;

  // The inference forward of the whole batch through this stage's virtual stages, receiving from and sending to the
  // neighbouring stages: ln_f's output [b*s, h] on the head's stage, nothing elsewhere.
  // `call` names the public call in errors.
  std::optional<DistMatrix<T>> forward_to_head(const std::vector<int>& tokens, const EncoderInputs& inputs,
                                               std::int64_t batch, const char* call);
  // Throws, naming `call` and the values, unless `inputs` suit a batch of `batch` sequences of `seq` tokens (token
  // types empty, or one of the model's per token; lengths empty, or one in [1, seq] per sequence). The same on every
  // rank: every rank holds the replica's whole batch.
  void check_inputs(const EncoderInputs& inputs, std::int64_t batch, std::int64_t seq, const char* call) const;
  // This stage's parameters outside the blocks: the embedding's (wte alone on the head's stage when another holds
  // the embedding), and ln_f's.
  void embedding_parameters(std::vector<ParameterRef<T>>& out);
  // The head's stage's parameters outside the blocks and the embedding: BERT's head transform's, ln_f's, the head's
  // bias (BERT's), in that order.
  void ln_f_parameters(std::vector<ParameterRef<T>>& out);
  // The chunks' spills, to end a call with (none unless spilled).
  std::vector<BlockSpill<T>*> spilling();

  Place place_;
  Grid grid_;
  GptConfig config_;
  Schedule schedule_;
  std::vector<Chunk> chunks_;                                  // [v]: this stage's chunks
  std::unique_ptr<typename Family::Embedding> embedding_;      // on the stages of u = 0 and u = U-1 (for wte)
  std::unique_ptr<HeadTransform<T>> transform_;               // BERT's head transform, on the stage of u = U-1
  std::unique_ptr<LayerNorm2D<T>> ln_f_;                       // on the stage of u = U-1
  std::unique_ptr<typename Family::Head> head_;
  std::unique_ptr<DistMatrix<T>> head_wte_grad_;  // the head's part of wte's gradient over a step
  std::vector<pipeline::Interval> times_;                   // [i]: the last step's operation i
  pipeline::Execution execution_;
  // Where the pipe does not match tags, the channel of each kind of message: (from stage, to stage, lane), the lane
  // lane_of(u, gradient) for the activations or the gradients into virtual stage u (each lane's messages go in
  // micro-batch order, whatever order the operations run in), kWteLane for wte's parts; empty where the pipe matches
  // tags.
  std::map<std::tuple<int, int, int>, std::unique_ptr<Communicator>> channels_;
  static constexpr int kWteLane = -1;
  static constexpr int lane_of(int u, bool gradient) { return 2 * u + (gradient ? 1 : 0); }
  // A dynamic order in a stage of several ranks: the stage's own channel, on which its first rank tells the others
  // each operation it chose (null otherwise).
  std::unique_ptr<Communicator> decisions_;
  // Where the pipe does not match tags, an exchanged end's partial sums travel on a copy of it of their own (every
  // stage to every other, one message per pair and step, so that they match in order); null where it does.
  std::unique_ptr<Communicator> sums_channel_;

  // Where messages of `lane` (channels_) from stage `from` to stage `to` travel, and the two stages' ranks there.
  struct Route {
    Communicator* comm;
    int from_rank, to_rank;
  };
  Route route(int from, int to, int lane) const;
};

// The GPT on q x q grids, dp x pp x q^2 ranks.
template <class T>
using Gpt2D = Gpt<TwoD<T>>;
// The 1D baseline's GPT on dp x pp x p ranks: each stage a tensor-parallel group of p ranks whose activations [N, h] are
// replicated (Megatron-LM's layout: two all-reduces of [N, h] per block forward and two backward), so each rank sends
// the whole [N/m, h] block of a micro-batch to the next stage (2D: N/(mq), h/q).
template <class T>
using Gpt1D = Gpt<OneD<T>>;

extern template class Gpt<TwoD<float>>;
extern template class Gpt<TwoD<double>>;
extern template class Gpt<OneD<float>>;
extern template class Gpt<OneD<double>>;

}  // namespace optimus

// optimus::AdamW: the optimizer on the local shards of a model's parameters, for the 2D grid and the 1D baseline.
//
// Per element (ops::adamw_update, the formula in core/adamw_step.hpp; for a parameter with a bf16 compute copy,
// ParameterRef::compute, its fused form writes the copy too — by pieces when the moments are offloaded, unless they
// are updated on the host: the copy is then marked stale, weight_copy.hpp), with global-norm clipping: the norm is the
// square root of the sum of squares of every gradient element of the model, each counted once. On a q x q grid every
// element is owned by exactly one rank, so the sum is an all-reduce of the ranks' partial sums over the grid. In a 1D
// group, the tensors a Sharding calls replicated (LayerNorm, row-parallel biases, wpe) are held, with the same
// gradient, by all p ranks: only group rank 0 adds them in. Each rank then updates what it holds; replicated tensors
// get the same update on every rank and stay equal. Moments are counted as optimizer memory where the parameters live.
// A parameter may live in host memory while the grid is on a device (a spilled block's, layers/spill.hpp): its moments
// are then host memory too, and its norm and update run on the host, with the same per-element arithmetic.
//
// A pipeline stage (model/gpt.hpp) holds part of a model, and the norm is the whole model's: NormOrder says where each
// of the stage's partial sums goes in the whole model's parameter list, so that the stages' sums are added in that
// order and the norm is bitwise the one the whole model on one stage computes (below).
//
// A non-finite gradient norm (a NaN or an inf in any gradient, on any rank: the norm is all-reduced) never reaches the
// parameters: step() throws, on every rank, an optimus::Error naming the step and the norm, or, under
// NonFinite::skip, returns the norm having changed nothing (parameters, moments and the step count stay as they were).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/optimizer_offload.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus {

// What AdamW::step does with a non-finite gradient norm.
enum class NonFinite { stop, skip };

// How a pipeline stage's share of the norm joins the others'. slot[k] is parameter k's place in the whole model's
// parameter list (the one-stage model's parameters() order), or -1 for a copy that another stage counts (the tied
// wte on the head's stage). Each rank puts its partial sums of squares in their slots of a vector of `slots` zeros,
// all-reduces it over `across` (grid.pipe(): each slot is filled by one stage, so the sum is exact), adds the slots in
// order and all-reduces that over the grid: the additions of the whole model on one stage, in the same order.
struct NormOrder {
  std::vector<int> slot;  // [parameters]: in [0, slots), or -1
  int slots = 0;
  Communicator* across = nullptr;  // the pipeline communicator; must outlive the optimizer
};

// Where an optimizer's parameters live and whose partial sums of squares make the global norm: a model's grid (every
// element held by one rank of it), or a 1D group (replicated tensors counted on group rank 0 only; the group's
// communicator must outlive the optimizer). Made from either implicitly, so that AdamW(grid, ...) and
// AdamW(group, ...) name the place the model lives.
class OptimizerPlace {
 public:
  OptimizerPlace(const Grid& grid);              // NOLINT(google-explicit-constructor)
  OptimizerPlace(const megatron::Group& group);  // NOLINT(google-explicit-constructor)
  const Grid& local() const { return local_; }   // where the shards live (their memory and queue)
  Communicator& norm() const { return *norm_; }  // the ranks whose partial sums make the norm

 private:
  Grid local_;
  Communicator* norm_;  // local_.grid() (kept alive by local_), or a 1D group's communicator
};

// Everything an AdamW is configured with besides its place and parameters.
struct AdamWOptions {
  AdamWConfig config;  // lr, betas, eps, weight decay, clipping
  // The moments offloaded (optimizer_offload.hpp): made in page-locked host memory — the device never holds them —
  // and streamed through the device at each step; the results are bitwise those without offload. Refused for a grid
  // on the host. Parameters already in host memory (spilled blocks) keep host moments, updated on the host.
  std::optional<OptimizerOffload> offload = std::nullopt;
  // One pipeline stage's part of a model (Gpt::norm_order()): where each parameter's partial sum goes in the
  // whole model's norm. Checked: one slot per parameter, each -1 or in [0, slots), none repeated.
  std::optional<NormOrder> norm_order = std::nullopt;
};

template <class T>
class AdamW {
 public:
  // The parameters of a model (Gpt::parameters(): the whole model's, or a pipeline stage's) at `place`.
  AdamW(OptimizerPlace place, std::vector<ParameterRef<T>> params, AdamWOptions options);

  // One step (t counts from 1); returns the global gradient norm before clipping (see NonFinite). Collective over the
  // norm order's stages (all-reducing stage_squares) and the place's ranks.
  double step();
  // step() taken apart for a caller that sums the stages' partials itself (Gpt::begin_step's exchanged end, which
  // never waits on another stage): this rank's sums of squares in the norm order's slots (zeros in the other stages'
  // slots; one slot without an order), local; then the step from those slots summed over the stages — each filled by
  // one stage, so any order of those sums gives step()'s bits —, collective over the place's ranks only.
  std::vector<double> stage_squares();
  double step_from(const std::vector<double>& slots);
  // For schedules: the learning rate of the following steps (positive and finite, or optimus::Error).
  void set_learning_rate(double lr);
  void set_nonfinite(NonFinite policy) { nonfinite_ = policy; }
  // The offloaded moments (of the parameters on the device) and what they moved; null without offload.
  const OffloadedMoments<T>* offloaded() const { return offload_.get(); }
  int skipped_steps() const { return skipped_; }

  // Checkpoints: the parameters as given, the moments m and v of parameter k ([local shape] like its value, where
  // the parameters live, or in host memory when offloaded: the views say which), and the steps taken (the bias corrections follow it).
  const std::vector<ParameterRef<T>>& parameters() const { return params_; }
  const AdamWConfig& config() const { return config_; }
  TensorView<T> first_moment(std::size_t k);
  TensorView<T> second_moment(std::size_t k);
  int steps_taken() const { return t_; }
  void set_steps_taken(int t);

 private:
  // Checks `order` against the parameters and keeps it.
  void use_order(NormOrder order);
  // Whether this rank adds parameter p's squares to the norm: a replicated tensor is added by group rank 0 only.
  bool counted_here(const ParameterRef<T>& p) const;

  // Parameter k's sum of squares, where its gradient lives.
  double squares_of(std::size_t k);
  // Where parameter k's local work runs: the grid's queue, or the host for a parameter in host memory.
  ops::Queue queue_of(const ParameterRef<T>& p) const;

  Grid local_;
  Communicator* norm_;  // OptimizerPlace::norm()
  std::optional<NormOrder> order_;  // a pipeline stage's
  std::vector<ParameterRef<T>> params_;
  AdamWConfig config_;
  std::vector<Tensor<T>> m_, v_;  // [params]: where each parameter lives; empty for an offloaded one
  std::unique_ptr<OffloadedMoments<T>> offload_;
  std::vector<std::size_t> offloaded_;  // the offloaded parameters' indices, in order
  std::vector<int> offload_slot_;       // [params]: the index among offloaded_, or -1
  Tensor<double> norm_scratch_;  // ops::sum_squares' partials, where the grid's gradients live
  Tensor<double> host_scratch_;  // the same on the host (parameters in host memory)
  int t_ = 0;
  NonFinite nonfinite_ = NonFinite::stop;
  int skipped_ = 0;
};

extern template class AdamW<float>;
extern template class AdamW<double>;

}  // namespace optimus

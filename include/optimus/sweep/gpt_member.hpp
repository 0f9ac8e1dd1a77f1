// A sweep's member made in C++ (optimus/sweep/runtime.hpp): a Gpt2D<T> on a pipeline of one stage per slot of its world
// (each slot a q x q grid: world = slots x q^2 ranks), its AdamW, and batches from a function of the step — what a
// program gives train_members without train_gpt's options (optimus-sweep's members are train_gpt's runs:
// apps/sweep_member_run.hpp).
//
//   std::vector<std::unique_ptr<optimus::sweep::GptMember<float>>> members;   // on each rank of `world`
//   for (const GptConfig& c : configs) members.push_back(std::make_unique<GptMember<float>>(world, q, c, spec, batches));
//   optimus::sweep::train_members(pointers_to(members), {.scheduler = optimus::sweep::Scheduler::lrtf, .in_flight = 0},
//                                 world, *slot);   // slot: this rank's q x q ranks (world.split(rank / (q*q), rank))
//
// Each step: the learning rate spec.adam.lr, zero_grad, the step's batch through the pipeline and its exchanged end
// (the stages' sums sent, not all-reduced: no slot waits on another), AdamW with the global gradient norm over the
// stages. A member trains bitwise as the same model, optimizer and batches on one stage with train_step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/layers/adamw.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/sweep/runtime.hpp"

namespace optimus::sweep {

// How a GptMember trains: its optimizer, its steps, its batch (sequences per step) and micro-batches (the pipeline
// baseline's; 1 otherwise, whose pipeline is GPipe's, else 1F1B).
struct MemberTraining {
  AdamWConfig adam;
  int steps = 1;
  std::int64_t batch = 1;
  int micro_batches = 1;
};

// A member's pipeline schedule on `stages` slots: one stage of `micro_batches`, else GPipe of one micro-batch, else
// 1F1B. Each slot runs its ops in this order, then the step's exchanged end (Gpt::begin_step).
pipeline::Schedule member_schedule(int stages, int micro_batches);

// The step's batch (from 0): tokens and targets, batch x config.max_seq ids each, row-major.
using BatchOf = std::function<void(int step, std::vector<int>& tokens, std::vector<int>& targets)>;

template <class T>
class GptMember final : public SteppedMember<typename Gpt2D<T>::TrainStep> {
 public:
  // Collective over `world` (slots x q^2 ranks), which must outlive the member.
  GptMember(Communicator& world, int q, const GptConfig& config, const MemberTraining& training, BatchOf batches);
  // On `grid`, a pipeline of one stage per slot made by the caller (Grid::create, or RankDevice::grid for a device),
  // its blocks spilled as `spill` says (Spill::none on the host).
  GptMember(const Grid& grid, Spill spill, const GptConfig& config, const MemberTraining& training, BatchOf batches);
  ~GptMember() override;
  GptMember(const GptMember&) = delete;
  GptMember& operator=(const GptMember&) = delete;

  bool more() const override { return step_ < training_.steps; }
  void begin() override;
  void end() override;
  // The steps left times the model's parameters.
  double remaining() const override;

  // Each step's loss (the batch's mean cross-entropy), as train_step returns it.
  const std::vector<double>& losses() const { return losses_; }
  Gpt2D<T>& model() { return model_; }

 private:
  MemberTraining training_;
  BatchOf batches_;
  Gpt2D<T> model_;
  AdamW<T> optimizer_;
  int step_ = 0;
  std::vector<int> tokens_, targets_;
  std::vector<double> losses_;
};

extern template class GptMember<float>;
extern template class GptMember<double>;

}  // namespace optimus::sweep

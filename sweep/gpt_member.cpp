// A sweep's member made in C++ (optimus/sweep/gpt_member.hpp).
#include "optimus/sweep/gpt_member.hpp"

#include <utility>

#include "optimus/grid/grid.hpp"

namespace optimus::sweep {

pipeline::Schedule member_schedule(int stages, int micro_batches) {
  if (stages == 1) return pipeline::one_stage(micro_batches);
  return pipeline::make_schedule({.kind = micro_batches == 1 ? pipeline::Kind::gpipe : pipeline::Kind::one_f_one_b,
                                  .stages = stages, .micro_batches = micro_batches, .chunks = 1});
}

template <class T>
GptMember<T>::GptMember(Communicator& world, int q, const GptConfig& config, const MemberTraining& training,
                        BatchOf batches)
    : GptMember(Grid::create(world, q, world.size() / (q * q)), Spill::none, config, training, std::move(batches)) {}

template <class T>
GptMember<T>::GptMember(const Grid& grid, Spill spill, const GptConfig& config, const MemberTraining& training,
                        BatchOf batches)
    : training_(training),
      batches_(std::move(batches)),
      model_(grid, config, member_schedule(grid.pp(), training.micro_batches), spill),
      optimizer_(model_.grid(), model_.parameters(),
                 AdamWOptions{.config = training.adam, .norm_order = model_.norm_order()}) {}

template <class T>
GptMember<T>::~GptMember() {
  this->running_.reset();  // a step in flight before the model it runs on
}

template <class T>
void GptMember<T>::begin() {
  batches_(step_, tokens_, targets_);
  model_.zero_grad();
  this->running_.emplace(model_.begin_step(tokens_, targets_, training_.batch, static_cast<std::uint64_t>(step_),
                                           [this] { return optimizer_.stage_squares(); }));
}

template <class T>
void GptMember<T>::end() {
  losses_.push_back(this->running_->finish());
  optimizer_.step_from(this->running_->stage_sums());  // no collective over the slots: the stages' sums have arrived
  this->running_.reset();
  ++step_;
}

template <class T>
double GptMember<T>::remaining() const {
  return static_cast<double>(training_.steps - step_) * static_cast<double>(model_.config().parameter_count());
}

template class GptMember<float>;
template class GptMember<double>;

}  // namespace optimus::sweep

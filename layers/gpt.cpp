// Gpt2D: the model assembled from the 2D layers; parameters by GPT-2 name.
#include "optimus/layers/gpt.hpp"

#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "gpt_logic.hpp"

namespace optimus {
namespace {

const GptConfig& checked(const GptConfig& c, const Grid& grid) {
  validate_for_grid(c, grid.q());
  return c;
}

// One public call of a spilled model: done() ends it (every copy finished, the blocks home); leaving by an error
// brings the blocks home without throwing again.
template <class T>
class SpillCall {
 public:
  explicit SpillCall(BlockSpill<T>* spill) : spill_(spill) {}
  SpillCall(const SpillCall&) = delete;
  SpillCall& operator=(const SpillCall&) = delete;
  ~SpillCall() {
    if (spill_ != nullptr) spill_->finish(true);
  }
  void done() {
    if (spill_ != nullptr) std::exchange(spill_, nullptr)->finish(false);
  }

 private:
  BlockSpill<T>* spill_;
};

// The forward's visits of the blocks (gpt_logic.hpp's forward_to_head) for a spilled model: residency, and the
// training forward's contexts for activation offload.
template <class T>
struct SpillVisit {
  BlockSpill<T>* spill;
  bool training;
  void begin(std::vector<BlockContext<T>>& contexts) {
    if (spill != nullptr) spill->begin(BlockSpill<T>::Direction::forward, training ? &contexts : nullptr);
  }
  void enter(std::size_t l) {
    if (spill != nullptr) spill->enter(l);
  }
  void leave(std::size_t l) {
    if (spill != nullptr) spill->leave(l);
  }
};

}  // namespace

template <class T>
Gpt2D<T>::Gpt2D(const Grid& grid, const GptConfig& config) : Gpt2D(grid, config, Spill::none) {}

template <class T>
Gpt2D<T>::Gpt2D(const Grid& grid, const GptConfig& config, Spill spill)
    : grid_(grid),
      config_(checked(config, grid)),
      spill_(spill == Spill::none ? nullptr : std::make_unique<BlockSpill<T>>(grid, spill)),
      embedding_(grid, config),
      ln_f_(grid, "ln_f", config.hidden),
      head_(grid, config.vocab),
      head_wte_grad_(grid, embedding_.wte().rows(), config.hidden, MemoryKind::gradients) {
  const ParameterTags blocks = spill_ ? spill_->home() : ParameterTags::of(grid);
  for (std::int64_t l = 0; l < config.layers; ++l) {
    blocks_.push_back(std::make_unique<TransformerBlock2D<T>>(grid, blocks, config, l));
  }
  if (spill_) {
    std::vector<std::vector<ParameterStorage<T>>> storage(blocks_.size());
    for (std::size_t l = 0; l < blocks_.size(); ++l) blocks_[l]->parameter_storage(storage[l]);
    spill_->attach(std::move(storage));
  }
  for (const ParameterRef<T>& p : parameters()) init_parameter(p, config_, grid_.device());
}

template <class T>
double Gpt2D<T>::forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                         std::uint64_t step, Context& saved) {
  SpillCall<T> call(spill_.get());
  const Pass pass{.step = step, .training = true, .first_sequence = grid_.dp_index() * batch};
  const double loss = run(tokens, targets, batch, static_cast<std::int64_t>(tokens.size()), pass, saved);
  call.done();
  return grid_.dp_comm().all_reduce(loss, ReduceOp::sum) / grid_.dp();
}

template <class T>
void Gpt2D<T>::backward(Context saved) {
  SpillCall<T> call(spill_.get());
  run_backward(std::move(saved), true);
  call.done();
}

template <class T>
double Gpt2D<T>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step, std::int64_t micro_batches) {
  const int q = grid_.q();
  const auto mean_over = static_cast<std::int64_t>(tokens.size());
  SpillCall<T> call(spill_.get());
  double loss = 0;
  detail::for_each_micro_batch(
      "train_step", tokens, targets, batch, micro_batches,
      [&](std::int64_t k, const std::vector<int>& tok, const std::vector<int>& tgt, std::int64_t micro) {
        OPTIMUS_CHECK(micro % q == 0, "train_step: batch = ", batch, " in ", micro_batches, " micro-batches of ",
                      micro, " sequences: a micro-batch is not divisible by q = ", q);
        const Pass pass{.step = step, .training = true, .first_sequence = grid_.dp_index() * batch + k * micro};
        Context saved;
        loss += run(tok, tgt, micro, mean_over, pass, saved);  // each micro-batch's part of the whole batch's mean
        run_backward(std::move(saved), k + 1 == micro_batches);
      });
  call.done();
  return grid_.dp_comm().all_reduce(loss, ReduceOp::sum) / grid_.dp();
}

template <class T>
double Gpt2D<T>::evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch) {
  SpillCall<T> call(spill_.get());
  Context none;
  const double loss =
      run(tokens, targets, batch, static_cast<std::int64_t>(tokens.size()), Pass::inference(), none);
  call.done();
  return grid_.dp_comm().all_reduce(loss, ReduceOp::sum) / grid_.dp();
}

template <class T>
double Gpt2D<T>::run(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                     std::int64_t mean_over, const Pass& pass, Context& saved) {
  const DistMatrix<T> x = detail::forward_to_head(embedding_, blocks_, ln_f_, tokens, batch, pass, saved,
                                                  SpillVisit<T>{.spill = spill_.get(), .training = pass.training});
  const double loss = head_.forward(x, embedding_.wte(), targets, mean_over, pass, saved.head);
  if (pass.training) saved.mark = ContextMark(grid_);
  return loss;
}

// With dp > 1 replicas, each layer's gradients are all-reduced over the data-parallel communicator as soon as
// that layer's backward has finished them (one bucket per layer), so the reduction overlaps the backward of
// the layers before it; with grid.overlap() off each reduction is waited on at once. wte's gradient is complete
// only after the embedding's backward (the LM head shares it), so it goes last.
template <class T>
void Gpt2D<T>::run_backward(Context saved, bool reduce_over_replicas) {
  saved.mark.check(grid_, "gpt");
  std::vector<Request> pending;
  std::vector<ParameterRef<T>> reduced;
  const auto reduce = [&](const std::vector<ParameterRef<T>>& bucket) {
    if (grid_.dp() == 1 || !reduce_over_replicas) return;
    for (const ParameterRef<T>& p : bucket) {
      pending.push_back(grid_.dp_comm().iall_reduce(p.grad.data(), p.grad.data(),
                                                     static_cast<std::size_t>(p.grad.numel()), dtype_of<T>,
                                                     ReduceOp::sum));
      if (!grid_.overlap()) pending.back().wait();
      reduced.push_back(p);
    }
  };
  const DistMatrix<T> dhead = head_.backward(std::move(saved.head), embedding_.wte(), head_wte_grad_);
  detail::check_finite(dhead, "lm_head backward input gradient");
  DistMatrix<T> dx = ln_f_.backward(std::move(saved.ln_f), dhead);
  detail::check_finite(dx, "ln_f backward input gradient");
  std::vector<ParameterRef<T>> bucket;
  ln_f_.parameters(bucket);
  reduce(bucket);
  const T scale = T(1) / static_cast<T>(grid_.dp());  // the average over replicas after their sum
  // A spilled block's gradients are reduced (and scaled) while it is resident, before they go home.
  const auto reduce_resident = [&](const std::vector<ParameterRef<T>>& resident) {
    if (grid_.dp() == 1 || !reduce_over_replicas) return;
    std::vector<Request> now;
    for (const ParameterRef<T>& p : resident) {
      now.push_back(grid_.dp_comm().iall_reduce(p.grad.data(), p.grad.data(), static_cast<std::size_t>(p.grad.numel()),
                                                dtype_of<T>, ReduceOp::sum));
    }
    for (Request& r : now) r.wait();
    for (const ParameterRef<T>& p : resident) scale_gradient(p, scale, grid_.queue());
  };
  if (spill_) spill_->begin(BlockSpill<T>::Direction::backward, &saved.blocks);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    if (spill_) spill_->enter(l);
    dx = blocks_[l]->backward(std::move(saved.blocks[l]), dx);
    bucket.clear();
    blocks_[l]->parameters(bucket);
    if (spill_) {
      reduce_resident(bucket);
      spill_->leave(l);
    } else {
      reduce(bucket);
    }
  }
  embedding_.backward(std::move(saved.embedding), dx);
  if (reduce_over_replicas) {  // the step's end: wte's gradient = the embedding's part + the head's part
    ops::axpby<T>(T(1), std::as_const(head_wte_grad_).local(), T(1), embedding_.wte_grad().local(), grid_.queue());
    ops::fill<T>(head_wte_grad_.local(), T(0), grid_.queue());
  }
  bucket.clear();
  embedding_.parameters(bucket);
  reduce(bucket);
  for (Request& r : pending) r.wait();
  for (const ParameterRef<T>& p : reduced) scale_gradient(p, scale, grid_.queue());
}

template <class T>
DistMatrix<T> Gpt2D<T>::logits(const std::vector<int>& tokens, std::int64_t batch) {
  SpillCall<T> call(spill_.get());
  const Pass pass = Pass::inference();
  Context none;  // inference fills nothing
  DistMatrix<T> logits =
      head_.logits(detail::forward_to_head(embedding_, blocks_, ln_f_, tokens, batch, pass, none,
                                           SpillVisit<T>{.spill = spill_.get(), .training = false}),
                   embedding_.wte());
  call.done();
  return logits;
}

template <class T>
void Gpt2D<T>::set_recompute(std::int64_t layer, Recompute policy) {
  detail::set_block_recompute(blocks_, layer, policy);
}

template <class T>
void Gpt2D<T>::set_recompute(Recompute policy) {
  for (auto& block : blocks_) block->set_recompute(policy);
}

template <class T>
std::vector<ParameterRef<T>> Gpt2D<T>::parameters() {
  std::vector<ParameterRef<T>> out;
  embedding_.parameters(out);
  for (auto& block : blocks_) block->parameters(out);
  ln_f_.parameters(out);
  return out;
}

template <class T>
void Gpt2D<T>::load_global(const std::map<std::string, GlobalMatrix>& tensors) {
  load_named(parameters(), tensors, grid_.device());
}

template <class T>
std::map<std::string, GlobalMatrix> Gpt2D<T>::gather(bool gradients) {
  return gather_named(grid_.grid(), parameters(), gradients, grid_.device());
}

template <class T>
void Gpt2D<T>::zero_grad() {
  embedding_.zero_grad();
  ops::fill<T>(head_wte_grad_.local(), T(0), grid_.queue());
  for (auto& block : blocks_) block->zero_grad();
  if (spill_) spill_->gradients_zeroed();
  ln_f_.zero_grad();
}

template class Gpt2D<float>;
template class Gpt2D<double>;

}  // namespace optimus

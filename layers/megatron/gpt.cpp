// Gpt1D: the 1D baseline's model assembled from its layers; parameters by GPT-2 name.
#include "optimus/layers/megatron/gpt.hpp"

#include <utility>

#include "../gpt_logic.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::megatron {
void validate_for_group(const GptConfig& c, int p) {
  validate(c);
  OPTIMUS_CHECK(c.heads % p == 0, "GptConfig: heads = ", c.heads, " is not divisible by p = ", p);
  OPTIMUS_CHECK(c.ffn % p == 0, "GptConfig: ffn = ", c.ffn, " is not divisible by p = ", p);
}

namespace {

const GptConfig& checked(const GptConfig& c, const Group& group) {
  validate_for_group(c, group.size());
  return c;
}

}  // namespace

template <class T>
Gpt1D<T>::Gpt1D(const Group& group, const GptConfig& config)
    : group_(group),
      config_(checked(config, group)),
      embedding_(group, config),
      ln_f_(group.local(), "ln_f", config.hidden),
      head_(group, config.vocab),
      head_wte_grad_(group.local(), embedding_.wte().rows(), config.hidden, MemoryKind::gradients) {
  for (std::int64_t l = 0; l < config.layers; ++l) {
    blocks_.push_back(std::make_unique<TransformerBlock1D<T>>(group, config, l));
  }
  for (const ParameterRef<T>& p : parameters()) init_parameter(p, config_, group_.local().device());
}

template <class T>
double Gpt1D<T>::forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                         std::uint64_t step, Context& saved) {
  const Pass pass{.step = step, .training = true, .first_sequence = 0};
  return run(tokens, targets, batch, static_cast<std::int64_t>(tokens.size()), pass, saved);
}

template <class T>
double Gpt1D<T>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step, std::int64_t micro_batches) {
  const auto mean_over = static_cast<std::int64_t>(tokens.size());
  double loss = 0;
  detail::for_each_micro_batch(
      "train_step", tokens, targets, batch, micro_batches,
      [&](std::int64_t k, const std::vector<int>& tok, const std::vector<int>& tgt, std::int64_t micro) {
        const Pass pass{.step = step, .training = true, .first_sequence = k * micro};
        Context saved;
        loss += run(tok, tgt, micro, mean_over, pass, saved);  // each micro-batch's part of the whole batch's mean
        run_backward(std::move(saved), k + 1 == micro_batches);
      });
  return loss;
}

template <class T>
double Gpt1D<T>::evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch) {
  Context none;
  return run(tokens, targets, batch, static_cast<std::int64_t>(tokens.size()), Pass::inference(), none);
}

template <class T>
double Gpt1D<T>::run(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                     std::int64_t mean_over, const Pass& pass, Context& saved) {
  const DistMatrix<T> x = detail::forward_to_head(embedding_, blocks_, ln_f_, tokens, batch, pass, saved);
  const double loss = head_.forward(x, embedding_.wte(), embedding_.first_id(), targets, mean_over, pass, saved.head);
  if (pass.training) saved.mark = ContextMark(group_.local());
  return loss;
}

template <class T>
void Gpt1D<T>::backward(Context saved) {
  run_backward(std::move(saved), true);
}

// As Gpt2D: the head's part of wte's gradient accumulates apart and joins the embedding's at the step's end (E + H),
// so that a pipeline, which holds the two parts on different stages, forms it with the same additions.
template <class T>
void Gpt1D<T>::run_backward(Context saved, bool last_micro_batch) {
  saved.mark.check(group_.local(), "gpt");
  const DistMatrix<T> dhead = head_.backward(std::move(saved.head), embedding_.wte(), head_wte_grad_);
  detail::check_finite(dhead, "lm_head backward input gradient");
  DistMatrix<T> dx = ln_f_.backward(std::move(saved.ln_f), dhead);
  detail::check_finite(dx, "ln_f backward input gradient");
  for (std::size_t l = blocks_.size(); l-- > 0;) dx = blocks_[l]->backward(std::move(saved.blocks[l]), dx);
  embedding_.backward(std::move(saved.embedding), dx);
  if (last_micro_batch) {
    const Grid& local = group_.local();
    ops::axpby<T>(T(1), std::as_const(head_wte_grad_).local(), T(1), embedding_.wte_grad().local(), local.queue());
    ops::fill<T>(head_wte_grad_.local(), T(0), local.queue());
  }
}

template <class T>
void Gpt1D<T>::set_recompute(std::int64_t layer, Recompute policy) {
  detail::set_block_recompute(blocks_, layer, policy);
}

template <class T>
void Gpt1D<T>::set_recompute(Recompute policy) {
  for (auto& block : blocks_) block->set_recompute(policy);
}

template <class T>
std::vector<ParameterRef<T>> Gpt1D<T>::parameters() {
  std::vector<ParameterRef<T>> out;
  embedding_.parameters(out);
  for (auto& block : blocks_) block->parameters(out);
  const std::size_t ln_f = out.size();
  ln_f_.parameters(out);
  mark_replicated(out, ln_f, group_);  // ln_f on the one-rank grid: every rank holds it
  return out;
}

template <class T>
void Gpt1D<T>::load_global(const std::map<std::string, GlobalMatrix>& tensors) {
  load_named(parameters(), tensors, group_.local().device());
}

template <class T>
std::map<std::string, GlobalMatrix> Gpt1D<T>::gather(bool gradients) {
  return gather_named(group_.tp(), parameters(), gradients, group_.local().device());
}

template <class T>
void Gpt1D<T>::zero_grad() {
  embedding_.zero_grad();
  for (auto& block : blocks_) block->zero_grad();
  ln_f_.zero_grad();
  ops::fill<T>(head_wte_grad_.local(), T(0), group_.local().queue());
}

template class Gpt1D<float>;
template class Gpt1D<double>;

}  // namespace optimus::megatron

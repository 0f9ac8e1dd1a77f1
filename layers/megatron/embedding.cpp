// Embedding1D: vocabulary-parallel lookups summed over the group.
#include "optimus/layers/megatron/embedding.hpp"

#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/embedding.hpp"

namespace optimus::megatron {
namespace {

std::int64_t slice_rows(const GptConfig& config, int p) {
  const std::int64_t stored = config.stored_vocab(p);
  OPTIMUS_CHECK(stored >= config.vocab && stored % p == 0, "Embedding1D: the stored vocabulary ", stored,
                " (padded_vocab = ", config.padded_vocab, ") must be a multiple of p = ", p, " no smaller than vocab = ",
                config.vocab);
  return stored / p;
}

}  // namespace

template <class T>
Embedding1D<T>::Embedding1D(const Group& group, const GptConfig& config, TiedHead head)
    : group_(group),
      config_(config),
      stored_vocab_(config.stored_vocab(group.size())),
      wte_(group.local(), slice_rows(config, group.size()), config.hidden, MemoryKind::parameters),
      dwte_(group.local(), wte_.rows(), config.hidden, MemoryKind::gradients) {
  if (!config.block.rope) {
    wpe_.emplace(group.local(), config.max_seq, config.hidden, MemoryKind::parameters);
    dwpe_.emplace(group.local(), config.max_seq, config.hidden, MemoryKind::gradients);
  }
  if (head == TiedHead::here && !config.block.tied_head) {
    lm_head_.emplace(group.local(), wte_.rows(), config.hidden, MemoryKind::parameters);
    dlm_head_.emplace(group.local(), wte_.rows(), config.hidden, MemoryKind::gradients);
  }
}

template <class T>
DistMatrix<T>& Embedding1D<T>::lm_head_grad() {
  OPTIMUS_CHECK(dlm_head_.has_value(), "embedding: lm_head_grad() of a model whose head is tied to wte or elsewhere");
  return *dlm_head_;
}

template <class T>
DistMatrix<T> Embedding1D<T>::forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass,
                                      Context& saved) {
  const std::int64_t seq = checked_sequence_length(tokens, batch, config_);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const Grid& local = group_.local();
  const Tensor<int> ids = upload(tokens.data(), Shape{n}, local.tag(MemoryKind::workspace));
  DistMatrix<T> x(local, n, config_.hidden);
  ops::embedding_lookup<T>(std::as_const(wte_).local(), ids.view(), first_id(), x.local(), local.queue());
  all_reduce_sum(group_, x);  // one slice holds each id: the sum is exact
  if (wpe_) ops::add_positions<T>(std::as_const(*wpe_).local(), 0, seq, x.local(), local.queue());
  finish_embedding(x, tokens, seq, pass, config_, local, saved);
  return x;
}

template <class T>
void Embedding1D<T>::backward(Context saved, const DistMatrix<T>& dx_in) {
  const Grid& local = group_.local();
  saved.mark.check(local, "embedding");
  const auto n = static_cast<std::int64_t>(saved.tokens.size());
  const DistMatrix<T> dx = dropped_gradient(saved, dx_in, config_);
  const MemoryTag work = local.tag(MemoryKind::workspace);
  const Tensor<int> ids = upload(saved.tokens.data(), Shape{n}, work);
  ops::embedding_scatter_add<T>(dx.local(), ids.view(), first_id(), dwte_.local(), local.queue());
  if (!dwpe_) return;
  Tensor<T> positions(Shape{config_.max_seq, config_.hidden}, work, Init::none);
  ops::position_grad<T>(dx.local(), 0, saved.seq, positions.view(), local.queue());
  ops::axpby<T>(T(1), std::as_const(positions).view(), T(1), dwpe_->local(), local.queue());
}

template <class T>
void Embedding1D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int p = group_.size(), r = group_.rank();
  const std::int64_t h = config_.hidden;
  const ShardLayout vocabulary{.kind = ShardLayout::Kind::rows, .q = 1, .i = 0, .j = 0, .rows = stored_vocab_,
                               .cols = h, .fused = {}, .parts = p, .part = r,
                               .padding_rows = stored_vocab_ - config_.vocab};
  out.push_back({"wte", {config_.vocab, h}, vocabulary, wte_.local(), dwte_.local()});
  if (wpe_) {
    out.push_back({"wpe", {config_.max_seq, h},
                   ShardLayout::replicated(config_.max_seq, h, p, r),
                   wpe_->local(), dwpe_->local()});
  }
  if (lm_head_) out.push_back({"lm_head.weight", {config_.vocab, h}, vocabulary, lm_head_->local(), dlm_head_->local()});
}

template <class T>
void Embedding1D<T>::zero_grad() {
  ops::fill<T>(dwte_.local(), T(0), group_.local().queue());
  if (dwpe_) ops::fill<T>(dwpe_->local(), T(0), group_.local().queue());
  if (dlm_head_) ops::fill<T>(dlm_head_->local(), T(0), group_.local().queue());
}

template class Embedding1D<float>;
template class Embedding1D<double>;

}  // namespace optimus::megatron

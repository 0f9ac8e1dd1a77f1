// Embedding2D: vocabulary-parallel lookups reduced along grid columns.
#include "optimus/layers/embedding.hpp"

#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

std::int64_t checked_sequence_length(const std::vector<int>& tokens, std::int64_t batch, const GptConfig& config) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(batch > 0 && n % batch == 0, "embedding: ", n, " tokens are not ", batch, " whole sequences");
  const std::int64_t seq = n / batch;
  OPTIMUS_CHECK(seq <= config.max_seq, "embedding: sequence length ", seq, " exceeds the position table (max_seq = ",
                config.max_seq, ")");
  for (std::int64_t t = 0; t < n; ++t) {
    const int id = tokens[static_cast<std::size_t>(t)];
    OPTIMUS_CHECK(id >= 0 && id < config.vocab, "embedding: token id ", id, " at position ", t,
                  " is outside the vocabulary [0, ", config.vocab, ")");
  }
  return seq;
}

template <class T>
void finish_embedding(DistMatrix<T>& x, const std::vector<int>& tokens, std::int64_t seq, const Pass& pass,
                      const GptConfig& config, const Grid& grid, EmbeddingContext& saved) {
  apply_dropout(x, pass.first_sequence * seq, pass.training ? config.dropout : 0.0, config.seed,
                dropout_stream(pass.step, 0, DropoutSite::embedding));
  saved = EmbeddingContext{};
  if (pass.training) {
    saved.tokens = tokens;
    saved.seq = seq;
    saved.pass = pass;
    saved.mark = ContextMark(grid);
  }
}

template <class T>
DistMatrix<T> dropped_gradient(const EmbeddingContext& saved, const DistMatrix<T>& dx, const GptConfig& config) {
  const auto n = static_cast<std::int64_t>(saved.tokens.size());
  OPTIMUS_CHECK(dx.rows() == n && dx.cols() == config.hidden, "embedding: the gradient is ", dx.rows(), "x", dx.cols(),
                ", expected ", n, "x", config.hidden);
  DistMatrix<T> dropped = dx.clone();
  apply_dropout(dropped, saved.pass.first_sequence * saved.seq, config.dropout, config.seed,
                dropout_stream(saved.pass.step, 0, DropoutSite::embedding));
  return dropped;
}

template <class T>
Embedding2D<T>::Embedding2D(const Grid& grid, const GptConfig& config, TiedHead head)
    : grid_(grid),
      config_(config),
      wte_(grid, config.stored_vocab(grid.q()), config.hidden, MemoryKind::parameters),
      dwte_(grid, config.stored_vocab(grid.q()), config.hidden, MemoryKind::gradients) {
  if (!config.block.rope) {
    wpe_.emplace(grid, config.max_seq, config.hidden, MemoryKind::parameters);
    dwpe_.emplace(grid, config.max_seq, config.hidden, MemoryKind::gradients);
  }
  if (head == TiedHead::here && !config.block.tied_head) {
    lm_head_.emplace(grid, wte_.rows(), config.hidden, MemoryKind::parameters);
    dlm_head_.emplace(grid, wte_.rows(), config.hidden, MemoryKind::gradients);
  }
  if (head == TiedHead::here) {
    head_bf16_ = weight_copy_for(grid, lm_head_ ? *lm_head_ : wte_, grid.tag(MemoryKind::parameters));
  }
}

template <class T>
SummaOperand<T> Embedding2D<T>::head_operand() {
  return weight_operand(std::as_const(lm_head_ ? *lm_head_ : wte_), head_bf16_.get());
}

template <class T>
DistMatrix<T>& Embedding2D<T>::lm_head_grad() {
  OPTIMUS_CHECK(dlm_head_.has_value(), "embedding: lm_head_grad() of a model whose head is tied to wte or elsewhere");
  return *dlm_head_;
}

template <class T>
DistMatrix<T> Embedding2D<T>::forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass,
                                      Context& saved) {
  const std::int64_t seq = checked_sequence_length(tokens, batch, config_);
  const int q = grid_.q();
  OPTIMUS_CHECK(batch % q == 0, "embedding: batch = ", batch, " is not divisible by q = ", q);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t width = wte_.local_cols(), v0 = wte_.row_offset();
  const MemoryTag work = grid_.tag(MemoryKind::workspace);

  // Partial lookups of all n tokens in this rank's vocabulary slice: [n, h/q].
  const Tensor<int> ids = upload(tokens.data(), Shape{n}, work);  // where the table lives
  Tensor<T> partial(Shape{n, width}, work, Init::none);
  ops::embedding_lookup<T>(std::as_const(wte_).local(), ids.view(), v0, partial.view(), grid_.queue());
  DistMatrix<T> x(grid_, n, config_.hidden);
  grid_.col().reduce_scatter(partial.data(), x.local().data(), static_cast<std::size_t>(x.local().numel()),
                              dtype_of<T>, ReduceOp::sum);

  // Learned positions: wpe's column block [max_seq, h/q], gathered along the column.
  if (wpe_) {
    Tensor<T> wpe(Shape{config_.max_seq, width}, work);
    grid_.col().all_gather(wpe_->local().data(), wpe.data(), static_cast<std::size_t>(wpe_->local().numel()),
                           dtype_of<T>);
    ops::add_positions<T>(wpe.view(), x.row_offset(), seq, x.local(), grid_.queue());
  }

  finish_embedding(x, tokens, seq, pass, config_, grid_, saved);
  return x;
}

template <class T>
void Embedding2D<T>::backward(Context saved, const DistMatrix<T>& dx_in) {
  saved.mark.check(grid_, "embedding");
  const auto n = static_cast<std::int64_t>(saved.tokens.size());
  const DistMatrix<T> dx = dropped_gradient(saved, dx_in, config_);
  const std::int64_t width = dx.local_cols(), v0 = wte_.row_offset();
  const MemoryTag work = grid_.tag(MemoryKind::workspace);

  // dwte: every token's gradient row (the column block, gathered) into this rank's vocabulary slice.
  Tensor<T> all(Shape{n, width}, work);
  grid_.col().all_gather(dx.local().data(), all.data(), static_cast<std::size_t>(dx.local().numel()), dtype_of<T>);
  const Tensor<int> ids = upload(saved.tokens.data(), Shape{n}, work);
  ops::embedding_scatter_add<T>(all.view(), ids.view(), v0, dwte_.local(), grid_.queue());

  // dwpe: this rank's rows summed per position, then reduced over the column into each rank's slice.
  if (!dwpe_) return;
  Tensor<T> partial(Shape{config_.max_seq, width}, work, Init::none);
  ops::position_grad<T>(dx.local(), dx.row_offset(), saved.seq, partial.view(), grid_.queue());
  Tensor<T> piece(dwpe_->local().shape(), work);
  grid_.col().reduce_scatter(partial.data(), piece.data(), static_cast<std::size_t>(piece.numel()), dtype_of<T>,
                              ReduceOp::sum);
  ops::axpby<T>(T(1), piece.view(), T(1), dwpe_->local(), grid_.queue());
}

template <class T>
void Embedding2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int q = grid_.q(), i = grid_.row_index(), j = grid_.col_index();
  const std::int64_t stored = wte_.rows();  // the padded vocabulary; GPT-2's wte is [vocab, h]
  if (head_bf16_) head_bf16_->invalidate();  // the caller may write the head's weight through its view: cast again
  const ShardLayout vocabulary{.kind = ShardLayout::Kind::block, .q = q, .i = i, .j = j, .rows = stored,
                               .cols = config_.hidden, .fused = {}, .parts = 1, .part = 0,
                               .padding_rows = stored - config_.vocab};
  out.push_back({"wte", {config_.vocab, config_.hidden}, vocabulary, wte_.local(), dwte_.local(),
                 lm_head_ ? nullptr : head_bf16_.get()});
  if (wpe_) {
    out.push_back({"wpe", {config_.max_seq, config_.hidden},
                   ShardLayout{.kind = ShardLayout::Kind::block, .q = q, .i = i, .j = j, .rows = config_.max_seq,
                               .cols = config_.hidden, .fused = {}, .parts = 1, .part = 0, .padding_rows = 0},
                   wpe_->local(), dwpe_->local()});
  }
  if (lm_head_) {
    out.push_back({"lm_head.weight", {config_.vocab, config_.hidden}, vocabulary, lm_head_->local(),
                   dlm_head_->local(), head_bf16_.get()});
  }
}

template <class T>
void Embedding2D<T>::zero_grad() {
  ops::fill<T>(dwte_.local(), T(0), grid_.queue());
  if (dwpe_) ops::fill<T>(dwpe_->local(), T(0), grid_.queue());
  if (dlm_head_) ops::fill<T>(dlm_head_->local(), T(0), grid_.queue());
}

#define OPTIMUS_INSTANTIATE(T)                                                                                    \
  template void finish_embedding<T>(DistMatrix<T>&, const std::vector<int>&, std::int64_t, const Pass&,            \
                                    const GptConfig&, const Grid&, EmbeddingContext&);                            \
  template DistMatrix<T> dropped_gradient<T>(const EmbeddingContext&, const DistMatrix<T>&, const GptConfig&);   \
  template class Embedding2D<T>;
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

// Embedding<T, Split>: vocabulary-parallel lookups, summed as the split says.
#include "optimus/layers/embedding.hpp"

#include "optimus/layers/megatron/embedding.hpp"

#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {
namespace {

// The sequence length of `tokens` taken as `batch` whole sequences; throws (naming the values) unless they are whole
// sequences, fit the position table (max_seq), and every id is in [0, vocab).
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

// tte's table as a vocabulary of its own: token_types ids, the rows stored padded to a multiple of `parts` (the split's
// parts of a vocabulary: q or p), so that it is looked up, stored and checkpointed as wte is.
GptConfig token_type_table(const GptConfig& config, int parts) {
  GptConfig table = config;
  table.vocab = config.block.token_types;
  table.padded_vocab = (table.vocab + parts - 1) / parts * parts;
  return table;
}

// The forward's end: the embedding dropout on x [b*s, h] (this pass's rows of the global batch) and, for a training
// pass, the context (the ids and types, the sequence length, the pass, ln_e's; marked for `grid`).
template <class T>
void finish_embedding(DistMatrix<T>& x, const std::vector<int>& tokens, const std::vector<int>& types,
                      std::int64_t seq, const Pass& pass, const GptConfig& config, const Grid& grid,
                      LayerNormContext<T> ln_e, EmbeddingContext<T>& saved) {
  apply_dropout(x, pass.first_sequence * seq, pass.training ? config.dropout : 0.0, config.seed,
                dropout_stream(pass.step, 0, DropoutSite::embedding));
  saved = EmbeddingContext<T>{};
  if (pass.training) {
    saved.tokens = tokens;
    saved.token_types = types;
    saved.seq = seq;
    saved.pass = pass;
    saved.ln_e = std::move(ln_e);
    saved.mark = ContextMark(grid);
  }
}

// The backward's start: dx [N, h] checked against the saved ids, copied, with the forward's dropout mask applied.
template <class T>
DistMatrix<T> dropped_gradient(const EmbeddingContext<T>& saved, const DistMatrix<T>& dx, const GptConfig& config) {
  const auto n = static_cast<std::int64_t>(saved.tokens.size());
  OPTIMUS_CHECK(dx.rows() == n && dx.cols() == config.hidden, "embedding: the gradient is ", dx.rows(), "x", dx.cols(),
                ", expected ", n, "x", config.hidden);
  DistMatrix<T> dropped = dx.clone();
  apply_dropout(dropped, saved.pass.first_sequence * saved.seq, config.dropout, config.seed,
                dropout_stream(saved.pass.step, 0, DropoutSite::embedding));
  return dropped;
}

}  // namespace

void check_token_types(const std::vector<int>& types, std::size_t n, std::int64_t token_types, std::string_view who) {
  if (types.empty()) return;
  OPTIMUS_CHECK(token_types > 0, who, ": ", types.size(), " token types given to a model without token types "
                "(BlockConfig::token_types = 0)");
  OPTIMUS_CHECK(types.size() == n, who, ": ", types.size(), " token types for ", n, " tokens");
  for (std::size_t t = 0; t < types.size(); ++t) {
    OPTIMUS_CHECK(types[t] >= 0 && types[t] < token_types, who, ": token type ", types[t], " at position ", t,
                  " is outside [0, ", token_types, ")");
  }
}

template <class T, class Split>
Embedding<T, Split>::Embedding(const Place& place, const GptConfig& config, TiedHead head)
    : place_(place),
      config_(config),
      wte_(grid(), Split::vocab_rows(place, config), config.hidden, MemoryKind::parameters),
      dwte_(grid(), wte_.rows(), config.hidden, MemoryKind::gradients) {
  if (!config.block.rope) {
    wpe_.emplace(grid(), config.max_seq, config.hidden, MemoryKind::parameters);
    dwpe_.emplace(grid(), config.max_seq, config.hidden, MemoryKind::gradients);
  }
  if (config.block.token_types > 0) {
    const std::int64_t rows = Split::vocab_rows(place, token_type_table(config, Split::head_parts(place)));
    tte_.emplace(grid(), rows, config.hidden, MemoryKind::parameters);
    dtte_.emplace(grid(), rows, config.hidden, MemoryKind::gradients);
  }
  if (config.block.embedding_norm) {
    ln_e_ = std::make_unique<LayerNorm2D<T>>(grid(), ParameterTags::of(grid()), "ln_e", config.hidden,
                                             config.block.norm);
  }
  if (head == TiedHead::here && !config.block.tied_head) {
    lm_head_.emplace(grid(), wte_.rows(), config.hidden, MemoryKind::parameters);
    dlm_head_.emplace(grid(), wte_.rows(), config.hidden, MemoryKind::gradients);
  }
  if (head == TiedHead::here) head_bf16_ = Split::head_copy(place, lm_head_ ? *lm_head_ : wte_);
}

template <class T, class Split>
SummaOperand<T> Embedding<T, Split>::head_operand() {
  return weight_operand(std::as_const(lm_head_ ? *lm_head_ : wte_), head_bf16_.get());
}

template <class T, class Split>
DistMatrix<T>& Embedding<T, Split>::lm_head_grad() {
  OPTIMUS_CHECK(dlm_head_.has_value(), "embedding: lm_head_grad() of a model whose head is tied to wte or elsewhere");
  return *dlm_head_;
}

template <class T, class Split>
DistMatrix<T> Embedding<T, Split>::forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass,
                                           Context& saved) {
  return forward(tokens, {}, batch, pass, saved);
}

namespace {

// The ids of a table's lookups where the table lives: `ids` (n of them), or n zeros where empty (every token's type 0).
Tensor<int> ids_on(const std::vector<int>& ids, std::size_t n, MemoryTag tag) {
  const std::vector<int> zeros(ids.empty() ? n : 0, 0);
  const std::vector<int>& values = ids.empty() ? zeros : ids;
  return upload(values.data(), Shape{static_cast<std::int64_t>(n)}, tag);
}

}  // namespace

template <class T, class Split>
DistMatrix<T> Embedding<T, Split>::forward(const std::vector<int>& tokens, const std::vector<int>& token_types,
                                           std::int64_t batch, const Pass& pass, Context& saved) {
  const std::int64_t seq = checked_sequence_length(tokens, batch, config_);
  check_token_types(token_types, tokens.size(), config_.block.token_types, "embedding");
  const int q = grid().q();
  OPTIMUS_CHECK(batch % q == 0, "embedding: batch = ", batch, " is not divisible by q = ", q);
  const MemoryTag work = grid().tag(MemoryKind::workspace);  // where the tables live
  DistMatrix<T> x = Split::look_up(place_, std::as_const(wte_), ids_on(tokens, tokens.size(), work).view(),
                                   config_.hidden);
  if (wpe_) Split::add_positions(place_, std::as_const(*wpe_), seq, x);
  if (tte_) {  // x += tte[type] (every token's type 0 where none are given)
    const DistMatrix<T> types = Split::look_up(place_, std::as_const(*tte_),
                                               ids_on(token_types, tokens.size(), work).view(), config_.hidden);
    ops::axpby<T>(T(1), types.local(), T(1), x.local(), grid().queue());
  }
  LayerNormContext<T> ln_e;
  if (ln_e_) x = ln_e_->forward(x, pass, ln_e);
  finish_embedding(x, tokens, token_types, seq, pass, config_, grid(), std::move(ln_e), saved);
  return x;
}

template <class T, class Split>
void Embedding<T, Split>::backward(Context saved, const DistMatrix<T>& dx_in) {
  saved.mark.check(grid(), "embedding");
  DistMatrix<T> dx = dropped_gradient(saved, dx_in, config_);
  if (ln_e_) dx = ln_e_->backward(std::move(saved.ln_e), dx);
  const MemoryTag work = grid().tag(MemoryKind::workspace);
  Split::add_lookup_gradient(place_, dx, ids_on(saved.tokens, saved.tokens.size(), work).view(), dwte_);
  if (dwpe_) Split::add_position_gradient(place_, dx, saved.seq, *dwpe_);
  if (dtte_) {
    Split::add_lookup_gradient(place_, dx, ids_on(saved.token_types, saved.tokens.size(), work).view(), *dtte_);
  }
}

template <class T, class Split>
void Embedding<T, Split>::parameters(std::vector<ParameterRef<T>>& out) {
  const std::int64_t h = config_.hidden;
  if (head_bf16_) head_bf16_->invalidate();  // the caller may write the head's weight through its view: cast again
  const Sharding vocabulary = Split::vocabulary_layout(place_, config_);  // GPT-2's wte is [vocab, h]
  out.push_back({"wte", {config_.vocab, h}, vocabulary, wte_.local(), dwte_.local(),
                 lm_head_ ? nullptr : head_bf16_.get()});
  if (wpe_) {
    out.push_back({"wpe", {config_.max_seq, h}, Split::table_layout(place_, config_.max_seq, h), wpe_->local(),
                   dwpe_->local()});
  }
  if (tte_) {
    const std::int64_t types = config_.block.token_types;
    out.push_back({"tte", {types, h},
                   Split::vocabulary_layout(place_, token_type_table(config_, Split::head_parts(place_))),
                   tte_->local(), dtte_->local()});
  }
  if (ln_e_) {
    const std::size_t from = out.size();
    ln_e_->parameters(out);
    Split::relabel_norms(place_, out, from);  // 1D: whole on every rank of the group
  }
  if (lm_head_) {
    out.push_back({"lm_head.weight", {config_.vocab, h}, vocabulary, lm_head_->local(), dlm_head_->local(),
                   head_bf16_.get()});
  }
}

template <class T, class Split>
void Embedding<T, Split>::zero_grad() {
  ops::fill<T>(dwte_.local(), T(0), grid().queue());
  if (dwpe_) ops::fill<T>(dwpe_->local(), T(0), grid().queue());
  if (dtte_) ops::fill<T>(dtte_->local(), T(0), grid().queue());
  if (ln_e_) ln_e_->zero_grad();
  if (dlm_head_) ops::fill<T>(dlm_head_->local(), T(0), grid().queue());
}

template class Embedding<float, Split2D>;
template class Embedding<double, Split2D>;
template class Embedding<float, megatron::Split1D>;
template class Embedding<double, megatron::Split1D>;

}  // namespace optimus

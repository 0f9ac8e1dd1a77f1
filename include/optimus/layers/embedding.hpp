// optimus::Embedding<T, Split>: vocab-parallel token embedding plus position embedding, one class for both splits
// (optimus/layers/split.hpp; docs/design.md, "Layers"): Embedding2D on the q x q grid, as below; megatron::Embedding1D,
// Megatron's, over the p ranks of a Group (optimus/layers/megatron/embedding.hpp).
//   wte: [vocab, h] in q x q blocks (rank (i, j) holds vocabulary slice i, feature block j);
//   wpe: [max_seq, h] in q x q blocks, for learned positions (none with rotary positions: the blocks' attention turns
//   queries and keys instead). Output x: [N, h] with N = b*s.
//   tte: [token_types, h] (BERT's segment embeddings, BlockConfig::token_types; none where 0), a small vocabulary of
//   its own, stored and looked up as wte is (its rows padded to a multiple of the split's parts: zero, never looked
//   up); ln_e: a norm over the sum (BlockConfig::embedding_norm: BERT's embeddings' LayerNorm), before the dropout.
//   lm_head.weight: [vocab, h] as wte, the untied LM head's own weight (BlockConfig::tied_head false), held here on the
//   stage of the head; the head multiplies head_operand(): lm_head, or wte where tied.
// Forward, as Megatron's vocab-parallel embedding applied along each grid column: every rank of column j
// looks up all N tokens in its vocabulary slice (zero for tokens outside it), and a reduce-scatter along the
// column sums the slices and leaves rank (i, j) its rows block i. wpe's column block is all-gathered along the
// column. Backward: dx's column block is all-gathered along the column and scattered into the local slice
// of dwte; dwpe's partial sums are reduce-scattered along the column.
// Every rank receives the replica's whole batch of token ids (b*s ints), checked against the vocabulary, and of token
// types where the model has them. tte's lookup is one more reduce-scatter (2D; 1D: all-reduce) of x, forward only.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/split.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus {

// Whether the LM head runs beside this embedding: a pipeline's first stage holds the embedding for its lookups only.
// Here, the head multiplies wte (tied) or lm_head (untied, held here); under mixed precision its products take that
// matrix's bf16 copy, kept only `here`.
enum class TiedHead { elsewhere, here };

// Throws, naming `who` and the values, unless `types` is empty or one type in [0, token_types) for each of n tokens of
// a model with token types.
void check_token_types(const std::vector<int>& types, std::size_t n, std::int64_t token_types, std::string_view who);

template <class T, class Split>
class Embedding {
 public:
  using Place = typename Split::Place;

  Embedding(const Place& place, const GptConfig& config, TiedHead head);

  using Context = EmbeddingContext<T>;

  // tokens: b*s ids, row-major [b, s]; returns x: [b*s, h] with embedding dropout applied. A training pass keeps the
  // ids in `saved`. Every token of type 0 where the model has token types.
  DistMatrix<T> forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass, Context& saved);
  // The same with each token's type (b*s, each in [0, token_types)); empty: every token of type 0. Types given to a
  // model without token types throw, naming the counts.
  DistMatrix<T> forward(const std::vector<int>& tokens, const std::vector<int>& token_types, std::int64_t batch,
                        const Pass& pass, Context& saved);
  // Accumulates dwte, dwpe (learned positions), dtte (token types) and ln_e's gradients.
  void backward(Context saved, const DistMatrix<T>& dx);

  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

  // The token embedding (this rank's part) and its gradient.
  const DistMatrix<T>& wte() const { return wte_; }
  DistMatrix<T>& wte_grad() { return dwte_; }
  // The LM head's weight (wte where tied, lm_head where not; this embedding must be the head's: TiedHead::here) as the
  // head's products take it (under mixed precision on the grid its bf16 copy, which AdamW's update writes:
  // weight_copy.hpp), and where its gradient goes where untied.
  SummaOperand<T> head_operand();
  DistMatrix<T>& lm_head_grad();

 private:
  const Grid& grid() const { return Split::activation_grid(place_); }

  Place place_;
  GptConfig config_;
  DistMatrix<T> wte_, dwte_;
  std::optional<DistMatrix<T>> wpe_, dwpe_;         // learned positions only
  std::optional<DistMatrix<T>> tte_, dtte_;         // token types only
  std::unique_ptr<LayerNorm2D<T>> ln_e_;            // the embeddings' norm (on the activation grid), or none
  std::optional<DistMatrix<T>> lm_head_, dlm_head_;  // the untied head's, here
  std::unique_ptr<WeightCopy> head_bf16_;  // the head's weight's bf16 copy (Split::head_copy) here, else null
};

template <class T>
using Embedding2D = Embedding<T, Split2D>;

extern template class Embedding<float, Split2D>;
extern template class Embedding<double, Split2D>;

}  // namespace optimus

// optimus::Embedding2D: vocab-parallel token embedding plus position embedding (docs/design.md, "Layers").
//   wte: [vocab, h] in q x q blocks (rank (i, j) holds vocabulary slice i, feature block j);
//   wpe: [max_seq, h] in q x q blocks, for learned positions (none with rotary positions: the blocks' attention turns
//   queries and keys instead). Output x: [N, h] with N = b*s.
//   lm_head.weight: [vocab, h] as wte, the untied LM head's own weight (BlockConfig::tied_head false), held here on the
//   stage of the head; the head multiplies head_operand(): lm_head, or wte where tied.
// Forward, as Megatron's vocab-parallel embedding applied along each grid column: every rank of column j
// looks up all N tokens in its vocabulary slice (zero for tokens outside it), and a reduce-scatter along the
// column sums the slices and leaves rank (i, j) its rows block i. wpe's column block is all-gathered along the
// column. Backward: dx's column block is all-gathered along the column and scattered into the local slice
// of dwte; dwpe's partial sums are reduce-scattered along the column.
// Every rank receives the replica's whole batch of token ids (b*s ints), checked against the vocabulary.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "optimus/core/gpt_config.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus {

// The sequence length of `tokens` taken as `batch` whole sequences; throws (naming the values) unless they are whole
// sequences, fit the position table (max_seq), and every id is in [0, vocab). Shared by the 2D and 1D embeddings.
std::int64_t checked_sequence_length(const std::vector<int>& tokens, std::int64_t batch, const GptConfig& config);

// Shared by the 2D and 1D embeddings. The forward's end: the embedding dropout on x [b*s, h] (this pass's rows of the
// global batch) and, for a training pass, the context (the ids, the sequence length, the pass; marked for `grid`).
template <class T>
void finish_embedding(DistMatrix<T>& x, const std::vector<int>& tokens, std::int64_t seq, const Pass& pass,
                      const GptConfig& config, const Grid& grid, EmbeddingContext& saved);
// The backward's start: dx [N, h] checked against the saved ids, copied, with the forward's dropout mask applied.
template <class T>
DistMatrix<T> dropped_gradient(const EmbeddingContext& saved, const DistMatrix<T>& dx, const GptConfig& config);

// Whether the LM head runs beside this embedding: a pipeline's first stage holds the embedding for its lookups only.
// Here, the head multiplies wte (tied) or lm_head (untied, held here); under mixed precision its products take that
// matrix's bf16 copy, kept only `here`.
enum class TiedHead { elsewhere, here };

template <class T>
class Embedding2D {
 public:
  Embedding2D(const Grid& grid, const GptConfig& config, TiedHead head);

  using Context = EmbeddingContext;

  // tokens: b*s ids, row-major [b, s]; returns x: [b*s, h] with embedding dropout applied. A training pass keeps the
  // ids in `saved`.
  DistMatrix<T> forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass, Context& saved);
  // Accumulates dwte and dwpe (learned positions).
  void backward(Context saved, const DistMatrix<T>& dx);

  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

  // The token embedding and its gradient.
  const DistMatrix<T>& wte() const { return wte_; }
  DistMatrix<T>& wte_grad() { return dwte_; }
  // The LM head's weight (wte where tied, lm_head where not; this embedding must be the head's: TiedHead::here) as the
  // head's products take it (under mixed precision its bf16 copy, which AdamW's update writes: weight_copy.hpp), and
  // where its gradient goes where untied.
  SummaOperand<T> head_operand();
  DistMatrix<T>& lm_head_grad();

 private:
  Grid grid_;
  GptConfig config_;
  DistMatrix<T> wte_, dwte_;
  std::optional<DistMatrix<T>> wpe_, dwpe_;         // learned positions only
  std::optional<DistMatrix<T>> lm_head_, dlm_head_;  // the untied head's, here
  std::unique_ptr<WeightCopy> head_bf16_;  // the head's weight [V/q, h/q] under mixed precision here, else null
};

extern template class Embedding2D<float>;
extern template class Embedding2D<double>;

}  // namespace optimus

// optimus::LmHead<T, Split>: logits = x w^T with w the token embedding (tied) or lm_head, and the vocab-parallel mean
// cross-entropy, one class for both splits (optimus/layers/split.hpp; docs/design.md, "Layers"): LmHead2D on the
// q x q grid, as below; megatron::LmHead1D, Megatron's, over the p ranks of a Group
// (optimus/layers/megatron/lm_head.hpp).
//   x: [N, h]; w: [V, h] with V >= vocab (the stored, padded vocabulary, GptConfig::stored_vocab); logits: [N, V],
//   rank (i, j) holds tokens block i, vocabulary slice j (SUMMA ABT). Logits of the padding ids [vocab, V) are -inf
//   (a row of 0 / -inf added to this rank's columns), so they take no part in the softmax, the loss or any gradient.
//   Per token: max, sum of exp and the target's logit are row all-reduces (the last two fused into one);
//   the loss is the sum of the N tokens' losses over `mean_over` (N for one batch, the whole batch's token count for
//   one of its micro-batches: the micro-batches' losses then add up to the batch's mean), a column all-reduce of the
//   rows' sums. backward: dlogits = (softmax - onehot(target)) / mean_over (computed by a training forward);
//   dx = dlogits w (SUMMA AB), dw += dlogits^T x (SUMMA ATB).
// w comes as a SUMMA operand: the embedding's matrix, or under mixed precision its bf16 copy
// (Embedding::head_operand). BERT's head (BlockConfig::head_transform) adds a bias to the logits, head.bias [vocab]
// (stored over the padded vocabulary, the padding zero): a grid vector, rank (i, j)'s column block j all-gathered along
// the column and added to its logits; its gradient the column sums of dlogits, reduce-scattered along the column (1D:
// each rank's vocabulary slice, no communication).
// Saved for backward (LmHeadContext): x [N, h] and dlogits [N, vocab] (split q*q ways) as SavedActivations: in bf16
// when the grid's GEMM math is bf16 (what the products take), half the bytes of f32; dlogits then written in bf16 by
// the loss's gradient kernel itself.
#pragma once

#include <optional>
#include <vector>

#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dist_vector.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/split.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

template <class T, class Split>
class LmHead {
 public:
  using Place = typename Split::Place;
  using Context = LmHeadContext<T>;

  // vocab: the real vocabulary (targets are checked against it); w may have more rows (padding).
  LmHead(const Place& place, std::int64_t vocab) : place_(place), vocab_(vocab) {}
  // A model's head: with a bias on the logits where config.block.head_transform says (BERT's).
  LmHead(const Place& place, const GptConfig& config);

  // The bias's parameter and gradient (head.bias; none without it).
  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

  // The logits only (inference): [N, V] as the split returns them (padding columns -inf).
  DistMatrix<T> logits(const DistMatrix<T>& x, const SummaOperand<T>& w) const;
  // The sum of the N tokens' cross-entropies over mean_over (>= N); targets: N ids (the pass's whole batch),
  // checked. A training pass fills `saved`.
  double forward(const DistMatrix<T>& x, const SummaOperand<T>& w, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // The same from an input already kept as this head keeps it (LayerNorm::forward_saved): a training pass takes it
  // over as its context, without a copy or a cast.
  double forward(SavedActivation<T> x, const SummaOperand<T>& w, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // Returns dx and accumulates into dw (w's gradient: wte's, or lm_head's where untied).
  DistMatrix<T> backward(Context saved, const SummaOperand<T>& w, DistMatrix<T>& dw);
  // The same, split (weight_gradients.hpp): dx now; dw += dlogits^T x queued in `later` with the saved x and
  // dlogits (dw must outlive the queued work).
  DistMatrix<T> backward(Context saved, const SummaOperand<T>& w, DistMatrix<T>& dw, WeightGradients& later);

 private:
  const Grid& grid() const { return Split::activation_grid(place_); }
  // The loss of x's logits; under `training` dlogits kept in saved (x already kept there by the caller).
  double loss(const SummaOperand<T>& x, const SummaOperand<T>& w, const std::vector<int>& targets,
              std::int64_t mean_over, bool training, Context& saved);
  // Adds -inf to the logits of padding ids (no-op where this rank's columns have none).
  void mask_padding(DistMatrix<T>& logits) const;
  // Adds the bias's slice to this rank's logits columns (no-op without a bias).
  void add_bias(DistMatrix<T>& logits) const;
  // dbias += the column sums of dlogits (no-op without a bias).
  void add_bias_gradient(const SavedActivation<T>& dlogits);

  Place place_;
  std::int64_t vocab_;
  std::optional<DistVector<T>> bias_, dbias_;  // BERT's head.bias over the stored vocabulary, or none
  mutable Tensor<T> mask_;  // [this rank's columns]: 0, or -inf for a padding id; made on first use where it has padding
};

template <class T>
using LmHead2D = LmHead<T, Split2D>;

extern template class LmHead<float, Split2D>;
extern template class LmHead<double, Split2D>;

}  // namespace optimus

// optimus::LmHead2D: logits = x wte^T (SUMMA ABT with the tied token embedding) and the vocab-parallel
// mean cross-entropy (docs/design.md, "Layers").
//   x: [N, h]; wte: [V, h] with V >= vocab (the stored, padded vocabulary, GptConfig::stored_vocab); logits: [N, V],
//   rank (i, j) holds tokens block i, vocabulary slice j. Logits of the padding ids [vocab, V) are -inf (a row of
//   0 / -inf added to this rank's columns), so they take no part in the softmax, the loss or any gradient.
//   Per token: max, sum of exp and the target's logit are row all-reduces (the last two fused into one);
//   the loss is the sum of the N tokens' losses over `mean_over` (N for one batch, the whole batch's token count for
//   one of its micro-batches: the micro-batches' losses then add up to the batch's mean), a column all-reduce of the
//   rows' sums. backward: dlogits = (softmax - onehot(target)) / mean_over (computed by a training forward);
//   dx = dlogits wte (SUMMA AB), dwte += dlogits^T x (SUMMA ATB).
// wte comes as a SUMMA operand: the embedding's matrix, or under mixed precision its bf16 copy
// (Embedding2D::wte_operand).
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
#include "optimus/layers/context.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

// Throws (naming the values) unless `targets` are n ids in [0, vocab) and mean_over >= n. Shared with the 1D head.
void check_targets(const std::vector<int>& targets, std::int64_t n, std::int64_t vocab, std::int64_t mean_over);

template <class T>
class LmHead2D {
 public:
  using Context = LmHeadContext<T>;

  // vocab: the real vocabulary (targets are checked against it); wte may have more rows (padding).
  LmHead2D(const Grid& grid, std::int64_t vocab) : grid_(grid), vocab_(vocab) {}

  // The logits only (inference): [N, V] (padding columns -inf).
  DistMatrix<T> logits(const DistMatrix<T>& x, const SummaOperand<T>& wte) const;
  // The sum of the N tokens' cross-entropies over mean_over (>= N); targets: N ids (the pass's whole batch),
  // checked. A training pass fills `saved`.
  double forward(const DistMatrix<T>& x, const SummaOperand<T>& wte, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // The same from an input already kept as this head keeps it (LayerNorm2D::forward_saved): a training pass takes it
  // over as its context, without a copy or a cast.
  double forward(SavedActivation<T> x, const SummaOperand<T>& wte, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // Returns dx and accumulates into dwte.
  DistMatrix<T> backward(Context saved, const SummaOperand<T>& wte, DistMatrix<T>& dwte);
  // The same, split (weight_gradients.hpp): dx now; dwte += dlogits^T x queued in `later` with the saved x and
  // dlogits (dwte must outlive the queued work).
  DistMatrix<T> backward(Context saved, const SummaOperand<T>& wte, DistMatrix<T>& dwte, WeightGradients& later);

 private:
  // The loss of x's logits; under `training` dlogits kept in saved (x already kept there by the caller).
  double loss(const SummaOperand<T>& x, const SummaOperand<T>& wte, const std::vector<int>& targets,
              std::int64_t mean_over, bool training, Context& saved);
  // Adds -inf to the logits of padding ids (no-op when wte has no padding rows).
  void mask_padding(DistMatrix<T>& logits) const;

  Grid grid_;
  std::int64_t vocab_;
  mutable Tensor<T> mask_;  // [V/q]: 0, or -inf for a padding id; made on first use where this rank has padding
};

extern template class LmHead2D<float>;
extern template class LmHead2D<double>;

}  // namespace optimus

// optimus::LmHead2D: logits = x wte^T (SUMMA ABT with the tied token embedding) and the vocab-parallel
// mean cross-entropy (docs/design.md, "Layers").
//   x: [N, h]; wte: [vocab, h]; logits: [N, vocab], rank (i, j) holds tokens block i, vocabulary slice j.
//   Per token: max, sum of exp and the target's logit are row all-reduces (the last two fused into one);
//   the loss is the sum of the N tokens' losses over `mean_over` (N for one batch, the whole batch's token count for
//   one of its micro-batches: the micro-batches' losses then add up to the batch's mean), a column all-reduce of the
//   rows' sums. backward: dlogits = (softmax - onehot(target)) / mean_over (computed by a training forward);
//   dx = dlogits wte (SUMMA AB), dwte += dlogits^T x (SUMMA ATB).
// Saved for backward (LmHeadContext): x [N, h] and dlogits [N, vocab] (split q*q ways) as SavedActivations: in bf16
// when the grid's GEMM math is bf16 (what the products take), half the bytes of f32.
#pragma once

#include <optional>
#include <vector>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus {

template <class T>
class LmHead2D {
 public:
  using Context = LmHeadContext<T>;

  explicit LmHead2D(const Grid& grid) : grid_(grid) {}

  // The logits only (inference): [N, vocab].
  DistMatrix<T> logits(const DistMatrix<T>& x, const DistMatrix<T>& wte) const;
  // The sum of the N tokens' cross-entropies over mean_over (>= N); targets: N ids (the pass's whole batch),
  // checked. A training pass fills `saved`.
  double forward(const DistMatrix<T>& x, const DistMatrix<T>& wte, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // Returns dx and accumulates into dwte.
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& wte, DistMatrix<T>& dwte);

 private:
  Grid grid_;
};

extern template class LmHead2D<float>;
extern template class LmHead2D<double>;

}  // namespace optimus

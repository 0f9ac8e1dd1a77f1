// optimus::LmHead2D: logits = x wte^T (SUMMA ABT with the tied token embedding) and the vocab-parallel
// mean cross-entropy (DESIGN.md section 5).
//   x: [N, h]; wte: [vocab, h]; logits: [N, vocab], rank (i, j) holds tokens block i, vocabulary slice j.
//   Per token: max, sum of exp and the target's logit are row all-reduces (the last two fused into one);
//   the loss is the mean over the N tokens (a column all-reduce of the rows' sums).
//   backward: dlogits = (softmax - onehot(target)) / N (computed by a training forward); dx = dlogits wte
//   (SUMMA AB), dwte += dlogits^T x (SUMMA ATB).
// Saved for backward: x [N, h] and dlogits [N, vocab] (split q*q ways) as SavedActivations: in bf16 when the grid's
// GEMM math is bf16 (what the products take), half the bytes of f32.
#pragma once

#include <optional>
#include <vector>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus {

template <class T>
class LmHead2D {
 public:
  explicit LmHead2D(const Grid& grid) : grid_(&grid) {}

  // The logits only (inference): [N, vocab].
  DistMatrix<T> logits(const DistMatrix<T>& x, const DistMatrix<T>& wte) const;
  // Mean cross-entropy over the N tokens; targets: N ids (the replica's whole batch), checked.
  double forward(const DistMatrix<T>& x, const DistMatrix<T>& wte, const std::vector<int>& targets, const Pass& pass);
  // Returns dx and accumulates into dwte.
  DistMatrix<T> backward(const DistMatrix<T>& wte, DistMatrix<T>& dwte);

 private:
  const Grid* grid_;
  std::optional<SavedActivation<T>> x_, dlogits_;
};

extern template class LmHead2D<float>;
extern template class LmHead2D<double>;

}  // namespace optimus

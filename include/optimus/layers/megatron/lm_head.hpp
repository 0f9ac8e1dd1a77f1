// optimus::megatron::LmHead1D: logits tied to the vocab-parallel wte and Megatron's vocab-parallel cross-entropy.
//   x: [N, h] replicated; wte_r: [V/p, h], this rank's ids [v0, v0 + V/p); logits_r = x wte_r^T: [N, V/p], with -inf
//   added to padding ids [vocab, V) so that they take no part in the softmax, the loss or any gradient.
//   Per token: the max, then (sum of exp, target logit) are all-reduces over the group of N and 2N elements; the loss
//   is the sum of the N tokens' cross-entropies over `mean_over` (as LmHead2D), the same on every rank.
//   backward: dlogits_r = (softmax - onehot) / mean_over (made by the training forward); dx = dlogits_r wte_r is
//   partial, one all-reduce of [N, h]; dwte_r += dlogits_r^T x, no communication.
// Saved (LmHeadContext): x [N, h] and dlogits_r [N, V/p], in bf16 when the group's GEMM math is bf16.
#pragma once

#include <vector>

#include "optimus/core/tensor.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus::megatron {

template <class T>
class LmHead1D {
 public:
  using Context = LmHeadContext<T>;

  // vocab: the real vocabulary (targets are checked against it).
  LmHead1D(const Group& group, std::int64_t vocab) : group_(group), vocab_(vocab) {}

  // wte: this rank's rows [V/p, h] of the token embedding, whose first row is id v0. targets: the N ids of the pass.
  double forward(const DistMatrix<T>& x, const DistMatrix<T>& wte, std::int64_t v0, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // The same from an input already kept as this head keeps it (LayerNorm1D::forward_saved): a training pass takes it
  // over as its context, without a copy or a cast.
  double forward(SavedActivation<T> x, const DistMatrix<T>& wte, std::int64_t v0, const std::vector<int>& targets,
                 std::int64_t mean_over, const Pass& pass, Context& saved);
  // Inference: every rank gets the whole logits [N, p*V/p] (x wte_r^T per rank, all-gathered over the group; padding
  // ids -inf), on the group's one-rank grid.
  DistMatrix<T> logits(const DistMatrix<T>& x, const DistMatrix<T>& wte, std::int64_t v0);
  // Returns dx (replicated) and accumulates into dwte (this rank's rows).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& wte, DistMatrix<T>& dwte);
  // The same, split (layers/weight_gradients.hpp): dx now; dwte += dlogits_r^T x queued in `later` with the saved x
  // and dlogits (dwte must outlive the queued work).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& wte, DistMatrix<T>& dwte, WeightGradients& later);

 private:
  // The loss of the logits of x's rows (x_local [N, h], its values); under `training` dlogits kept in saved.
  double loss(TensorView<const T> x_local, const DistMatrix<T>& wte, std::int64_t v0, const std::vector<int>& targets,
              std::int64_t mean_over, bool training, Context& saved);
  void mask_padding(DistMatrix<T>& logits, std::int64_t v0);
  // dx = dlogits_r wte_r, all-reduced over the group.
  DistMatrix<T> input_gradient(const Context& saved, const DistMatrix<T>& wte);

  Group group_;
  std::int64_t vocab_;
  Tensor<T> mask_;  // [V/p]: 0, or -inf for a padding id; made on first use where this rank has padding
};

extern template class LmHead1D<float>;
extern template class LmHead1D<double>;

}  // namespace optimus::megatron

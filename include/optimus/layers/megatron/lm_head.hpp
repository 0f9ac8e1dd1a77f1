// The 1D (Megatron-LM) baseline's LM head: the 2D one's class (optimus/layers/lm_head.hpp) on megatron::Split1D, with
// Megatron's vocab-parallel cross-entropy:
//   x: [N, h] replicated; w_r: [V/p, h], this rank's ids [v0, v0 + V/p); logits_r = x w_r^T: [N, V/p], with -inf
//   added to padding ids [vocab, V) so that they take no part in the softmax, the loss or any gradient.
//   Per token: the max, then (sum of exp, target logit) are all-reduces over the group of N and 2N elements; the loss
//   is the sum of the N tokens' cross-entropies over `mean_over` (as LmHead2D), the same on every rank.
//   backward: dlogits_r = (softmax - onehot) / mean_over (made by the training forward); dx = dlogits_r w_r is
//   partial, one all-reduce of [N, h]; dw_r += dlogits_r^T x, no communication.
//   Inference: every rank gets the whole logits [N, p V/p] (the slices all-gathered over the group).
// Saved (LmHeadContext): x [N, h] and dlogits_r [N, V/p], in bf16 when the group's GEMM math is bf16.
#pragma once

#include "optimus/layers/lm_head.hpp"
#include "optimus/layers/megatron/split.hpp"

namespace optimus::megatron {

template <class T>
using LmHead1D = LmHead<T, Split1D>;

}  // namespace optimus::megatron

namespace optimus {

extern template class LmHead<float, megatron::Split1D>;
extern template class LmHead<double, megatron::Split1D>;

}  // namespace optimus

// The 1D (Megatron-LM) baseline's attention: the 2D one's class (optimus/layers/attention.hpp) on megatron::Split1D,
// heads split over the p ranks of a Group, activations [N, h] replicated:
//   c_attn column-parallel (rank r holds the Q, K, V of heads [r*a/p, (r+1)*a/p)), local causal attention, c_proj
//   row-parallel (its output all-reduced over the group).
#pragma once

#include "optimus/layers/attention.hpp"
#include "optimus/layers/megatron/split.hpp"

namespace optimus::megatron {

template <class T>
using Attention1D = Attention<T, Split1D>;

}  // namespace optimus::megatron

namespace optimus {

extern template class Attention<float, megatron::Split1D>;
extern template class Attention<double, megatron::Split1D>;

}  // namespace optimus

// The 1D (Megatron-LM) transformer block: the pre-norm block (GPT-2's or Llama's parts) with attention heads and the
// MLP's inner dimension split over the p ranks of a Group, activations [N, h] replicated — the same classes as the
// 2D ones (optimus/layers/block.hpp, mlp.hpp) on megatron::Split1D (split.hpp):
//   Attention1D: c_attn column-parallel, local causal attention, c_proj row-parallel (megatron/attention.hpp).
//   MLP1D      : c_fc column-parallel, GELU or SwiGLU, c_proj row-parallel.
// Communication per block: two all-reduces of [N, h] forward (after each row-parallel layer) and two
// backward (after each column-parallel layer). LayerNorm parameters and row-parallel biases are replicated.
// Parameter names are GPT-2's, as for the 2D block, so the same reference checks both.
#pragma once

#include "optimus/layers/block.hpp"
#include "optimus/layers/megatron/attention.hpp"
#include "optimus/layers/megatron/split.hpp"
#include "optimus/layers/mlp.hpp"

namespace optimus::megatron {

template <class T>
using MLP1D = MLP<T, Split1D>;
template <class T>
using TransformerBlock1D = TransformerBlock<T, Split1D>;

}  // namespace optimus::megatron

namespace optimus {

extern template class MLP<float, megatron::Split1D>;
extern template class MLP<double, megatron::Split1D>;
extern template class TransformerBlock<float, megatron::Split1D>;
extern template class TransformerBlock<double, megatron::Split1D>;

}  // namespace optimus

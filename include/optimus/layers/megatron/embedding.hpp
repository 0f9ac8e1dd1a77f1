// The 1D (Megatron-LM) baseline's embedding: the 2D one's class (optimus/layers/embedding.hpp) on megatron::Split1D:
//   wte: [V, h] split by rows over the p ranks of the group (rank r: ids [r V/p, (r+1) V/p)), V the stored, padded
//        vocabulary (GptConfig::stored_vocab(p)); wpe: [max_seq, h] replicated, for learned positions (none with rotary
//        positions). Output x: [N, h] replicated, N = b*s. lm_head.weight: the untied LM head's own [V, h], split as
//        wte, held here on the head's stage.
// Forward: each rank looks up all N tokens in its slice (zero rows for ids outside it), one all-reduce of [N, h]
// sums the slices; then positions and the embedding dropout (the same global masks as the 2D model and the
// reference). Backward: dx (replicated) goes into the rows of dwte this rank holds; dwpe, like wpe, is the same on
// every rank, so neither needs communication. Communication: one all-reduce of N*h elements, forward only.
#pragma once

#include "optimus/layers/embedding.hpp"
#include "optimus/layers/megatron/split.hpp"

namespace optimus::megatron {

template <class T>
using Embedding1D = Embedding<T, Split1D>;

}  // namespace optimus::megatron

namespace optimus {

extern template class Embedding<float, megatron::Split1D>;
extern template class Embedding<double, megatron::Split1D>;

}  // namespace optimus

// The attention of one rank's block, shared by the 2D and 1D layers: for each of its sequences and each of
// its heads, causal softmax(Q K^T / sqrt(d)) with dropout, times V — no communication.
//   qkv   : [batches*seq, 3*width], columns [Q | K | V] each `width` = heads*d wide (this rank's heads)
//   probs : [batches*heads*seq, seq], row (b*heads + t)*seq + query, softmax before dropout (saved; in bf16 under
//           mixed precision, see ProbsStore)
//   merged: [batches*seq, width], head-major columns; an empty view computes the probabilities only (selective
//           recomputation)
// Dropout masks use global indices: row ((first_batch + b)*total_heads + first_head + t)*seq + query.
// The work is sequence by sequence, all of its heads at once — batched GEMMs (ops::gemm_batched) over the heads'
// [s, d] blocks and the [heads*seq, seq] stack of their tiles, causal softmax and dropout on that stack — through
// optimus::ops, so it runs wherever the views live; its scratch tiles (one sequence's) come from `grid`.
#pragma once

#include <cstdint>
#include <type_traits>

#include "optimus/core/dtype.hpp"

#include "optimus/core/rng.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::detail {

struct AttentionGeometry {
  std::int64_t seq = 0, batches = 0, heads = 0, head_size = 0;  // this rank's sequences and heads
  std::int64_t first_batch = 0, first_head = 0, total_heads = 0;
  double dropout = 0.0;
  CounterRng rng{0};  // the attention-probability dropout stream
};

// Where the probabilities are kept: in T, or in bf16 under mixed precision (SavedActivation<T>::keeps_bf16); the
// other view is empty. Both [batches*heads*seq, seq]. The forward may keep none (inference: both empty).
template <class T, class P = T>
struct ProbsStore {
  TensorView<P> full;
  TensorView<std::conditional_t<std::is_const_v<P>, const bf16, bf16>> half;
};

template <class T>
void attention_core_forward(const AttentionGeometry& g, const Grid& grid, TensorView<const T> qkv,
                            ProbsStore<T> probs, TensorView<T> merged);

// With bf16 probabilities, the backward works on their widening: the bf16 rounding of the forward's values.
template <class T>
void attention_core_backward(const AttentionGeometry& g, const Grid& grid, TensorView<const T> qkv,
                             ProbsStore<T, const T> probs, TensorView<const T> dmerged, TensorView<T> dqkv);

}  // namespace optimus::detail

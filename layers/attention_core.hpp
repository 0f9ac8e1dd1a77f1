// The attention of one rank's block, shared by the 2D and 1D layers: for each of its sequences and each of its heads,
// softmax(Q K^T / sqrt(d)) with a causal mask or none (bidirectional), with dropout, times V — no communication — through the fused attention
// (ops::flash_attention_*, FlashAttention-2's algorithm), so that no [seq, seq] matrix is ever whole in memory.
//   qkv   : [batches*seq, 3*width], columns [Q | K | V] each `width` = heads*d wide (this rank's heads), as saved: in
//           bf16 under mixed precision, which the attention reads as it is (no f32 copy)
//   lse   : [batches*heads*seq], row (b*heads + t)*seq + query: the log-sum-exp of the query's scaled scores, all
//           backward needs besides qkv (kept in T under mixed precision too: it is small, and the probabilities
//           are rebuilt from it)
//   merged: [batches*seq, width], head-major columns, written as c_proj keeps its input (a SavedActivation: bf16
//           under mixed precision, by the attention kernel itself)
// Dropout masks use global indices: row ((first_batch + b)*total_heads + first_head + t)*seq + query, column key.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/grid/saved_activation.hpp"

namespace optimus::detail {

struct AttentionGeometry {
  std::int64_t seq = 0, batches = 0, heads = 0, head_size = 0;  // this rank's sequences and heads
  std::int64_t kv_heads = 0;  // this rank's key/value heads (grouped-query attention; = heads: multi-head)
  std::int64_t first_batch = 0, first_head = 0, total_heads = 0;
  double dropout = 0.0;
  CounterRng rng{0};  // the attention-probability dropout stream
  std::optional<RopeSpec> rope;  // rotary positions on the queries and keys, or none
  bool causal = true;            // query i sees keys 0..i of its sequence; false: all of them
  std::vector<int> lengths;      // [batches]: each sequence's keys before its padding (Pass::lengths), or empty: none
};

// `lse` may be empty (inference: nothing is kept; the core uses scratch from `grid`).
template <class T>
void attention_core_forward(const AttentionGeometry& g, const Grid& grid, const SavedActivation<T>& qkv,
                            TensorView<T> lse, SavedActivation<T>& merged);

// The softmax backward's row terms D [batches * heads * seq] (ops::attention_delta) from the forward's output as c_proj
// keeps it — in bf16 (merged16) under mixed precision, else in T (merged); the other view empty — and its gradient.
template <class T>
Tensor<T> attention_core_delta(const AttentionGeometry& g, const Grid& grid, TensorView<const T> merged,
                               TensorView<const bf16> merged16, TensorView<const T> dmerged);

template <class T>
void attention_core_backward(const AttentionGeometry& g, const Grid& grid, const SavedActivation<T>& qkv,
                             TensorView<const T> lse, TensorView<const T> delta, TensorView<const T> dmerged,
                             TensorView<T> dqkv);

}  // namespace optimus::detail

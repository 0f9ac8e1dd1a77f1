// The vocabulary-parallel cross-entropy of the language-model head (LmHead2D over a grid row, LmHead1D over the
// tensor-parallel group): this rank holds the logits of some rows for a slice of the vocabulary, `owners` hold the
// same rows' other slices. Two passes over the logits (optimus/core/ops.hpp): one read for the row statistics,
// reduced over the owners in two all-reduces of `rows` numbers each (the max, then the rescaled sum with the target
// logit), and under training one read-and-write turning the logits into their gradient in place.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"

namespace optimus::detail {

// Where dlogits = (softmax - onehot(target)) / mean_over goes: nowhere (inference), in place of the logits, or into a
// bf16 block (mixed precision: as the head's products take it), the logits then left as they are.
struct LogitsGradient {
  enum class Into { none, logits, bf16 };
  Into into = Into::none;
  TensorView<bf16> block;  // [rows, vn] for Into::bf16
};

// logits: [rows, vn], this rank's columns [v0, v0 + vn) of a vocabulary of `vocab` ids (ids past it are padding: no
// probability, no gradient); targets: [n_tokens] for the whole batch, these rows at row_offset.., on the device and
// (host_targets) on the host, math::kIgnoredTarget where a position is not predicted. Returns the sum of these rows'
// losses over their predicted positions, the same on every owner, and writes dlogits where `gradient` says.
template <class T>
double vocab_parallel_cross_entropy(TensorView<T> logits, TensorView<const int> targets,
                                    std::span<const int> host_targets, std::int64_t row_offset,
                                    std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                                    const LogitsGradient& gradient, Communicator& owners, const MemoryTag& work,
                                    const ops::Queue& queue);

// The same on a head's logits (its block at this rank: row_offset and v0 as above), keeping under training dlogits as
// the head's backward products take them in `dlogits`: in bf16 under mixed precision, written so by the gradient kernel
// (no f32 gradient, no cast), else the logits turned into their gradient in place; counted as activations.
template <class T>
double vocab_parallel_loss(DistMatrix<T> logits, TensorView<const int> targets, std::span<const int> host_targets,
                           std::int64_t row_offset,
                           std::int64_t v0, std::int64_t vocab, std::int64_t mean_over, bool training,
                           Communicator& owners, std::optional<SavedActivation<T>>& dlogits);

}  // namespace optimus::detail

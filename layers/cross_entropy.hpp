// The vocabulary-parallel cross-entropy both language-model heads share (LmHead2D over a grid row, LmHead1D over the
// tensor-parallel group): this rank holds the logits of some rows for a slice of the vocabulary, `owners` hold the
// same rows' other slices. Two passes over the logits (optimus/core/ops.hpp): one read for the row statistics,
// reduced over the owners in two all-reduces of `rows` numbers each (the max, then the rescaled sum with the target
// logit), and under training one read-and-write turning the logits into their gradient in place.
#pragma once

#include <cstdint>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::detail {

// logits: [rows, vn], this rank's columns [v0, v0 + vn) of a vocabulary of `vocab` ids (ids past it are padding: no
// probability, no gradient); targets: [n_tokens] for the whole batch, these rows at row_offset.. . Returns the sum of
// these rows' losses, the same on every owner. With `gradient`, the logits become dlogits = (softmax -
// onehot(target)) / mean_over.
template <class T>
double vocab_parallel_cross_entropy(TensorView<T> logits, TensorView<const int> targets, std::int64_t row_offset,
                                    std::int64_t v0, std::int64_t vocab, std::int64_t mean_over, bool gradient,
                                    Communicator& owners, const MemoryTag& work, const ops::Queue& queue);

}  // namespace optimus::detail

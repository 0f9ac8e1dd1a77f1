// Dropout with partition-independent masks (gpt_config.hpp): element (r, c) of a global [N, h] activation
// is kept iff math::dropout_keeps(p, seed, stream, r, c) (one Philox call per four columns; element_math.hpp), and
// kept values are scaled by 1 / (1 - p).
// The same call applies the mask in forward and to the gradient in backward, so no mask is stored.
// Rows are numbered through the global batch (dp replicas and micro-batches: Pass::first_sequence), so that every
// split of the batch draws the masks of the whole batch.
#pragma once

#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"

namespace optimus {

struct DropoutSpec {
  double p = 0.0;
  std::uint64_t seed = 0;
  std::int64_t layer = 0;
};

// The mask of this rank's block of x, whose row 0 is global row `first_row` (for the fused kernels of ops).
template <class T>
ops::DropoutMask dropout_mask(const DistMatrix<T>& x, std::int64_t first_row, double p, std::uint64_t seed,
                              std::uint64_t stream);

// x *= mask, in place, on this rank's block (no communication); x's row 0 is global row `first_row`.
template <class T>
void apply_dropout(DistMatrix<T>& x, std::int64_t first_row, double p, std::uint64_t seed, std::uint64_t stream);

}  // namespace optimus

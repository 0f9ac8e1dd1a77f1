// What a forward pass needs to know besides its input: the training step (for dropout masks), whether it trains
// (fills a context for backward and applies dropout) or only infers, and where its sequences sit in the global
// batch (dropout masks number the rows of the whole global batch, so that dp replicas and micro-batches draw what
// one rank would draw on the concatenated batch).
#pragma once

#include <cstdint>

namespace optimus {

struct Pass {
  std::uint64_t step = 0;
  bool training = true;
  // The index of the pass's first sequence in the global batch: replica d's micro-batch k of b sequences, in a step
  // of m micro-batches per replica, starts at (d*m + k)*b. Row r of the pass's [b*s, h] activations is global
  // row first_sequence*s + r.
  std::int64_t first_sequence = 0;

  static Pass inference() { return {.step = 0, .training = false, .first_sequence = 0}; }
};

}  // namespace optimus

// What a forward pass needs to know besides its input: the training step (for dropout masks), whether it trains
// (fills a context for backward and applies dropout) or only infers, and where its sequences sit in the global
// batch (dropout masks number the rows of the whole global batch, so that dp replicas and micro-batches draw what
// one rank would draw on the concatenated batch), and how long its sequences are before their padding.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "optimus/core/error.hpp"

namespace optimus {

struct Pass {
  std::uint64_t step = 0;
  bool training = true;
  // The index of the pass's first sequence in the global batch: replica d's micro-batch k of b sequences, in a step
  // of m micro-batches per replica, starts at (d*m + k)*b. Row r of the pass's [b*s, h] activations is global
  // row first_sequence*s + r.
  std::int64_t first_sequence = 0;
  // [the pass's sequences], or empty (none padded): sequence k's tokens before its padding, in [1, s]. Attention
  // masks the keys from there on (an encoder's key-padding mask, Hugging Face's attention_mask of 1s then 0s); the
  // padded positions still have outputs (their queries see the sequence's real keys), which a masked LM's loss
  // ignores. A copy per pass: b ints.
  std::vector<int> lengths;

  static Pass inference() { return {.step = 0, .training = false, .first_sequence = 0, .lengths = {}}; }
  // A training pass of `step` whose first sequence is the global batch's first_sequence, none padded.
  static Pass train(std::uint64_t step, std::int64_t first_sequence) {
    return {.step = step, .training = true, .first_sequence = first_sequence, .lengths = {}};
  }
};

// Throws, naming `who` and the values, unless `lengths` (Pass::lengths) is empty or one length in [1, seq] for each of
// a batch's `sequences` sequences of `seq` tokens.
inline void check_lengths(const std::vector<int>& lengths, std::int64_t sequences, std::int64_t seq,
                          std::string_view who) {
  if (lengths.empty()) return;
  OPTIMUS_CHECK(static_cast<std::int64_t>(lengths.size()) == sequences, who, ": ", lengths.size(),
                " sequence lengths for a batch of ", sequences, " sequences");
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    OPTIMUS_CHECK(lengths[k] >= 1 && lengths[k] <= seq, who, ": sequence ", k, " has length ", lengths[k],
                  ", outside [1, ", seq, "] (its tokens before the padding)");
  }
}

}  // namespace optimus

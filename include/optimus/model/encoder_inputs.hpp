// What an encoder's batch (BERT's) holds besides its token ids and targets, for Gpt's calls (model/gpt.hpp): how long
// each sequence is before its padding. A decoder's batch of whole sequences needs none of it (EncoderInputs{}).
//
//   optimus::EncoderInputs inputs{.lengths = {7, 5}};  // two sequences of s = 8: the first padded after 7 tokens
//   model.train_step(tokens, targets, inputs, 2, step);
#pragma once

#include <vector>

namespace optimus {

struct EncoderInputs {
  // [the replica's b sequences], or empty (none padded): sequence k's tokens before its padding, in [1, s] (Hugging
  // Face's attention_mask: that many 1s, then 0s). Every attention masks the keys from there on (Pass::lengths); the
  // padded positions still have outputs, which a masked LM's targets ignore (math::kIgnoredTarget).
  std::vector<int> lengths;
};

}  // namespace optimus

// What an encoder's batch (BERT's) holds besides its token ids and targets, for Gpt's calls (model/gpt.hpp) and the
// reference's (reference/gpt.hpp): each token's type (segment) and how long each sequence is before its padding. A
// decoder's batch of whole sequences needs none of it (EncoderInputs{}).
//
//   optimus::EncoderInputs inputs{.token_types = types, .lengths = {7, 5}};  // two sequences of s = 8, the first
//   model.train_step(tokens, targets, inputs, 2, step);                      // padded after 7 tokens
#pragma once

#include <vector>

namespace optimus {

struct EncoderInputs {
  // [the replica's b*s tokens], row-major [b, s], each in [0, BlockConfig::token_types) (Hugging Face's
  // token_type_ids); empty: every token of type 0. A model without token types takes none.
  std::vector<int> token_types;
  // [the replica's b sequences], or empty (none padded): sequence k's tokens before its padding, in [1, s] (Hugging
  // Face's attention_mask: that many 1s, then 0s). Every attention masks the keys from there on (Pass::lengths); the
  // padded positions still have outputs, which a masked LM's targets ignore (math::kIgnoredTarget).
  std::vector<int> lengths;
};

}  // namespace optimus

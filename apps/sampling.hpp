// train_gpt's sample at the end: characters (or token ids) drawn one at a time from a trained model.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpt_data.hpp"

namespace optimus::apps {

// Collective over the model's ranks: the logits of the id that follows `window` (at most max_seq ids), on every rank.
using NextLogits = std::function<Eigen::RowVectorXd(const std::vector<int>& window)>;

// `count` ids after `prompt` (its characters that the text has; token data: the held-out ids' first four), sampled at
// temperature 0.8 with the counter-based generator of `seed` among the text's characters, or for token data among the
// model's `vocab` ids (not its padding); the prompt and the sample as text (token data: ids). Throws optimus::Error if
// the logits are not finite.
std::string generate(const NextLogits& next_logits, std::int64_t max_seq, const Corpus& c, std::int64_t vocab,
                     const std::string& prompt, int count, std::uint64_t seed);

}  // namespace optimus::apps

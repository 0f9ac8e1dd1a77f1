// train_gpt's sample (sampling.hpp).
#include "sampling.hpp"

#include <algorithm>

#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

namespace optimus::apps {

std::string generate(const NextLogits& next_logits, std::int64_t max_seq, const Corpus& c, std::int64_t vocab,
                     const std::string& prompt, int count, std::uint64_t seed) {
  std::vector<int> context;
  std::string out;
  if (c.chars.empty()) {  // token data: the held-out tokens' first four as the prompt, ids printed
    c.valid.copy(0, 4, context);
    for (std::size_t k = 0; k < context.size(); ++k) {
      if (k > 0) out += ' ';
      out += std::to_string(context[k]);
    }
  } else {
    for (char ch : prompt) {  // the prompt's characters that the text has
      const auto pos = c.chars.find(ch);
      if (pos != std::string::npos) {
        context.push_back(static_cast<int>(pos));
        out += ch;
      }
    }
    if (context.empty()) {  // none: the held-out text's first character
      c.valid.copy(0, 1, context);
      out += c.chars[static_cast<std::size_t>(context[0])];
    }
  }
  const CounterRng rng(seed, 7);
  for (int n = 0; n < count; ++n) {
    const std::size_t s = std::min(context.size(), static_cast<std::size_t>(max_seq));
    const std::vector<int> window(context.end() - static_cast<std::ptrdiff_t>(s), context.end());
    const Eigen::RowVectorXd all = next_logits(window);
    const auto ids = static_cast<Eigen::Index>(c.chars.empty() ? vocab : static_cast<std::int64_t>(c.chars.size()));
    OPTIMUS_CHECK(ids <= all.size(), "sampling: ", ids, " ids to sample from but only ", all.size(), " logits");
    const Eigen::RowVectorXd row = all.head(ids) / 0.8;
    OPTIMUS_CHECK(row.allFinite(), "sampling: the model's logits for character ", n + 1,
                  " are not finite (NaN or inf parameters?); nothing to sample from");
    const Eigen::RowVectorXd p = (row.array() - row.maxCoeff()).exp();
    double u = rng.uniform(static_cast<std::uint64_t>(n), 0) * p.sum();
    int next = 0;
    while (next + 1 < p.size() && (u -= p(next)) > 0) ++next;
    context.push_back(next);
    if (c.chars.empty()) out.append(" ").append(std::to_string(next));
    else out.push_back(c.chars[static_cast<std::size_t>(next)]);
  }
  return out;
}

}  // namespace optimus::apps

// BERT's masking (optimus/model/masked_lm.hpp).
#include "optimus/model/masked_lm.hpp"

#include <cstddef>
#include <utility>

#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

namespace optimus {

static_assert(MaskedLm::kIgnored == math::kIgnoredTarget, "the heads' cross-entropy skips the targets MaskedLm ignores");

namespace {

// A uniform draw in [0, 1) from 32 random bits.
double unit(std::uint32_t bits) { return static_cast<double>(bits) * 0x1p-32; }

}  // namespace

MaskedLm::MaskedLm(const MaskedLmConfig& config) : config_(config) {
  const MaskedLmConfig& c = config_;
  OPTIMUS_CHECK(c.vocab >= 1, "masked LM: a vocabulary of ", c.vocab, " ids");
  const std::pair<const char*, int> specials[] = {
      {"pad", c.pad_id}, {"cls", c.cls_id}, {"sep", c.sep_id}, {"mask", c.mask_id}};
  for (const auto& [name, id] : specials) {
    OPTIMUS_CHECK(id >= 0 && id < c.vocab, "masked LM: the ", name, " id ", id, " is outside the vocabulary [0, ",
                  c.vocab, ")");
  }
  OPTIMUS_CHECK(c.probability > 0 && c.probability < 1, "masked LM: a mask probability of ", c.probability,
                "; it must be in (0, 1)");
  OPTIMUS_CHECK(c.mask_share >= 0 && c.random_share >= 0 && c.mask_share + c.random_share <= 1,
                "masked LM: shares of ", c.mask_share, " (mask id) and ", c.random_share,
                " (random id); each in [0, 1], their sum at most 1");
}

MaskedBatch MaskedLm::mask(const std::vector<int>& tokens, std::int64_t seq, std::uint64_t step,
                           std::int64_t first_sequence) const {
  const MaskedLmConfig& c = config_;
  OPTIMUS_CHECK(seq >= 1 && first_sequence >= 0 && tokens.size() % static_cast<std::size_t>(seq) == 0,
                "masked LM: ", tokens.size(), " tokens are not whole sequences of ", seq, " from sequence ",
                first_sequence);
  const CounterRng rng(c.seed, step);
  MaskedBatch out{.inputs = tokens, .targets = std::vector<int>(tokens.size(), kIgnored)};
  const auto s = static_cast<std::size_t>(seq);
  // Position k (of sequence `sequence`, at `position`) chosen: its target the id, its input as its draw says.
  const auto choose = [&](std::size_t k, const Philox4x32Counter& bits) {
    out.targets[k] = tokens[k];
    const double how = unit(bits[1]);
    if (how < c.mask_share) {
      out.inputs[k] = c.mask_id;
    } else if (how < c.mask_share + c.random_share) {
      out.inputs[k] = static_cast<int>(bits[2] % static_cast<std::uint32_t>(c.vocab));
    }
  };
  std::vector<std::size_t> eligible;  // the sequence's positions that may be chosen
  for (std::size_t row = 0; row < tokens.size(); row += s) {
    const auto sequence = static_cast<std::uint64_t>(first_sequence) + row / s;
    eligible.clear();
    bool any = false;
    for (std::size_t k = row; k < row + s; ++k) {
      const int id = tokens[k];
      OPTIMUS_CHECK(id >= 0 && id < c.vocab, "masked LM: token ", k, " is ", id, ", outside the vocabulary [0, ",
                    c.vocab, ")");
      if (id == c.pad_id || id == c.cls_id || id == c.sep_id) continue;
      eligible.push_back(k);
      const Philox4x32Counter bits = rng.bits(sequence, k - row);
      if (unit(bits[0]) >= c.probability) continue;
      choose(k, bits);
      any = true;
    }
    // Every sequence predicts at least one position (as BERT's data does: max(1, round(n p)) of them), so that no
    // batch is without a loss: where the draws chose none, the eligible position a draw of its own (column seq, past
    // the positions') picks, masked as its own draw says.
    if (!any && !eligible.empty()) {
      const std::size_t k = eligible[rng.bits(sequence, s)[0] % eligible.size()];
      choose(k, rng.bits(sequence, k - row));
    }
  }
  return out;
}

}  // namespace optimus

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
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const int id = tokens[k];
    OPTIMUS_CHECK(id >= 0 && id < c.vocab, "masked LM: token ", k, " is ", id, ", outside the vocabulary [0, ",
                  c.vocab, ")");
    if (id == c.pad_id || id == c.cls_id || id == c.sep_id) continue;
    const auto sequence = static_cast<std::uint64_t>(first_sequence) + k / static_cast<std::size_t>(seq);
    const auto position = static_cast<std::uint64_t>(k % static_cast<std::size_t>(seq));
    const Philox4x32Counter bits = rng.bits(sequence, position);
    if (unit(bits[0]) >= c.probability) continue;
    out.targets[k] = id;
    const double how = unit(bits[1]);
    if (how < c.mask_share) {
      out.inputs[k] = c.mask_id;
    } else if (how < c.mask_share + c.random_share) {
      out.inputs[k] = static_cast<int>(bits[2] % static_cast<std::uint32_t>(c.vocab));
    }
  }
  return out;
}

}  // namespace optimus

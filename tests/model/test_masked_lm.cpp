// BERT's masking (optimus/model/masked_lm.hpp): its proportions, its independence from how a batch is split, the
// special ids left alone, and its bad input.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/model/masked_lm.hpp"
#include "same_error.hpp"

namespace {

using optimus::MaskedLm;

// `sequences` x `seq` ids in [200, 30000), none of them special, from a simple generator.
std::vector<int> plain_tokens(std::int64_t sequences, std::int64_t seq) {
  std::vector<int> t(static_cast<std::size_t>(sequences * seq));
  std::uint64_t x = 12345;
  for (int& id : t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = 200 + static_cast<int>((x >> 33) % 29800);
  }
  return t;
}

}  // namespace

TEST_CASE("masked LM: BERT's proportions — 15% chosen, of those 80% the mask id, 10% a random id, 10% kept") {
  const MaskedLm masking({.seed = 7});
  const std::vector<int> tokens = plain_tokens(4000, 64);  // 256,000 positions
  const optimus::MaskedBatch b = masking.mask(tokens, 64, 3, 0);
  REQUIRE(b.inputs.size() == tokens.size());
  REQUIRE(b.targets.size() == tokens.size());
  double chosen = 0, masked = 0, random = 0, kept = 0;
  int changed_unchosen = 0, wrong_targets = 0;
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    if (b.targets[k] == MaskedLm::kIgnored) {
      changed_unchosen += b.inputs[k] != tokens[k] ? 1 : 0;  // not chosen: read as it is
      continue;
    }
    wrong_targets += b.targets[k] != tokens[k] ? 1 : 0;  // chosen: the original id is the target
    ++chosen;
    if (b.inputs[k] == 103) {
      ++masked;
    } else if (b.inputs[k] != tokens[k]) {
      ++random;
    } else {
      ++kept;
    }
  }
  CHECK(changed_unchosen == 0);
  CHECK(wrong_targets == 0);
  const double n = static_cast<double>(tokens.size());
  CHECK(chosen / n == doctest::Approx(0.15).epsilon(0.03));  // 3 standard deviations are ~2% of 0.15 here
  CHECK(masked / chosen == doctest::Approx(0.8).epsilon(0.01));
  CHECK(random / chosen == doctest::Approx(0.1).epsilon(0.05));
  CHECK(kept / chosen == doctest::Approx(0.1).epsilon(0.05));
}

TEST_CASE("masked LM: a replica's sequences are masked as the whole batch's rows; steps and seeds differ") {
  const std::int64_t seq = 32;
  const std::vector<int> tokens = plain_tokens(8, seq);
  const MaskedLm masking({.seed = 11});
  const optimus::MaskedBatch whole = masking.mask(tokens, seq, 5, 0);
  // sequences 3, 4, 5 alone (a data-parallel replica's share, or a micro-batch)
  const std::vector<int> part(tokens.begin() + 3 * seq, tokens.begin() + 6 * seq);
  const optimus::MaskedBatch mine = masking.mask(part, seq, 5, 3);
  CHECK(mine.inputs == std::vector<int>(whole.inputs.begin() + 3 * seq, whole.inputs.begin() + 6 * seq));
  CHECK(mine.targets == std::vector<int>(whole.targets.begin() + 3 * seq, whole.targets.begin() + 6 * seq));
  CHECK(masking.mask(tokens, seq, 5, 0).targets == whole.targets);  // a function of its arguments
  CHECK(masking.mask(tokens, seq, 6, 0).targets != whole.targets);  // another step
  CHECK(MaskedLm({.seed = 12}).mask(tokens, seq, 5, 0).targets != whole.targets);  // another seed
}

TEST_CASE("masked LM: CLS, SEP and PAD positions are never chosen") {
  const MaskedLm masking({.probability = 0.9, .seed = 1});
  std::vector<int> tokens;
  for (int i = 0; i < 300; ++i) tokens.insert(tokens.end(), {101, 2000 + i, 102, 0});
  const optimus::MaskedBatch b = masking.mask(tokens, 4, 0, 0);
  int chosen = 0;
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    if (k % 4 != 1) {
      CHECK(b.targets[k] == MaskedLm::kIgnored);
      CHECK(b.inputs[k] == tokens[k]);
    } else {
      chosen += b.targets[k] != MaskedLm::kIgnored ? 1 : 0;
    }
  }
  CHECK(chosen > 240);  // 90% of 300, give or take
}

TEST_CASE("masked LM: every sequence predicts at least one of its positions, drawn as the others are") {
  // [CLS] x y z [SEP]: three positions that may be chosen, each with probability 0.01.
  const MaskedLm masking({.probability = 0.01, .seed = 5});
  std::vector<int> tokens;
  for (int i = 0; i < 3000; ++i) tokens.insert(tokens.end(), {101, 2000 + i % 7, 3000 + i % 11, 4000 + i % 13, 102});
  const optimus::MaskedBatch b = masking.mask(tokens, 5, 2, 0);
  int at[5] = {0, 0, 0, 0, 0}, sequences_with_one = 0;
  for (std::size_t row = 0; row < tokens.size(); row += 5) {
    int chosen = 0;
    for (std::size_t k = row; k < row + 5; ++k) {
      if (b.targets[k] == MaskedLm::kIgnored) continue;
      ++chosen;
      ++at[k - row];
      CHECK(b.targets[k] == tokens[k]);
    }
    CHECK(chosen >= 1);
    sequences_with_one += chosen == 1 ? 1 : 0;
  }
  CHECK(at[0] == 0);  // CLS and SEP never
  CHECK(at[4] == 0);
  for (int p = 1; p <= 3; ++p) CHECK(at[p] == doctest::Approx(1000).epsilon(0.1));  // uniform over the three
  CHECK(sequences_with_one > 2900);  // a second position only where a draw chose it (3%)
  // A sequence of special ids only predicts nothing.
  const optimus::MaskedBatch none = masking.mask({101, 102, 0, 0}, 4, 2, 0);
  CHECK(none.targets == std::vector<int>(4, MaskedLm::kIgnored));
  // Still a function of the sequence alone: a replica's share masks as the whole batch's rows.
  const std::vector<int> part(tokens.begin() + 50, tokens.begin() + 100);
  CHECK(masking.mask(part, 5, 2, 10).targets == std::vector<int>(b.targets.begin() + 50, b.targets.begin() + 100));
}

TEST_CASE("masked LM: bad input is one error naming the value") {
  const auto refused = [](const optimus::MaskedLmConfig& c) {
    return optimus::test::error_of([&] { MaskedLm masking(c); });
  };
  CHECK(refused({.probability = 0}).find("a mask probability of 0; it must be in (0, 1)") != std::string::npos);
  CHECK(refused({.probability = 1}).find("a mask probability of 1;") != std::string::npos);
  CHECK(refused({.probability = 1.5}).find("a mask probability of 1.5;") != std::string::npos);
  CHECK(refused({.vocab = 100}).find("the cls id 101 is outside the vocabulary [0, 100)") != std::string::npos);
  CHECK(refused({.mask_id = -3}).find("the mask id -3 is outside the vocabulary") != std::string::npos);
  CHECK(refused({.mask_share = 0.8, .random_share = 0.3}).find("shares of 0.8 (mask id) and 0.3 (random id)") !=
        std::string::npos);
  const MaskedLm masking({.vocab = 1000});
  CHECK(optimus::test::error_of([&] { masking.mask({5, 6, 1000, 7}, 2, 0, 0); })
            .find("token 2 is 1000, outside the vocabulary [0, 1000)") != std::string::npos);
  CHECK(optimus::test::error_of([&] { masking.mask({5, 6, 7}, 2, 0, 0); })
            .find("3 tokens are not whole sequences of 2") != std::string::npos);
}

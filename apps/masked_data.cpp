// BERT's pre-training sequences (masked_data.hpp).
#include "masked_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <utility>

#include "checkpoint_options.hpp"
#include "program_options.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

namespace optimus::apps {
namespace {

// The generator's stream for the sequences' shapes (draw_batch's windows take stream 1 << 20).
constexpr std::uint64_t kShapeStream = (std::uint64_t{1} << 20) + 1;
constexpr double kShortShare = 0.1;  // BERT's short_seq_prob

// The special ids' fields, in the order of kSpecialIdOptions.
constexpr int MaskedLmConfig::*kSpecialIds[] = {&MaskedLmConfig::pad_id, &MaskedLmConfig::cls_id,
                                                &MaskedLmConfig::sep_id, &MaskedLmConfig::mask_id};
static_assert(std::size(kSpecialIds) == std::size(kSpecialIdOptions));

// "character 'e' (byte 101)", or "byte 10 (not printable)": a text's character as a message names it.
std::string character_name(char ch) {
  const auto byte = static_cast<unsigned char>(ch);
  return byte >= 32 && byte < 127 ? std::string("character '") + ch + "' (byte " + std::to_string(byte) + ")"
                                  : "byte " + std::to_string(byte) + " (not printable)";
}

}  // namespace

std::optional<MaskedLmConfig> masking_of(const cli::Options& o, const GptConfig& config, const Corpus& corpus,
                                         const std::map<std::string, std::string>& recorded) {
  if (!trains_masked(config.block)) {
    OPTIMUS_CHECK(!o.has("mask-prob"), "--mask-prob describes a masked LM's data (--arch bert), not the model's ",
                  family_name(config.block), " blocks");
    for (const char* option : kSpecialIdOptions) {
      OPTIMUS_CHECK(!o.has(option), "--", option, " describes a masked LM's data (--arch bert), not the model's ",
                    family_name(config.block), " blocks");
    }
    OPTIMUS_CHECK(!o.has("specials-in-data"), "--specials-in-data describes a masked LM's data (--arch bert), not the "
                  "model's ", family_name(config.block), " blocks");
    return std::nullopt;
  }
  OPTIMUS_CHECK(config.block.token_types >= 2, "a masked LM's sequences [CLS] A [SEP] B [SEP] take 2 token types; "
                "the model has ", config.block.token_types);
  // A recorded value: the checkpoint's (checksummed text; one that is not a number is a file written by something
  // else).
  const auto from_record = [&](const std::string& key, double fallback) {
    const auto found = recorded.find(key);
    if (found == recorded.end()) return fallback;
    const std::string& text = found->second;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    OPTIMUS_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(value), "the checkpoint's '",
                  key, "' is '", text, "', not a number");
    return value;
  };
  MaskedLmConfig m;
  m.vocab = config.vocab;
  m.probability = o.has("mask-prob") ? o.real("mask-prob", 0) : from_record("mask_prob", 0.15);
  const bool text = !corpus.chars.empty();
  const auto characters = static_cast<std::int64_t>(corpus.chars.size());
  OPTIMUS_CHECK(!text || !o.has("specials-in-data"), "--specials-in-data: a text's ids are its characters, which hold "
                "no special ids (its special ids follow them)");
  const bool own = specials_in_data(o, recorded);
  const int defaults[] = {0, 101, 102, 103};
  for (std::size_t k = 0; k < std::size(kSpecialIds); ++k) {
    const char* option = kSpecialIdOptions[k];
    const double fallback = text ? static_cast<double>(characters) + static_cast<double>(k) : defaults[k];
    const std::int64_t id = o.has(option) ? o.integer(option, 0)
                                          : static_cast<std::int64_t>(from_record(option, fallback));
    // As the message names the value: given, recorded or the default.
    const std::string named = std::string("--") + option + (o.has(option)                ? " "
                                                            : recorded.count(option) != 0 ? " (the checkpoint's) "
                                                                                          : " (the default) ") +
                              std::to_string(id);
    OPTIMUS_CHECK(id < config.vocab, named, " is outside the model's vocabulary [0, ", config.vocab, ")");
    const auto at = static_cast<std::size_t>(id);
    const std::int64_t held = at < corpus.id_counts.size() ? corpus.id_counts[at] : 0;
    if (text) {
      OPTIMUS_CHECK(held == 0, named, " is the id of the text's ", character_name(corpus.chars[at]),
                    ": a special id must lie outside the text's ids [0, ", characters, ") (by default the four after "
                    "them)");
    } else {
      OPTIMUS_CHECK(held == 0 || own, named, " is an id of the token data (", held, " times): a special id must lie "
                    "outside the data's ids (it could not be told from the data's, nor masked); give one the data "
                    "does not hold (from ", corpus.ids_used, " up, widening --vocab), or say that the data's tokenizer "
                    "has these special ids (--specials-in-data)");
    }
    m.*kSpecialIds[k] = static_cast<int>(id);
    for (std::size_t j = 0; j < k; ++j) {
      OPTIMUS_CHECK(m.*kSpecialIds[j] != id, "--", kSpecialIdOptions[j], " and --", option, " are both ", id,
                    ": the special ids must differ");
    }
  }
  OPTIMUS_CHECK(m.probability < 1, "--mask-prob ", m.probability, " masks every position; it must be in (0, 1)");
  static_cast<void>(MaskedLm(m));  // its own checks (the shares), before any work
  return m;
}

bool specials_in_data(const cli::Options& o, const std::map<std::string, std::string>& recorded) {
  const auto found = recorded.find("specials_in_data");
  return o.has("specials-in-data") || (found != recorded.end() && found->second == "1");
}

std::map<std::string, std::string> masking_record(const MaskedLmConfig& masking, bool specials_in_data) {
  std::map<std::string, std::string> record{{"mask_prob", format_exact(masking.probability)},
                                            {"specials_in_data", specials_in_data ? "1" : "0"}};
  for (std::size_t k = 0; k < std::size(kSpecialIds); ++k) {
    record[kSpecialIdOptions[k]] = std::to_string(masking.*kSpecialIds[k]);
  }
  return record;
}

void draw_masked_batch(const Tokens& ids, std::int64_t b, std::int64_t s, const MaskedLm& masking, std::uint64_t step,
                       int replica, int replicas, Batch& out) {
  OPTIMUS_CHECK(s >= kShortestMaskedSequence, "a masked LM's sequence of ", s, " positions cannot hold [CLS] A [SEP] B "
                "[SEP] (at least ", kShortestMaskedSequence, ")");
  const MaskedLmConfig& m = masking.config();
  const CounterRng rng(m.seed, kShapeStream);
  const auto n = static_cast<std::size_t>(b * s);
  std::vector<int> tokens(n, m.pad_id);
  out.inputs.token_types.assign(n, 0);
  out.inputs.lengths.assign(static_cast<std::size_t>(b), 0);
  const auto span = static_cast<double>(ids.size() - static_cast<std::size_t>(s) + 3);  // windows of at most s - 3
  std::vector<int> window;
  for (std::int64_t k = 0; k < b; ++k) {
    const auto global = static_cast<std::uint64_t>((replica + static_cast<std::int64_t>(step) * replicas) * b + k);
    const bool short_one = rng.uniform(global, 1) < kShortShare;
    const std::int64_t length =
        short_one ? kShortestMaskedSequence +
                        static_cast<std::int64_t>(rng.uniform(global, 2) *
                                                  static_cast<double>(s - kShortestMaskedSequence + 1))
                  : s;
    const std::int64_t content = length - 3;  // A and B
    const std::int64_t a = 1 + static_cast<std::int64_t>(rng.uniform(global, 3) * static_cast<double>(content - 1));
    ids.copy(static_cast<std::size_t>(rng.uniform(global, 0) * span), static_cast<std::size_t>(content), window);
    const auto row = static_cast<std::size_t>(k * s);
    std::size_t at = row;
    tokens[at++] = m.cls_id;
    for (std::int64_t t = 0; t < a; ++t) tokens[at++] = window[static_cast<std::size_t>(t)];
    tokens[at++] = m.sep_id;
    for (std::int64_t t = a; t < content; ++t) {
      out.inputs.token_types[at] = 1;
      tokens[at++] = window[static_cast<std::size_t>(t)];
    }
    out.inputs.token_types[at] = 1;
    tokens[at++] = m.sep_id;
    out.inputs.lengths[static_cast<std::size_t>(k)] = static_cast<int>(length);
  }
  MaskedBatch masked = masking.mask(tokens, s, step, static_cast<std::int64_t>(replica) * b);
  out.tokens = std::move(masked.inputs);
  out.targets = std::move(masked.targets);
}

}  // namespace optimus::apps

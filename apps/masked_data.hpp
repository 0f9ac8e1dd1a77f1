// train_gpt's data for an encoder (--arch bert): BERT's pre-training sequences cut from the same ids a decoder trains
// on (the text's characters or --data's tokens), masked as BERT masks them.
//
// Sequence k of a step's batch, of length L (the context s, or for one sequence in ten a length drawn from [5, s]:
// BERT's short sequences), is [CLS] A [SEP] B [SEP] followed by s - L PAD ids: A and B are one window of L - 3 ids cut
// at a drawn point (each segment at least one id), A's positions of token type 0 and B's of type 1 (the padding 0),
// and the batch's lengths say where the padding starts. Then MaskedLm chooses the predicted positions. Every draw is
// counter-based on (seed, step, global sequence), so every layout — grids, pipelines, micro-batches, replicas, a
// resumed run — trains on the same sequences with the same masks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpt_data.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/model/masked_lm.hpp"
#include "optimus/programs/cli.hpp"

namespace optimus::apps {

// A text's special ids follow its characters (PAD, CLS, SEP, MASK: the model's vocabulary grows by these four).
inline constexpr std::int64_t kTextSpecialIds = 4;

// Whether a model of `blocks` trains as a masked LM: bidirectional attention sees every key, the next token too.
inline bool trains_masked(const BlockConfig& blocks) { return blocks.bidirectional; }

// The masking a run of `config`'s model trains with, from train_gpt's options --mask-prob, --pad-id, --cls-id, --sep-id
// and --mask-id (none for a decoder, which refuses the options): the options, else
// what `recorded` (a resumed checkpoint's run state) says, else BERT's — a probability of 0.15, and the special ids
// bert-base-uncased's (PAD 0, CLS 101, SEP 102, MASK 103) for token data or the four after a text's characters
// (`corpus`'s). Each id is checked against the vocabulary and against the data, naming the option: a special id must
// lie outside the ids the data holds (a text's characters, a token file's ids: they could not be told from the
// special, nor be masked) — unless, for token data, --specials-in-data (or the checkpoint's record) says they are the
// data's own, its tokenizer's. The seed is draw_step's.
std::optional<MaskedLmConfig> masking_of(const cli::Options& o, const GptConfig& config, const Corpus& corpus,
                                         const std::map<std::string, std::string>& recorded);
// Whether the special ids are the token data's own: --specials-in-data, or `recorded` (a resumed checkpoint's).
bool specials_in_data(const cli::Options& o, const std::map<std::string, std::string>& recorded);
// What a checkpoint records of `masking` in its run state (masking_of's `recorded`), and whether the special ids are
// the data's own (specials_in_data).
std::map<std::string, std::string> masking_record(const MaskedLmConfig& masking, bool specials_in_data);

// The fewest positions a sequence takes: [CLS] A [SEP] B [SEP] with one id in each segment.
inline constexpr std::int64_t kShortestMaskedSequence = 5;

// Replica `replica`'s batch of step `step`: b sequences of s positions (s >= kShortestMaskedSequence) from `ids`,
// masked by `masking` (its seed draws the windows, cuts, lengths and masks); into `out` (tokens, targets, token types,
// lengths). The ids must not be special ids (PAD, CLS, SEP): the text's are not (the specials follow its characters).
void draw_masked_batch(const Tokens& ids, std::int64_t b, std::int64_t s, const MaskedLm& masking, std::uint64_t step,
                       int replica, int replicas, Batch& out);

}  // namespace optimus::apps

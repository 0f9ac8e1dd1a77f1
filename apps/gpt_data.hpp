// train_gpt's data: the text as character ids, or token files (--data: llm.c's uint16 or uint32 ids, or raw uint16),
// each split into a training part and a held-out part, and the batches drawn from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimus/checkpoint/token_file.hpp"
#include "optimus/core/encoder_inputs.hpp"

namespace optimus::apps {

// A sequence of token ids: the text's (in memory), or a range of a token file's (memory-mapped).
struct Tokens {
  std::vector<int> owned;
  const checkpoint::TokenFile* file = nullptr;
  std::size_t begin = 0, count = 0;

  std::size_t size() const { return file != nullptr ? count : owned.size(); }
  // Ids [first, first + n) into `out` (read from the file where they live there).
  void copy(std::size_t first, std::size_t n, std::vector<int>& out) const;
};

// What the model trains on: the text as ids over its own sorted character set (the model pads the vocabulary for
// the grid), its last 10% held out; or token files (--data), the validation file or else the train file's last 10%
// held out.
struct Corpus {
  std::string chars;  // id -> character (the text); empty for token data
  Tokens train, valid;
  // The model's vocabulary by default: the characters', or the tokenizer's that the files' id width implies (GPT-2's
  // 50257 for uint16 ids, Llama 3's 128256 for uint32); any vocabulary of at least ids_used ids fits the data.
  std::int64_t vocab = 0;
  std::int64_t ids_used = 0;  // the data's largest id + 1
  std::vector<std::int64_t> id_counts;  // [ids_used]: how often each id occurs, the held-out part included
  double unigram_entropy = 0;  // nats per token: the text's whole, or the training file's
  std::unique_ptr<checkpoint::TokenFile> train_file, valid_file;
};

inline constexpr std::int64_t kGpt2Vocab = 50257, kLlama3Vocab = 128256;

// --data FILE[,VALID_FILE] in --data-format's layout; throws optimus::Error (naming the file) on a damaged file, on an
// id past TokenFile::kLargestVocab, and on two files of different id widths.
Corpus load_data(const std::vector<std::string>& files, checkpoint::TokenFormat format);
// --text FILE: the text's characters; throws optimus::Error if it cannot be read or has under 1000 bytes.
Corpus load_corpus(const std::string& path);

// One replica's batch of a step: b sequences of s positions.
struct Batch {
  std::vector<int> tokens, targets;  // [b, s]; a target ignored (math::kIgnoredTarget) is not predicted
  EncoderInputs inputs;              // an encoder's token types and lengths; empty for a decoder's
};

// Batch `step` of replica `replica`: b windows of s+1 ids of `ids` at counter-based random offsets, as tokens [b, s]
// and targets (the next ids) [b, s]; the same on any layout for the same (step, replica * b + k).
void draw_batch(const Tokens& ids, std::int64_t b, std::int64_t s, std::uint64_t seed, std::uint64_t step,
                int replica, int replicas, std::vector<int>& tokens, std::vector<int>& targets);

}  // namespace optimus::apps

// train_gpt's data: the text as character ids, or GPT-2 token files (--data), each split into a training part and a
// held-out part, and the batches drawn from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimus/checkpoint/token_file.hpp"

namespace optimus::examples {

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
  std::int64_t vocab = 0;
  double unigram_entropy = 0;  // nats per token: the text's whole, or the training file's
  std::unique_ptr<checkpoint::TokenFile> train_file, valid_file;
};

// --data FILE[,VALID_FILE] in --data-format's layout: GPT-2 token ids (vocabulary 50257); throws optimus::Error on an
// id outside it.
Corpus load_data(const std::vector<std::string>& files, checkpoint::TokenFormat format);
// --text FILE: the text's characters; throws optimus::Error if it cannot be read or has under 1000 bytes.
Corpus load_corpus(const std::string& path);

// Batch `step` of replica `replica`: b windows of s+1 ids of `ids` at counter-based random offsets, as tokens [b, s]
// and targets (the next ids) [b, s]; the same on any layout for the same (step, replica * b + k).
void draw_batch(const Tokens& ids, std::int64_t b, std::int64_t s, std::uint64_t seed, std::uint64_t step,
                int replica, int replicas, std::vector<int>& tokens, std::vector<int>& targets);

}  // namespace optimus::examples

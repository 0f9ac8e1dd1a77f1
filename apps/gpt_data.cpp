// train_gpt's data (gpt_data.hpp).
#include "gpt_data.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

namespace optimus::apps {
namespace {

// Nats per token of the unigram distribution of `counts`.
double entropy(const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0;
  for (std::int64_t n : counts) total += n;
  double h = 0;
  for (std::int64_t n : counts) {
    if (n == 0) continue;
    const double p = static_cast<double>(n) / static_cast<double>(total);
    h -= p * std::log(p);
  }
  return h;
}

// The largest id that occurs (a histogram's last nonzero count).
int largest_id(const std::vector<std::int64_t>& counts) {
  int id = static_cast<int>(counts.size()) - 1;
  while (id >= 0 && counts[static_cast<std::size_t>(id)] == 0) --id;
  return id;
}

}  // namespace

Corpus load_data(const std::vector<std::string>& files, checkpoint::TokenFormat format) {
  OPTIMUS_CHECK(files.size() == 1 || files.size() == 2, "--data takes a training file and optionally a held-out one "
                "(FILE[,VALID_FILE]), not ", files.size(), " files");
  Corpus c;
  for (std::size_t f = 0; f < files.size(); ++f) {
    auto file = std::make_unique<checkpoint::TokenFile>(files[f], format);
    OPTIMUS_CHECK(f == 0 || file->id_bytes() == c.train_file->id_bytes(), "token files '", c.train_file->path(),
                  "' and '", file->path(), "' hold ids of different widths (", c.train_file->id_bytes(), " and ",
                  file->id_bytes(), " bytes): two tokenizers?");
    const std::vector<std::int64_t> counts = file->histogram();
    if (f == 0) c.unigram_entropy = entropy(counts);
    c.ids_used = std::max<std::int64_t>(c.ids_used, largest_id(counts) + 1);
    c.id_counts.resize(std::max(c.id_counts.size(), counts.size()), 0);
    for (std::size_t id = 0; id < counts.size(); ++id) c.id_counts[id] += counts[id];
    (f == 0 ? c.train_file : c.valid_file) = std::move(file);
  }
  c.vocab = c.train_file->id_bytes() == 2 ? kGpt2Vocab : kLlama3Vocab;
  const std::size_t n = c.train_file->size();
  if (c.valid_file) {
    c.train = Tokens{.owned = {}, .file = c.train_file.get(), .begin = 0, .count = n};
    c.valid = Tokens{.owned = {}, .file = c.valid_file.get(), .begin = 0, .count = c.valid_file->size()};
  } else {
    const std::size_t split = n * 9 / 10;
    c.train = Tokens{.owned = {}, .file = c.train_file.get(), .begin = 0, .count = split};
    c.valid = Tokens{.owned = {}, .file = c.train_file.get(), .begin = split, .count = n - split};
  }
  return c;
}

Corpus load_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OPTIMUS_CHECK(in.good(), "cannot read the text '", path, "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OPTIMUS_CHECK(text.size() > 1000, "the text '", path, "' has only ", text.size(), " bytes");
  Corpus c;
  std::vector<std::int64_t> count(256, 0);
  c.train.owned.reserve(text.size());
  for (unsigned char ch : text) ++count[ch];
  int lookup[256];
  for (int ch = 0; ch < 256; ++ch) {
    lookup[ch] = static_cast<int>(c.chars.size());
    if (count[static_cast<std::size_t>(ch)] > 0) c.chars.push_back(static_cast<char>(ch));
  }
  const std::size_t split = text.size() * 9 / 10;
  for (std::size_t e = 0; e < text.size(); ++e) {
    (e < split ? c.train : c.valid).owned.push_back(lookup[static_cast<unsigned char>(text[e])]);
  }
  c.vocab = static_cast<std::int64_t>(c.chars.size());
  c.ids_used = c.vocab;
  for (const char ch : c.chars) c.id_counts.push_back(count[static_cast<unsigned char>(ch)]);
  OPTIMUS_CHECK(c.vocab >= 2, "the text '", path, "' is one character repeated (byte ",
                static_cast<int>(static_cast<unsigned char>(c.chars[0])), ", ", text.size(),
                " times): there is nothing to predict");
  c.unigram_entropy = entropy(count);
  return c;
}

void Tokens::copy(std::size_t first, std::size_t n, std::vector<int>& out) const {
  out.resize(n);
  if (file == nullptr) {
    std::copy(owned.begin() + static_cast<std::ptrdiff_t>(first), owned.begin() + static_cast<std::ptrdiff_t>(first + n),
              out.begin());
    return;
  }
  std::vector<std::uint32_t> raw(n);
  file->read(begin + first, n, raw.data());
  std::copy(raw.begin(), raw.end(), out.begin());
}

// Batch `step` of replica `replica`: b windows of s+1 characters of `ids` at counter-based random offsets.
void draw_batch(const Tokens& ids, std::int64_t b, std::int64_t s, std::uint64_t seed, std::uint64_t step,
                int replica, int replicas, std::vector<int>& tokens, std::vector<int>& targets) {
  const CounterRng rng(seed, 1u << 20);
  tokens.resize(static_cast<std::size_t>(b * s));
  targets.resize(tokens.size());
  const auto span = static_cast<double>(ids.size() - static_cast<std::size_t>(s) - 1);
  std::vector<int> read;  // one window of s + 1 ids
  for (std::int64_t k = 0; k < b; ++k) {
    const auto window = static_cast<std::uint64_t>((replica + static_cast<std::int64_t>(step) * replicas) * b + k);
    const auto start = static_cast<std::size_t>(rng.uniform(window, 0) * span);
    ids.copy(start, static_cast<std::size_t>(s) + 1, read);
    for (std::int64_t t = 0; t < s; ++t) {
      tokens[static_cast<std::size_t>(k * s + t)] = read[static_cast<std::size_t>(t)];
      targets[static_cast<std::size_t>(k * s + t)] = read[static_cast<std::size_t>(t) + 1];
    }
  }
}

}  // namespace optimus::apps

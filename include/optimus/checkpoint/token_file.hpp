// Token data for training: a file of token ids, read where used (pread: a window per sequence), never mapped — a file
// truncated while a run trains it is an error naming it, not a SIGBUS.
//
// Two layouts:
//   llm.c   : a header of 256 int32 (little-endian) — magic 20240520, version, the token count — then the tokens:
//             version 1 uint16 (GPT-2's tokenizer), version 2 uint32 (Llama 3's, whose ids pass 65535);
//   nanoGPT : raw uint16 tokens (train.bin / val.bin), no header.
// Both end in .bin, and a raw file may start with any bytes, so the layout is the caller's to say: an llm.c file must
// have llm.c's magic, version and a count matching its size (a damaged header is an error, never raw data), and a raw
// file an even number of bytes. Errors name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace optimus::checkpoint {

enum class TokenFormat { llmc, raw_uint16 };
std::string_view name_of(TokenFormat format);  // "llm.c", "raw uint16"

class TokenFile {
 public:
  TokenFile(std::string path, TokenFormat format);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  TokenFile(TokenFile&&) = delete;
  TokenFile& operator=(TokenFile&&) = delete;

  const std::string& path() const { return path_; }
  TokenFormat format() const { return format_; }
  std::size_t size() const { return count_; }
  // Bytes per id: 2 (llm.c version 1, raw) or 4 (llm.c version 2).
  std::size_t id_bytes() const { return id_bytes_; }
  // Tokens [first, first + count) into `out`; throws naming the file where it no longer holds them (truncated).
  void read(std::size_t first, std::size_t count, std::uint32_t* out) const;
  // How often each id occurs, [largest id + 1] (reads the whole file once, in 1 MiB pieces); throws naming the file
  // and the id for an id of kLargestVocab or more (no vocabulary Optimus takes holds it: a damaged file).
  std::vector<std::int64_t> histogram() const;

  static constexpr std::int64_t kLargestVocab = std::int64_t{1} << 24;

 private:
  std::string path_;
  TokenFormat format_;
  int fd_ = -1;
  std::size_t offset_ = 0, count_ = 0;  // where the tokens start, and how many
  std::size_t id_bytes_ = 2;
};

// Writes `tokens` as an llm.c token file (tests and tools): version 1 (uint16 ids) or version 2 (uint32 ids).
void write_llmc_tokens(const std::string& path, const std::uint16_t* tokens, std::size_t count);
void write_llmc_tokens(const std::string& path, const std::uint32_t* tokens, std::size_t count);

}  // namespace optimus::checkpoint

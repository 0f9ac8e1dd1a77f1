// Token data for training: a file of uint16 token ids, read where used (pread: a window per sequence), never mapped —
// a file truncated while a run trains it is an error naming it, not a SIGBUS.
//
// Two layouts:
//   llm.c   : a header of 256 int32 (little-endian) — magic 20240520, version 1, the token count — then the tokens;
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
  // Tokens [first, first + count) into `out`; throws naming the file where it no longer holds them (truncated).
  void read(std::size_t first, std::size_t count, std::uint16_t* out) const;
  // How often each id 0..65535 occurs (reads the whole file once, in 1 MiB pieces).
  std::vector<std::int64_t> histogram() const;

 private:
  std::string path_;
  TokenFormat format_;
  int fd_ = -1;
  std::size_t offset_ = 0, count_ = 0;  // where the tokens start, and how many
};

// Writes `tokens` as an llm.c token file (tests and tools).
void write_llmc_tokens(const std::string& path, const std::uint16_t* tokens, std::size_t count);

}  // namespace optimus::checkpoint

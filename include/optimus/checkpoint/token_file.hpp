// Token data for training: a file of uint16 token ids, memory-mapped (nothing is read until used).
//
// Two layouts are recognised by content:
//   llm.c   : a header of 256 int32 (little-endian) — magic 20240520, version 1, the token count — then the tokens;
//   nanoGPT : raw uint16 tokens (train.bin / val.bin), no header.
// A file that starts with llm.c's magic must be a complete llm.c file (its count matching its size); any other file
// must hold an even number of bytes. Errors name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace optimus::checkpoint {

class TokenFile {
 public:
  explicit TokenFile(std::string path);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  TokenFile& operator=(TokenFile&&) = delete;

  const std::string& path() const { return path_; }
  const char* format() const { return llmc_ ? "llm.c" : "raw uint16"; }
  std::size_t size() const { return count_; }
  int operator[](std::size_t k) const { return tokens_[k]; }
  // The largest token id (reads the whole file once).
  int max_token() const;

 private:
  void parse();  // the layout, from the mapped bytes

  std::string path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0, count_ = 0;
  const std::uint16_t* tokens_ = nullptr;
  bool llmc_ = false;
};

// Writes `tokens` as an llm.c token file (tests and tools).
void write_llmc_tokens(const std::string& path, const std::uint16_t* tokens, std::size_t count);

}  // namespace optimus::checkpoint

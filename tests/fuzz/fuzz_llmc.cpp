// Fuzz target: an llm.c checkpoint header (magic, version, shape fields, sizes) and its token files.
#include "fuzz_input.hpp"
#include "optimus/checkpoint/llmc_gpt2.hpp"
#include "optimus/checkpoint/token_file.hpp"
#include "optimus/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = optimus::fuzz::as_file(data, size, "input.bin");
  try {
    if (optimus::checkpoint::is_llmc_checkpoint(path)) optimus::checkpoint::llmc_config(path);
  } catch (const optimus::Error&) {
  }
  try {
    const optimus::checkpoint::TokenFile tokens(path);
    if (tokens.size() > 0) static_cast<void>(tokens[0] + tokens[tokens.size() - 1] + tokens.max_token());
  } catch (const optimus::Error&) {
  }
  return 0;
}

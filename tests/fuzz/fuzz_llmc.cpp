// Fuzz target: an llm.c checkpoint header (magic, version, shape fields, sizes) and its token files.
#include <cstdint>
#include <vector>

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
  for (const auto format : {optimus::checkpoint::TokenFormat::llmc, optimus::checkpoint::TokenFormat::raw_uint16}) {
    try {
      const optimus::checkpoint::TokenFile tokens(path, format);
      std::vector<std::uint32_t> all(tokens.size());  // inputs are small (-max_len): the whole file at once
      tokens.read(0, all.size(), all.data());
      (void)tokens.histogram();
    } catch (const optimus::Error&) {
    }
  }
  return 0;
}

// Fuzz target: a checkpoint's metadata.json (its checksum line, JSON, config and layout fields), read by inspect().
#include <filesystem>

#include "fuzz_input.hpp"
#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string file = optimus::fuzz::as_file(data, size, "metadata.json");
  try {
    optimus::checkpoint::inspect(std::filesystem::path(file).parent_path());
  } catch (const optimus::Error&) {
  }
  return 0;
}

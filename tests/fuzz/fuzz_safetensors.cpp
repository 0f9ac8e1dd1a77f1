// Fuzz target: a safetensors file (header length, JSON header, offsets, dtypes, shapes), read by safetensors::Reader
// and by the Hugging Face GPT-2 config reader; every entry it accepts is read back whole.
#include <vector>

#include "fuzz_input.hpp"
#include "optimus/checkpoint/hf_gpt2.hpp"
#include "optimus/checkpoint/safetensors.hpp"
#include "optimus/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = optimus::fuzz::as_file(data, size, "input.safetensors");
  try {
    const optimus::safetensors::Reader reader(path);
    std::vector<char> bytes;
    for (const auto& entry : reader.entries()) {
      bytes.resize(static_cast<std::size_t>(entry.info.bytes()));
      reader.read(entry.offset, entry.info.bytes(), bytes.data());
    }
  } catch (const optimus::Error&) {
  }
  try {
    optimus::checkpoint::hf_config(path);
  } catch (const optimus::Error&) {
  }
  return 0;
}

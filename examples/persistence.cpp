// train_gpt's persistence (persistence.hpp).
#include "persistence.hpp"

#include <span>
#include <vector>

namespace optimus::examples {

std::string shared_run_id(Communicator& world) {
  std::string id = world.rank() == 0 ? checkpoint::new_run_id() : std::string(16, ' ');
  std::vector<std::uint8_t> bytes(id.begin(), id.end());
  world.broadcast(std::span<std::uint8_t>(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

const char* name_of(InitFormat format) {
  switch (format) {
    case InitFormat::llmc: return "llm.c";
    case InitFormat::hf_gpt2: return "Hugging Face GPT-2 safetensors";
    case InitFormat::hf_llama: return "Hugging Face Llama";
    case InitFormat::hf_bert: return "Hugging Face BERT";
  }
  return "?";
}

}  // namespace optimus::examples

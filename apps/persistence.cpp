// train_gpt's persistence (persistence.hpp).
#include "persistence.hpp"

namespace optimus::apps {

const char* name_of(InitFormat format) {
  switch (format) {
    case InitFormat::llmc: return "llm.c";
    case InitFormat::hf_gpt2: return "Hugging Face GPT-2 safetensors";
    case InitFormat::hf_llama: return "Hugging Face Llama";
    case InitFormat::hf_bert: return "Hugging Face BERT";
  }
  return "?";
}

}  // namespace optimus::apps

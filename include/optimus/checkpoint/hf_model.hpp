// Which model a Hugging Face directory holds, by its config.json's model_type, before any of its fields is read: a
// directory of another model (a Mixtral, a GPT-2 directory, a config.json without model_type) is refused naming its
// type and what Optimus reads, instead of being read as a Llama and refused for a field it happens to lack.
#pragma once

#include <string>

namespace optimus::checkpoint {

// The Hugging Face model directories Optimus reads (hf_llama.hpp, hf_bert.hpp); a GPT-2 is read from its
// model.safetensors file (hf_gpt2.hpp).
enum class HfModel { llama, bert };

// `dir`'s model: config.json's model_type "llama" or "bert". Throws optimus::Error naming the directory and its
// model_type (or its absence), and what Optimus reads, otherwise; and where config.json is missing or not JSON.
HfModel hf_model_of(const std::string& dir);

}  // namespace optimus::checkpoint

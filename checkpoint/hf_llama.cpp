// Hugging Face Llama directories: config.json, the name and layout map, sharded streaming export, per-tensor import.
#include "optimus/checkpoint/hf_llama.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/hf_directory.hpp"
#include "checkpoint/model_tensors.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"

namespace optimus::checkpoint {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using detail::ConfigFields;
using detail::Piece;
using detail::Shards;

constexpr const char* kFamily = "Llama";

// Throws unless the model's blocks are what a Llama file holds: RMSNorm, rotary positions, SwiGLU, no biases.
void check_llama_blocks(const GptConfig& c, const char* op) {
  OPTIMUS_CHECK(std::string(family_name(c.block)) == "llama", op,
                ": a Hugging Face Llama holds Llama's blocks (RMSNorm, rotary positions, SwiGLU, no biases, causal); the model's "
                "are ", c);
}

// The Hugging Face tensors an Optimus tensor `name` of `c` is made of.
std::vector<Piece> pieces_of(const std::string& name, const GptConfig& c) {
  const std::int64_t h = c.hidden, kv = c.kv_heads() * c.head_size(), f = c.ffn;
  if (name == "wte") return {{"model.embed_tokens.weight", 0, h, false}};
  if (name == "lm_head.weight") return {{"lm_head.weight", 0, h, false}};
  if (name == "ln_f.weight") return {{"model.norm.weight", 0, h, false}};
  OPTIMUS_CHECK(name.starts_with("h."), "export_hf_llama: the model's tensor '", name, "' has no Llama name");
  const std::size_t dot = name.find('.', 2);
  const std::string layer = "model.layers." + name.substr(2, dot - 2) + ".", part = name.substr(dot + 1);
  if (part == "ln_1.weight") return {{layer + "input_layernorm.weight", 0, h, false}};
  if (part == "ln_2.weight") return {{layer + "post_attention_layernorm.weight", 0, h, false}};
  if (part == "attn.c_attn.weight") {
    return {{layer + "self_attn.q_proj.weight", 0, h, true},
            {layer + "self_attn.k_proj.weight", h, kv, true},
            {layer + "self_attn.v_proj.weight", h + kv, kv, true}};
  }
  if (part == "attn.c_proj.weight") return {{layer + "self_attn.o_proj.weight", 0, h, true}};
  if (part == "mlp.c_fc.weight") {
    return {{layer + "mlp.gate_proj.weight", 0, f, true}, {layer + "mlp.up_proj.weight", f, f, true}};
  }
  if (part == "mlp.c_proj.weight") return {{layer + "mlp.down_proj.weight", 0, h, true}};
  OPTIMUS_FAIL("export_hf_llama: the model's tensor '", name, "' has no Llama name");
}

// The Hugging Face names a model of `c` has.
std::set<std::string> llama_names(const GptConfig& c) {
  std::set<std::string> names;
  std::vector<std::string> optimus = {"wte", "ln_f.weight"};
  if (!c.block.tied_head) optimus.push_back("lm_head.weight");
  for (std::int64_t l = 0; l < c.layers; ++l) {
    for (const char* part : {"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight", "ln_2.weight",
                             "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
      optimus.push_back("h." + std::to_string(l) + "." + part);
    }
  }
  for (const std::string& name : optimus) {
    for (const Piece& p : pieces_of(name, c)) names.insert(p.name);
  }
  return names;
}

json config_json(const GptConfig& c, std::int64_t context) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", c.vocab},
          {"hidden_size", c.hidden},
          {"intermediate_size", c.ffn},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads()},
          {"head_dim", c.head_size()},
          {"hidden_act", "silu"},
          {"rms_norm_eps", c.block.norm.eps},
          {"rope_theta", c.block.rope->theta},
          {"rope_scaling", nullptr},
          {"max_position_embeddings", context},
          {"tie_word_embeddings", c.block.tied_head},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"torch_dtype", "float32"},
          {"producer", "optimus"}};
}

template <class T>
void import_into(const std::string& dir, const detail::ModelTensors<T>& model) {
  all_or_throw(model.everyone, [&] {
    const GptConfig there = hf_llama_config(dir), &here = *model.config;
    // The blocks compared with kv_heads resolved (0 in a BlockConfig is heads).
    const auto resolved = [](const GptConfig& c) {
      BlockConfig b = c.block;
      b.kv_heads = c.kv_heads();
      return b;
    };
    OPTIMUS_CHECK(there.vocab == here.vocab && there.layers == here.layers && there.hidden == here.hidden &&
                      there.heads == here.heads && there.ffn == here.ffn && resolved(there) == resolved(here),
                  "'", dir, "' holds a Llama of ", there, "; the model is ", here);
    Shards shards(dir, kFamily);
    detail::load_pieces(shards, model, [&](const std::string& name) { return pieces_of(name, here); });
  });
}

}  // namespace

GptConfig hf_llama_config(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path path = dir / "config.json";
  const json j = detail::read_json(path);
  const ConfigFields f(j, path, kFamily);
  detail::model_of(j, dir_name);  // a model_type Optimus reads, else refused naming it
  f.absent_or("model_type", "llama");
  f.absent_or("hidden_act", "silu");
  f.absent_or("attention_bias", false);
  f.absent_or("mlp_bias", false);
  f.absent_or("rope_scaling", nullptr);
  const std::int64_t heads = f.integer("num_attention_heads");
  GptConfig c{.vocab = f.integer("vocab_size"), .padded_vocab = 0, .max_seq = f.integer("max_position_embeddings"),
              .layers = f.integer("num_hidden_layers"), .hidden = f.integer("hidden_size"), .heads = heads,
              .ffn = f.integer("intermediate_size"), .dropout = 0.0, .seed = 0,
              .block = BlockConfig::llama(f.number_or("rope_theta", 10000.0),
                                          f.has("num_key_value_heads") ? f.integer("num_key_value_heads") : heads)};
  c.block.norm.eps = f.number_or("rms_norm_eps", 1e-6);
  c.block.tied_head = f.boolean_or("tie_word_embeddings", false);
  OPTIMUS_CHECK(heads > 0 && c.hidden % heads == 0, "'", path.string(), "': hidden_size ", c.hidden,
                " is not divisible by num_attention_heads ", heads);
  if (f.has("head_dim")) f.absent_or("head_dim", c.hidden / heads);
  validate(c);
  // Every tensor is one the model has.
  const std::set<std::string> names = llama_names(c);
  Shards(dir, kFamily).check_known([&](const std::string& name) {
    return names.count(name) > 0 || (c.block.tied_head && name == "lm_head.weight");
  });
  return c;
}

template <class F>
void import_hf_llama(const std::string& dir, Gpt<F>& model) {
  check_llama_blocks(model.config(), "import_hf_llama");
  import_into(dir, detail::tensors_of(model));
}

template <class F>
void export_hf_llama(const std::string& dir, Gpt<F>& model, std::uint64_t max_shard_bytes, std::int64_t context) {
  check_llama_blocks(model.config(), "export_hf_llama");
  OPTIMUS_CHECK(context >= model.config().max_seq, "export_hf_llama: max_position_embeddings ", context,
                " is shorter than the model's context ", model.config().max_seq);
  const auto tensors = detail::tensors_of(model);
  detail::export_pieces(dir, tensors, [&](const std::string& name) { return pieces_of(name, model.config()); },
                        config_json(model.config(), context), max_shard_bytes, "export_hf_llama");
}

template void import_hf_llama(const std::string&, Gpt<TwoD<float>>&);
template void import_hf_llama(const std::string&, Gpt<OneD<float>>&);
template void import_hf_llama(const std::string&, Gpt<TwoD<double>>&);
template void import_hf_llama(const std::string&, Gpt<OneD<double>>&);
template void export_hf_llama(const std::string&, Gpt<TwoD<float>>&, std::uint64_t, std::int64_t);
template void export_hf_llama(const std::string&, Gpt<OneD<float>>&, std::uint64_t, std::int64_t);
template void export_hf_llama(const std::string&, Gpt<TwoD<double>>&, std::uint64_t, std::int64_t);
template void export_hf_llama(const std::string&, Gpt<OneD<double>>&, std::uint64_t, std::int64_t);

}  // namespace optimus::checkpoint

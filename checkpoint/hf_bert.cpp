// Hugging Face BERT directories (BertForMaskedLM): config.json and the name and layout map; the directory's reading,
// import and sharded export are hf_directory's.
#include "optimus/checkpoint/hf_bert.hpp"

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

constexpr const char* kBertFamily = "BERT";
// The tied decoder, as transformers may save it beside what it is tied to.
constexpr const char* kDecoderWeight = "cls.predictions.decoder.weight";
constexpr const char* kDecoderBias = "cls.predictions.decoder.bias";
constexpr const char* kWordEmbeddings = "bert.embeddings.word_embeddings.weight";
constexpr const char* kPredictionBias = "cls.predictions.bias";

// Throws unless the model's blocks are BERT's (BlockConfig::bert, any eps and token types).
void check_bert_blocks(const GptConfig& c, const char* op) {
  OPTIMUS_CHECK(std::string(family_name(c.block)) == "bert", op,
                ": a Hugging Face BERT holds BERT's blocks (post-LayerNorm, exact GELU, bidirectional, token types, "
                "the masked-LM head); the model's are ", c);
}

// Part of an nn.Linear `hf`: columns [col0, col0 + cols) of the Optimus weight, transposed, or of its bias.
std::vector<Piece> linear(const std::string& part, const std::string& hf, std::int64_t col0, std::int64_t cols) {
  if (part.ends_with(".weight")) return {{hf + ".weight", col0, cols, true}};
  return {{hf + ".bias", col0, cols, false}};
}

// A norm's weight or bias.
std::vector<Piece> norm(const std::string& part, const std::string& hf, std::int64_t h) {
  return {{hf + (part.ends_with(".weight") ? ".weight" : ".bias"), 0, h, false}};
}

// The Hugging Face tensors an Optimus tensor `name` of `c` is made of.
std::vector<Piece> bert_pieces_of(const std::string& name, const GptConfig& c) {
  const std::int64_t h = c.hidden, f = c.ffn;
  if (name == "wte") return {{kWordEmbeddings, 0, h, false}};
  if (name == "wpe") return {{"bert.embeddings.position_embeddings.weight", 0, h, false}};
  if (name == "tte") return {{"bert.embeddings.token_type_embeddings.weight", 0, h, false}};
  if (name.starts_with("ln_e.")) return norm(name, "bert.embeddings.LayerNorm", h);
  if (name.starts_with("head.dense.")) return linear(name, "cls.predictions.transform.dense", 0, h);
  if (name.starts_with("ln_f.")) return norm(name, "cls.predictions.transform.LayerNorm", h);
  if (name == "head.bias") return {{kPredictionBias, 0, c.vocab, false}};
  OPTIMUS_CHECK(name.starts_with("h."), "the model's tensor '", name, "' has no BERT name");
  const std::size_t dot = name.find('.', 2);
  const std::string layer = "bert.encoder.layer." + name.substr(2, dot - 2) + ".", part = name.substr(dot + 1);
  if (part.starts_with("attn.c_attn.")) {
    std::vector<Piece> qkv;
    for (const char* which : {"query", "key", "value"}) {
      const std::int64_t col0 = static_cast<std::int64_t>(qkv.size()) * h;
      qkv.push_back(linear(part, layer + "attention.self." + which, col0, h).front());
    }
    return qkv;
  }
  if (part.starts_with("attn.c_proj.")) return linear(part, layer + "attention.output.dense", 0, h);
  if (part.starts_with("ln_1.")) return norm(part, layer + "attention.output.LayerNorm", h);
  if (part.starts_with("mlp.c_fc.")) return linear(part, layer + "intermediate.dense", 0, f);
  if (part.starts_with("mlp.c_proj.")) return linear(part, layer + "output.dense", 0, h);
  if (part.starts_with("ln_2.")) return norm(part, layer + "output.LayerNorm", h);
  OPTIMUS_FAIL("the model's tensor '", name, "' has no BERT name");
}

// The Hugging Face names a model of `c` has.
std::set<std::string> bert_names(const GptConfig& c) {
  std::vector<std::string> optimus = {"wte", "wpe", "tte", "ln_e.weight", "ln_e.bias", "head.dense.weight",
                                      "head.dense.bias", "ln_f.weight", "ln_f.bias", "head.bias"};
  for (std::int64_t l = 0; l < c.layers; ++l) {
    for (const char* part : {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                             "ln_1.weight", "ln_1.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                             "mlp.c_proj.bias", "ln_2.weight", "ln_2.bias"}) {
      optimus.push_back("h." + std::to_string(l) + "." + part);
    }
  }
  std::set<std::string> names;
  for (const std::string& name : optimus) {
    for (const Piece& p : bert_pieces_of(name, c)) names.insert(p.name);
  }
  return names;
}

// What a file may hold beside the model's tensors: the tied decoder, the position ids buffer, BertForPreTraining's
// pooler and next-sentence head.
bool passed_over(const std::string& name) {
  return name == kDecoderWeight || name == kDecoderBias || name == "bert.embeddings.position_ids" ||
         name.starts_with("bert.pooler.") || name.starts_with("cls.seq_relationship.");
}

json bert_config_json(const GptConfig& c) {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", c.vocab},
          {"hidden_size", c.hidden},
          {"intermediate_size", c.ffn},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"hidden_act", "gelu"},
          {"layer_norm_eps", c.block.norm.eps},
          {"max_position_embeddings", c.max_seq},
          {"type_vocab_size", c.block.token_types},
          {"position_embedding_type", "absolute"},
          {"hidden_dropout_prob", c.dropout},
          {"attention_probs_dropout_prob", c.dropout},
          {"tie_word_embeddings", true},
          {"is_decoder", false},
          {"torch_dtype", "float32"},
          {"producer", "optimus"}};
}

// The tied decoder, where the file holds it, equals what it is tied to (read where the model's part is held).
void check_tied(Shards& shards, const char* decoder, const char* tied, const std::vector<std::int64_t>& shape,
                const std::string& dir) {
  if (!shards.names().count(decoder)) return;
  OPTIMUS_CHECK(shards.read(decoder, shape) == shards.read(tied, shape), "'", dir, "': ", decoder, " differs from ",
                tied, ", to which BertForMaskedLM ties it (an untied decoder is not BERT's)");
}

template <class T>
void import_bert_into(const std::string& dir, const detail::ModelTensors<T>& model) {
  all_or_throw(model.everyone, [&] {
    const GptConfig there = hf_bert_config(dir), &here = *model.config;
    OPTIMUS_CHECK(there.vocab == here.vocab && there.layers == here.layers && there.hidden == here.hidden &&
                      there.heads == here.heads && there.ffn == here.ffn && there.max_seq == here.max_seq &&
                      there.block == here.block,
                  "'", dir, "' holds a BERT of ", there, "; the model is ", here);
    Shards shards(dir, kBertFamily);
    detail::load_pieces(shards, model, [&](const std::string& name) { return bert_pieces_of(name, here); });
    for (const ParameterRef<T>& p : model.held) {
      if (p.name == "wte") check_tied(shards, kDecoderWeight, kWordEmbeddings, {here.vocab, here.hidden}, dir);
      if (p.name == "head.bias") check_tied(shards, kDecoderBias, kPredictionBias, {here.vocab}, dir);
    }
  });
}

}  // namespace

GptConfig hf_bert_config(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path path = dir / "config.json";
  const json j = detail::read_json(path);
  const ConfigFields f(j, path, kBertFamily);
  detail::model_of(j, dir_name);  // a model_type Optimus reads, else refused naming it
  f.absent_or("model_type", "bert");
  f.absent_or("hidden_act", "gelu");
  f.absent_or("position_embedding_type", "absolute");
  f.absent_or("tie_word_embeddings", true);
  f.absent_or("is_decoder", false);
  f.absent_or("add_cross_attention", false);
  const std::int64_t heads = f.integer("num_attention_heads");
  GptConfig c{.vocab = f.integer("vocab_size"), .padded_vocab = 0, .max_seq = f.integer("max_position_embeddings"),
              .layers = f.integer("num_hidden_layers"), .hidden = f.integer("hidden_size"), .heads = heads,
              .ffn = f.integer("intermediate_size"), .dropout = 0.0, .seed = 0, .block = BlockConfig::bert()};
  c.block.norm.eps = f.number_or("layer_norm_eps", 1e-12);
  c.block.token_types = f.has("type_vocab_size") ? f.integer("type_vocab_size") : 2;
  OPTIMUS_CHECK(c.block.token_types >= 1, "'", path.string(), "': type_vocab_size ", c.block.token_types,
                " (at least 1)");
  OPTIMUS_CHECK(heads > 0 && c.hidden % heads == 0, "'", path.string(), "': hidden_size ", c.hidden,
                " is not divisible by num_attention_heads ", heads);
  validate(c);
  // Every tensor is one the model has, or one it passes over.
  const std::set<std::string> names = bert_names(c);
  Shards(dir, kBertFamily).check_known(
      [&](const std::string& name) { return names.count(name) > 0 || passed_over(name); });
  return c;
}

template <class F>
void import_hf_bert(const std::string& dir, Gpt<F>& model) {
  check_bert_blocks(model.config(), "import_hf_bert");
  import_bert_into(dir, detail::tensors_of(model));
}

template <class F>
void export_hf_bert(const std::string& dir, Gpt<F>& model, std::uint64_t max_shard_bytes) {
  check_bert_blocks(model.config(), "export_hf_bert");
  const auto tensors = detail::tensors_of(model);
  detail::export_pieces(dir, tensors, [&](const std::string& name) { return bert_pieces_of(name, model.config()); },
                        bert_config_json(model.config()), max_shard_bytes, "export_hf_bert");
}

template void import_hf_bert(const std::string&, Gpt<TwoD<float>>&);
template void import_hf_bert(const std::string&, Gpt<OneD<float>>&);
template void import_hf_bert(const std::string&, Gpt<TwoD<double>>&);
template void import_hf_bert(const std::string&, Gpt<OneD<double>>&);
template void export_hf_bert(const std::string&, Gpt<TwoD<float>>&, std::uint64_t);
template void export_hf_bert(const std::string&, Gpt<OneD<float>>&, std::uint64_t);
template void export_hf_bert(const std::string&, Gpt<TwoD<double>>&, std::uint64_t);
template void export_hf_bert(const std::string&, Gpt<OneD<double>>&, std::uint64_t);

}  // namespace optimus::checkpoint

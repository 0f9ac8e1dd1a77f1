// Internal to the checkpoint module: a Hugging Face model directory (config.json, and the tensors in model.safetensors
// or in shards that model.safetensors.index.json's weight_map names) read into and written from a GPT on any layout,
// whatever the family's names — Llama's (hf_llama.cpp) and BERT's (hf_bert.cpp) each give the map from an Optimus
// tensor to the Hugging Face tensors it is made of.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/model_tensors.hpp"
#include "optimus/checkpoint/hf_model.hpp"
#include "optimus/checkpoint/safetensors.hpp"

namespace optimus::checkpoint::detail {

// Columns [col0, col0 + cols) of an Optimus tensor as one Hugging Face tensor, transposed (nn.Linear's [out, in]) or
// not (embeddings, norms, biases).
struct Piece {
  std::string name;
  std::int64_t col0 = 0, cols = 0;
  bool transposed = false;
};

// The Hugging Face tensors the Optimus tensor `name` is made of (optimus::Error for a tensor the family has no name
// for).
using PiecesOf = std::function<std::vector<Piece>(const std::string& name)>;

// A piece's shape in the file, from its Optimus tensor's `shape` ({n} for a vector).
std::vector<std::int64_t> file_shape(const Piece& p, const std::vector<std::int64_t>& shape);

// A JSON file of the directory; optimus::Error naming it where it cannot be read or parsed.
nlohmann::json read_json(const std::filesystem::path& path);
// The model a directory's config.json (`j`, read from `dir`) describes, by its model_type (hf_model.hpp's
// hf_model_of, for a config.json already read).
HfModel model_of(const nlohmann::json& j, const std::string& dir);

// The directory's tensors: each name's shard, opened once. `family` names the model in messages ("Llama").
class Shards {
 public:
  Shards(const std::filesystem::path& dir, std::string family);
  const std::map<std::string, std::string>& names() const { return where_; }
  const std::filesystem::path& directory() const { return dir_; }
  // Throws unless `known` accepts every tensor name, naming the first other ("'DIR' has a tensor 'x' that the BERT of
  // its config.json does not").
  void check_known(const std::function<bool(const std::string&)>& known) const;
  // The tensor `name`, checked to have `shape`.
  GlobalMatrix read(const std::string& name, const std::vector<std::int64_t>& shape);

 private:
  const safetensors::Reader& open(const std::string& file);
  std::filesystem::path dir_;
  std::string family_;
  std::map<std::string, std::string> where_;
  std::map<std::string, std::unique_ptr<safetensors::Reader>> open_;
};

// config.json's fields, typed as transformers writes them: a field of the wrong JSON type is refused naming its key
// and the file (never truncated: hidden_size 32.5 is not 32). `family` names the model in messages.
class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& j, const std::filesystem::path& path, std::string family);
  bool has(const char* key) const { return j_.contains(key); }
  std::int64_t integer(const char* key) const;
  double number_or(const char* key, double fallback) const;
  bool boolean_or(const char* key, bool fallback) const;
  // Absent, or `value`: what Optimus' blocks of the family have ("... = "relative_key", which Optimus' BERT blocks do
  // not have ("absolute")").
  void absent_or(const char* key, const nlohmann::json& value) const;

 private:
  const nlohmann::json& j_;
  const std::filesystem::path& path_;
  std::string family_;
};

// Each tensor this rank holds, assembled from its pieces in `shards` and loaded. One rank's part of an import (the
// caller agrees on the outcome over the model's ranks).
template <class T>
void load_pieces(Shards& shards, const ModelTensors<T>& model, const PiecesOf& pieces);

// The model to a new directory `dir`, streamed one tensor at a time on the writing rank in F32 into shards of at most
// max_shard_bytes (a larger tensor alone in its own), with `config` as config.json: built beside under a name of this
// writer's own (core/output_file.hpp) and renamed to `dir` once every file is complete and fsynced; `dir` must not
// exist. Collective over the model's ranks; fails the same way on every rank (naming `op`, the file and the tensor).
template <class T>
void export_pieces(const std::string& dir, const ModelTensors<T>& model, const PiecesOf& pieces,
                   const nlohmann::json& config, std::uint64_t max_shard_bytes, const char* op);

}  // namespace optimus::checkpoint::detail

// Hugging Face Llama directories: config.json, the name and layout map, sharded streaming export, per-tensor import.
#include "optimus/checkpoint/hf_llama.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/model_tensors.hpp"
#include "optimus/checkpoint/safetensors.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using detail::read_matrix;

constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";

// Columns [col0, col0 + cols) of an Optimus tensor as one Hugging Face tensor, transposed (nn.Linear's [out, in]) or
// not (embeddings, norms).
struct Piece {
  std::string name;
  std::int64_t col0 = 0, cols = 0;
  bool transposed = false;
};

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

// A piece's shape in the file, from its Optimus tensor's `shape` ({n} for a vector).
std::vector<std::int64_t> file_shape(const Piece& p, const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return {p.cols};
  return p.transposed ? std::vector<std::int64_t>{p.cols, shape[0]} : std::vector<std::int64_t>{shape[0], p.cols};
}

json read_json(const fs::path& path) {
  check_regular_input(path, "a Hugging Face Llama directory's file");
  std::ifstream in(path);
  OPTIMUS_CHECK(in.good(), "'", path.string(), "' cannot be read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    OPTIMUS_FAIL("'", path.string(), "' is not JSON: ", e.what());
  }
}

// The directory's tensors: each name's shard, opened once.
class Shards {
 public:
  explicit Shards(const fs::path& dir) : dir_(dir) {
    if (fs::exists(dir / kIndex)) {
      const json index = read_json(dir / kIndex);
      OPTIMUS_CHECK(index.contains("weight_map") && index.at("weight_map").is_object(), "'", (dir / kIndex).string(),
                    "' has no weight_map");
      for (const auto& [name, file] : index.at("weight_map").items()) {
        OPTIMUS_CHECK(file.is_string(), "'", (dir / kIndex).string(), "': weight_map's ", name, " is ", file.dump(),
                      ", not a file name");
        where_[name] = file.get<std::string>();
      }
    } else {
      OPTIMUS_CHECK(fs::exists(dir / kSingle), "'", dir.string(), "' holds neither ", kSingle, " nor ", kIndex);
      for (const safetensors::Entry& e : open(kSingle).entries()) where_[e.info.name] = kSingle;
    }
  }
  const std::map<std::string, std::string>& names() const { return where_; }
  // The tensor `name`, checked to have `shape`.
  GlobalMatrix read(const std::string& name, const std::vector<std::int64_t>& shape) {
    const auto it = where_.find(name);
    OPTIMUS_CHECK(it != where_.end(), "'", dir_.string(), "' is not the model's Llama: it has no tensor '", name, "'");
    const safetensors::Reader& file = open(it->second);
    const safetensors::Entry& e = file.find(name);
    OPTIMUS_CHECK(e.info.shape == shape, "'", file.path(), "': '", name, "' has another shape than the model's");
    return read_matrix(file, e);
  }

 private:
  const safetensors::Reader& open(const std::string& file) {
    OPTIMUS_CHECK(fs::path(file).filename() == fs::path(file), "'", dir_.string(), "': the shard '", file,
                  "' is not a file of the directory");
    auto it = open_.find(file);
    if (it == open_.end()) it = open_.emplace(file, std::make_unique<safetensors::Reader>((dir_ / file).string())).first;
    return *it->second;
  }
  fs::path dir_;
  std::map<std::string, std::string> where_;
  std::map<std::string, std::unique_ptr<safetensors::Reader>> open_;
};

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
    Shards shards(dir);
    for (const ParameterRef<T>& p : model.held) {
      const std::int64_t rows = p.shape.size() == 2 ? p.shape[0] : 1, cols = p.shape.back();
      GlobalMatrix full(rows, cols);
      for (const Piece& piece : pieces_of(p.name, here)) {
        const GlobalMatrix m = shards.read(piece.name, file_shape(piece, p.shape));
        if (piece.transposed) {
          full.middleCols(piece.col0, piece.cols) = m.transpose();
        } else {
          full.middleCols(piece.col0, piece.cols) = m;
        }
      }
      load_parameter(p, full, model.device);
    }
  });
}

// The file name of shard k (0-based) of n.
std::string shard_name(std::size_t k, std::size_t n) {
  if (n == 1) return kSingle;
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return name;
}

template <class T>
void export_from(const std::string& dir_name, const detail::ModelTensors<T>& model, std::uint64_t max_shard_bytes,
                 std::int64_t context) {
  const GptConfig& c = *model.config;
  const fs::path dir(dir_name);
  const fs::path partial = temporary_beside(dir, ".partial");  // this writer's own (output_file.hpp)
  // Every piece of the model's tensors in order, and the shard each goes to.
  struct Out {
    Piece piece;
    std::size_t tensor;  // in model.order
    safetensors::TensorInfo info;
  };
  std::vector<Out> outs;
  for (std::size_t k = 0; k < model.order.size(); ++k) {
    for (const Piece& p : pieces_of(model.order[k].name, c)) {
      outs.push_back({.piece = p, .tensor = k,
                      .info = {.name = p.name, .dtype = "F32", .shape = file_shape(p, model.order[k].shape)}});
    }
  }
  std::vector<std::vector<std::size_t>> shards(1);  // the outs of each shard
  std::uint64_t bytes = 0;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!shards.back().empty() && bytes + outs[k].info.bytes() > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(k);
    bytes += outs[k].info.bytes();
  }
  DeferredFailure outcome(model.writer);
  struct Unfinished {  // the writer's partial directory, removed unless it became `dir`
    const fs::path& path;
    bool pending;
    ~Unfinished() {
      std::error_code ignored;
      if (pending) fs::remove_all(path, ignored);
    }
  } unfinished{partial, false};
  outcome.attempt([&] {
    OPTIMUS_CHECK(max_shard_bytes > 0, "export_hf_llama: max_shard_bytes must be positive");
    OPTIMUS_CHECK(!fs::exists(dir), "export_hf_llama: '", dir.string(), "' exists; the export makes a new directory");
    remove_dead_writers_leftovers(dir, ".partial");  // interrupted exports' of this host
    OPTIMUS_CHECK(fs::create_directory(partial), "export_hf_llama: '", partial.string(), "' exists already");
    unfinished.pending = true;
    write_file(partial / "config.json", config_json(c, context).dump(2) + "\n");
    json weight_map = json::object();
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      for (std::size_t k : shards[s]) {
        weight_map[outs[k].info.name] = shard_name(s, shards.size());
        total += outs[k].info.bytes();
      }
    }
    if (shards.size() > 1) {
      write_file(partial / kIndex,
                 json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
    }
  });
  std::optional<safetensors::Writer> file;
  std::size_t shard = 0, next = 0;  // the shard being written; the next out to write
  const auto open_shard = [&] {
    std::vector<safetensors::TensorInfo> infos;
    for (std::size_t k : shards[shard]) infos.push_back(outs[k].info);
    file.emplace((partial / shard_name(shard, shards.size())).string(), infos,
                 std::map<std::string, std::string>{{"format", "pt"}, {"producer", "optimus"}});
  };
  outcome.attempt(open_shard);
  for (std::size_t k = 0; k < model.order.size(); ++k) {
    const GlobalMatrix m = model.fetch(k);  // one tensor at a time
    outcome.attempt([&] {
      for (; next < outs.size() && outs[next].tensor == k; ++next) {
        if (next > shards[shard].back()) {  // this shard is whole: the next one
          file->finish();
          ++shard;
          open_shard();
        }
        const Piece& p = outs[next].piece;
        const GlobalMatrix part = p.transposed ? GlobalMatrix(m.middleCols(p.col0, p.cols).transpose())
                                               : GlobalMatrix(m.middleCols(p.col0, p.cols));
        std::vector<float> values(static_cast<std::size_t>(part.size()));
        for (Eigen::Index i = 0; i < part.size(); ++i) {
          values[static_cast<std::size_t>(i)] = static_cast<float>(part(i / part.cols(), i % part.cols()));
        }
        file->append(values.data(), values.size() * sizeof(float));
      }
    });
  }
  outcome.attempt([&] {
    file->finish();
    file.reset();
    unfinished.pending = false;
    rename_new(partial, dir);  // refused where another writer made `dir` meanwhile
  });
  outcome.agree(model.everyone);
}

}  // namespace

namespace {

// config.json's fields, typed as transformers writes them: a field of the wrong JSON type is refused naming its key
// and the file (never truncated: hidden_size 32.5 is not 32).
class ConfigFields {
 public:
  ConfigFields(const json& j, const fs::path& path) : j_(j), path_(path) {
    OPTIMUS_CHECK(j_.is_object(), "'", path_.string(), "' is not a Llama config: not a JSON object");
  }
  bool has(const char* key) const { return j_.contains(key); }
  std::int64_t integer(const char* key) const {
    OPTIMUS_CHECK(has(key), "'", path_.string(), "' has no ", key);
    const json& v = j_.at(key);
    OPTIMUS_CHECK(v.is_number_integer(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not an integer");
    return v.get<std::int64_t>();
  }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    OPTIMUS_CHECK(v.is_number(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not a number");
    return v.get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    OPTIMUS_CHECK(v.is_boolean(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not true or false");
    return v.get<bool>();
  }
  // Absent, or `value`: what Optimus' Llama blocks have.
  void absent_or(const char* key, const json& value) const {
    OPTIMUS_CHECK(!has(key) || j_.at(key) == value, "'", path_.string(), "': ", key, " = ", j_.at(key).dump(),
                  ", which Optimus' Llama blocks do not have (", value.dump(), ")");
  }

 private:
  const json& j_;
  const fs::path& path_;
};

}  // namespace

GptConfig hf_llama_config(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path path = dir / "config.json";
  const json j = read_json(path);
  const ConfigFields f(j, path);
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
  const Shards shards(dir);
  for (const auto& [name, file] : shards.names()) {
    OPTIMUS_CHECK(names.count(name) || (c.block.tied_head && name == "lm_head.weight"), "'", dir.string(),
                  "' has a tensor '", name, "' that the Llama of its config.json does not");
  }
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
  export_from(dir, detail::tensors_of(model), max_shard_bytes, context);
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

// Hugging Face model directories (hf_directory.hpp): the shards, config.json's fields, per-tensor import and the
// sharded streaming export.
#include "checkpoint/hf_directory.hpp"
#include "optimus/checkpoint/hf_model.hpp"

#include <fstream>
#include <optional>
#include <utility>

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint::detail {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";

// The file name of shard k (0-based) of n.
std::string shard_name(std::size_t k, std::size_t n) {
  if (n == 1) return kSingle;
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return name;
}

}  // namespace

std::vector<std::int64_t> file_shape(const Piece& p, const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return {p.cols};
  return p.transposed ? std::vector<std::int64_t>{p.cols, shape[0]} : std::vector<std::int64_t>{shape[0], p.cols};
}

json read_json(const fs::path& path) {
  check_regular_input(path, "a Hugging Face model directory's file");
  std::ifstream in(path);
  OPTIMUS_CHECK(in.good(), "'", path.string(), "' cannot be read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    OPTIMUS_FAIL("'", path.string(), "' is not JSON: ", e.what());
  }
}

HfModel model_of(const json& j, const std::string& dir) {
  OPTIMUS_CHECK(j.is_object() && j.contains("model_type"), "'", dir, "': config.json has no model_type, so the model "
                "it describes is unknown; Optimus reads Hugging Face directories of model_type \"llama\" and \"bert\" "
                "(and a GPT-2's model.safetensors file)");
  const json& type = j.at("model_type");
  if (type == "llama") return HfModel::llama;
  if (type == "bert") return HfModel::bert;
  OPTIMUS_FAIL("'", dir, "': config.json's model_type is ", type.dump(), "; Optimus reads Hugging Face directories of ",
               "model_type \"llama\" and \"bert\"",
               type == "gpt2" ? " (for a GPT-2, give its model.safetensors file)"
                              : " (and a GPT-2's model.safetensors file)");
}

}  // namespace optimus::checkpoint::detail

namespace optimus::checkpoint {

HfModel hf_model_of(const std::string& dir) {
  return detail::model_of(detail::read_json(std::filesystem::path(dir) / "config.json"), dir);
}

}  // namespace optimus::checkpoint

namespace optimus::checkpoint::detail {

Shards::Shards(const fs::path& dir, std::string family) : dir_(dir), family_(std::move(family)) {
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

void Shards::check_known(const std::function<bool(const std::string&)>& known) const {
  for (const auto& [name, file] : where_) {
    OPTIMUS_CHECK(known(name), "'", dir_.string(), "' has a tensor '", name, "' that the ", family_,
                  " of its config.json does not");
  }
}

GlobalMatrix Shards::read(const std::string& name, const std::vector<std::int64_t>& shape) {
  const auto it = where_.find(name);
  OPTIMUS_CHECK(it != where_.end(), "'", dir_.string(), "' is not the model's ", family_, ": it has no tensor '", name,
                "'");
  const safetensors::Reader& file = open(it->second);
  const safetensors::Entry& e = file.find(name);
  OPTIMUS_CHECK(e.info.shape == shape, "'", file.path(), "': '", name, "' has another shape than the model's");
  return read_matrix(file, e);
}

const safetensors::Reader& Shards::open(const std::string& file) {
  OPTIMUS_CHECK(fs::path(file).filename() == fs::path(file), "'", dir_.string(), "': the shard '", file,
                "' is not a file of the directory");
  auto it = open_.find(file);
  if (it == open_.end()) it = open_.emplace(file, std::make_unique<safetensors::Reader>((dir_ / file).string())).first;
  return *it->second;
}

ConfigFields::ConfigFields(const json& j, const fs::path& path, std::string family)
    : j_(j), path_(path), family_(std::move(family)) {
  OPTIMUS_CHECK(j_.is_object(), "'", path_.string(), "' is not a ", family_, " config: not a JSON object");
}

std::int64_t ConfigFields::integer(const char* key) const {
  OPTIMUS_CHECK(has(key), "'", path_.string(), "' has no ", key);
  const json& v = j_.at(key);
  OPTIMUS_CHECK(v.is_number_integer(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not an integer");
  return v.get<std::int64_t>();
}

double ConfigFields::number_or(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const json& v = j_.at(key);
  OPTIMUS_CHECK(v.is_number(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not a number");
  return v.get<double>();
}

bool ConfigFields::boolean_or(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& v = j_.at(key);
  OPTIMUS_CHECK(v.is_boolean(), "'", path_.string(), "': ", key, " is ", v.dump(), ", not true or false");
  return v.get<bool>();
}

void ConfigFields::absent_or(const char* key, const json& value) const {
  OPTIMUS_CHECK(!has(key) || j_.at(key) == value, "'", path_.string(), "': ", key, " = ", j_.at(key).dump(),
                ", which Optimus' ", family_, " blocks do not have (", value.dump(), ")");
}

template <class T>
void load_pieces(Shards& shards, const ModelTensors<T>& model, const PiecesOf& pieces) {
  for (const ParameterRef<T>& p : model.held) {
    const std::int64_t rows = p.shape.size() == 2 ? p.shape[0] : 1, cols = p.shape.back();
    GlobalMatrix full(rows, cols);
    for (const Piece& piece : pieces(p.name)) {
      const GlobalMatrix m = shards.read(piece.name, file_shape(piece, p.shape));
      if (piece.transposed) {
        full.middleCols(piece.col0, piece.cols) = m.transpose();
      } else {
        full.middleCols(piece.col0, piece.cols) = m;
      }
    }
    load_from(shards.directory().string(), p, full, model.device);
  }
}

namespace {

// A piece of the model's tensors as it is exported: the tensor it is of (in the model's order) and its file entry.
struct Out {
  Piece piece;
  std::size_t tensor;
  safetensors::TensorInfo info;
};

// Every piece of the model's tensors, in order.
template <class T>
std::vector<Out> outs_of(const ModelTensors<T>& model, const PiecesOf& pieces) {
  std::vector<Out> outs;
  for (std::size_t k = 0; k < model.order.size(); ++k) {
    for (const Piece& p : pieces(model.order[k].name)) {
      outs.push_back({.piece = p, .tensor = k,
                      .info = {.name = p.name, .dtype = "F32", .shape = file_shape(p, model.order[k].shape)}});
    }
  }
  return outs;
}

// The outs of each shard: in order, a shard closed where the next out would take it past `max_shard_bytes`.
std::vector<std::vector<std::size_t>> shards_of(const std::vector<Out>& outs, std::uint64_t max_shard_bytes) {
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t bytes = 0;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!shards.back().empty() && bytes + outs[k].info.bytes() > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(k);
    bytes += outs[k].info.bytes();
  }
  return shards;
}

// config.json, and with several shards the index naming each tensor's, in the directory `partial`.
void write_config_and_index(const fs::path& partial, const json& config, const std::vector<Out>& outs,
                            const std::vector<std::vector<std::size_t>>& shards) {
  write_file(partial / "config.json", config.dump(2) + "\n");
  json weight_map = json::object();
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (std::size_t k : shards[s]) {
      weight_map[outs[k].info.name] = shard_name(s, shards.size());
      total += outs[k].info.bytes();
    }
  }
  if (shards.size() > 1) {
    const json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file(partial / kIndex, index.dump(2) + "\n");
  }
}

// A piece's values of its tensor m, as the file holds them (f32, row-major, transposed where the piece is).
std::vector<float> values_of(const GlobalMatrix& m, const Piece& p) {
  const GlobalMatrix part = p.transposed ? GlobalMatrix(m.middleCols(p.col0, p.cols).transpose())
                                         : GlobalMatrix(m.middleCols(p.col0, p.cols));
  std::vector<float> values(static_cast<std::size_t>(part.size()));
  for (Eigen::Index i = 0; i < part.size(); ++i) {
    values[static_cast<std::size_t>(i)] = static_cast<float>(part(i / part.cols(), i % part.cols()));
  }
  return values;
}

// The writer's partial directory, removed unless it became the export.
struct Unfinished {
  const fs::path& path;
  bool pending;
  ~Unfinished() {
    std::error_code ignored;
    if (pending) fs::remove_all(path, ignored);
  }
};

}  // namespace

template <class T>
void export_pieces(const std::string& dir_name, const ModelTensors<T>& model, const PiecesOf& pieces,
                   const json& config, std::uint64_t max_shard_bytes, const char* op) {
  const fs::path dir(dir_name);
  const fs::path partial = temporary_beside(dir, ".partial");  // this writer's own (output_file.hpp)
  const std::vector<Out> outs = outs_of(model, pieces);
  const std::vector<std::vector<std::size_t>> shards = shards_of(outs, max_shard_bytes);
  DeferredFailure outcome(model.writer);
  Unfinished unfinished{partial, false};
  outcome.attempt([&] {
    OPTIMUS_CHECK(max_shard_bytes > 0, op, ": max_shard_bytes must be positive");
    OPTIMUS_CHECK(!fs::exists(dir), op, ": '", dir.string(), "' exists; the export makes a new directory");
    remove_dead_writers_leftovers(dir, ".partial");  // interrupted exports' of this host
    OPTIMUS_CHECK(fs::create_directory(partial), op, ": '", partial.string(), "' exists already");
    unfinished.pending = true;
    write_config_and_index(partial, config, outs, shards);
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
        const std::vector<float> values = values_of(m, outs[next].piece);
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

template void load_pieces(Shards&, const ModelTensors<float>&, const PiecesOf&);
template void load_pieces(Shards&, const ModelTensors<double>&, const PiecesOf&);
template void export_pieces(const std::string&, const ModelTensors<float>&, const PiecesOf&, const json&, std::uint64_t,
                            const char*);
template void export_pieces(const std::string&, const ModelTensors<double>&, const PiecesOf&, const json&,
                            std::uint64_t, const char*);

}  // namespace optimus::checkpoint::detail

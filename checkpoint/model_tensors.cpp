// The GPT-2 files' view of a model (model_tensors.hpp).
#include "checkpoint/model_tensors.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "checkpoint/shards.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/error.hpp"

namespace optimus::checkpoint::detail {

namespace {

// Where a tensor of the whole model goes in its order: the embedding's, each block's in the block's order, ln_f's.
std::tuple<int, std::int64_t> section_of(const std::string& name) {
  if (name == "wte") return {0, 0};
  if (name == "wpe") return {1, 0};
  if (name.starts_with("h.")) return {2, std::stoll(name.substr(2, name.find('.', 2) - 2))};
  return {3, 0};
}

}  // namespace

template <class F>
ModelTensors<typename F::Value> tensors_of(Gpt<F>& model) {
  using T = typename F::Value;
  const Grid& grid = model.grid();
  Communicator& holders = F::holders(model.place());
  ModelTensors<T> out{.config = &model.config(),
                      .held = model.parameters(),
                      .device = grid.device(),
                      .order = {},
                      .writer = grid.dp_index() == 0 && holders.rank() == 0 && grid.stage() == 0,
                      .everyone = {&holders, &grid.dp_comm(), &grid.pipe()},
                      .fetch = nullptr};
  // Every stage's tensors in its own order, all-gathered over the pipeline; a tensor's owner is the first stage that
  // holds it (wte: the embedding's, stage 0).
  nlohmann::json mine = nlohmann::json::array();
  for (const ParameterRef<T>& p : out.held) mine.push_back({{"name", p.name}, {"shape", p.shape}});
  struct Entry {
    NamedShape tensor;
    int owner;
    std::size_t position;  // in its owner's list: a block's tensors keep their order
  };
  std::map<std::string, Entry> entries;
  const std::vector<nlohmann::json> stages = gather_json(grid.pipe(), mine);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (std::size_t k = 0; k < stages[s].size(); ++k) {
      const std::string name = stages[s][k].at("name");
      entries.try_emplace(name, Entry{.tensor = {.name = name, .shape = stages[s][k].at("shape")},
                                      .owner = static_cast<int>(s), .position = k});
    }
  }
  std::vector<Entry> sorted;
  for (auto& [name, e] : entries) sorted.push_back(std::move(e));
  std::sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) {
    return std::tuple(section_of(a.tensor.name), a.position) < std::tuple(section_of(b.tensor.name), b.position);
  });
  std::vector<int> owners;
  for (const Entry& e : sorted) {
    out.order.push_back(e.tensor);
    owners.push_back(e.owner);
  }
  out.fetch = [held = out.held, order = out.order, owners, grid, &holders](std::size_t k) {
    if (grid.dp_index() != 0) return GlobalMatrix();
    const int owner = owners[k], tag = static_cast<int>(k);
    GlobalMatrix m;
    if (grid.stage() == owner) {
      const auto p = std::find_if(held.begin(), held.end(), [&](const ParameterRef<T>& r) {
        return r.name == order[k].name;
      });
      m = gather_parameter(holders, *p, false, grid.device());
      if (owner != 0 && holders.rank() == 0) {
        const double dims[2] = {static_cast<double>(m.rows()), static_cast<double>(m.cols())};
        grid.pipe().send(dims, 2, DType::f64, 0, tag);
        grid.pipe().send(m.data(), static_cast<std::size_t>(m.size()), DType::f64, 0, tag);
      }
    } else if (grid.stage() == 0 && holders.rank() == 0) {
      double dims[2] = {0, 0};
      grid.pipe().recv(dims, 2, DType::f64, owner, tag);
      m.resize(static_cast<Eigen::Index>(dims[0]), static_cast<Eigen::Index>(dims[1]));
      grid.pipe().recv(m.data(), static_cast<std::size_t>(m.size()), DType::f64, owner, tag);
    }
    return grid.stage() == 0 && holders.rank() == 0 ? m : GlobalMatrix();
  };
  return out;
}

template ModelTensors<float> tensors_of(Gpt<TwoD<float>>&);
template ModelTensors<double> tensors_of(Gpt<TwoD<double>>&);
template ModelTensors<float> tensors_of(Gpt<OneD<float>>&);
template ModelTensors<double> tensors_of(Gpt<OneD<double>>&);

// A tensor of the file as a [rows, cols] matrix (vectors 1 x n); F32, F64 and BF16 are read.
GlobalMatrix read_matrix(const safetensors::Reader& file, const safetensors::Entry& e) {
  const std::vector<std::int64_t>& shape = e.info.shape;
  OPTIMUS_CHECK(shape.size() == 1 || shape.size() == 2, "'", file.path(), "': tensor '", e.info.name, "' has ",
                shape.size(), " dimensions");
  const std::int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.back();
  std::vector<char> bytes(e.info.bytes());
  file.read(e.offset, bytes.size(), bytes.data());
  GlobalMatrix m(rows, cols);
  const std::string& dtype = e.info.dtype;
  for (std::int64_t k = 0; k < rows * cols; ++k) {
    double v = 0;
    if (dtype == "F32") {
      float f;
      std::memcpy(&f, bytes.data() + 4 * k, 4);
      v = f;
    } else if (dtype == "F64") {
      std::memcpy(&v, bytes.data() + 8 * k, 8);
    } else if (dtype == "BF16") {
      std::uint16_t b;
      std::memcpy(&b, bytes.data() + 2 * k, 2);
      bf16 h;
      h.bits = b;
      v = static_cast<float>(h);
    } else {
      OPTIMUS_FAIL("'", file.path(), "': tensor '", e.info.name, "' is ", dtype, "; F32, F64 or BF16 are read");
    }
    m(k / cols, k % cols) = v;
  }
  return m;
}

template <class T>
void load_from(const std::string& source, const ParameterRef<T>& p, const GlobalMatrix& full, DeviceMemory* device) {
  try {
    load_parameter(p, full, device);
  } catch (const Error& e) {
    OPTIMUS_FAIL("'", source, "': ", e.what());
  }
}
template void load_from(const std::string&, const ParameterRef<float>&, const GlobalMatrix&, DeviceMemory*);
template void load_from(const std::string&, const ParameterRef<double>&, const GlobalMatrix&, DeviceMemory*);

void check_gpt2_blocks(const GptConfig& config, const char* op) {
  const BlockConfig& b = config.block;
  OPTIMUS_CHECK(b == BlockConfig{}, op, ": the file holds GPT-2's blocks (LayerNorm, eps 1e-5); the model's are ",
                b.norm.kind == NormSpec::Kind::layernorm ? "LayerNorm" : "RMSNorm", " with eps ", b.norm.eps, ", MLP ",
                name_of(b.mlp), b.bias ? "" : ", no biases", b.rope ? ", rotary positions" : "",
                b.kv_heads > 0 ? ", grouped-query attention" : "", b.tied_head ? "" : ", an untied head",
                b.post_norm ? ", norms after the residual adds" : "",
                b.bidirectional ? ", bidirectional attention" : "",
                b.token_types > 0 ? ", token-type embeddings" : "", b.embedding_norm ? ", a norm over the embeddings" : "",
                b.head_transform ? ", a masked-LM head" : "");
}

}  // namespace optimus::checkpoint::detail

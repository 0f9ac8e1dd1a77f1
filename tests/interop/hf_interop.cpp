// The Hugging Face GPT-2 interop against an external reader and writer (tests/interop/hf_check.py, Python's
// safetensors and numpy):
//
//   hf_interop export FILE EXPECTED   a trained GPT on a 2x2 grid (4 in-process ranks) exported to FILE; EXPECTED
//                                     lists what Optimus gathers: "name d0 [d1] v0 v1 ..." per line (%.9g: f32 exact)
//   hf_interop import FILE EXPECTED   FILE (written by Python) imported on a 2x2 grid and gathered: exit 0 only if
//                                     every tensor equals EXPECTED (written by Python in the same format) exactly
#include <cstdio>
#include <fstream>
#include <map>
#include <optimus/optimus.hpp>
#include <sstream>
#include <string>

namespace {

using Tensors = std::map<std::string, optimus::GlobalMatrix>;

std::string hf(const std::string& name) { return name == "wte" || name == "wpe" ? name + ".weight" : name; }

void write_expected(const std::string& path, const Tensors& tensors, const optimus::GptConfig& config) {
  std::ofstream out(path);
  for (const auto& [name, shape] : optimus::reference::gpt_parameter_shapes(config)) {
    const optimus::GlobalMatrix& m = tensors.at(name);
    out << hf(name);
    for (std::int64_t d : shape) out << ' ' << d;
    char value[32];
    for (Eigen::Index k = 0; k < m.size(); ++k) {
      std::snprintf(value, sizeof value, " %.9g", static_cast<double>(static_cast<float>(m(k / m.cols(), k % m.cols()))));
      out << value;
    }
    out << '\n';
  }
}

// name -> values (row-major), from the EXPECTED format.
std::map<std::string, std::vector<float>> read_expected(const std::string& path, const optimus::GptConfig& config) {
  std::map<std::string, std::vector<float>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    std::int64_t numel = 1;
    const auto shapes = optimus::reference::gpt_parameter_shapes(config);
    for (const auto& [n, shape] : shapes) {
      if (hf(n) != name) continue;
      for (std::int64_t d : shape) {
        std::int64_t given = 0;
        fields >> given;
        OPTIMUS_CHECK(given == d, "expected file: ", name, " has another shape");
        numel *= d;
      }
    }
    std::vector<float> values(static_cast<std::size_t>(numel));
    for (float& v : values) {
      double d = 0;
      fields >> d;
      v = static_cast<float>(d);
    }
    OPTIMUS_CHECK(!fields.fail(), "expected file: ", name, " has too few values");
    out[name] = std::move(values);
  }
  return out;
}

int run(const std::string& mode, const std::string& file, const std::string& expected) {
  int status = 0;
  optimus::run_in_process(4, [&](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2);
    if (mode == "export") {
      // Shapes distinct from each other, a vocabulary that needs padding on the grid, one training step.
      const optimus::GptConfig config{.vocab = 50, .padded_vocab = 0, .max_seq = 8, .layers = 2, .hidden = 32,
                                      .heads = 4, .ffn = 48, .dropout = 0.0, .seed = 3, .block = {}};
      optimus::Gpt2D<float> model(grid, config);
      optimus::AdamW<float> optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{}});
      std::vector<int> tokens(2 * 8), targets(2 * 8);
      for (std::size_t k = 0; k < tokens.size(); ++k) {
        tokens[k] = static_cast<int>((7 * k + 1) % 50);
        targets[k] = static_cast<int>((3 * k + 2) % 50);
      }
      model.train_step(tokens, targets, 2, 1);
      optimizer.step();
      optimus::checkpoint::export_hf(file, model);
      const Tensors gathered = model.gather(false);
      if (world.rank() == 0) write_expected(expected, gathered, config);
      return;
    }
    const optimus::GptConfig config = optimus::checkpoint::hf_config(file);
    optimus::Gpt2D<float> model(grid, config);
    optimus::checkpoint::import_hf(file, model);
    const Tensors gathered = model.gather(false);
    if (world.rank() != 0) return;
    const auto want = read_expected(expected, config);
    OPTIMUS_CHECK(want.size() == gathered.size(), "expected ", want.size(), " tensors, the model has ", gathered.size());
    for (const auto& [name, m] : gathered) {
      const std::vector<float>& values = want.at(hf(name));
      for (Eigen::Index k = 0; k < m.size(); ++k) {
        if (static_cast<float>(m(k / m.cols(), k % m.cols())) != values[static_cast<std::size_t>(k)]) {
          std::printf("hf_interop: %s element %lld is %.9g, expected %.9g\n", hf(name).c_str(),
                      static_cast<long long>(k), m(k / m.cols(), k % m.cols()), values[static_cast<std::size_t>(k)]);
          status = 1;
          return;
        }
      }
    }
    std::printf("hf_interop: imported %zu tensors (vocab %lld, %lld layers, hidden %lld, heads %lld), all equal\n",
                gathered.size(), static_cast<long long>(config.vocab), static_cast<long long>(config.layers),
                static_cast<long long>(config.hidden), static_cast<long long>(config.heads));
  });
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    OPTIMUS_CHECK(argc == 4, "usage: hf_interop export|import FILE EXPECTED");
    return run(argv[1], argv[2], argv[3]);
  } catch (const std::exception& e) {
    return ctx.fail("hf_interop", e);
  }
}

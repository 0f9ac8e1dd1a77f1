// What the checkpoint tests share: a model every layout holds, its batches, the state to compare, scratch directories.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

namespace optimus::test {

// Shapes every layout here can hold: q = 1, 2, 3 divide heads, vocab, max_seq; q*q divides hidden and ffn; the 1D
// baseline's p = 4 divides heads and ffn.
inline optimus::GptConfig small_config() {
  return optimus::GptConfig{.vocab = 36, .max_seq = 6, .layers = 2, .hidden = 36, .heads = 12, .ffn = 72,
                            .dropout = 0.1, .seed = 77, .block = {}};
}
constexpr std::int64_t global_batch = 12;  // q = 1, 2, 3 divide it, and dp = 2 replicas of 6 sequences

// Step `step`'s batch for replica `replica` of `replicas`: a slice of one global batch drawn from a counter RNG.
inline void batch_of(std::uint64_t step, int replica, int replicas, std::vector<int>& tokens,
                     std::vector<int>& targets) {
  const optimus::GptConfig c = small_config();
  const optimus::CounterRng rng(5, step);
  const std::int64_t b = global_batch / replicas, s = c.max_seq;
  tokens.resize(static_cast<std::size_t>(b * s));
  targets.resize(tokens.size());
  for (std::int64_t k = 0; k < b * s; ++k) {
    const auto g = static_cast<std::uint64_t>(replica * b * s + k);
    tokens[static_cast<std::size_t>(k)] = static_cast<int>(rng.uniform(g, 0) * static_cast<double>(c.vocab));
    targets[static_cast<std::size_t>(k)] = static_cast<int>(rng.uniform(g, 1) * static_cast<double>(c.vocab));
  }
}

// A model's parameters and its optimizer's moments ("m/NAME", "v/NAME"), gathered over `holders` (collective).
template <class Model>
std::map<std::string, GlobalMatrix> gather_state(Model& model, optimus::AdamW<float>& optimizer,
                                                 optimus::Communicator& holders, optimus::DeviceMemory* device) {
  std::map<std::string, GlobalMatrix> all = model.gather(false);
  const auto& params = optimizer.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    for (int moment = 0; moment < 2; ++moment) {
      optimus::ParameterRef<float> ref = params[k];
      ref.value = moment == 0 ? optimizer.first_moment(k) : optimizer.second_moment(k);
      all[(moment == 0 ? "m/" : "v/") + ref.name] = optimus::gather_parameter(holders, ref, false, device);
    }
  }
  return all;
}

// An empty directory of this process under the temporary directory.
inline std::filesystem::path fresh_directory(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("optimus_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The writers' temporary files and directories in `dir` (core/output_file.hpp: names ending in ".partial").
inline std::vector<std::filesystem::path> partial_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(".partial")) found.push_back(e.path());
  }
  return found;
}

}  // namespace optimus::test

// The initialization rule of GPT-2 parameters, by name.
#include <cmath>

#include "optimus/core/gpt_config.hpp"

namespace optimus {

std::uint64_t parameter_stream(std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char ch : name) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

namespace {
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

Distribution initial_distribution(const GptConfig& config, std::string_view name) {
  const bool is_ln = name.find("ln_") != std::string_view::npos;
  if (ends_with(name, ".bias")) return Distribution::normal(0.0, 0.0);
  if (is_ln) return Distribution::normal(1.0, 0.0);  // LayerNorm weight
  if (name == "wpe") return Distribution::normal(0.0, 0.01);
  if (ends_with(name, "c_proj.weight")) {
    return Distribution::normal(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(config.layers)));
  }
  return Distribution::normal(0.0, 0.02);
}

}  // namespace optimus

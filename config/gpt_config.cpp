// The initialization rule of GPT-2 parameters, by name.
#include <cmath>

#include "optimus/config/gpt_config.hpp"

#include "optimus/core/error.hpp"

namespace optimus {

std::uint64_t parameter_stream(std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char ch : name) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

ConfigNames ConfigNames::fields() {
  return {.subject = "GptConfig: ", .vocab = "vocab", .max_seq = "max_seq", .hidden = "hidden", .heads = "heads",
          .ffn = "ffn", .layers = "layers", .padded_vocab = "padded_vocab", .dropout = "dropout",
          .norm_eps = "block.norm.eps", .kv_heads = "block.kv_heads", .rope_theta = "block.rope.theta", .q = "q",
          .p = "p"};
}

ConfigNames ConfigNames::options() {
  return {.subject = "", .vocab = "--vocab", .max_seq = "--seq", .hidden = "--hidden", .heads = "--heads",
          .ffn = "--ffn", .layers = "--layers", .padded_vocab = "the padded vocabulary", .dropout = "--dropout",
          .norm_eps = "the norm's epsilon", .kv_heads = "--kv-heads", .rope_theta = "--rope-theta", .q = "--q",
          .p = "--p"};
}

namespace {

// "--hidden 30" for an option, "hidden = 30" for a field.
template <class V>
std::string named(const std::string& name, const V& value) {
  return detail::concat(name, name.starts_with("--") ? " " : " = ", value);
}

// "q^2 = 4 (--q 2)".
std::string squared(const std::string& name, std::int64_t q) {
  return detail::concat(name.starts_with("--") ? name.substr(2) : name, "^2 = ", q * q, " (", named(name, q), ")");
}

}  // namespace

void validate_for_group(const GptConfig& c, int p) { validate_for_group(c, p, ConfigNames::fields()); }

void validate_for_group(const GptConfig& c, int p, const ConfigNames& n) {
  validate(c, n);
  const std::string& at = n.subject;
  OPTIMUS_CHECK(p >= 1, at, "the group size ", named(n.p, p), " must be positive");
  OPTIMUS_CHECK(c.heads % p == 0, at, named(n.heads, c.heads), " is not divisible by ", named(n.p, p));
  OPTIMUS_CHECK(c.ffn % p == 0, at, named(n.ffn, c.ffn), " is not divisible by ", named(n.p, p));
  OPTIMUS_CHECK(c.kv_heads() % p == 0, at, named(n.kv_heads, c.kv_heads()), " is not divisible by ", named(n.p, p),
                " (each rank holds whole key/value heads)");
}

void validate_for_grid(const GptConfig& c, int grid_side) { validate_for_grid(c, grid_side, ConfigNames::fields()); }

void validate_for_grid(const GptConfig& c, int grid_side, const ConfigNames& n) {
  validate(c, n);
  const std::int64_t q = grid_side, qq = q * q;
  const std::string& at = n.subject;
  OPTIMUS_CHECK(q >= 1, at, "the grid side ", named(n.q, q), " must be positive");
  OPTIMUS_CHECK(c.heads % q == 0, at, named(n.heads, c.heads), " is not divisible by ", named(n.q, q));
  OPTIMUS_CHECK(c.padded_vocab == 0 || (c.padded_vocab >= c.vocab && c.padded_vocab % q == 0), at,
                named(n.padded_vocab, c.padded_vocab), " must be 0 (the default padding) or a multiple of ",
                named(n.q, q), " no smaller than ", named(n.vocab, c.vocab));
  OPTIMUS_CHECK(!c.block.head_transform || c.padded_vocab % qq == 0, at, named(n.padded_vocab, c.padded_vocab),
                " must be a multiple of ", squared(n.q, q), " with the masked-LM head's bias (split as a vector)");
  OPTIMUS_CHECK(c.max_seq % q == 0, at, named(n.max_seq, c.max_seq), " is not divisible by ", named(n.q, q));
  OPTIMUS_CHECK(c.hidden % qq == 0, at, named(n.hidden, c.hidden), " is not divisible by ", squared(n.q, q),
                ": biases and LayerNorm parameters are split q^2 ways");
  OPTIMUS_CHECK(c.ffn % qq == 0, at, named(n.ffn, c.ffn), " is not divisible by ", squared(n.q, q));
  OPTIMUS_CHECK(c.kv_heads() % q == 0, at, named(n.kv_heads, c.kv_heads()), " is not divisible by ", named(n.q, q),
                " (each grid column holds whole key/value heads)");
  OPTIMUS_CHECK(!c.block.bias || c.qkv_width() % qq == 0, at, "c_attn's width ", c.qkv_width(), " (",
                named(n.hidden, c.hidden), " + 2 x ", named(n.kv_heads, c.kv_heads()), " x head size ", c.head_size(),
                ") is not divisible by ", squared(n.q, q), ": its bias is split q^2 ways");
}

void validate(const GptConfig& c) { validate(c, ConfigNames::fields()); }

void validate(const GptConfig& c, const ConfigNames& n) {
  const std::string& at = n.subject;
  const auto positive = [&](const std::string& name, std::int64_t v) {
    OPTIMUS_CHECK(v > 0, at, named(name, v), " must be positive");
  };
  positive(n.vocab, c.vocab);
  positive(n.max_seq, c.max_seq);
  positive(n.hidden, c.hidden);
  positive(n.heads, c.heads);
  positive(n.ffn, c.ffn);
  OPTIMUS_CHECK(c.layers >= 0, at, named(n.layers, c.layers), " must not be negative");
  OPTIMUS_CHECK(c.hidden % c.heads == 0, at, named(n.hidden, c.hidden), " is not divisible by ",
                named(n.heads, c.heads));
  OPTIMUS_CHECK(c.padded_vocab == 0 || c.padded_vocab >= c.vocab, at, named(n.padded_vocab, c.padded_vocab),
                " must be 0 (the default padding) or no smaller than ", named(n.vocab, c.vocab));
  OPTIMUS_CHECK(std::isfinite(c.dropout) && c.dropout >= 0.0 && c.dropout < 1.0, at, named(n.dropout, c.dropout),
                " must be in [0, 1)");
  OPTIMUS_CHECK(std::isfinite(c.block.norm.eps) && c.block.norm.eps > 0.0, at, named(n.norm_eps, c.block.norm.eps),
                " must be positive and finite");
  OPTIMUS_CHECK(c.block.kv_heads >= 0 && c.heads % c.kv_heads() == 0, at, named(n.kv_heads, c.block.kv_heads),
                " must divide ", named(n.heads, c.heads), n.kv_heads.starts_with("--") ? "" : " (or be 0: as many)");
  OPTIMUS_CHECK(c.block.token_types >= 0, at, "token_types = ", c.block.token_types, " must not be negative");
  OPTIMUS_CHECK(!c.block.head_transform || c.block.mlp != MlpKind::swiglu, at,
                "the masked-LM head's transform takes the blocks' GELU, but their MLP is SwiGLU");
  if (c.block.rope) {
    OPTIMUS_CHECK(std::isfinite(c.block.rope->theta) && c.block.rope->theta > 1.0, at,
                  named(n.rope_theta, c.block.rope->theta), " must be finite and above 1");
    OPTIMUS_CHECK(c.head_size() % 2 == 0, at, "rotary positions pair a head's columns, but the head size ",
                  c.head_size(), " (", named(n.hidden, c.hidden), " / ", named(n.heads, c.heads), ") is odd");
  }
}

void validate(const AdamWConfig& c) {
  const auto check = [](const char* field, double v, bool ok, const char* range) {
    OPTIMUS_CHECK(std::isfinite(v) && ok, "AdamWConfig: ", field, " = ", v, " must be ", range);
  };
  check("lr", c.lr, c.lr > 0, "positive and finite");
  check("beta1", c.beta1, c.beta1 >= 0 && c.beta1 < 1, "in [0, 1)");
  check("beta2", c.beta2, c.beta2 >= 0 && c.beta2 < 1, "in [0, 1)");
  check("eps", c.eps, c.eps > 0, "positive and finite");
  check("weight_decay", c.weight_decay, c.weight_decay >= 0, "non-negative and finite");
  check("max_grad_norm", c.max_grad_norm, true, "finite (<= 0 disables clipping)");
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

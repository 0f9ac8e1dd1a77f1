// The initialization rule of GPT-2 parameters, by name.
#include <cmath>

#include "optimus/core/gpt_config.hpp"

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

void validate_for_group(const GptConfig& c, int p) {
  validate(c);
  OPTIMUS_CHECK(p >= 1, "GptConfig: the group size p = ", p, " must be positive");
  OPTIMUS_CHECK(c.heads % p == 0, "GptConfig: heads = ", c.heads, " is not divisible by p = ", p);
  OPTIMUS_CHECK(c.ffn % p == 0, "GptConfig: ffn = ", c.ffn, " is not divisible by p = ", p);
  OPTIMUS_CHECK(c.kv_heads() % p == 0, "GptConfig: kv_heads = ", c.kv_heads(), " is not divisible by p = ", p,
                " (each rank holds whole key/value heads)");
}

void validate_for_grid(const GptConfig& c, int grid_side) {
  validate(c);
  const std::int64_t q = grid_side, qq = q * q;
  OPTIMUS_CHECK(q >= 1, "GptConfig: the grid side q = ", q, " must be positive");
  OPTIMUS_CHECK(c.heads % q == 0, "GptConfig: heads = ", c.heads, " is not divisible by q = ", q);
  OPTIMUS_CHECK(c.padded_vocab == 0 || (c.padded_vocab >= c.vocab && c.padded_vocab % q == 0),
                "GptConfig: padded_vocab = ", c.padded_vocab, " must be 0 (the default padding) or a multiple of q = ",
                q, " no smaller than vocab = ", c.vocab);
  OPTIMUS_CHECK(c.max_seq % q == 0, "GptConfig: max_seq = ", c.max_seq, " is not divisible by q = ", q);
  OPTIMUS_CHECK(c.hidden % qq == 0, "GptConfig: hidden = ", c.hidden, " is not divisible by q*q = ", qq,
                " (biases and LayerNorm parameters are split q*q ways)");
  OPTIMUS_CHECK(c.ffn % qq == 0, "GptConfig: ffn = ", c.ffn, " is not divisible by q*q = ", qq);
  OPTIMUS_CHECK(c.kv_heads() % q == 0, "GptConfig: kv_heads = ", c.kv_heads(), " is not divisible by q = ", q,
                " (each grid column holds whole key/value heads)");
  OPTIMUS_CHECK(!c.block.bias || c.qkv_width() % qq == 0, "GptConfig: c_attn's width ", c.qkv_width(),
                " (hidden + 2 kv_heads * head size) is not divisible by q*q = ", qq, " (its bias is split q*q ways)");
}

void validate(const GptConfig& c) {
  const auto positive = [](const char* field, std::int64_t v) {
    OPTIMUS_CHECK(v > 0, "GptConfig: ", field, " = ", v, " must be positive");
  };
  positive("vocab", c.vocab);
  positive("max_seq", c.max_seq);
  positive("hidden", c.hidden);
  positive("heads", c.heads);
  positive("ffn", c.ffn);
  OPTIMUS_CHECK(c.layers >= 0, "GptConfig: layers = ", c.layers, " must not be negative");
  OPTIMUS_CHECK(c.hidden % c.heads == 0, "GptConfig: hidden = ", c.hidden, " is not divisible by heads = ", c.heads);
  OPTIMUS_CHECK(c.padded_vocab == 0 || c.padded_vocab >= c.vocab, "GptConfig: padded_vocab = ", c.padded_vocab,
                " must be 0 (the default padding) or no smaller than vocab = ", c.vocab);
  OPTIMUS_CHECK(std::isfinite(c.dropout) && c.dropout >= 0.0 && c.dropout < 1.0, "GptConfig: dropout = ", c.dropout,
                " must be in [0, 1)");
  OPTIMUS_CHECK(std::isfinite(c.block.norm.eps) && c.block.norm.eps > 0.0, "GptConfig: block.norm.eps = ",
                c.block.norm.eps, " must be positive and finite");
  OPTIMUS_CHECK(c.block.kv_heads >= 0 && c.heads % c.kv_heads() == 0, "GptConfig: block.kv_heads = ", c.block.kv_heads,
                " must be 0 (heads) or divide heads = ", c.heads);
  if (c.block.rope) {
    OPTIMUS_CHECK(std::isfinite(c.block.rope->theta) && c.block.rope->theta > 1.0, "GptConfig: block.rope.theta = ",
                  c.block.rope->theta, " must be finite and above 1");
    OPTIMUS_CHECK(c.head_size() % 2 == 0, "GptConfig: rotary positions pair a head's columns, but the head size ",
                  c.head_size(), " (hidden ", c.hidden, " / heads ", c.heads, ") is odd");
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

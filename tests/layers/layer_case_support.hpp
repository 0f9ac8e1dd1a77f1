// What the layer cases (layer_cases.cpp, block_part_cases.cpp) share: inputs per context, the reference's weights and
// gradients by GPT-2 name, the comparison with the reference, the blocks tried, and the cases of a block's parts.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "in_flight.hpp"
#include "layer_cases.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/layers/attention.hpp"
#include "optimus/core/encoder_inputs.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/mlp.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"

namespace optimus::test {

using reference::Matrix;

inline Matrix random(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double scale = 1.0) {
  return scale * reference::random_matrix(rows, cols, seed);
}

template <class T>
void expect_close(const Grid& grid, const char* what, const Matrix& got, const Matrix& expected) {
  const auto cmp = reference::compare_relative(got, expected, tolerance<T>(grid.gemm_math()));
  const std::string name = what;
  CAPTURE(name);
  CAPTURE(cmp);
  CAPTURE(sizeof(T));
  CHECK(cmp.ok());
}

template <class T>
Matrix global(const DistMatrix<T>& m) {
  return m.to_global().template cast<double>();
}

// The backward of a layer whose input and input gradient are DistMatrix<T>: dy(c) distributed over `grid`, the input
// gradient gathered (for LayerRun::backward).
template <class T, class Layer, class Dy>
auto distributed_backward(const Grid& grid, Layer& layer, Dy dy) {
  return [&grid, &layer, dy](int c, typename Layer::Context saved) {
    return global(layer.backward(std::move(saved), DistMatrix<T>::from_global(grid, dy(c))));
  };
}

// A linear's bias, or an empty matrix for a linear without one.
inline Matrix bias_of(const reference::Parameters& p, const std::string& name) {
  return p.count(name) ? p.at(name) : Matrix();
}
inline reference::AttentionWeights attention_weights(const reference::Parameters& p, const std::string& prefix) {
  return {p.at(prefix + ".c_attn.weight"), bias_of(p, prefix + ".c_attn.bias"), p.at(prefix + ".c_proj.weight"),
          bias_of(p, prefix + ".c_proj.bias")};
}
inline reference::MlpWeights mlp_weights(const reference::Parameters& p, const std::string& prefix) {
  return {p.at(prefix + ".c_fc.weight"), bias_of(p, prefix + ".c_fc.bias"), p.at(prefix + ".c_proj.weight"),
          bias_of(p, prefix + ".c_proj.bias")};
}
// The gradients, biases only where the layer has them (the reference's are empty then).
inline void put_attention(reference::Parameters& g, const std::string& prefix, const reference::AttentionWeights& w) {
  g[prefix + ".c_attn.weight"] = w.c_attn_w;
  if (w.c_attn_b.size() > 0) g[prefix + ".c_attn.bias"] = w.c_attn_b;
  g[prefix + ".c_proj.weight"] = w.c_proj_w;
  if (w.c_proj_b.size() > 0) g[prefix + ".c_proj.bias"] = w.c_proj_b;
}
inline void put_mlp(reference::Parameters& g, const std::string& prefix, const reference::MlpWeights& w) {
  g[prefix + ".c_fc.weight"] = w.c_fc_w;
  if (w.c_fc_b.size() > 0) g[prefix + ".c_fc.bias"] = w.c_fc_b;
  g[prefix + ".c_proj.weight"] = w.c_proj_w;
  if (w.c_proj_b.size() > 0) g[prefix + ".c_proj.bias"] = w.c_proj_b;
}


// The parameter names of `refs` and a gatherer of their accumulated gradients (collective over the grid).
template <class T>
std::function<Matrix(const std::string&)> gradients_of(const Grid& grid, const std::vector<ParameterRef<T>>& refs) {
  return [&grid, &refs](const std::string& name) {
    for (const ParameterRef<T>& r : refs) {
      if (r.name == name) return gather_parameter(grid.grid(), r, true, grid.device());
    }
    FAIL("no parameter " << name);
    return Matrix();
  };
}
template <class T>
std::vector<std::string> names_of(const std::vector<ParameterRef<T>>& refs) {
  std::vector<std::string> names;
  for (const ParameterRef<T>& r : refs) names.push_back(r.name);
  return names;
}
// Context c's input: distinct per context (and rounded to T), from `seed`.
template <class T>
Matrix input(std::int64_t rows, std::int64_t cols, std::uint64_t seed, int c, double scale = 1.0) {
  return rounded<T>(random(rows, cols, seed + 1000 * static_cast<std::uint64_t>(c), scale));
}
// Context c's training pass: its own step (so that its dropout masks differ from the others').
inline Pass pass_for(std::uint64_t step, int c) {
  return Pass::train(step + static_cast<std::uint64_t>(c), 0);
}

// Every scenario of in_flight_cases for f64 (all) or f32.
template <class T, class Case>
void in_flight_scenarios(const Case& one) {
  for (const InFlight& f : in_flight_cases(sizeof(T) == 8)) one(f);
}

inline const NormSpec kLayerNorm{};
inline const NormSpec kRmsNorm{.kind = NormSpec::Kind::rmsnorm, .eps = 1e-6};

// Llama's blocks (rotary positions of theta 500, SwiGLU, no biases, an untied head) for the shapes of a q x q grid
// (with rotary positions 6 heads of 6 at q <= 3, 12 of 4 at q = 4): grouped-query attention of 3 key/value heads, or q
// of them where q does not divide 3.
inline BlockConfig llama_blocks(int q) { return BlockConfig::llama(500, 3 % q == 0 ? 3 : q); }

// BERT's arrangement: the norms after the residual adds, GPT-2's parts otherwise.
inline BlockConfig post_norm_blocks() {
  BlockConfig b;
  b.post_norm = true;
  return b;
}

// BERT's blocks: the norms after the residual adds, the exact GELU, bidirectional attention.
inline BlockConfig bert_blocks() {
  BlockConfig b = post_norm_blocks();
  b.mlp = MlpKind::gelu_erf;
  b.bidirectional = true;
  return b;
}

// BERT's model (BlockConfig::bert): its blocks, LayerNorm's eps 1e-12, two token types (segments A and B), a norm over
// the embeddings and the masked-LM head.
inline BlockConfig bert_model_blocks() {
  const BlockConfig b = BlockConfig::bert();
  BlockConfig parts = bert_blocks();
  parts.token_types = 2;
  parts.embedding_norm = true;
  parts.head_transform = true;
  REQUIRE(b.norm.eps == 1e-12);
  parts.norm.eps = b.norm.eps;
  REQUIRE(b == parts);  // BERT's blocks are these parts
  REQUIRE(std::string(family_name(b)) == "bert");
  return b;
}

// GPT-2's blocks with RMSNorm, their linears with biases or without.
inline BlockConfig rms_blocks(bool bias) {
  BlockConfig block;
  block.norm = kRmsNorm;
  block.bias = bias;
  return block;
}

// Which attention: rotary positions on the queries and keys or none (in heads of an even dimension: half as many heads
// where the shapes' are odd), linears with biases or none, and key/value heads as a function of the query heads
// (grouped-query attention; multi-head where it returns heads).
struct AttentionVariant {
  std::optional<RopeSpec> rope;
  bool bias = true;
  std::function<std::int64_t(std::int64_t heads)> kv_heads = [](std::int64_t heads) { return heads; };
  bool causal = true;   // false: an encoder's bidirectional attention
  bool padded = false;  // the sequences padded as padded_lengths says (a key-padding mask)
};

// An encoder's attention: every query sees every key of its sequence; GPT-2's parts otherwise.
inline AttentionVariant bidirectional_attention() {
  AttentionVariant v;
  v.causal = false;
  return v;
}

// The same on padded sequences (padded_lengths).
inline AttentionVariant padded_attention(bool causal) {
  AttentionVariant v;
  v.causal = causal;
  v.padded = true;
  return v;
}

// The tokens before the padding of `batch` sequences of `seq`: seq, seq - 1, .., 1, seq, .. (each grid row's
// sequences differ, and one is a single token).
inline std::vector<int> padded_lengths(std::int64_t batch, std::int64_t seq) {
  std::vector<int> lengths;
  for (std::int64_t b = 0; b < batch; ++b) lengths.push_back(static_cast<int>(seq - b % seq));
  return lengths;
}

// The encoder's inputs of a batch of `s`'s shapes for a model of `block`'s: its sequences padded as padded_lengths says
// (padded) or none; each sequence's second half of token type 1 where the model has token types (BERT's segment B).
inline EncoderInputs encoder_inputs(const LayerShapes& s, bool padded, const BlockConfig& block) {
  EncoderInputs inputs;
  if (padded) inputs.lengths = padded_lengths(s.batch, s.seq);
  for (std::int64_t i = 0; i < s.batch * s.seq && block.token_types > 0; ++i) {
    inputs.token_types.push_back(i % s.seq >= s.seq / 2 ? 1 : 0);
  }
  return inputs;
}

// pass_for(step, c) of sequences padded as padded_lengths says, or not padded.
inline Pass pass_for(std::uint64_t step, int c, const LayerShapes& s, bool padded) {
  Pass pass = pass_for(step, c);
  if (padded) pass.lengths = padded_lengths(s.batch, s.seq);
  return pass;
}

// The cases of a block's parts against the reference (block_part_cases.cpp; float and double): LayerNorm2D as `spec`
// says, Attention2D as `v` says, MLP2D of `kind` with biases or without.
template <class T>
void norm_case(const Grid& grid, const LayerShapes& s, const NormSpec& spec, const InFlight& f);
template <class T>
void attention_case(const Grid& grid, const LayerShapes& s, double dropout, const AttentionVariant& v,
                    const InFlight& f);
template <class T>
void mlp_case(const Grid& grid, const LayerShapes& s, MlpKind kind, bool bias, const InFlight& f);

}  // namespace optimus::test

// The reference GPT (fp64, one process) of any BlockConfig: embedding (with wpe for learned positions), blocks, final
// norm, LM head tied to wte or its own lm_head.weight, mean cross-entropy; forward, backward, and AdamW with
// global-norm clipping.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/core/encoder_inputs.hpp"
#include "optimus/reference/layers.hpp"

namespace optimus::reference {

// GPT-2 names -> full tensors; vectors are 1 x n.
using Parameters = std::map<std::string, Matrix>;

// Token plus position embedding with the embedding dropout mask: x[r] = (wte[tokens[r]] + wpe[r % s]) * mask[r]; wpe
// empty (rotary positions): x[r] = wte[tokens[r]] * mask[r].
Matrix embedding_forward(const Matrix& wte, const Matrix& wpe, const std::vector<int>& tokens, std::int64_t batch,
                         const Matrix& mask);
// dwte, dwpe from dx (the mask applied again).
struct EmbeddingGrads {
  Matrix dwte, dwpe;
};
EmbeddingGrads embedding_backward(std::int64_t vocab, std::int64_t max_seq, const std::vector<int>& tokens,
                                  std::int64_t batch, const Matrix& mask, const Matrix& dx);

// Mean cross-entropy of logits [N, vocab] against targets over the predicted positions (a target of
// math::kIgnoredTarget is not predicted: no loss, a zero gradient row; none predicted: 0), and its gradient with
// respect to the logits.
struct CrossEntropy {
  double loss = 0;
  Matrix dlogits;
};
CrossEntropy cross_entropy(const Matrix& logits, const std::vector<int>& targets);

// Block `layer`'s weights, taken from the GPT-2 tensors h.<layer>.* of a model of `block`'s blocks (RMSNorm: no norm
// biases; no linear biases where the block has none: empty); and the reverse, for gradients (empty ones left out).
BlockWeights block_weights(const Parameters& params, std::int64_t layer, const BlockConfig& block);
void store_block_grads(Parameters& grads, std::int64_t layer, const BlockWeights& d);

// The GPT-2 parameter names of a config, in canonical order, with their global shapes ({n} for vectors).
std::vector<std::pair<std::string, std::vector<std::int64_t>>> gpt_parameter_shapes(const GptConfig& config);

// Every parameter drawn by the shared initialization rule (gpt_config.hpp).
Parameters gpt_init(const GptConfig& config);

// tokens, targets: b*s ids, row-major [b, s]. Returns the mean cross-entropy over the b*s positions.
struct GptResult {
  double loss = 0;
  Matrix logits;  // [b*s, vocab]
  Parameters grads;
};
GptResult gpt_forward_backward(const GptConfig& config, const Parameters& params, const std::vector<int>& tokens,
                               const std::vector<int>& targets, std::int64_t batch, std::uint64_t step);
// The same on an encoder's batch (core/encoder_inputs.hpp): each token's type (tte's row, added before the
// embeddings' norm; empty: type 0) and each sequence's tokens before its padding (KeyMask::lengths; empty: none).
GptResult gpt_forward_backward(const GptConfig& config, const Parameters& params, const std::vector<int>& tokens,
                               const std::vector<int>& targets, const EncoderInputs& inputs, std::int64_t batch,
                               std::uint64_t step);

// One AdamW step (t counts from 1) on every parameter; weight decay applies to matrices only.
// Returns the gradient norm before clipping.
double adamw_step(const AdamWConfig& config, int t, Parameters& params, Parameters grads, Parameters& m, Parameters& v);

}  // namespace optimus::reference

// The reference transformer layers: plain fp64 Eigen on full matrices, one process, forward and backward.
// Activations are [tokens, features] with tokens = b*s rows, sequence-major inside a batch entry
// (row = batch * s + position). Vectors (biases, LayerNorm parameters) are 1 x n row matrices.
// Every backward takes what its forward saved (a *Cache) and returns gradients for the inputs it names.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/reference/compare.hpp"

namespace optimus::reference {

// ---- Linear: y = x W + b;  x: [N, in], W: [in, out], b: [1, out], or empty: no bias (the layers below then return
// an empty bias gradient too) ----
Matrix linear_forward(const Matrix& x, const Matrix& w, const Matrix& b);
struct LinearGrads {
  Matrix dx, dw, db;
};
LinearGrads linear_backward(const Matrix& x, const Matrix& w, const Matrix& dy);

// ---- LayerNorm over the features of each row, eps 1e-5;  gamma, beta: [1, h] ----
struct LayerNormCache {
  Matrix xhat;  // [N, h] normalized input
  Matrix rstd;  // [N, 1] 1 / sqrt(var + eps)
};
Matrix layernorm_forward(const Matrix& x, const Matrix& gamma, const Matrix& beta, double eps, LayerNormCache& cache);
struct LayerNormGrads {
  Matrix dx, dgamma, dbeta;
};
LayerNormGrads layernorm_backward(const LayerNormCache& cache, const Matrix& gamma, const Matrix& dy);

// ---- RMSNorm over the features of each row: y = x / sqrt(mean(x^2) + eps) gamma;  gamma: [1, h] ----
struct RmsNormCache {
  Matrix x;     // [N, h] input
  Matrix rstd;  // [N, 1] 1 / sqrt(mean(x^2) + eps)
};
Matrix rmsnorm_forward(const Matrix& x, const Matrix& gamma, double eps, RmsNormCache& cache);
struct RmsNormGrads {
  Matrix dx, dgamma;
};
RmsNormGrads rmsnorm_backward(const RmsNormCache& cache, const Matrix& gamma, const Matrix& dy);

// ---- A block's norm as `spec` says: LayerNorm (gamma, beta) or RMSNorm (gamma; beta and dbeta empty) ----
struct NormCache {
  NormSpec spec;
  LayerNormCache layernorm;
  RmsNormCache rmsnorm;
};
Matrix norm_forward(const NormSpec& spec, const Matrix& x, const Matrix& gamma, const Matrix& beta, NormCache& cache);
LayerNormGrads norm_backward(const NormCache& cache, const Matrix& gamma, const Matrix& dy);

// ---- GELU, tanh form ----
Matrix gelu_forward(const Matrix& x);
Matrix gelu_backward(const Matrix& x, const Matrix& dy);
// ---- GELU, exact: x Phi(x), Phi the standard normal distribution; its derivative Phi(x) + x phi(x) ----
Matrix gelu_erf_forward(const Matrix& x);
Matrix gelu_erf_backward(const Matrix& x, const Matrix& dy);

// ---- Dropout: the keep-and-scale mask of gpt_config.hpp for a rows x cols activation ----
Matrix dropout_mask(std::int64_t rows, std::int64_t cols, double p, std::uint64_t seed, std::uint64_t stream);

// ---- Causal self-attention: c_attn h -> h + 2 kv d with columns [Q | K | V] (kv_heads key/value heads of d = h/heads
// columns; kv_heads = heads: GPT-2's multi-head attention; fewer: grouped-query attention, query head t attending
// with key/value head t / (heads / kv_heads)), softmax, c_proj ----
struct AttentionWeights {
  Matrix c_attn_w, c_attn_b;  // [h, h + 2 kv d], [1, h + 2 kv d]
  Matrix c_proj_w, c_proj_b;  // [h, h], [1, h]
};
struct AttentionCache {
  Matrix x;       // [N, h] input
  Matrix qkv;     // [N, h + 2 kv d]
  Matrix probs;   // [b*heads*s, s]: row (batch*heads + head)*s + query, softmax over keys (before dropout)
  Matrix merged;  // [N, h] attention output before c_proj
};
struct Dropout {
  double p = 0.0;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::int64_t layer = 0;
};
// Which keys query i of sequence b sees: j <= i (causal) or every j of its sequence (an encoder's), and of those only
// j < lengths[b] where `lengths` (one per sequence) gives the sequence's tokens before its padding.
struct KeyMask {
  bool causal = true;
  std::vector<int> lengths;  // [batch], or empty: none padded
};
// With `rope`, each head's queries and keys are turned by rotary positions (rotary below) after c_attn; qkv in the cache
// holds them turned.
Matrix attention_forward(const Matrix& x, const AttentionWeights& w, std::int64_t batch, std::int64_t heads,
                         std::int64_t kv_heads, const std::optional<RopeSpec>& rope, const KeyMask& keys,
                         const Dropout& dropout, AttentionCache& cache);
struct AttentionGrads {
  Matrix dx;
  AttentionWeights dw;
};
AttentionGrads attention_backward(const AttentionCache& cache, const AttentionWeights& w, std::int64_t batch,
                                  std::int64_t heads, std::int64_t kv_heads, const std::optional<RopeSpec>& rope,
                                  const Dropout& dropout, const Matrix& dy);

// ---- Rotary positions: x [N, heads*d] with N = batch*s rows (position r % s), each head's d = 2m columns as m pairs
// (i, i + m) — rotate-half, Hugging Face's Llama — each pair multiplied by the rotation R(pos * theta^(-i/m)),
// [[cos, -sin], [sin, cos]]; `transpose` multiplies by its transpose (the gradient's map) ----
Matrix rotary(const Matrix& x, std::int64_t s, std::int64_t heads, double theta, bool transpose);

// ---- MLP: GELU, tanh or exact (c_fc h -> ffn, gelu, c_proj ffn -> h) or SwiGLU (c_fc h -> 2 ffn with columns [gate | up],
// silu(gate) * up with silu(v) = v / (1 + e^-v), c_proj ffn -> h) ----
struct MlpWeights {
  Matrix c_fc_w, c_fc_b, c_proj_w, c_proj_b;
};
struct MlpCache {
  Matrix x, pre, act;  // input, c_fc output, the activation's output
};
Matrix mlp_forward(const Matrix& x, const MlpWeights& w, MlpKind kind, MlpCache& cache);
struct MlpGrads {
  Matrix dx;
  MlpWeights dw;
};
MlpGrads mlp_backward(const MlpCache& cache, const MlpWeights& w, MlpKind kind, const Matrix& dy);

// ---- Transformer block, as `block` says (its norms, rotary positions or none, MLP, kv_heads, where the norms sit):
//      pre-norm  x1 = x + drop(attn(ln_1(x))),  y = x1 + drop(mlp(ln_2(x1)));
//      post-norm x1 = ln_1(x + drop(attn(x))),  y = ln_2(x1 + drop(mlp(x1))) ----
struct BlockWeights {
  BlockConfig block;  // the block's parts (ln_1's and ln_2's biases empty for RMSNorm, the linears' without biases)
  Matrix ln_1_w, ln_1_b;
  AttentionWeights attn;
  Matrix ln_2_w, ln_2_b;
  MlpWeights mlp;
};
struct BlockCache {
  NormCache ln_1, ln_2;
  AttentionCache attn;
  MlpCache mlp;
};
Matrix block_forward(const Matrix& x, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                     const Dropout& dropout, BlockCache& cache);
// The same with the sequences padded: `lengths` [batch] their tokens before the padding (KeyMask::lengths).
Matrix block_forward(const Matrix& x, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                     const std::vector<int>& lengths, const Dropout& dropout, BlockCache& cache);
struct BlockGrads {
  Matrix dx;
  BlockWeights dw;
};
BlockGrads block_backward(const BlockCache& cache, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                          const Dropout& dropout, const Matrix& dy);

}  // namespace optimus::reference

// Predicted bytes received per rank for one training step (forward + backward) of transformer blocks, from
// the communication formulas alone (docs/design.md, "Communicators"), to be compared with the counters.
//   1D (Megatron, p ranks): 4 all-reduces of [N, h] per block, each floor(2 (p-1)/p * N h * size) bytes.
//   2D (q x q grid)       : per Linear2D (in -> out), 3 SUMMA products each moving (q-1)/q^2 of N*in + in*out
//                           elements, plus the bias all-gather and reduce-scatter, (q-1) out/q^2 each; per
//                           LayerNorm2D, row all-reduces of N/q (twice forward) and 2N/q (backward) values and
//                           gathers / reduce-scatters of gamma and beta.
// N = b*s tokens; attention, GELU and dropout move nothing.
#pragma once

#include <cstdint>

#include "optimus/config/gpt_config.hpp"

namespace optimus::plan {

struct BlockShape {
  std::int64_t batch, seq, hidden, heads, ffn;
  std::int64_t qkv_width, fc_width;  // c_attn's and c_fc's output widths (GptConfig::qkv_width, fc_width)
  bool centered;                     // LayerNorm (true) or RMSNorm (false: one forward all-reduce, no beta)
  bool bias;                         // the linears' biases (gathered forward, their gradients reduce-scattered)
  std::int64_t tokens() const { return batch * seq; }
  // A block of `config` on `batch` sequences of `seq` tokens.
  static BlockShape of(const GptConfig& config, std::int64_t batch, std::int64_t seq) {
    return {.batch = batch, .seq = seq, .hidden = config.hidden, .heads = config.heads, .ffn = config.ffn,
            .qkv_width = config.qkv_width(), .fc_width = config.fc_width(), .centered = config.block.norm.centered(),
            .bias = config.block.bias};
  }
};

// `operand` (0: elem): the bytes of a SUMMA panel's elements — 2 under mixed precision (bf16 GEMM operands), where
// the broadcast operands move in bf16 while the reduced partial products, the 1D all-reduces and the layers' other
// collectives stay `elem`: per Linear2D, AB moves X and W as operands; ABT moves W and reduces dX; ATB moves X and
// reduces dW.
// One Linear2D (in -> out) on n tokens, forward and backward, received per rank; with a bias or without (`bias`).
std::uint64_t linear_2d_bytes(std::int64_t n, std::int64_t in, std::int64_t out, std::uint64_t q, std::size_t elem,
                              std::size_t operand, bool bias);
std::uint64_t predicted_bytes_1d(const BlockShape& s, int p, std::size_t elem, std::int64_t layers);
std::uint64_t predicted_bytes_2d(const BlockShape& s, int q, std::size_t elem, std::int64_t layers,
                                 std::size_t operand = 0);

// Activation bytes saved for backward per rank per block, from what the layers save (Korthikanti et al. 2022,
// adapted: `elem`-byte activations, no stored dropout masks, LayerNorm saves its normalized input, both GELU's
// input and output are kept, and the fused attention keeps one log-sum-exp per query and head instead of the
// b a s^2 probabilities):
//   1D: N h (4 + 12/p) elements with ffn = 4h, in general N h (4 + (4 + 2 ffn/h)/p) (+ 2N for the LayerNorm
//       statistics and b a s / p log-sum-exps); 2D: (8 N h + 2 N ffn) / p (+ 2N/q and b a s / p).
// `kept` (0: elem): the bytes of a saved element — 2 under mixed precision, where everything saved is bf16 but
// LayerNorm's statistics and the log-sum-exps, which stay `elem`.
double predicted_activation_bytes_1d(const BlockShape& s, int p, std::size_t elem, std::size_t kept = 0);
double predicted_activation_bytes_2d(const BlockShape& s, int q, std::size_t elem, std::size_t kept = 0);

}  // namespace optimus::plan

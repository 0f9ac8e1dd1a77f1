// Activation recomputation (activation checkpointing), per transformer block, as Korthikanti et al. (2022,
// "Reducing Activation Recomputation in Large Transformer Models") define it:
//   none      : a training forward saves everything its backward reads;
//   selective : Korthikanti's: the linears' inputs kept, the attention core (QK^T, softmax, dropout, times V)
//               recomputed in backward, so that its [b*a*s, s] probabilities are not saved. That is what the fused
//               attention (layers/attention_core.hpp) always does — its backward rebuilds the probabilities from one
//               log-sum-exp per query — so selective keeps its promise and saves and computes exactly what none does
//               (the planner no longer offers both);
//   full      : only the block's input is saved; backward runs the block's forward again (same step, same dropout
//               masks from the counter RNG), then its backward.
// Results are bitwise those of `none`: the recomputed values are computed from the same inputs by the same code.
//
// block_saved_bytes states exactly what a block's context holds per rank (tests assert it against the memory
// tracker). For a block of N = b*s tokens of h features, a heads, ffn = MLP width, c_attn's output width w_qkv (3h;
// h + 2 kv d under grouped-query attention) and c_fc's w_fc (ffn; 2 ffn for SwiGLU), on a q x q grid, with e bytes
// per saved element (2 when the grid's GEMM math is bf16 and T = float: SavedActivation keeps bf16; sizeof(T)
// otherwise) and t = sizeof(T):
//   none, selective : e*N*(5h + w_qkv + w_fc + ffn)/q^2 + t*(b*a*s/q^2 + 2N/q)   (GPT-2: e*N*(8h + 2ffn)/q^2 + ...)
//               per token: ln_1's xhat, c_attn's input, qkv (w_qkv), attn.c_proj's input, ln_2's xhat and c_fc's
//               input (5h + w_qkv in all), the activation's input (c_fc's output, w_fc) and mlp.c_proj's input
//               (ffn); per query and head the attention's log-sum-exp (in T); the norms' 1/std (2 per token, held by
//               each of a grid row's q ranks)
//   full      : t*N*h/q^2 (the input, kept in T so that the recomputation is exact)
#pragma once

#include <cstdint>
#include <string>

#include "optimus/config/gpt_config.hpp"

namespace optimus {

enum class Recompute { none, selective, full };

// "none", "selective", "full"; parse_recompute throws optimus::Error naming any other text.
const char* name_of(Recompute policy);
Recompute parse_recompute(const std::string& text);

// The shape of one block's forward on one rank of a q x q grid.
struct BlockActivations {
  std::int64_t batch = 0;  // sequences in the pass (b; the replica's micro-batch)
  std::int64_t seq = 0;    // s
  std::int64_t hidden = 0, heads = 0, ffn = 0;
  std::int64_t qkv_width = 0, fc_width = 0;  // c_attn's and c_fc's output widths (GptConfig::qkv_width, fc_width)
  int q = 1;
  std::int64_t element_bytes = 0;  // t = sizeof(T)
  std::int64_t saved_bytes = 0;    // e: 2 when kept in bf16, else t

  // A block of `config` on `batch` sequences of `seq` tokens.
  static BlockActivations of(const GptConfig& config, std::int64_t batch, std::int64_t seq, int q,
                             std::int64_t element_bytes, std::int64_t saved_bytes) {
    return {.batch = batch, .seq = seq, .hidden = config.hidden, .heads = config.heads, .ffn = config.ffn,
            .qkv_width = config.qkv_width(), .fc_width = config.fc_width(), .q = q, .element_bytes = element_bytes,
            .saved_bytes = saved_bytes};
  }
};

// Bytes of activations one block's context holds per rank under `policy` (the formulas above).
std::int64_t block_saved_bytes(const BlockActivations& shape, Recompute policy);
// Bytes of activations ln_f's and the LM head's contexts hold per rank, for a stored vocabulary of V rows
// (GptConfig::stored_vocab): ln_f's xhat e*N*h/q^2 and 1/std t*N/q, the head's input e*N*h/q^2 and dlogits e*N*V/q^2.
std::int64_t head_saved_bytes(const BlockActivations& shape, std::int64_t stored_vocab);

}  // namespace optimus

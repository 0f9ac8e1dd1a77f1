// The shape and hyper-parameters of a GPT-2 style model, shared by the 2D layers and the reference.
#pragma once

#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace optimus {

// A block's row norm: LayerNorm, (x - mean) / sqrt(var + eps) gamma + beta (GPT-2); or RMSNorm, x / sqrt(mean(x^2) +
// eps) gamma, no beta (Zhang and Sennrich 2019; Llama's).
struct NormSpec {
  enum class Kind { layernorm, rmsnorm };
  Kind kind = Kind::layernorm;
  double eps = 1e-5;
  // LayerNorm subtracts the mean and has beta; RMSNorm neither.
  bool centered() const { return kind == Kind::layernorm; }
  // gamma's and, centered, beta's elements over `hidden` features.
  std::int64_t parameters(std::int64_t hidden) const { return centered() ? 2 * hidden : hidden; }
  friend bool operator==(const NormSpec&, const NormSpec&) = default;
};
// "layernorm" or "rmsnorm" (as checkpoints record it).
inline const char* name_of(NormSpec::Kind kind) { return kind == NormSpec::Kind::layernorm ? "layernorm" : "rmsnorm"; }

// Rotary position embedding (RoPE) on each head's queries and keys, pairs rotate-half as in Hugging Face's Llama:
// the pair (i, i + d/2) turns by pos * theta^(-2i/d) (ops::rotary).
struct RopeSpec {
  double theta = 10000;
  friend bool operator==(const RopeSpec&, const RopeSpec&) = default;
};

// The MLP's activation: GELU (tanh form) between c_fc h -> ffn and c_proj (GPT-2's), or SwiGLU, silu(gate) * up with
// c_fc h -> 2 ffn holding [gate | up] (Shazeer 2020; Llama's gate_proj and up_proj side by side).
// The MLP's activation: GPT-2's GELU (the tanh approximation), the exact GELU x Phi(x) (erf: BERT's, Hugging Face's
// "gelu"), or SwiGLU (Llama's).
enum class MlpKind { gelu, gelu_erf, swiglu };
inline const char* name_of(MlpKind kind) {
  switch (kind) {
    case MlpKind::gelu: return "gelu";
    case MlpKind::gelu_erf: return "gelu_erf";
    case MlpKind::swiglu: return "swiglu";
  }
  return "?";
}
// The kind name_of names, if any.
inline std::optional<MlpKind> mlp_kind_named(std::string_view name) {
  for (const MlpKind k : {MlpKind::gelu, MlpKind::gelu_erf, MlpKind::swiglu}) {
    if (name == name_of(k)) return k;
  }
  return std::nullopt;
}
// c_fc's output width for an MLP of inner size `ffn`: ffn (GELU) or 2 ffn (SwiGLU's [gate | up]).
inline std::int64_t fc_width(MlpKind kind, std::int64_t ffn) { return kind == MlpKind::swiglu ? 2 * ffn : ffn; }
// Llama's MLP inner size for hidden size h: 8h/3 rounded up to a multiple of `multiple` (what a layout splits evenly;
// Meta's multiple_of is 256).
inline std::int64_t llama_ffn(std::int64_t hidden, std::int64_t multiple) {
  return ((8 * hidden + 2) / 3 + multiple - 1) / multiple * multiple;
}

// How the model builds its blocks, ln_f and head: a value, so that GPT-2, Llama and any mix of their parts are
// configurations of one model, not classes. GPT-2's by default; llama() gives Llama's.
struct BlockConfig {
  NormSpec norm;                 // ln_1, ln_2 and ln_f
  bool bias = true;              // the linear layers' biases (c_attn, attn.c_proj, c_fc, mlp.c_proj); Llama has none
  std::optional<RopeSpec> rope;  // none: learned positions (wpe, added by the embedding); else rotary positions on
                                 // every block's queries and keys, and no wpe
  MlpKind mlp = MlpKind::gelu;
  std::int64_t kv_heads = 0;     // grouped-query attention's key/value heads (dividing heads); 0: heads (multi-head)
  bool tied_head = true;         // the LM head multiplies wte; false: its own lm_head.weight [vocab, h]
  // Where the norms sit: false, before each sublayer (GPT-2's, Llama's: x1 = x + attn(ln_1(x)), y = x1 +
  // mlp(ln_2(x1))); true, after each residual add (BERT's: x1 = ln_1(x + attn(x)), y = ln_2(x1 + mlp(x1))).
  bool post_norm = false;
  // Which keys a query sees: false, itself and those before it (a decoder's causal attention); true, every key of its
  // sequence (an encoder's, BERT's).
  bool bidirectional = false;
  // BERT's embeddings: token-type (segment) embeddings tte [token_types, h] added to the lookups (0: none), and a norm
  // (`norm`'s kind and eps: ln_e) over their sum, before the embedding dropout.
  std::int64_t token_types = 0;
  bool embedding_norm = false;
  // BERT's masked-LM head: before ln_f (then the transform's norm) a dense h -> h with a bias (head.dense) and the
  // blocks' GELU (tanh or exact; not with SwiGLU), and a bias on the logits (head.bias [vocab]).
  bool head_transform = false;
  friend bool operator==(const BlockConfig&, const BlockConfig&) = default;

  // Llama's blocks: RMSNorm (eps 1e-5), rotary positions of `theta`, SwiGLU, no biases, `kv_heads` (0: heads), an
  // untied head.
  static BlockConfig llama(double theta, std::int64_t kv_heads) {
    return {.norm = {.kind = NormSpec::Kind::rmsnorm, .eps = 1e-5}, .bias = false, .rope = RopeSpec{theta},
            .mlp = MlpKind::swiglu, .kv_heads = kv_heads, .tied_head = false};
  }
  // BERT's (Devlin et al.; Hugging Face's BertForMaskedLM): LayerNorm of eps 1e-12 after each residual add, learned
  // positions, the exact GELU, biases, bidirectional attention, two token types, the embeddings' norm, and the
  // masked-LM head (dense, GELU, norm, the decoder tied to wte with its own bias).
  static BlockConfig bert() {
    return {.norm = {.kind = NormSpec::Kind::layernorm, .eps = 1e-12}, .bias = true, .rope = std::nullopt,
            .mlp = MlpKind::gelu_erf, .kv_heads = 0, .tied_head = true, .post_norm = true, .bidirectional = true,
            .token_types = 2, .embedding_norm = true, .head_transform = true};
  }
};

// "gpt2" for GPT-2's blocks, "bert" for BERT's (BlockConfig::bert, any norm eps and number of token types),
// "llama" for Llama's (RMSNorm, rotary positions, SwiGLU, no biases, norms before the sublayers, causal attention; any
// kv_heads, theta, eps, head), else "custom".
inline const char* family_name(const BlockConfig& b) {
  if (b == BlockConfig{}) return "gpt2";
  BlockConfig bert = BlockConfig::bert();
  bert.norm.eps = b.norm.eps;
  if (b.token_types >= 1) bert.token_types = b.token_types;
  if (b == bert) return "bert";
  const bool llama =
      b.norm.kind == NormSpec::Kind::rmsnorm && b.rope && b.mlp == MlpKind::swiglu && !b.bias && !b.post_norm &&
      !b.bidirectional && b.token_types == 0 && !b.embedding_norm && !b.head_transform;
  return llama ? "llama" : "custom";
}

struct GptConfig {
  std::int64_t vocab = 256;     // token ids are [0, vocab)
  std::int64_t padded_vocab = 0;  // rows of wte as stored (see stored_vocab); 0: the default padding
  std::int64_t max_seq = 64;    // rows of the position table wpe
  std::int64_t layers = 2;      // transformer blocks
  std::int64_t hidden = 128;    // h
  std::int64_t heads = 4;       // attention heads; head size h / heads
  std::int64_t ffn = 512;       // MLP inner size (GPT-2: 4h)
  double dropout = 0.0;         // probability for the embedding, attention and residual dropouts
  std::uint64_t seed = 1234;    // initialization and dropout masks
  BlockConfig block;            // how the blocks are built (GPT-2's by default)

  std::int64_t head_size() const { return hidden / heads; }
  // Key/value heads: block.kv_heads, or heads where it is 0.
  std::int64_t kv_heads() const { return block.kv_heads > 0 ? block.kv_heads : heads; }
  // c_attn's output columns: [Q | K | V], h + 2 kv_heads * head_size.
  std::int64_t qkv_width() const { return hidden + 2 * kv_heads() * head_size(); }
  // c_fc's output columns: ffn (GELU) or [gate | up], 2 ffn (SwiGLU).
  std::int64_t fc_width() const { return optimus::fc_width(block.mlp, ffn); }
  // The vocabulary as a q x q grid stores it: padded_vocab where set, else vocab rounded up to a multiple of 128*q
  // (Megatron's and llm.c's padding, so that q divides it and GEMMs get round shapes) — and of q^2 with BERT's head
  // bias, split as a grid's vectors are. Ids [vocab, stored) are never looked up, their logits take no part in the
  // softmax or the loss, and their rows of wte stay zero; parameters(), gathering, loading and checkpoints show wte as
  // [vocab, h].
  std::int64_t stored_vocab(int q) const {
    const std::int64_t side = q, multiple = block.head_transform ? std::lcm(128 * side, side * side) : 128 * side;
    return padded_vocab > 0 ? padded_vocab : (vocab + multiple - 1) / multiple * multiple;
  }
  // One block's weight-matrix elements (c_attn, attn.c_proj, c_fc, mlp.c_proj) and bias elements (where it has them).
  std::int64_t block_weights() const { return hidden * qkv_width() + hidden * hidden + hidden * fc_width() + ffn * hidden; }
  std::int64_t block_biases() const { return block.bias ? qkv_width() + hidden + fc_width() + hidden : 0; }
  // Parameter count: wte (and an untied head's lm_head), wpe for learned positions, tte and ln_e where the block says
  // (BERT's), per block two norms (gamma and, for LayerNorm, beta), c_attn, attn.c_proj, c_fc, mlp.c_proj and their
  // biases where the block has them; ln_f.
  std::int64_t parameter_count() const {
    const std::int64_t h = hidden;
    const std::int64_t norm = block.norm.parameters(h);
    const std::int64_t per_block = 2 * norm + block_weights() + block_biases();
    const std::int64_t embeddings = vocab * h * (block.tied_head ? 1 : 2) + (block.rope ? 0 : max_seq * h) +
                                    block.token_types * h + (block.embedding_norm ? norm : 0);
    const std::int64_t transform = block.head_transform ? h * h + h + vocab : 0;  // head.dense, head.bias
    return embeddings + layers * per_block + norm + transform;
  }
};

inline std::ostream& operator<<(std::ostream& os, const GptConfig& c) {
  return os << "vocab=" << c.vocab << " padded_vocab=" << c.padded_vocab << " max_seq=" << c.max_seq << " layers=" << c.layers << " hidden=" << c.hidden
            << " heads=" << c.heads << " ffn=" << c.ffn << " dropout=" << c.dropout << " norm="
            << name_of(c.block.norm.kind) << "(eps " << c.block.norm.eps << ") bias=" << c.block.bias << " positions="
            << (c.block.rope ? "rope(theta " + std::to_string(c.block.rope->theta) + ")" : std::string("learned"))
            << " mlp=" << name_of(c.block.mlp) << " kv_heads=" << c.kv_heads() << " tied_head=" << c.block.tied_head
            << " post_norm=" << c.block.post_norm << " bidirectional=" << c.block.bidirectional
            << " token_types=" << c.block.token_types << " embedding_norm=" << c.block.embedding_norm
            << " head_transform=" << c.block.head_transform;
}

// Dropout masks are counter-based like initialization: element (row, col) of `site` in block `layer` at
// training step `step` is kept iff math::dropout_keeps(p, seed, dropout_stream(step, layer, site), row, col) (Philox at
// (col / 4, row, stream), word col mod 4, against ceil(p 2^32); element_math.hpp), and kept values are scaled by
// 1 / (1 - p). Rows and columns are global indices, so masks do not depend on q.
enum class DropoutSite : std::uint32_t { embedding = 0, attention_probs = 1, attention_residual = 2, mlp_residual = 3 };

constexpr std::uint64_t dropout_stream(std::uint64_t step, std::uint64_t layer, DropoutSite site) {
  return (step << 24) | (layer << 8) | static_cast<std::uint64_t>(site);
}

}  // namespace optimus

#include <string_view>

#include "optimus/core/rng.hpp"

namespace optimus {

// AdamW (decoupled weight decay, Loshchilov and Hutter) with clipping by the global gradient norm.
// Weight decay applies to matrices (weights, wte, wpe), not to biases or LayerNorm parameters.
struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double max_grad_norm = 1.0;  // clip when the global norm exceeds it; <= 0 disables
};

// How validation names what it checks in its messages: the configuration's fields ("GptConfig: hidden = 30 is not
// divisible by q^2 = 4 (q = 2)") by default; a program names its options instead ("--hidden 30 is not divisible by
// q^2 = 4 (--q 2)"). A name starting with "--" is an option, printed "--hidden 30"; any other "hidden = 30".
struct ConfigNames {
  std::string subject;  // before every message: "GptConfig: ", or "" for a program's options
  std::string vocab, max_seq, hidden, heads, ffn, layers, padded_vocab, dropout, norm_eps, kv_heads, rope_theta;
  std::string q, p;  // the grid's side, the 1D group's size

  static ConfigNames fields();   // GptConfig's fields
  static ConfigNames options();  // train_gpt's and optimus-plan's options (--vocab, --seq, --kv-heads, --q, --p, ...)
};

// Throw optimus::Error naming the field and its value unless every value is finite and in its range. GptConfig: vocab,
// max_seq, hidden, heads, ffn > 0, heads divides hidden, layers >= 0, padded_vocab 0 or >= vocab, dropout in [0, 1).
// AdamWConfig: lr > 0, beta1 and beta2 in [0, 1), eps > 0, weight_decay >= 0, max_grad_norm finite. (The models and
// AdamW check them at construction; a layout's own divisibility rules are the model's.)
// Each names what it checks by `names` (ConfigNames), or by the configuration's fields.
void validate(const GptConfig& config);
void validate(const GptConfig& config, const ConfigNames& names);
void validate(const AdamWConfig& config);
// validate(config), then what a q x q grid needs (the 2D GPT's rules, whole or cut into pipeline stages): q divides
// heads, max_seq and padded_vocab (when set, no smaller than vocab); q^2 divides hidden and ffn.
void validate_for_grid(const GptConfig& config, int q);
void validate_for_grid(const GptConfig& config, int q, const ConfigNames& names);
// validate(config), then what the 1D baseline's tensor-parallel group of p ranks needs (whole or cut into pipeline
// stages): p divides heads and ffn.
void validate_for_group(const GptConfig& config, int p);
void validate_for_group(const GptConfig& config, int p, const ConfigNames& names);

// Initialization of GPT-2 parameters, shared by the 2D model and the reference: element (r, c) of the
// tensor named `name` (GPT-2 layout; vectors have r = 0) is
//     initial_distribution(config, name).sample(CounterRng(config.seed, parameter_stream(name)), r, c)
// Weights ~ N(0, 0.02) (residual projections c_proj: 0.02 / sqrt(2 * layers), wpe: 0.01), biases 0,
// LayerNorm weights 1.
std::uint64_t parameter_stream(std::string_view name);
Distribution initial_distribution(const GptConfig& config, std::string_view name);

}  // namespace optimus

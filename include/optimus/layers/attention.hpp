// optimus::Attention<T, Split>: causal (an encoder's: bidirectional) multi-head (or grouped-query) self-attention, one class for both splits
// (optimus/layers/split.hpp): Attention2D on the q x q grid (docs/design.md, "Layers"), as below; megatron::Attention1D
// with heads split over the p ranks of a Group, c_attn column-parallel, c_proj row-parallel
// (optimus/layers/megatron/attention.hpp).
//   x, y: [N, h] with N = b*s tokens; grid row i holds b/q whole sequences, grid column j holds heads
//   [j*a/q, (j+1)*a/q). c_attn (h -> 3h) stores its columns grouped by heads, so that column block j of
//   qkv is [Q_j | K_j | V_j] for exactly those heads: attention itself needs no communication.
//   With grouped-query attention (kv < a key/value heads, q dividing kv), c_attn is h -> h + 2 kv d and column block j
//   is [Q_j | K_j | V_j] of heads [j a/q, ...) and key/value heads [j kv/q, ...): query head t reads key/value head
//   t / (a/kv), which is on the same rank.
//   probs = softmax(Q K^T / sqrt(h/a)) with a causal mask (none where bidirectional), dropped out (site
//   attention_probs);
//   merged = probs V: [N, h] in GPT-2's head-major column order; y = c_proj(merged). With rotary positions (Llama's),
//   Q and K are turned in place after c_attn (ops::rotary): rank (i, j) knows its rows' positions (whole sequences)
//   and holds whole heads, so the rotation needs nothing from another rank.
// Saved for backward (AttentionContext): qkv [N, h + 2 kv d] (split q*q ways) and the fused core's log-sum-exp of each
// query row, [sequences*heads*s]; never the probabilities, which backward rebuilds from them (layers/context.hpp).
#pragma once

#include <optional>

#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/linear.hpp"
#include "optimus/layers/split.hpp"
#include "optimus/layers/sublayers.hpp"

namespace optimus {
namespace detail {
struct AttentionGeometry;
}  // namespace detail

// What an attention layer is (2D and 1D): hidden size h, query heads, key/value heads (grouped-query attention,
// dividing heads; heads: multi-head), rotary positions on the queries and keys or none (positions then come from wpe),
// biases on its linears or none, its dropout, and whether a query sees only the keys up to its own (causal) or all of
// its sequence's.
struct AttentionSpec {
  std::int64_t hidden = 0, heads = 0, kv_heads = 0;
  DropoutSpec dropout;
  std::optional<RopeSpec> rope;
  bool bias = true;
  bool causal = true;
  // Block `layer`'s attention in a model of `config`.
  static AttentionSpec of(const GptConfig& config, std::int64_t layer) {
    return {.hidden = config.hidden, .heads = config.heads, .kv_heads = config.kv_heads(),
            .dropout = DropoutSpec{config.dropout, config.seed, layer}, .rope = config.block.rope,
            .bias = config.block.bias, .causal = !config.block.bidirectional};
  }
  // c_attn's output as fused parts [Q | K | V]: h, kv d, kv d (Sharding stores them grouped by heads).
  FusedColumns qkv_parts() const {
    const std::int64_t kv_width = kv_heads * (hidden / heads);
    return {{hidden, kv_width, kv_width}};
  }
};
// `spec`, after throwing (naming `name` and the values) unless heads divides hidden, kv_heads divides heads, `parts`
// (q, or the 1D group's p) divides heads and kv_heads, and rotary positions have an even head size and a theta above 1.
AttentionSpec checked(const AttentionSpec& spec, int parts, const std::string& name);

template <class T, class Split>
class Attention : public Sublayers<T, Attention<T, Split>> {
 public:
  using Place = typename Split::Place;

  // name: e.g. "h.0.attn". Throws if the split's parts do not divide heads, or heads does not divide hidden.
  Attention(const Place& place, const std::string& name, std::int64_t hidden, std::int64_t heads, DropoutSpec dropout);
  // The same with its linears' parameters and gradients where `tags` say (ParameterTags).
  Attention(const Place& place, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
            std::int64_t heads, DropoutSpec dropout);
  // Any attention `spec` describes: grouped-query, rotary positions (each rank turns its own heads of its own
  // sequences: no parameters, no communication), linears with biases or without.
  Attention(const Place& place, const ParameterTags& tags, const std::string& name, const AttentionSpec& spec);

  using Context = AttentionContext<T>;

  // x: [N, h] with sequences of `seq` tokens; a training pass fills `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved);
  // The same from an input kept as c_attn keeps it (LayerNorm2D::forward_saved), which c_attn takes over.
  DistMatrix<T> forward(SavedActivation<T> x, std::int64_t seq, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  // parameters, parameter_storage, zero_grad: its linears' (Sublayers).

 private:
  friend Sublayers<T, Attention>;
  auto sublayers() { return std::tie(c_attn_, c_proj_); }
  template <class X>
  DistMatrix<T> forward_any(X&& x, std::int64_t seq, const Pass& pass, Context& saved);
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  detail::AttentionGeometry geometry(std::int64_t local_rows, std::int64_t seq, const Pass& pass, double dropout) const;

  Place place_;
  AttentionSpec spec_;
  typename Split::template ColumnLinear<T> c_attn_;
  typename Split::template RowLinear<T> c_proj_;
};

template <class T>
using Attention2D = Attention<T, Split2D>;

extern template class Attention<float, Split2D>;
extern template class Attention<double, Split2D>;

}  // namespace optimus

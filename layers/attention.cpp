// Attention<T, Split> (Attention2D, megatron::Attention1D): the geometry of this rank's sequences and heads; the work
// is in block_logic.hpp.
#include "optimus/layers/attention.hpp"

#include "optimus/layers/megatron/attention.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "attention_core.hpp"
#include "block_logic.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

AttentionSpec checked(const AttentionSpec& spec, int parts, const std::string& name) {
  const std::int64_t hidden = spec.hidden, heads = spec.heads, kv = spec.kv_heads;
  OPTIMUS_CHECK(heads > 0 && hidden % heads == 0, name, ": hidden = ", hidden, " is not divisible by heads = ", heads);
  OPTIMUS_CHECK(kv > 0 && heads % kv == 0, name, ": kv_heads = ", kv, " does not divide heads = ", heads);
  OPTIMUS_CHECK(heads % parts == 0, name, ": heads = ", heads, " is not divisible by ", parts,
                " (each rank holds whole heads)");
  OPTIMUS_CHECK(kv % parts == 0, name, ": kv_heads = ", kv, " is not divisible by ", parts,
                " (each rank holds whole key/value heads)");
  OPTIMUS_CHECK(!spec.rope || (hidden / heads) % 2 == 0, name,
                ": rotary positions pair a head's columns, but its dimension ", hidden / heads, " is odd");
  OPTIMUS_CHECK(!spec.rope || (std::isfinite(spec.rope->theta) && spec.rope->theta > 1.0), name, ": rotary theta = ",
                spec.rope ? spec.rope->theta : 0.0, " must be finite and above 1");
  return spec;
}

template <class T, class Split>
Attention<T, Split>::Attention(const Place& place, const std::string& name, std::int64_t hidden, std::int64_t heads,
                               DropoutSpec dropout)
    : Attention(place, Split::tags_of(place), name, hidden, heads, dropout) {}

template <class T, class Split>
Attention<T, Split>::Attention(const Place& place, const ParameterTags& tags, const std::string& name,
                               std::int64_t hidden, std::int64_t heads, DropoutSpec dropout)
    : Attention(place, tags, name,
                AttentionSpec{.hidden = hidden, .heads = heads, .kv_heads = heads, .dropout = dropout,
                              .rope = std::nullopt, .bias = true, .causal = true}) {}

template <class T, class Split>
Attention<T, Split>::Attention(const Place& place, const ParameterTags& tags, const std::string& name,
                               const AttentionSpec& spec)
    : place_(place),
      spec_(checked(spec, Split::head_parts(place), name)),
      c_attn_(place, tags, name + ".c_attn", spec_.hidden, spec_.qkv_parts().total(), spec_.qkv_parts(), spec_.bias),
      c_proj_(Split::template row_linear<T>(place, tags, name + ".c_proj", spec_.hidden, spec_.hidden, spec_.bias)) {}

template <class T, class Split>
detail::AttentionGeometry Attention<T, Split>::geometry(std::int64_t local_rows, std::int64_t seq, const Pass& pass,
                                                        double dropout) const {
  const int parts = Split::head_parts(place_);
  detail::AttentionGeometry g;
  g.seq = seq;
  g.batches = local_rows / seq;
  g.heads = spec_.heads / parts;
  g.kv_heads = spec_.kv_heads / parts;
  g.head_size = spec_.hidden / spec_.heads;
  // This rank's first sequence in the global batch (activation grid row i holds the pass's sequences
  // [i*b/q, (i+1)*b/q); the 1D group's one-rank grid all of them) and first head.
  g.first_batch = pass.first_sequence + Split::activation_grid(place_).row_index() * g.batches;
  g.first_head = Split::head_block(place_) * g.heads;
  g.total_heads = spec_.heads;
  g.dropout = dropout;
  g.rng = CounterRng(spec_.dropout.seed, dropout_stream(pass.step, static_cast<std::uint64_t>(spec_.dropout.layer),
                                                        DropoutSite::attention_probs));
  g.rope = spec_.rope;
  g.causal = spec_.causal;
  if (!pass.lengths.empty()) {  // this rank's sequences' (checked by forward)
    const auto first = static_cast<std::ptrdiff_t>(g.first_batch - pass.first_sequence);
    g.lengths.assign(pass.lengths.begin() + first, pass.lengths.begin() + first + g.batches);
  }
  return g;
}

template <class T, class Split>
template <class X>
DistMatrix<T> Attention<T, Split>::forward_any(X&& x, std::int64_t seq, const Pass& pass, Context& saved) {
  const int q = Split::activation_grid(place_).q();
  OPTIMUS_CHECK(seq > 0 && (x.rows() / q) % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ",
                seq, q > 1 ? " on each of q = " + std::to_string(q) + " grid rows" : std::string());
  check_lengths(pass.lengths, x.rows() / seq, seq, "attention");
  const detail::AttentionGeometry g = geometry(x.rows() / q, seq, pass, pass.training ? spec_.dropout.p : 0.0);
  return detail::attention_forward<T>(c_attn_, c_proj_, std::forward<X>(x), Split::heads_width(place_, spec_.hidden),
                                      g, pass, saved);
}

template <class T, class Split>
DistMatrix<T> Attention<T, Split>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass,
                                           Context& saved) {
  return forward_any(x, seq, pass, saved);
}

template <class T, class Split>
DistMatrix<T> Attention<T, Split>::forward(SavedActivation<T> x, std::int64_t seq, const Pass& pass, Context& saved) {
  return forward_any(std::move(x), seq, pass, saved);
}

template <class T, class Split>
DistMatrix<T> Attention<T, Split>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(Split::activation_grid(place_), "attention");
  const detail::AttentionGeometry g = geometry(saved.qkv->local_rows(), saved.seq, saved.pass, spec_.dropout.p);
  return detail::attention_backward<T>(c_attn_, c_proj_, std::move(saved), dy, g, later);
}

template <class T, class Split>
DistMatrix<T> Attention<T, Split>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T, class Split>
DistMatrix<T> Attention<T, Split>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template class Attention<float, Split2D>;
template class Attention<double, Split2D>;
template class Attention<float, megatron::Split1D>;
template class Attention<double, megatron::Split1D>;

}  // namespace optimus

// Attention2D: the geometry of this rank's sequences and heads; the work is in block_logic.hpp.
#include "optimus/layers/attention.hpp"

#include <cmath>
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

template <class T>
Attention2D<T>::Attention2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t heads,
                            DropoutSpec dropout)
    : Attention2D(grid, ParameterTags::of(grid), name, hidden, heads, dropout) {}

template <class T>
Attention2D<T>::Attention2D(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                            std::int64_t heads, DropoutSpec dropout)
    : Attention2D(grid, tags, name,
                  AttentionSpec{.hidden = hidden, .heads = heads, .kv_heads = heads, .dropout = dropout,
                                .rope = std::nullopt, .bias = true}) {}

template <class T>
Attention2D<T>::Attention2D(const Grid& grid, const ParameterTags& tags, const std::string& name,
                            const AttentionSpec& spec)
    : grid_(grid),
      spec_(checked(spec, grid.q(), name)),
      c_attn_(grid, tags, name + ".c_attn", spec_.hidden, spec_.qkv_parts().total(), spec_.qkv_parts(), spec_.bias),
      c_proj_(grid, tags, name + ".c_proj", spec_.hidden, spec_.hidden, FusedColumns{}, spec_.bias) {}

template <class T>
detail::AttentionGeometry Attention2D<T>::geometry(std::int64_t local_rows, std::int64_t seq, const Pass& pass,
                                                   double dropout) const {
  const int q = grid_.q();
  detail::AttentionGeometry g;
  g.seq = seq;
  g.batches = local_rows / seq;
  g.heads = spec_.heads / q;
  g.kv_heads = spec_.kv_heads / q;
  g.head_size = spec_.hidden / spec_.heads;
  // This rank's first sequence in the global batch (grid row i holds the pass's sequences [i*b/q, (i+1)*b/q)) and
  // first head.
  g.first_batch = pass.first_sequence + grid_.row_index() * g.batches;
  g.first_head = grid_.col_index() * g.heads;
  g.total_heads = spec_.heads;
  g.dropout = dropout;
  g.rng = CounterRng(spec_.dropout.seed, dropout_stream(pass.step, static_cast<std::uint64_t>(spec_.dropout.layer),
                                                        DropoutSite::attention_probs));
  g.rope = spec_.rope;
  return g;
}

template <class T>
template <class X>
DistMatrix<T> Attention2D<T>::forward_any(X&& x, std::int64_t seq, const Pass& pass, Context& saved) {
  const int q = grid_.q();
  OPTIMUS_CHECK(seq > 0 && (x.rows() / q) % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ",
                seq, " on each of q = ", q, " grid rows");
  const detail::AttentionGeometry g = geometry(x.rows() / q, seq, pass, pass.training ? spec_.dropout.p : 0.0);
  return detail::attention_forward<T>(c_attn_, c_proj_, std::forward<X>(x), spec_.hidden, g, pass, saved);
}

template <class T>
DistMatrix<T> Attention2D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved) {
  return forward_any(x, seq, pass, saved);
}

template <class T>
DistMatrix<T> Attention2D<T>::forward(SavedActivation<T> x, std::int64_t seq, const Pass& pass, Context& saved) {
  return forward_any(std::move(x), seq, pass, saved);
}

template <class T>
DistMatrix<T> Attention2D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(grid_, "attention");
  const detail::AttentionGeometry g = geometry(saved.qkv->local_rows(), saved.seq, saved.pass, spec_.dropout.p);
  return detail::attention_backward<T>(c_attn_, c_proj_, std::move(saved), dy, g, later);
}

template <class T>
DistMatrix<T> Attention2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> Attention2D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void Attention2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_attn_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void Attention2D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  c_attn_.parameter_storage(out);
  c_proj_.parameter_storage(out);
}

template <class T>
void Attention2D<T>::zero_grad() {
  c_attn_.zero_grad();
  c_proj_.zero_grad();
}

template class Attention2D<float>;
template class Attention2D<double>;

}  // namespace optimus

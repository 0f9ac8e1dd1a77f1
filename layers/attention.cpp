// Attention2D: c_attn, the local attention of attention_core, c_proj.
#include "optimus/layers/attention.hpp"

#include <utility>

#include "attention_core.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

template <class T>
Attention2D<T>::Attention2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t heads,
                            DropoutSpec dropout)
    : grid_(&grid),
      hidden_(hidden),
      heads_(heads),
      dropout_(dropout),
      c_attn_(grid, name + ".c_attn", hidden, 3 * hidden, hidden),
      c_proj_(grid, name + ".c_proj", hidden, hidden) {
  OPTIMUS_CHECK(heads > 0 && hidden % heads == 0, name, ": hidden = ", hidden, " is not divisible by heads = ", heads);
  OPTIMUS_CHECK(heads % grid.q() == 0, name, ": heads = ", heads, " is not divisible by q = ", grid.q());
}

template <class T>
detail::AttentionGeometry Attention2D<T>::geometry(std::int64_t local_rows, std::int64_t seq, std::uint64_t step,
                                                   double dropout) const {
  const int q = grid_->q();
  detail::AttentionGeometry g;
  g.seq = seq;
  g.batches = local_rows / seq;
  g.heads = heads_ / q;
  g.head_size = hidden_ / heads_;
  // This rank's first sequence in the global batch (replicas hold consecutive slices) and first head.
  g.first_batch = (grid_->dp_index() * q + grid_->row_index()) * g.batches;
  g.first_head = grid_->col_index() * g.heads;
  g.total_heads = heads_;
  g.dropout = dropout;
  g.rng = CounterRng(dropout_.seed, dropout_stream(step, static_cast<std::uint64_t>(dropout_.layer),
                                                   DropoutSite::attention_probs));
  return g;
}

template <class T>
DistMatrix<T> Attention2D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass) {
  const int q = grid_->q();
  OPTIMUS_CHECK(seq > 0 && (x.rows() / q) % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ",
                seq, " on each of q = ", q, " grid rows");
  DistMatrix<T> qkv = c_attn_.forward(x, pass);  // local [N/q, 3h/q] = [Q_j | K_j | V_j]
  const detail::AttentionGeometry g = geometry(x.local_rows(), seq, pass.step, pass.training ? dropout_.p : 0.0);
  Tensor<T> probs(Shape{g.batches * g.heads * seq, seq},
                  MemoryTag{&grid_->memory(), pass.training ? MemoryKind::activations : MemoryKind::workspace},
                  Init::none);
  DistMatrix<T> merged(x.grid(), x.rows(), hidden_);
  detail::attention_core_forward<T>(g, std::as_const(qkv).local_map(),
                                    Eigen::Map<detail::RowMajorMatrix<T>>(probs.data(), probs.size(0), seq),
                                    merged.local_map());
  DistMatrix<T> y = c_proj_.forward(merged, pass);
  if (pass.training) {
    qkv_ = qkv.clone_as(MemoryKind::activations);
    probs_ = std::move(probs);
    seq_ = seq;
    step_ = pass.step;
  }
  return y;
}

template <class T>
DistMatrix<T> Attention2D<T>::backward(const DistMatrix<T>& dy) {
  OPTIMUS_CHECK(qkv_.has_value(), "attention: backward without a training forward");
  const detail::AttentionGeometry g = geometry(qkv_->local_rows(), seq_, step_, dropout_.p);
  const DistMatrix<T> dmerged = c_proj_.backward(dy);
  DistMatrix<T> dqkv(dy.grid(), dy.rows(), 3 * hidden_);
  detail::attention_core_backward<T>(
      g, std::as_const(*qkv_).local_map(),
      Eigen::Map<const detail::RowMajorMatrix<T>>(probs_.data(), probs_.size(0), seq_), dmerged.local_map(),
      dqkv.local_map());
  qkv_.reset();
  probs_.reset();
  return c_attn_.backward(dqkv);
}

template <class T>
void Attention2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_attn_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void Attention2D<T>::zero_grad() {
  c_attn_.zero_grad();
  c_proj_.zero_grad();
}

template class Attention2D<float>;
template class Attention2D<double>;

}  // namespace optimus

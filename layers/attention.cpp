// Attention2D: per-sequence, per-head causal softmax attention on the local block.
#include "optimus/layers/attention.hpp"

#include <cmath>
#include <limits>

#include "optimus/core/error.hpp"

namespace optimus {
namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;


}  // namespace

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
DistMatrix<T> Attention2D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass) {
  const int q = grid_->q();
  OPTIMUS_CHECK(seq > 0 && (x.rows() / q) % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ",
                seq, " on each of q = ", q, " grid rows");
  DistMatrix<T> qkv = c_attn_.forward(x, pass);  // local [N/q, 3h/q] = [Q_j | K_j | V_j]
  const std::int64_t d = hidden_ / heads_, width = hidden_ / q, hl = heads_ / q;
  const std::int64_t bl = x.local_rows() / seq, gh0 = grid_->col_index() * hl;
  const std::int64_t gb0 = grid_->dp_index() * bl * q + grid_->row_index() * bl;  // first sequence, global batch
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  const double p = pass.training ? dropout_.p : 0.0;
  const CounterRng rng(dropout_.seed, dropout_stream(pass.step, static_cast<std::uint64_t>(dropout_.layer),
                                                     DropoutSite::attention_probs));
  Tensor<T> probs(Shape{bl * hl * seq, seq},
                  MemoryTag{&grid_->memory(), pass.training ? MemoryKind::activations : MemoryKind::workspace});
  DistMatrix<T> merged(x.grid(), x.rows(), hidden_);
  const auto QKV = qkv.local_map();
  auto M = merged.local_map();
  auto P = Eigen::Map<Mat<T>>(probs.data(), bl * hl * seq, seq);
  for (std::int64_t b = 0; b < bl; ++b) {
    for (std::int64_t t = 0; t < hl; ++t) {
      const auto Q = QKV.block(b * seq, t * d, seq, d);
      const auto K = QKV.block(b * seq, width + t * d, seq, d);
      const auto V = QKV.block(b * seq, 2 * width + t * d, seq, d);
      auto probs_bt = P.block((b * hl + t) * seq, 0, seq, seq);
      const Mat<T> scores = scale * (Q * K.transpose());
      Mat<T> dropped(seq, seq);
      const std::uint64_t mask_row0 = static_cast<std::uint64_t>(((gb0 + b) * heads_ + gh0 + t) * seq);
      for (std::int64_t r = 0; r < seq; ++r) {
        const T max = scores.row(r).head(r + 1).maxCoeff();
        T sum = 0;
        for (std::int64_t c = 0; c < seq; ++c) {
          probs_bt(r, c) = c <= r ? std::exp(scores(r, c) - max) : T(0);
          sum += probs_bt(r, c);
        }
        probs_bt.row(r) /= sum;
        for (std::int64_t c = 0; c < seq; ++c) {
          const bool keep = p <= 0.0 || rng.uniform(mask_row0 + static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(c)) >= p;
          dropped(r, c) = keep ? probs_bt(r, c) * static_cast<T>(1.0 / (1.0 - p)) : T(0);
        }
      }
      M.block(b * seq, t * d, seq, d).noalias() = dropped * V;
    }
  }
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
  const int q = grid_->q();
  const std::int64_t seq = seq_, d = hidden_ / heads_, width = hidden_ / q, hl = heads_ / q;
  const std::int64_t bl = qkv_->local_rows() / seq, gh0 = grid_->col_index() * hl;
  const std::int64_t gb0 = grid_->dp_index() * bl * q + grid_->row_index() * bl;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  const double p = dropout_.p;
  const CounterRng rng(dropout_.seed,
                       dropout_stream(step_, static_cast<std::uint64_t>(dropout_.layer), DropoutSite::attention_probs));
  const DistMatrix<T> dmerged = c_proj_.backward(dy);
  DistMatrix<T> dqkv(dy.grid(), dy.rows(), 3 * hidden_);
  const auto QKV = qkv_->local_map();
  const auto DM = dmerged.local_map();
  auto DQKV = dqkv.local_map();
  const auto P = Eigen::Map<const Mat<T>>(probs_.data(), bl * hl * seq, seq);
  Mat<T> mask(seq, seq);
  for (std::int64_t b = 0; b < bl; ++b) {
    for (std::int64_t t = 0; t < hl; ++t) {
      const auto Q = QKV.block(b * seq, t * d, seq, d);
      const auto K = QKV.block(b * seq, width + t * d, seq, d);
      const auto V = QKV.block(b * seq, 2 * width + t * d, seq, d);
      const auto probs_bt = P.block((b * hl + t) * seq, 0, seq, seq);
      const auto dout = DM.block(b * seq, t * d, seq, d);
      const std::uint64_t mask_row0 = static_cast<std::uint64_t>(((gb0 + b) * heads_ + gh0 + t) * seq);
      for (std::int64_t r = 0; r < seq; ++r) {
        for (std::int64_t c = 0; c < seq; ++c) {
          const bool keep = p <= 0.0 || rng.uniform(mask_row0 + static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(c)) >= p;
          mask(r, c) = keep ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
        }
      }
      DQKV.block(b * seq, 2 * width + t * d, seq, d).noalias() = probs_bt.cwiseProduct(mask).transpose() * dout;
      const Mat<T> dprobs = (dout * V.transpose()).cwiseProduct(mask);
      Mat<T> dscores(seq, seq);
      for (std::int64_t r = 0; r < seq; ++r) {
        const T dot = dprobs.row(r).dot(probs_bt.row(r));
        dscores.row(r) = scale * probs_bt.row(r).array() * (dprobs.row(r).array() - dot);
      }
      DQKV.block(b * seq, t * d, seq, d).noalias() = dscores * K;
      DQKV.block(b * seq, width + t * d, seq, d).noalias() = dscores.transpose() * Q;
    }
  }
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

// Causal multi-head attention on a local block (see attention_core.hpp).
#include "attention_core.hpp"

#include <cmath>

namespace optimus::detail {
namespace {

// mask(r, c) = 1/(1-p) where kept, 0 where dropped, for the (b, t) tile.
template <class T>
void dropout_tile(const AttentionGeometry& g, std::int64_t b, std::int64_t t, RowMajorMatrix<T>& mask) {
  const std::int64_t s = g.seq;
  mask.resize(s, s);
  const T keep = static_cast<T>(1.0 / (1.0 - g.dropout));
  const auto row0 = static_cast<std::uint64_t>(((g.first_batch + b) * g.total_heads + g.first_head + t) * s);
  for (std::int64_t r = 0; r < s; ++r) {
    for (std::int64_t c = 0; c < s; ++c) {
      const bool kept = g.dropout <= 0.0 || g.rng.uniform(row0 + static_cast<std::uint64_t>(r),
                                                          static_cast<std::uint64_t>(c)) >= g.dropout;
      mask(r, c) = kept ? keep : T(0);
    }
  }
}

}  // namespace

template <class T>
void attention_core_forward(const AttentionGeometry& g, Eigen::Map<const RowMajorMatrix<T>> qkv,
                            Eigen::Map<RowMajorMatrix<T>> probs, Eigen::Map<RowMajorMatrix<T>> merged) {
  const std::int64_t s = g.seq, d = g.head_size, width = g.heads * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  RowMajorMatrix<T> mask;
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      const auto q = qkv.block(b * s, t * d, s, d);
      const auto k = qkv.block(b * s, width + t * d, s, d);
      const auto v = qkv.block(b * s, 2 * width + t * d, s, d);
      auto p = probs.block((b * g.heads + t) * s, 0, s, s);
      const RowMajorMatrix<T> scores = scale * (q * k.transpose());
      for (std::int64_t r = 0; r < s; ++r) {
        const T max = scores.row(r).head(r + 1).maxCoeff();
        T sum = 0;
        for (std::int64_t c = 0; c < s; ++c) {
          p(r, c) = c <= r ? std::exp(scores(r, c) - max) : T(0);
          sum += p(r, c);
        }
        p.row(r) /= sum;
      }
      dropout_tile(g, b, t, mask);
      merged.block(b * s, t * d, s, d).noalias() = p.cwiseProduct(mask) * v;
    }
  }
}

template <class T>
void attention_core_backward(const AttentionGeometry& g, Eigen::Map<const RowMajorMatrix<T>> qkv,
                             Eigen::Map<const RowMajorMatrix<T>> probs, Eigen::Map<const RowMajorMatrix<T>> dmerged,
                             Eigen::Map<RowMajorMatrix<T>> dqkv) {
  const std::int64_t s = g.seq, d = g.head_size, width = g.heads * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  RowMajorMatrix<T> mask;
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      const auto q = qkv.block(b * s, t * d, s, d);
      const auto k = qkv.block(b * s, width + t * d, s, d);
      const auto v = qkv.block(b * s, 2 * width + t * d, s, d);
      const auto p = probs.block((b * g.heads + t) * s, 0, s, s);
      const auto dout = dmerged.block(b * s, t * d, s, d);
      dropout_tile(g, b, t, mask);
      dqkv.block(b * s, 2 * width + t * d, s, d).noalias() = p.cwiseProduct(mask).transpose() * dout;
      const RowMajorMatrix<T> dp = (dout * v.transpose()).cwiseProduct(mask);
      RowMajorMatrix<T> ds(s, s);
      for (std::int64_t r = 0; r < s; ++r) {
        const T dot = dp.row(r).dot(p.row(r));
        ds.row(r) = scale * p.row(r).array() * (dp.row(r).array() - dot);
      }
      dqkv.block(b * s, t * d, s, d).noalias() = ds * k;
      dqkv.block(b * s, width + t * d, s, d).noalias() = ds.transpose() * q;
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                    \
  template void attention_core_forward<T>(const AttentionGeometry&, Eigen::Map<const RowMajorMatrix<T>>,           \
                                          Eigen::Map<RowMajorMatrix<T>>, Eigen::Map<RowMajorMatrix<T>>);           \
  template void attention_core_backward<T>(const AttentionGeometry&, Eigen::Map<const RowMajorMatrix<T>>,          \
                                           Eigen::Map<const RowMajorMatrix<T>>, Eigen::Map<const RowMajorMatrix<T>>, \
                                           Eigen::Map<RowMajorMatrix<T>>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::detail

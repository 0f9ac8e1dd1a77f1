// Causal multi-head attention on a local block (see attention_core.hpp).
#include "attention_core.hpp"

#include <cmath>

#include "optimus/core/ops.hpp"

namespace optimus::detail {
namespace {

template <class T>
TensorView<T> tile_view(T* data, std::int64_t seq) {
  return TensorView<T>(data, Shape{seq, seq});
}

// m *= the attention dropout mask of tile (b, t): 1/(1-p) where kept, 0 where dropped (no-op without dropout).
template <class T>
void drop_tile(const AttentionGeometry& g, std::int64_t b, std::int64_t t, RowMajorMatrix<T>& m) {
  const auto row0 = static_cast<std::uint64_t>(((g.first_batch + b) * g.total_heads + g.first_head + t) * g.seq);
  ops::dropout<T>(tile_view(m.data(), g.seq), row0, 0, g.dropout, g.rng.seed(), g.rng.stream());
}

}  // namespace

template <class T>
void attention_core_forward(const AttentionGeometry& g, Eigen::Map<const RowMajorMatrix<T>> qkv,
                            Eigen::Map<RowMajorMatrix<T>> probs, Eigen::Map<RowMajorMatrix<T>> merged) {
  const std::int64_t s = g.seq, d = g.head_size, width = g.heads * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  RowMajorMatrix<T> scores(s, s), kept;
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      const auto q = qkv.block(b * s, t * d, s, d);
      const auto k = qkv.block(b * s, width + t * d, s, d);
      const auto v = qkv.block(b * s, 2 * width + t * d, s, d);
      T* p = probs.data() + (b * g.heads + t) * s * s;  // this tile's [s, s] probabilities
      scores.noalias() = q * k.transpose();
      ops::causal_softmax_forward<T>(tile_view<const T>(scores.data(), s), scale, tile_view(p, s));
      kept = Eigen::Map<const RowMajorMatrix<T>>(p, s, s);
      drop_tile(g, b, t, kept);
      merged.block(b * s, t * d, s, d).noalias() = kept * v;
    }
  }
}

template <class T>
void attention_core_backward(const AttentionGeometry& g, Eigen::Map<const RowMajorMatrix<T>> qkv,
                             Eigen::Map<const RowMajorMatrix<T>> probs, Eigen::Map<const RowMajorMatrix<T>> dmerged,
                             Eigen::Map<RowMajorMatrix<T>> dqkv) {
  const std::int64_t s = g.seq, d = g.head_size, width = g.heads * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  RowMajorMatrix<T> kept, dp(s, s), ds(s, s);
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      const auto q = qkv.block(b * s, t * d, s, d);
      const auto k = qkv.block(b * s, width + t * d, s, d);
      const auto v = qkv.block(b * s, 2 * width + t * d, s, d);
      const T* p = probs.data() + (b * g.heads + t) * s * s;
      const auto dout = dmerged.block(b * s, t * d, s, d);
      kept = Eigen::Map<const RowMajorMatrix<T>>(p, s, s);
      drop_tile(g, b, t, kept);
      dqkv.block(b * s, 2 * width + t * d, s, d).noalias() = kept.transpose() * dout;
      dp.noalias() = dout * v.transpose();
      drop_tile(g, b, t, dp);
      ops::causal_softmax_backward<T>(tile_view(p, s), tile_view<const T>(dp.data(), s), scale, tile_view(ds.data(), s));
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

// Causal multi-head attention on a local block (see attention_core.hpp).
#include "attention_core.hpp"

#include <cmath>
#include <utility>

#include "optimus/core/ops.hpp"

namespace optimus::detail {
namespace {

// The scale and the per-tile views of one rank's attention.
template <class T>
struct Tiles {
  const AttentionGeometry& g;
  std::int64_t s = g.seq, d = g.head_size, width = g.heads * d;
  T scale = T(1) / std::sqrt(static_cast<T>(g.head_size));

  // Q, K, V of sequence b, head t: [s, d] blocks of qkv (or of its gradient).
  template <class V>
  V part(V qkv, int which, std::int64_t b, std::int64_t t) const {
    return qkv.block(b * s, which * width + t * d, s, d);
  }
  template <class V>
  V probs(V all, std::int64_t b, std::int64_t t) const {
    return all.block((b * g.heads + t) * s, 0, s, s);
  }
  // x *= the attention dropout mask of tile (b, t): 1/(1-p) where kept, 0 where dropped.
  void drop(TensorView<T> x, std::int64_t b, std::int64_t t, const ops::Queue& queue) const {
    const auto row0 = static_cast<std::uint64_t>(((g.first_batch + b) * g.total_heads + g.first_head + t) * s);
    ops::dropout<T>(x, row0, 0, g.dropout, g.rng.seed(), g.rng.stream(), queue);
  }
  // The tile's probabilities after dropout: p itself without dropout, else a masked copy in `kept`.
  TensorView<const T> kept(TensorView<const T> p, Tensor<T>& kept, std::int64_t b, std::int64_t t,
                           const ops::Queue& queue) const {
    if (g.dropout <= 0.0) return p;
    ops::axpby<T>(T(1), p, T(0), kept.view(), queue);
    drop(kept.view(), b, t, queue);
    return std::as_const(kept).view();
  }
};

}  // namespace

template <class T>
void attention_core_forward(const AttentionGeometry& g, const GridState& grid, TensorView<const T> qkv,
                            ProbsStore<T> probs, TensorView<T> merged) {
  const Tiles<T> tiles{g};
  const std::int64_t s = g.seq;
  const ops::Queue& queue = grid.queue;
  const MemoryTag work = grid.tag(MemoryKind::workspace);
  const bool half = probs.half.data() != nullptr;
  Tensor<T> scores(Shape{s, s}, work, Init::none), kept(Shape{s, s}, work, Init::none);
  // A tile's f32 probabilities, when they are kept in bf16.
  Tensor<T> tile = half ? Tensor<T>(Shape{s, s}, work, Init::none) : Tensor<T>();
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      const TensorView<T> p = half ? tile.view() : tiles.probs(probs.full, b, t);
      ops::gemm<T>(false, true, T(1), tiles.part(qkv, 0, b, t), tiles.part(qkv, 1, b, t), T(0), scores.view(), queue);
      ops::causal_softmax_forward<T>(std::as_const(scores).view(), tiles.scale, p, queue);
      ops::gemm<T>(false, false, T(1), tiles.kept(p, kept, b, t, queue), tiles.part(qkv, 2, b, t), T(0),
                   tiles.part(merged, 0, b, t), queue);
      if constexpr (std::is_same_v<T, float>) {
        if (half) ops::to_bf16(TensorView<const T>(p), tiles.probs(probs.half, b, t), queue);
      }
    }
  }
}

template <class T>
void attention_core_backward(const AttentionGeometry& g, const GridState& grid, TensorView<const T> qkv,
                             ProbsStore<T, const T> probs, TensorView<const T> dmerged, TensorView<T> dqkv) {
  const Tiles<T> tiles{g};
  const std::int64_t s = g.seq;
  const ops::Queue& queue = grid.queue;
  const MemoryTag work = grid.tag(MemoryKind::workspace);
  const bool half = probs.half.data() != nullptr;
  Tensor<T> kept(Shape{s, s}, work, Init::none), dp(Shape{s, s}, work, Init::none), ds(Shape{s, s}, work, Init::none);
  Tensor<T> tile = half ? Tensor<T>(Shape{s, s}, work, Init::none) : Tensor<T>();  // a tile widened from bf16
  for (std::int64_t b = 0; b < g.batches; ++b) {
    for (std::int64_t t = 0; t < g.heads; ++t) {
      if constexpr (std::is_same_v<T, float>) {
        if (half) ops::to_f32(tiles.probs(probs.half, b, t), tile.view(), queue);
      }
      const TensorView<const T> p = half ? std::as_const(tile).view() : tiles.probs(probs.full, b, t);
      const TensorView<const T> dout = tiles.part(dmerged, 0, b, t);
      const TensorView<const T> q = tiles.part(qkv, 0, b, t), k = tiles.part(qkv, 1, b, t);
      const TensorView<const T> v = tiles.part(qkv, 2, b, t);
      // dV = kept^T dout; dP = (dout V^T) * mask; dS = softmax'(dP); dQ = dS K; dK = dS^T Q.
      ops::gemm<T>(true, false, T(1), tiles.kept(p, kept, b, t, queue), dout, T(0), tiles.part(dqkv, 2, b, t), queue);
      ops::gemm<T>(false, true, T(1), dout, v, T(0), dp.view(), queue);
      tiles.drop(dp.view(), b, t, queue);
      ops::causal_softmax_backward<T>(p, std::as_const(dp).view(), tiles.scale, ds.view(), queue);
      ops::gemm<T>(false, false, T(1), std::as_const(ds).view(), k, T(0), tiles.part(dqkv, 0, b, t), queue);
      ops::gemm<T>(true, false, T(1), std::as_const(ds).view(), q, T(0), tiles.part(dqkv, 1, b, t), queue);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                  \
  template void attention_core_forward<T>(const AttentionGeometry&, const GridState&, TensorView<const T>,       \
                                          ProbsStore<T>, TensorView<T>);                                         \
  template void attention_core_backward<T>(const AttentionGeometry&, const GridState&, TensorView<const T>,      \
                                           ProbsStore<T, const T>, TensorView<const T>, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::detail

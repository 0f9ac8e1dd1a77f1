// Causal multi-head attention on a local block (see attention_core.hpp).
#include "attention_core.hpp"

#include <cmath>
#include <utility>

#include "optimus/core/ops.hpp"

namespace optimus::detail {
namespace {

// The scale and the per-sequence views of one rank's attention: all of a sequence's heads at once, as batches of
// [s, d] blocks side by side (Q, K, V and their gradients) and of [s, s] tiles stacked (scores, probabilities).
template <class T>
struct Sequences {
  const AttentionGeometry& g;
  std::int64_t s = g.seq, d = g.head_size, width = g.heads * d, heads = g.heads;
  T scale = T(1) / std::sqrt(static_cast<T>(g.head_size));

  // Q (which = 0), K (1) or V (2) of sequence b, every head: [s, width] of qkv (or of its gradient, or of merged).
  template <class E>
  ops::BatchView<E> part(TensorView<E> qkv, int which, std::int64_t b) const {
    return {qkv.block(b * s, which * width, s, width), ops::Batched::side_by_side};
  }
  // Sequence b's probability tiles: [heads * s, s] of all of this rank's tiles.
  template <class V>
  V probs(V all, std::int64_t b) const {
    return all.block(b * heads * s, 0, heads * s, s);
  }
  // x [heads * s, s] *= the attention dropout masks of sequence b's tiles: 1/(1-p) where kept, 0 where dropped.
  // Tile (b, t) is rows ((first_batch + b) * total_heads + first_head + t) * s.. of the global mask: consecutive in t.
  void drop(TensorView<T> x, std::int64_t b, const ops::Queue& queue) const {
    const auto row0 = static_cast<std::uint64_t>(((g.first_batch + b) * g.total_heads + g.first_head) * s);
    ops::dropout<T>(x, row0, 0, g.dropout, g.rng.seed(), g.rng.stream(), queue);
  }
  // Scratch for one sequence's tiles, [heads * s, s], or an empty tensor when not `needed`.
  Tensor<T> tiles(bool needed, const MemoryTag& work) const {
    return needed ? Tensor<T>(Shape{heads * s, s}, work, Init::none) : Tensor<T>();
  }
  // The probabilities after dropout: p itself without dropout, else a masked copy in `kept`.
  TensorView<const T> kept(TensorView<const T> p, Tensor<T>& kept, std::int64_t b, const ops::Queue& queue) const {
    if (g.dropout <= 0.0) return p;
    ops::axpby<T>(T(1), p, T(0), kept.view(), queue);
    drop(kept.view(), b, queue);
    return std::as_const(kept).view();
  }
};

template <class T>
ops::BatchView<T> stacked(TensorView<T> tiles) {
  return {tiles, ops::Batched::stacked};
}

}  // namespace

template <class T>
void attention_core_forward(const AttentionGeometry& g, const Grid& grid, TensorView<const T> qkv,
                            ProbsStore<T> probs, TensorView<T> merged) {
  const Sequences<T> seqs{g};
  const std::int64_t heads = g.heads;
  const ops::Queue& queue = grid.queue();
  const MemoryTag work = grid.tag(MemoryKind::workspace);
  const bool full = probs.full.data() != nullptr, half = probs.half.data() != nullptr;
  Tensor<T> scores = seqs.tiles(true, work);
  Tensor<T> kept = seqs.tiles(g.dropout > 0.0 && merged.data() != nullptr, work);  // the masked copy, for x V
  Tensor<T> wide = seqs.tiles(!full, work);  // the f32 tiles when not kept in T (kept in bf16, or not kept)
  for (std::int64_t b = 0; b < g.batches; ++b) {
    const TensorView<T> p = full ? seqs.probs(probs.full, b) : wide.view();
    ops::gemm_batched<T>(Trans::no, Trans::yes, T(1), seqs.part(qkv, 0, b), seqs.part(qkv, 1, b), T(0),
                         stacked(scores.view()), heads, queue);
    ops::causal_softmax_forward<T>(std::as_const(scores).view(), seqs.scale, p, queue);
    if (merged.data() != nullptr) {
      ops::gemm_batched<T>(Trans::no, Trans::no, T(1), stacked(seqs.kept(p, kept, b, queue)), seqs.part(qkv, 2, b),
                           T(0), seqs.part(merged, 0, b), heads, queue);
    }
    if constexpr (std::is_same_v<T, float>) {
      if (half) ops::to_bf16(TensorView<const T>(p), seqs.probs(probs.half, b), queue);
    }
  }
}

template <class T>
void attention_core_backward(const AttentionGeometry& g, const Grid& grid, TensorView<const T> qkv,
                             ProbsStore<T, const T> probs, TensorView<const T> dmerged, TensorView<T> dqkv) {
  const Sequences<T> seqs{g};
  const std::int64_t heads = g.heads;
  const ops::Queue& queue = grid.queue();
  const MemoryTag work = grid.tag(MemoryKind::workspace);
  const bool half = probs.half.data() != nullptr;
  Tensor<T> dp = seqs.tiles(true, work), ds = seqs.tiles(true, work), kept = seqs.tiles(g.dropout > 0.0, work);
  Tensor<T> wide = seqs.tiles(half, work);  // tiles widened from bf16
  for (std::int64_t b = 0; b < g.batches; ++b) {
    if constexpr (std::is_same_v<T, float>) {
      if (half) ops::to_f32(seqs.probs(probs.half, b), wide.view(), queue);
    }
    const TensorView<const T> p = half ? std::as_const(wide).view() : seqs.probs(probs.full, b);
    const auto dout = seqs.part(dmerged, 0, b), q = seqs.part(qkv, 0, b), k = seqs.part(qkv, 1, b);
    const auto v = seqs.part(qkv, 2, b);
    // dV = kept^T dout; dP = (dout V^T) * mask; dS = softmax'(dP); dQ = dS K; dK = dS^T Q — for every head.
    ops::gemm_batched<T>(Trans::yes, Trans::no, T(1), stacked(seqs.kept(p, kept, b, queue)), dout, T(0),
                         seqs.part(dqkv, 2, b), heads, queue);
    ops::gemm_batched<T>(Trans::no, Trans::yes, T(1), dout, v, T(0), stacked(dp.view()), heads, queue);
    seqs.drop(dp.view(), b, queue);
    ops::causal_softmax_backward<T>(p, std::as_const(dp).view(), seqs.scale, ds.view(), queue);
    const auto dS = stacked(std::as_const(ds).view());
    ops::gemm_batched<T>(Trans::no, Trans::no, T(1), dS, k, T(0), seqs.part(dqkv, 0, b), heads, queue);
    ops::gemm_batched<T>(Trans::yes, Trans::no, T(1), dS, q, T(0), seqs.part(dqkv, 1, b), heads, queue);
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                  \
  template void attention_core_forward<T>(const AttentionGeometry&, const Grid&, TensorView<const T>,       \
                                          ProbsStore<T>, TensorView<T>);                                         \
  template void attention_core_backward<T>(const AttentionGeometry&, const Grid&, TensorView<const T>,      \
                                           ProbsStore<T, const T>, TensorView<const T>, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::detail

// CPU backend: fused causal attention (cpu_kernels.hpp, optimus/core/ops.hpp), FlashAttention-2's algorithm, so that
// no [seq, seq] matrix is whole in memory on the host either.
//
// Forward, per head of a sequence and per tile of kTile queries: the key tiles the queries may see, each a [rows, cols]
// product Q Kᵀ, the running max and sum per query (math::exp_nonpositive against the new max, the output rescaled
// when the max grows), the tile's dropped probabilities times V added to the output; then out = acc / sum and
// lse = max + log(sum). Backward, per tile of queries: its strip of probabilities over the keys it sees, recomputed as
// exp(scale q.k - lse), and the strip's dP = dO Vᵀ through the dropout mask; D = rowsum(P dP); dS = scale P (dP - D);
// dQ = dS K, dK += dSᵀ Q, dV += (dropped P)ᵀ dO. Workspace: kTile x seq numbers, O(seq).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "cpu_kernels.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

constexpr std::int64_t kTile = 64;  // queries and keys of a tile (a multiple of the dropout draws' 4 columns)

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Strided = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;
template <class T>
using StridedOut = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;

// Head t of sequence b: its Q, K, V [seq, d] in qkv (row stride 3 * width), and its tiles' first row of the mask.
template <class T>
struct Head {
  Strided<T> q, k, v;
  std::uint64_t mask_row;
  std::int64_t lse_row;  // (b * heads + t) * seq

  Head(const T* qkv, const ops::AttentionShape& s, std::int64_t d, std::int64_t b, std::int64_t t)
      : q(qkv + (b * s.seq) * 3 * s.heads * d + t * d, s.seq, d, Eigen::OuterStride<>(3 * s.heads * d)),
        k(q.data() + s.heads * d, s.seq, d, Eigen::OuterStride<>(3 * s.heads * d)),
        v(q.data() + 2 * s.heads * d, s.seq, d, Eigen::OuterStride<>(3 * s.heads * d)),
        mask_row(static_cast<std::uint64_t>(((s.first_batch + b) * s.total_heads + s.first_head + t) * s.seq)),
        lse_row((b * s.heads + t) * s.seq) {}
};

// The keys query i sees among the `cols` from j0: i - j0 + 1, within [0, cols].
std::int64_t visible(std::int64_t i, std::int64_t j0, std::int64_t cols) {
  return std::clamp<std::int64_t>(i - j0 + 1, 0, cols);
}

// p[c] = exp(p[c] - max) for c < n, 0 from n to cols (the loops vectorise: math::softmax_exp has no call in f32).
template <class T>
OPTIMUS_VECTOR_CLONES void exps(T* p, T max, std::int64_t n, std::int64_t cols) {
  for (std::int64_t c = 0; c < n; ++c) p[c] = math::softmax_exp(p[c], T(1), max);
  for (std::int64_t c = n; c < cols; ++c) p[c] = T(0);
}

// The row's `n` values dropped as the global mask's row `row` from column 0 says: x / (1 - p) or 0.
template <class T>
void drop(T* x, std::int64_t n, std::uint64_t row, std::uint64_t col0, const ops::AttentionShape& s) {
  if (s.dropout <= 0.0 || n == 0) return;
  dropout(TensorView<T>(x, Shape{1, n}, Device::cpu), row, col0, s.dropout, s.seed, s.stream);
}

template <class T>
void forward_head(const Head<T>& h, const ops::AttentionShape& s, std::int64_t d, T* out, std::int64_t out_stride,
                  T* lse) {
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  Matrix<T> scores(kTile, kTile), acc(kTile, d);
  std::vector<T> max(kTile), sum(kTile);
  for (std::int64_t i0 = 0; i0 < s.seq; i0 += kTile) {
    const std::int64_t rows = std::min(kTile, s.seq - i0);
    std::fill(max.begin(), max.end(), -std::numeric_limits<T>::infinity());
    std::fill(sum.begin(), sum.end(), T(0));
    acc.setZero();
    for (std::int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {  // the key tiles some query of this tile sees
      const std::int64_t cols = std::min(kTile, s.seq - j0);
      scores.topLeftCorner(rows, cols).noalias() = h.q.middleRows(i0, rows) * h.k.middleRows(j0, cols).transpose();
      for (std::int64_t r = 0; r < rows; ++r) {
        T* p = &scores(r, 0);
        const std::int64_t n = visible(i0 + r, j0, cols);
        if (n == 0) {
          std::fill(p, p + cols, T(0));
          continue;
        }
        T tile_max = scale * p[0];
        for (std::int64_t c = 0; c < n; ++c) {
          p[c] *= scale;
          tile_max = std::max(tile_max, p[c]);
        }
        const T new_max = std::max(max[static_cast<std::size_t>(r)], tile_max);
        const T rescale = math::exp_nonpositive(max[static_cast<std::size_t>(r)] - new_max);
        exps(p, new_max, n, cols);
        sum[static_cast<std::size_t>(r)] = rescale * sum[static_cast<std::size_t>(r)] + lane_sum(p, n);
        drop(p, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), static_cast<std::uint64_t>(j0), s);
        acc.row(r) *= rescale;
        max[static_cast<std::size_t>(r)] = new_max;
      }
      acc.topRows(rows).noalias() += scores.topLeftCorner(rows, cols) * h.v.middleRows(j0, cols);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const T l = sum[static_cast<std::size_t>(r)];
      StridedOut<T>(out + (i0 + r) * out_stride, 1, d, Eigen::OuterStride<>(out_stride)) = acc.row(r) / l;
      lse[i0 + r] = max[static_cast<std::size_t>(r)] + std::log(l);
    }
  }
}

template <class T>
void backward_head(const Head<T>& h, const ops::AttentionShape& s, std::int64_t d, const T* dout,
                   std::int64_t out_stride, const T* lse, T* dqkv, T* delta) {
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  const std::int64_t stride = 3 * s.heads * d;  // dqkv has qkv's layout
  StridedOut<T> dq(dqkv, s.seq, d, Eigen::OuterStride<>(stride));
  StridedOut<T> dk(dqkv + s.heads * d, s.seq, d, Eigen::OuterStride<>(stride));
  StridedOut<T> dv(dqkv + 2 * s.heads * d, s.seq, d, Eigen::OuterStride<>(stride));
  dk.setZero();
  dv.setZero();
  const Strided<T> dO(dout, s.seq, d, Eigen::OuterStride<>(out_stride));
  Matrix<T> p(kTile, s.seq), dp(kTile, s.seq);
  for (std::int64_t i0 = 0; i0 < s.seq; i0 += kTile) {
    const std::int64_t rows = std::min(kTile, s.seq - i0), keys = i0 + rows;  // the keys the tile's queries see
    auto P = p.topLeftCorner(rows, keys);
    auto DP = dp.topLeftCorner(rows, keys);
    P.noalias() = h.q.middleRows(i0, rows) * h.k.topRows(keys).transpose();
    DP.noalias() = dO.middleRows(i0, rows) * h.v.topRows(keys).transpose();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t n = i0 + r + 1;
      T* pr = &p(r, 0);
      T* dpr = &dp(r, 0);
      for (std::int64_t c = 0; c < n; ++c) pr[c] *= scale;
      exps(pr, lse[i0 + r], n, keys);  // the forward's probabilities: exp(scale q.k - lse)
      drop(dpr, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), 0, s);
      T dot = T(0);
      for (std::int64_t c = 0; c < n; ++c) dot += pr[c] * dpr[c];
      delta[i0 + r] = dot;
      // dS in dp's place; then the dropped probabilities in p's, for dV.
      for (std::int64_t c = 0; c < keys; ++c) dpr[c] = math::softmax_grad(pr[c], dpr[c], dot, scale);
      drop(pr, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), 0, s);
    }
    dq.middleRows(i0, rows).noalias() = DP * h.k.topRows(keys);
    dk.topRows(keys).noalias() += DP.transpose() * h.q.middleRows(i0, rows);
    dv.topRows(keys).noalias() += P.transpose() * dO.middleRows(i0, rows);
  }
}

}  // namespace

template <class T>
void flash_attention_forward(TensorView<const T> qkv, const ops::AttentionShape& s, TensorView<T> out,
                             TensorView<T> lse) {
  const std::int64_t width = out.size(1), d = width / s.heads, batches = out.size(0) / s.seq;
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      const Head<T> h(qkv.data(), s, d, b, t);
      forward_head(h, s, d, out.data() + b * s.seq * width + t * d, width, lse.data() + h.lse_row);
    }
  }
}

template <class T>
void flash_attention_backward(TensorView<const T> qkv, TensorView<const T> dout, TensorView<const T> lse,
                              const ops::AttentionShape& s, TensorView<T> dqkv, TensorView<T> delta) {
  const std::int64_t width = dout.size(1), d = width / s.heads, batches = dout.size(0) / s.seq;
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      const Head<T> h(qkv.data(), s, d, b, t);
      backward_head(h, s, d, dout.data() + b * s.seq * width + t * d, width, lse.data() + h.lse_row,
                    dqkv.data() + b * s.seq * 3 * width + t * d, delta.data() + h.lse_row);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                   \
  template void flash_attention_forward<T>(TensorView<const T>, const ops::AttentionShape&, TensorView<T>,    \
                                           TensorView<T>);                                                       \
  template void flash_attention_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,     \
                                            const ops::AttentionShape&, TensorView<T>, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

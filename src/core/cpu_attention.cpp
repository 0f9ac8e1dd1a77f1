// CPU backend: dropout and the causal softmax (cpu_kernels.hpp), with the shared element arithmetic.
#include <algorithm>

#include "cpu_kernels.hpp"
#include "eigen_views.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

using detail::ConstRows;

constexpr std::int64_t kPerDraw = math::kDropoutColumnsPerDraw;

// Dropout of the whole draws (groups of four columns) first_group .. first_group + groups - 1 of global row `row`,
// whose columns start at x: one Philox call per four elements, in integers (the loop vectorises).
template <class T>
OPTIMUS_VECTOR_CLONES void dropout_groups(T* x, std::int64_t groups, std::uint64_t threshold, T scale,
                                          std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                          std::uint64_t first_group) {
  for (std::int64_t g = 0; g < groups; ++g) {
    std::uint32_t words[kPerDraw];
    math::dropout_words(seed, stream, row, first_group + static_cast<std::uint64_t>(g), words);
    for (std::int64_t lane = 0; lane < kPerDraw; ++lane) {
      x[g * kPerDraw + lane] = math::dropout(x[g * kPerDraw + lane], words[lane] >= threshold, scale);
    }
  }
}

// Dropout of n contiguous elements of global row `row` from global column col0: element by element
// (math::dropout_keeps) up to the first whole draw and after the last, whole draws between.
template <class T>
void dropout_row(T* x, std::int64_t n, double p, T scale, std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                 std::uint64_t col0) {
  const auto one = [&](std::int64_t c) {
    x[c] = math::dropout(x[c], math::dropout_keeps(p, seed, stream, row, col0 + static_cast<std::uint64_t>(c)), scale);
  };
  std::int64_t c = 0;
  for (; c < n && (col0 + static_cast<std::uint64_t>(c)) % kPerDraw != 0; ++c) one(c);
  const std::int64_t groups = (n - c) / kPerDraw;
  dropout_groups(x + c, groups, math::dropout_threshold(p), scale, seed, stream, row,
                 (col0 + static_cast<std::uint64_t>(c)) / kPerDraw);
  for (c += groups * kPerDraw; c < n; ++c) one(c);
}

// p[c] = exp(scale s[c] - max) for c < keep, then 0 to n (the loops vectorise: math::softmax_exp has no call in f32).
template <class T>
OPTIMUS_VECTOR_CLONES void softmax_exps(const T* s, T scale, T max, std::int64_t keep, std::int64_t n, T* p) {
  for (std::int64_t c = 0; c < keep; ++c) p[c] = math::softmax_exp(s[c], scale, max);
  for (std::int64_t c = keep; c < n; ++c) p[c] = T(0);
}

// p[c] /= sum for c < n.
template <class T>
OPTIMUS_VECTOR_CLONES void normalize(T* p, T sum, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) p[c] = math::normalized(p[c], sum);
}

}  // namespace

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {  // rows contiguous (ops::dropout checks)
    dropout_row(&x(r, 0), x.size(1), p, scale, seed, stream, row0 + static_cast<std::uint64_t>(r), col0);
  }
}

// Row `row` of tile row % seq keeps columns 0..row % seq: the max and the sum (lane_sum) over those, the rest 0.
template <class T>
void causal_softmax_forward(TensorView<const T> scores, T scale, TensorView<T> probs) {
  const std::int64_t rows = scores.size(0), seq = scores.size(1);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t keep = row % seq + 1;
    const T* s = scores.data() + row * seq;
    T* p = probs.data() + row * seq;
    T max = scale * s[0];
    for (std::int64_t c = 1; c < keep; ++c) max = std::max(max, scale * s[c]);
    softmax_exps(s, scale, max, keep, seq, p);
    normalize(p, lane_sum(p, keep), keep);
  }
}

template <class T>
void causal_softmax_backward(TensorView<const T> probs, TensorView<const T> dp, T scale, TensorView<T> ds) {
  const std::int64_t rows = probs.size(0), seq = probs.size(1);
  const ConstRows<T> P(probs.data(), rows, seq), DP(dp.data(), rows, seq);
  for (std::int64_t row = 0; row < rows; ++row) {
    const T dot = DP.row(row).dot(P.row(row));
    for (std::int64_t c = 0; c < seq; ++c) {
      ds.data()[row * seq + c] = math::softmax_grad(P(row, c), DP(row, c), dot, scale);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                 \
  template void dropout<T>(TensorView<T>, std::uint64_t, std::uint64_t, double, std::uint64_t, std::uint64_t); \
  template void causal_softmax_forward<T>(TensorView<const T>, T, TensorView<T>);                              \
  template void causal_softmax_backward<T>(TensorView<const T>, TensorView<const T>, T, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

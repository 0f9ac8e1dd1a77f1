// CPU backend: dropout and the causal softmax (cpu_kernels.hpp), with the shared element arithmetic.
#include <algorithm>

#include "cpu_kernels.hpp"
#include "eigen_views.hpp"

namespace optimus::cpu {
namespace {

using detail::ConstRows;

}  // namespace

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) {
      const bool keep = math::dropout_keeps(p, seed, stream, row0 + static_cast<std::uint64_t>(r),
                                            col0 + static_cast<std::uint64_t>(c));
      x(r, c) = math::dropout(x(r, c), keep, scale);
    }
  }
}

// Row `row` of tile row % seq keeps columns 0..row % seq: the max and the sum over those, the rest 0.
template <class T>
void causal_softmax_forward(TensorView<const T> scores, T scale, TensorView<T> probs) {
  const std::int64_t rows = scores.size(0), seq = scores.size(1);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t r = row % seq;
    const T* s = scores.data() + row * seq;
    T* p = probs.data() + row * seq;
    T max = scale * s[0];
    for (std::int64_t c = 1; c <= r; ++c) max = std::max(max, scale * s[c]);
    T sum = 0;
    for (std::int64_t c = 0; c < seq; ++c) {
      p[c] = c <= r ? math::softmax_exp(s[c], scale, max) : T(0);
      sum += p[c];
    }
    for (std::int64_t c = 0; c <= r; ++c) p[c] = math::normalized(p[c], sum);
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

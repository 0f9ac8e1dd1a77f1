// Causal softmax of attention scores, dispatched by device (optimus/core/ops.hpp).
#include <cmath>

#include "ops_dispatch.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/layer_kernels.hpp"
#endif

namespace optimus::ops {
namespace {

using detail::ConstRows;
using detail::Rows;

// [tiles * seq, seq] operands: the tile size, after checking the shapes.
template <class T>
std::int64_t square_tiles(const char* op, const TensorView<const T>& a, const char* b_name, const Shape& b) {
  OPTIMUS_CHECK(a.rank() == 2 && a.size(1) > 0 && a.size(0) % a.size(1) == 0, op,
                ": expected [tiles * seq, seq] scores, got shape ", a.shape());
  OPTIMUS_CHECK(a.shape() == b, op, ": ", b_name, " has shape ", b, ", expected ", a.shape());
  OPTIMUS_CHECK(a.is_contiguous(), op, ": operands must be contiguous");
  return a.size(1);
}

}  // namespace

template <class T>
void causal_softmax_forward(TensorView<const T> scores, T scale, TensorView<T> probs, [[maybe_unused]] Queue queue) {
  const char* op = "causal_softmax_forward";
  const std::int64_t seq = square_tiles(op, scores, "probs", probs.shape()), rows = scores.size(0);
  OPTIMUS_CHECK(probs.is_contiguous(), op, ": operands must be contiguous");
  if (detail::on_cuda<T>(op, {{"scores", scores.device()}, {"probs", probs.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::causal_softmax_forward(scores.data(), scale, rows / seq, seq, probs.data(), detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> S(scores.data(), rows, seq);
  Rows<T> P(probs.data(), rows, seq);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t r = row % seq;
    const T max = (scale * S.row(row).head(r + 1)).maxCoeff();
    T sum = 0;
    for (std::int64_t c = 0; c < seq; ++c) {
      P(row, c) = c <= r ? std::exp(scale * S(row, c) - max) : T(0);
      sum += P(row, c);
    }
    P.row(row) /= sum;
  }
}

template <class T>
void causal_softmax_backward(TensorView<const T> probs, TensorView<const T> dp, T scale, TensorView<T> ds,
                             [[maybe_unused]] Queue queue) {
  const char* op = "causal_softmax_backward";
  const std::int64_t seq = square_tiles(op, probs, "dp", dp.shape()), rows = probs.size(0);
  OPTIMUS_CHECK(ds.shape() == probs.shape() && ds.is_contiguous() && dp.is_contiguous(), op, ": ds has shape ",
                ds.shape(), ", expected ", probs.shape(), " (contiguous)");
  if (detail::on_cuda<T>(op, {{"probs", probs.device()}, {"dp", dp.device()}, {"ds", ds.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::causal_softmax_backward(probs.data(), dp.data(), scale, rows / seq, seq, ds.data(),
                                    detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> P(probs.data(), rows, seq), DP(dp.data(), rows, seq);
  Rows<T> DS(ds.data(), rows, seq);
  for (std::int64_t row = 0; row < rows; ++row) {
    const T dot = DP.row(row).dot(P.row(row));
    DS.row(row) = scale * P.row(row).array() * (DP.row(row).array() - dot);
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                        \
  template void causal_softmax_forward<T>(TensorView<const T>, T, TensorView<T>, Queue);              \
  template void causal_softmax_backward<T>(TensorView<const T>, TensorView<const T>, T, TensorView<T>, \
                                           Queue);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

// Device dispatch and the CPU side of optimus/core/ops.hpp. The CPU loops are the layers' Eigen expressions,
// row by row, so results do not depend on the dispatch; the CUDA side calls optimus/cuda/layer_kernels.hpp.
#include "optimus/core/ops.hpp"

#include <cmath>

#include "ops_dispatch.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/layer_kernels.hpp"
#endif

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::on_cuda;
using detail::rows_of;
#if OPTIMUS_HAVE_CUDA
using detail::stream_of;
#endif

using detail::ConstRows;
using detail::ConstVec;
using detail::Rows;
using detail::Vec;

}  // namespace

namespace {

// row_sums and row_max: one reduction of each row.
template <class T, bool Max>
void row_reduce(const char* op, TensorView<const T> x, TensorView<T> out, [[maybe_unused]] Queue queue) {
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "out", out, rows, 1);
  if (on_cuda<T>(op, {{"x", x.device()}, {"out", out.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      (Max ? cuda::row_max : cuda::row_sums)(x.data(), rows, cols, out.data(), stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> X(x.data(), rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) out.data()[r] = Max ? X.row(r).maxCoeff() : X.row(r).sum();
}

}  // namespace

template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out, Queue queue) {
  row_reduce<T, false>("row_sums", x, out, queue);
}

template <class T>
void row_max(TensorView<const T> x, TensorView<T> out, Queue queue) {
  row_reduce<T, true>("row_max", x, out, queue);
}

template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out, [[maybe_unused]] Queue queue) {
  const char* op = "layernorm_square_deviations";
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "row_sum", row_sum, rows, 1);
  check_shape(op, "out", out, rows, 1);
  if (on_cuda<T>(op, {{"x", x.device()}, {"row_sum", row_sum.device()}, {"out", out.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::layernorm_square_deviations(x.data(), row_sum.data(), hidden, rows, cols, out.data(), stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> X(x.data(), rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean = row_sum.data()[r] / static_cast<T>(hidden);
    out.data()[r] = (X.row(r).array() - mean).square().sum();
  }
}

template <class T>
void layernorm_normalize(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                         TensorView<const T> gamma, TensorView<const T> beta, std::int64_t hidden, TensorView<T> xhat,
                         TensorView<T> rstd, TensorView<T> y, [[maybe_unused]] Queue queue) {
  const char* op = "layernorm_normalize";
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "row_sum", row_sum, rows, 1);
  check_shape(op, "sq_dev", sq_dev, rows, 1);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "beta", beta, 1, cols);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "rstd", rstd, rows, 1);
  check_shape(op, "y", y, rows, cols);
  if (on_cuda<T>(op, {{"x", x.device()}, {"row_sum", row_sum.device()}, {"sq_dev", sq_dev.device()},
                       {"gamma", gamma.device()}, {"beta", beta.device()}, {"xhat", xhat.device()},
                       {"rstd", rstd.device()}, {"y", y.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::layernorm_normalize(x.data(), row_sum.data(), sq_dev.data(), gamma.data(), beta.data(), hidden, rows, cols,
                                xhat.data(), rstd.data(), y.data(), stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> X(x.data(), rows, cols);
  Rows<T> XH(xhat.data(), rows, cols), Y(y.data(), rows, cols);
  const ConstVec<T> G(gamma.data(), cols), B(beta.data(), cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean = row_sum.data()[r] / static_cast<T>(hidden);
    rstd.data()[r] = T(1) / std::sqrt(sq_dev.data()[r] / static_cast<T>(hidden) + T(1e-5));
    XH.row(r) = (X.row(r).array() - mean) * rstd.data()[r];
    Y.row(r) = XH.row(r).array() * G + B;
  }
}

template <class T>
void layernorm_backward_partials(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                                 TensorView<T> dgamma, TensorView<T> dbeta, TensorView<T> sums,
                                 [[maybe_unused]] Queue queue) {
  const char* op = "layernorm_backward_partials";
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "dgamma", dgamma, 1, cols);
  check_shape(op, "dbeta", dbeta, 1, cols);
  check_shape(op, "sums", sums, 2 * rows, 1);
  if (on_cuda<T>(op, {{"dy", dy.device()}, {"xhat", xhat.device()}, {"gamma", gamma.device()},
                       {"dgamma", dgamma.device()}, {"dbeta", dbeta.device()}, {"sums", sums.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::layernorm_backward_partials(dy.data(), xhat.data(), gamma.data(), rows, cols, dgamma.data(), dbeta.data(),
                                        sums.data(), stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> DY(dy.data(), rows, cols), XH(xhat.data(), rows, cols);
  const ConstVec<T> G(gamma.data(), cols);
  Vec<T>(dgamma.data(), cols) = (DY.array() * XH.array()).colwise().sum();
  Vec<T>(dbeta.data(), cols) = DY.array().colwise().sum();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto dxhat = DY.row(r).array() * G;
    sums.data()[2 * r] = dxhat.sum();
    sums.data()[2 * r + 1] = (dxhat * XH.row(r).array()).sum();
  }
}

template <class T>
void layernorm_backward_dx(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                           TensorView<const T> rstd, TensorView<const T> sums, std::int64_t hidden, TensorView<T> dx,
                           [[maybe_unused]] Queue queue) {
  const char* op = "layernorm_backward_dx";
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "rstd", rstd, rows, 1);
  check_shape(op, "sums", sums, 2 * rows, 1);
  check_shape(op, "dx", dx, rows, cols);
  if (on_cuda<T>(op, {{"dy", dy.device()}, {"xhat", xhat.device()}, {"gamma", gamma.device()},
                       {"rstd", rstd.device()}, {"sums", sums.device()}, {"dx", dx.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::layernorm_backward_dx(dy.data(), xhat.data(), gamma.data(), rstd.data(), sums.data(), hidden, rows, cols,
                                  dx.data(), stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> DY(dy.data(), rows, cols), XH(xhat.data(), rows, cols);
  const ConstVec<T> G(gamma.data(), cols);
  Rows<T> DX(dx.data(), rows, cols);
  const T inv_h = T(1) / static_cast<T>(hidden);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean_dxhat = sums.data()[2 * r] * inv_h;
    const T mean_dxhat_xhat = sums.data()[2 * r + 1] * inv_h;
    DX.row(r) = rstd.data()[r] * (DY.row(r).array() * G - mean_dxhat - XH.row(r).array() * mean_dxhat_xhat);
  }
}

template <class T>
void cross_entropy_exp_sums(TensorView<T> logits, TensorView<const T> max, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, TensorView<T> sums,
                            [[maybe_unused]] Queue queue) {
  const char* op = "cross_entropy_exp_sums";
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits);
  check_shape(op, "max", max, rows, 1);
  check_shape(op, "sums", sums, 2 * rows, 1);
  OPTIMUS_CHECK(row_offset >= 0 && row_offset + rows <= targets.numel(), op, ": rows ", row_offset, "..",
                row_offset + rows, " are outside the ", targets.numel(), " targets");
  if (on_cuda<T>(op, {{"logits", logits.device()}, {"max", max.device()}, {"targets", targets.device()},
                       {"sums", sums.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::cross_entropy_exp_sums(logits.data(), max.data(), targets.data(), row_offset, v0, rows, vn, sums.data(),
                                   stream_of(queue));
    }
#endif
    return;
  }
  Rows<T> L(logits.data(), rows, vn);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t target = targets.data()[row_offset + r];
    sums.data()[2 * r + 1] = target >= v0 && target < v0 + vn ? L(r, target - v0) : T(0);
    L.row(r) = (L.row(r).array() - max.data()[r]).exp();
    sums.data()[2 * r] = L.row(r).sum();
  }
}

template <class T>
void cross_entropy_finish(TensorView<T> probs, TensorView<const T> max, TensorView<const T> sums,
                          TensorView<double> row_loss, [[maybe_unused]] Queue queue) {
  const char* op = "cross_entropy_finish";
  const std::int64_t rows = rows_of(probs), vn = cols_of(probs);
  check_shape(op, "max", max, rows, 1);
  check_shape(op, "sums", sums, 2 * rows, 1);
  check_shape(op, "row_loss", row_loss, rows, 1);
  if (on_cuda<T>(op, {{"probs", probs.device()}, {"max", max.device()}, {"sums", sums.device()},
                       {"row_loss", row_loss.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::cross_entropy_finish(probs.data(), max.data(), sums.data(), rows, vn, row_loss.data(), stream_of(queue));
    }
#endif
    return;
  }
  Rows<T> P(probs.data(), rows, vn);
  for (std::int64_t r = 0; r < rows; ++r) {
    row_loss.data()[r] = std::log(static_cast<double>(sums.data()[2 * r])) + static_cast<double>(max.data()[r]) -
                         static_cast<double>(sums.data()[2 * r + 1]);
    P.row(r) /= sums.data()[2 * r];
  }
}

template <class T>
void cross_entropy_backward(TensorView<T> probs, TensorView<const int> targets, std::int64_t row_offset,
                            std::int64_t v0, [[maybe_unused]] Queue queue) {
  const char* op = "cross_entropy_backward";
  const std::int64_t rows = rows_of(probs), vn = cols_of(probs), n_tokens = targets.numel();
  OPTIMUS_CHECK(row_offset >= 0 && row_offset + rows <= n_tokens, op, ": rows ", row_offset, "..", row_offset + rows,
                " are outside the ", n_tokens, " targets");
  if (on_cuda<T>(op, {{"probs", probs.device()}, {"targets", targets.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::cross_entropy_backward(probs.data(), targets.data(), row_offset, v0, rows, vn, n_tokens, stream_of(queue));
    }
#endif
    return;
  }
  Rows<T> D(probs.data(), rows, vn);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t target = targets.data()[row_offset + r];
    if (target >= v0 && target < v0 + vn) D(r, target - v0) -= T(1);
  }
  D /= static_cast<T>(n_tokens);
}

#define OPTIMUS_INSTANTIATE(T)                                                                                        \
  template void row_sums<T>(TensorView<const T>, TensorView<T>, Queue);                                               \
  template void row_max<T>(TensorView<const T>, TensorView<T>, Queue);                                                \
  template void layernorm_square_deviations<T>(TensorView<const T>, TensorView<const T>, std::int64_t, TensorView<T>, \
                                               Queue);                                                                \
  template void layernorm_normalize<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,                 \
                                       TensorView<const T>, TensorView<const T>, std::int64_t, TensorView<T>,         \
                                       TensorView<T>, TensorView<T>, Queue);                                          \
  template void layernorm_backward_partials<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,         \
                                               TensorView<T>, TensorView<T>, TensorView<T>, Queue);                   \
  template void layernorm_backward_dx<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,               \
                                         TensorView<const T>, TensorView<const T>, std::int64_t, TensorView<T>,       \
                                         Queue);                                                                      \
  template void cross_entropy_exp_sums<T>(TensorView<T>, TensorView<const T>, TensorView<const int>, std::int64_t,    \
                                          std::int64_t, TensorView<T>, Queue);                                        \
  template void cross_entropy_finish<T>(TensorView<T>, TensorView<const T>, TensorView<const T>, TensorView<double>,  \
                                        Queue);                                                                       \
  template void cross_entropy_backward<T>(TensorView<T>, TensorView<const int>, std::int64_t, std::int64_t, Queue);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

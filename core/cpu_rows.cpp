// CPU backend: row statistics and LayerNorm (cpu_kernels.hpp), row by row with the shared element arithmetic.
#include <type_traits>
#include <vector>

#include "optimus/core/cpu_kernels.hpp"
#include "eigen_views.hpp"

namespace optimus::cpu {
namespace {

using detail::cols_of;
using detail::ConstRows;
using detail::ConstVec;
using detail::rows_of;

}  // namespace

template <class T>
T row_sum(const T* x, std::int64_t n) {
  return ConstVec<T>(x, n).sum();
}

template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out) {
  const std::int64_t cols = cols_of(x);
  for (std::int64_t r = 0; r < rows_of(x); ++r) out.data()[r] = row_sum(x.data() + r * cols, cols);
}

template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out) {
  const ConstRows<T> X(x.data(), rows_of(x), cols_of(x));
  for (std::int64_t r = 0; r < X.rows(); ++r) {
    const T mean = math::layernorm_mean(row_sum.data()[r], static_cast<T>(hidden));
    out.data()[r] = (X.row(r).array() - mean).square().sum();
  }
}

namespace {

// xhat and y in T, or rounded to bf16 (Out) as they are written.
template <class T, class Out>
void normalize_rows(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                    TensorView<const T> gamma, TensorView<const T> beta, const ops::Normalization& norm,
                    TensorView<Out> xhat, TensorView<T> rstd, TensorView<Out> y) {
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  const T h = static_cast<T>(norm.hidden), eps = static_cast<T>(norm.eps);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean = math::layernorm_mean(row_sum.data()[r], h);
    const T s = math::layernorm_rstd(sq_dev.data()[r], h, eps);
    rstd.data()[r] = s;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t e = r * cols + c;
      const T xh = math::layernorm_xhat(x.data()[e], mean, s);
      xhat.data()[e] = Out(xh);
      y.data()[e] = Out(math::layernorm_y(xh, gamma.data()[c], beta.data()[c]));
    }
  }
}

}  // namespace

template <class T>
void layernorm_normalize(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                         TensorView<const T> gamma, TensorView<const T> beta, const ops::Normalization& norm,
                         TensorView<T> xhat, TensorView<T> rstd, TensorView<T> y) {
  normalize_rows<T, T>(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y);
}

void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                         TensorView<const float> gamma, TensorView<const float> beta, const ops::Normalization& norm,
                         TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y) {
  normalize_rows<float, bf16>(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y);
}

namespace {

// Row r of xhat as T: the row itself, or (bf16) widened into `buffer`.
template <class T, class X>
const T* xhat_row(const X* xhat, std::int64_t r, std::int64_t cols, std::vector<T>& buffer) {
  if constexpr (std::is_same_v<X, T>) {
    return xhat + r * cols;
  } else {
    to_f32(TensorView<const bf16>(xhat + r * cols, Shape{1, cols}, Device::cpu),
           TensorView<float>(buffer.data(), Shape{1, cols}, Device::cpu));
    return buffer.data();
  }
}

}  // namespace

template <class T, class X>
void layernorm_backward_partials(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma,
                                 TensorView<T> dgamma, TensorView<T> dbeta, TensorView<T> sums) {
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  const ConstVec<T> G(gamma.data(), cols);
  std::vector<T> widened(std::is_same_v<X, T> ? 0 : static_cast<std::size_t>(cols));
  // Each column summed over the rows in order (the CUDA kernel's order).
  T* g = dgamma.data();
  T* b = dbeta.data();
  for (std::int64_t c = 0; c < cols; ++c) g[c] = b[c] = T(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* dy_row = dy.data() + r * cols;
    const T* xh = xhat_row(xhat.data(), r, cols, widened);
    for (std::int64_t c = 0; c < cols; ++c) {
      g[c] += dy_row[c] * xh[c];
      b[c] += dy_row[c];
    }
    const auto dxhat = ConstVec<T>(dy_row, cols).array() * G.array();
    sums.data()[2 * r] = dxhat.sum();
    sums.data()[2 * r + 1] = (dxhat * ConstVec<T>(xh, cols).array()).sum();
  }
}

template <class T, class X>
void layernorm_backward_dx(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma,
                           TensorView<const T> rstd, TensorView<const T> sums, const ops::Normalization& norm,
                           TensorView<const T> residual, TensorView<T> dx) {
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  const T h = static_cast<T>(norm.hidden);
  const T* add = residual.rank() == 0 ? nullptr : residual.data();  // no residual: TensorView{}
  std::vector<T> widened(std::is_same_v<X, T> ? 0 : static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean_d = norm.centered ? math::layernorm_mean(sums.data()[2 * r], h) : T(0);
    const T mean_dx = math::layernorm_mean(sums.data()[2 * r + 1], h);
    const T* xh = xhat_row(xhat.data(), r, cols, widened);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t e = r * cols + c;
      const T d = math::layernorm_dx(dy.data()[e], gamma.data()[c], xh[c], rstd.data()[r], mean_d, mean_dx);
      dx.data()[e] = add == nullptr ? d : math::axpby(T(1), add[e], T(1), d);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                        \
  template T row_sum<T>(const T*, std::int64_t);                                                                      \
  template void row_sums<T>(TensorView<const T>, TensorView<T>);                                                      \
  template void layernorm_square_deviations<T>(TensorView<const T>, TensorView<const T>, std::int64_t, TensorView<T>); \
  template void layernorm_normalize<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,                 \
                                       TensorView<const T>, TensorView<const T>, const ops::Normalization&,           \
                                       TensorView<T>, TensorView<T>, TensorView<T>);                                  \
  template void layernorm_backward_partials<T, T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,      \
                                                  TensorView<T>, TensorView<T>, TensorView<T>);                       \
  template void layernorm_backward_dx<T, T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,            \
                                            TensorView<const T>, TensorView<const T>, const ops::Normalization&,      \
                                            TensorView<const T>, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE
template void layernorm_backward_partials<float, bf16>(TensorView<const float>, TensorView<const bf16>,
                                                       TensorView<const float>, TensorView<float>, TensorView<float>,
                                                       TensorView<float>);
template void layernorm_backward_dx<float, bf16>(TensorView<const float>, TensorView<const bf16>,
                                                 TensorView<const float>, TensorView<const float>,
                                                 TensorView<const float>, const ops::Normalization&,
                                                 TensorView<const float>,
                                                 TensorView<float>);

}  // namespace optimus::cpu

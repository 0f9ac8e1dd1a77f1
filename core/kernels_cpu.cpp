// CPU kernels: argument checks, then Eigen expressions on strided views (GEMM: gemm_backend.hpp).
#include "optimus/core/kernels.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "optimus/core/cpu_kernels.hpp"
#include "gemm_backend.hpp"
#include "optimus/core/element_math.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

// GELU and its backward over n contiguous elements (math::gelu has no branch or call in f32: the loops vectorise).
template <class T>
OPTIMUS_VECTOR_CLONES void gelu_row(const T* x, T* y, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) y[e] = math::gelu(x[e]);
}
// x in T, or in bf16 (X) widened as it is read.
template <class T, class X>
OPTIMUS_VECTOR_CLONES void gelu_backward_row(const X* x, const T* dy, T* dx, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) dx[e] = dy[e] * math::gelu_derivative(static_cast<T>(x[e]));
}

// acc[e] += x[e] over n contiguous elements.
template <class T>
OPTIMUS_VECTOR_CLONES void add_row(const T* x, T* acc, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) acc[e] += x[e];
}

template <class T>
using RowMajor = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
using MatrixMap = Eigen::Map<std::conditional_t<std::is_const_v<T>, const RowMajor<T>, RowMajor<T>>, Eigen::Unaligned,
                             Eigen::OuterStride<>>;

// A host matrix with contiguous rows, or an error naming the operand.
template <class T>
void check_matrix(const TensorView<T>& v, const char* what) {
  OPTIMUS_CHECK(v.device() == Device::cpu, "CPU kernel given a device tensor for ", what);
  OPTIMUS_CHECK(v.rank() == 2, "CPU kernel needs a matrix for ", what, ", got shape ", v.shape());
  OPTIMUS_CHECK(v.stride(1) == 1 || v.size(1) <= 1, "CPU kernel needs contiguous rows for ", what, ", got strides ",
                v.strides());
}

// Elements between the starts of consecutive rows (at least one row's width, for degenerate views).
template <class T>
std::int64_t leading_dim(const TensorView<T>& v) {
  return std::max<std::int64_t>({v.stride(0), v.size(1), 1});
}

// A contiguous tensor of another rank (a vector, say) as the matrix [1, numel]; a matrix as it is.
template <class T>
TensorView<T> matrix_of(const TensorView<T>& v, const char* what) {
  if (v.rank() == 2) return v;
  OPTIMUS_CHECK(v.is_contiguous(), "CPU kernel needs a matrix or a contiguous tensor for ", what, ", got shape ",
                v.shape(), " and strides ", v.strides());
  return TensorView<T>(v.data(), Shape{1, v.numel()}, v.device());
}

template <class T>
MatrixMap<T> as_eigen(TensorView<T> v, const char* what) {
  v = matrix_of(v, what);
  check_matrix(v, what);
  return MatrixMap<T>(v.data(), v.size(0), v.size(1), Eigen::OuterStride<>(leading_dim(v)));
}

}  // namespace

template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta,
          TensorView<T> c) {
  check_matrix(a, "A");
  check_matrix(b, "B");
  const bool ta = trans_a == Trans::yes;
  const bool tb = trans_b == Trans::yes;
  const std::int64_t m = ta ? a.size(1) : a.size(0);
  const std::int64_t ka = ta ? a.size(0) : a.size(1);
  const std::int64_t kb = tb ? b.size(1) : b.size(0);
  const std::int64_t n = tb ? b.size(0) : b.size(1);
  OPTIMUS_CHECK(ka == kb && c.size(0) == m && c.size(1) == n, "gemm shapes do not agree: op(A) is ", m, "x", ka,
                ", op(B) is ", kb, "x", n, ", C is ", c.size(0), "x", c.size(1));
  auto C = as_eigen(c, "C");
  if (m == 0 || n == 0) return;
  if (ka == 0) {
    if (beta == T(0)) C.setZero();
    else C *= beta;
    return;
  }
  detail::gemm_rowmajor<T>(ta, tb, m, n, ka, alpha, a.data(), leading_dim(a), b.data(), leading_dim(b), beta, c.data(),
                           leading_dim(c));
}

template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y) {
  OPTIMUS_CHECK(x.shape() == y.shape(), "axpby shapes differ: x ", x.shape(), ", y ", y.shape());
  auto X = as_eigen(x, "x");
  auto Y = as_eigen(y, "y");
  for (Eigen::Index r = 0; r < Y.rows(); ++r) {
    for (Eigen::Index c = 0; c < Y.cols(); ++c) Y(r, c) = math::axpby(alpha, X(r, c), beta, Y(r, c));
  }
}

template <class T>
void copy(TensorView<const T> x, TensorView<T> y) {
  OPTIMUS_CHECK(x.shape() == y.shape(), "copy shapes differ: x ", x.shape(), ", y ", y.shape());
  as_eigen(y, "y") = as_eigen(x, "x");
}

template <class T>
void fill(TensorView<T> y, T value) {
  as_eigen(y, "y").setConstant(value);
}

template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y) {
  auto Y = as_eigen(y, "y");
  OPTIMUS_CHECK(row.numel() == Y.cols(), "add_row_broadcast: row has ", row.numel(), " elements, y is ", y.shape());
  Y.rowwise() += as_eigen(row, "row").row(0);
}

template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out) {
  const auto X = as_eigen(x, "x");
  OPTIMUS_CHECK(out.numel() == X.cols(), "column_sums: out has ", out.numel(), " elements, x is ", x.shape());
  auto O = as_eigen(out, "out");
  // Each column summed over the rows in order, a row at a time, so that the loop runs along contiguous columns.
  if (X.rows() == 0) {
    O.setZero();
    return;
  }
  O.row(0) = X.row(0);
  for (Eigen::Index r = 1; r < X.rows(); ++r) add_row(X.data() + r * X.outerStride(), O.data(), X.cols());
}

template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y) {
  OPTIMUS_CHECK(x.shape() == y.shape(), "gelu_forward shapes differ: x ", x.shape(), ", y ", y.shape());
  auto X = as_eigen(x, "x");
  auto Y = as_eigen(y, "y");
  for (Eigen::Index r = 0; r < X.rows(); ++r) {
    gelu_row(X.data() + r * X.outerStride(), Y.data() + r * Y.outerStride(), X.cols());
  }
}

template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx) {
  OPTIMUS_CHECK(x.shape() == dy.shape() && x.shape() == dx.shape(), "gelu_backward shapes differ: x ", x.shape(),
                ", dy ", dy.shape(), ", dx ", dx.shape());
  auto X = as_eigen(x, "x");
  auto DY = as_eigen(dy, "dy");
  auto DX = as_eigen(dx, "dx");
  for (Eigen::Index r = 0; r < X.rows(); ++r) {
    gelu_backward_row(X.data() + r * X.outerStride(), DY.data() + r * DY.outerStride(),
                      DX.data() + r * DX.outerStride(), X.cols());
  }
}

void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16) {
  // The f32 form's order (row 0, then each row added to the sums), each row cast as it is read.
  const std::int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0) std::fill(out.data(), out.data() + cols, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    if (r == 0) {
      std::copy(row, row + cols, out.data());
    } else {
      add_row(row, out.data(), cols);
    }
    for (std::int64_t c = 0; c < cols; ++c) x_bf16.data()[r * cols + c] = bf16(row[c]);
  }
}

void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx) {
  gelu_backward_row(x.data(), dy.data(), dx.data(), x.numel());
}

void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept) {
  // Row by row as the f32 form runs gelu_row (its vector clones and their tails fall on the same elements), then
  // rounded: its bits.
  const std::int64_t rows = x.rank() == 2 ? x.size(0) : 1, cols = rows == 0 ? 0 : x.numel() / rows;
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x.data() + r * cols;
    gelu_row(in, row.data(), cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      y.data()[r * cols + c] = bf16(row[static_cast<std::size_t>(c)]);
      x_kept.data()[r * cols + c] = bf16(in[c]);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                          \
  template void gemm<T>(Trans, Trans, T, TensorView<const T>, TensorView<const T>, T, TensorView<T>); \
  template void axpby<T>(T, TensorView<const T>, T, TensorView<T>);                                   \
  template void copy<T>(TensorView<const T>, TensorView<T>);                                          \
  template void fill<T>(TensorView<T>, T);                                                          \
  template void add_row_broadcast<T>(TensorView<const T>, TensorView<T>);                           \
  template void column_sums<T>(TensorView<const T>, TensorView<T>);                                 \
  template void gelu_forward<T>(TensorView<const T>, TensorView<T>);                                \
  template void gelu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

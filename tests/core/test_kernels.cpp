// CPU kernels against plain loops: every transpose combination, alpha, beta, strided views.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "optimus/core/kernels.hpp"
#include "optimus/core/rng.hpp"

using optimus::Shape;
using optimus::Tensor;
using optimus::cpu::Trans;

namespace {

template <class T>
Tensor<T> random_tensor(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Tensor<T> t(Shape{rows, cols});
  const optimus::CounterRng rng(seed);
  auto v = t.view();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) v(r, c) = static_cast<T>(2 * rng.uniform(r, c) - 1);
  return t;
}

template <class T>
void check_gemm(Trans ta, Trans tb, T alpha, T beta, double tol) {
  const std::int64_t m = 5, n = 7, k = 3;
  auto a = random_tensor<T>(ta == Trans::no ? m : k, ta == Trans::no ? k : m, 1);
  auto b = random_tensor<T>(tb == Trans::no ? k : n, tb == Trans::no ? n : k, 2);
  // C is the interior of a larger matrix, so the leading dimension differs from n.
  auto big = random_tensor<T>(m + 2, n + 3, 3);
  auto c = big.view().block(1, 2, m, n);
  std::vector<double> expected(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        const double x = ta == Trans::no ? a.view()(i, l) : a.view()(l, i);
        const double y = tb == Trans::no ? b.view()(l, j) : b.view()(j, l);
        s += x * y;
      }
      expected[static_cast<std::size_t>(i * n + j)] = alpha * s + beta * c(i, j);
    }
  }
  const T corner = big.view()(0, 0);
  optimus::cpu::gemm<T>(ta, tb, alpha, a.view(), b.view(), beta, c);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) CHECK(std::abs(c(i, j) - expected[static_cast<std::size_t>(i * n + j)]) < tol);
  CHECK(big.view()(0, 0) == corner);  // outside the block untouched
}

}  // namespace

TEST_CASE_TEMPLATE("gemm matches loops for every transpose, alpha and beta", T, float, double) {
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (Trans ta : {Trans::no, Trans::yes}) {
    for (Trans tb : {Trans::no, Trans::yes}) {
      check_gemm<T>(ta, tb, T(1), T(0), tol);
      check_gemm<T>(ta, tb, T(-0.5), T(2), tol);
    }
  }
}

TEST_CASE("gemm with beta = 0 ignores NaN in C, and refuses shapes that do not agree") {
  auto a = random_tensor<double>(2, 3, 1);
  auto b = random_tensor<double>(3, 2, 2);
  Tensor<double> c(Shape{2, 2});
  optimus::cpu::fill(c.view(), std::nan(""));
  optimus::cpu::gemm<double>(Trans::no, Trans::no, 1.0, a.view(), b.view(), 0.0, c.view());
  for (int e = 0; e < 4; ++e) CHECK(std::isfinite(c.data()[e]));
  CHECK_THROWS_WITH_AS(optimus::cpu::gemm<double>(Trans::yes, Trans::no, 1.0, a.view(), b.view(), 0.0, c.view()),
                       doctest::Contains("op(A) is 3x2, op(B) is 3x2, C is 2x2"), optimus::Error);
}

TEST_CASE("axpby, copy and fill") {
  auto x = random_tensor<double>(3, 4, 5);
  auto y = random_tensor<double>(3, 4, 6);
  Tensor<double> y0 = y.clone();
  optimus::cpu::axpby<double>(2.0, x.view(), -1.0, y.view());
  for (int e = 0; e < 12; ++e) CHECK(y.data()[e] == doctest::Approx(2.0 * x.data()[e] - y0.data()[e]));
  optimus::cpu::copy<double>(x.view(), y.view());
  for (int e = 0; e < 12; ++e) CHECK(y.data()[e] == x.data()[e]);
  optimus::cpu::fill(y.view(), 3.0);
  for (int e = 0; e < 12; ++e) CHECK(y.data()[e] == 3.0);
}

TEST_CASE("a CPU kernel refuses device tensors") {
  auto a = random_tensor<float>(2, 2, 1);
  const optimus::TensorView<const float> on_gpu(a.data(), Shape{2, 2}, optimus::Device::cuda);
  Tensor<float> c(Shape{2, 2});
  CHECK_THROWS_WITH_AS(optimus::cpu::gemm<float>(Trans::no, Trans::no, 1.0f, on_gpu, a.view(), 0.0f, c.view()),
                       doctest::Contains("CPU kernel given a device tensor for A"), optimus::Error);
}

// Device dispatch of the layers' local operations: operands on different devices, or of the wrong shape, are
// refused with an error naming the operation and the operands (the numbers are tested through the layers).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "optimus/core/ops.hpp"

namespace {

using optimus::Device;
using optimus::Shape;
using optimus::TensorView;

}  // namespace

TEST_CASE("an operation given CPU and CUDA tensors at once is refused, naming where each operand is") {
  std::vector<float> x(6, 1.0f), out(3, 0.0f);
  // The device views are never dereferenced: the device check comes first.
  const TensorView<const float> x_cpu(x.data(), Shape{3, 2});
  const TensorView<float> out_cuda(out.data(), Shape{3}, Device::cuda);
  CHECK_THROWS_WITH_AS(optimus::ops::row_sums<float>(x_cpu, out_cuda),
                       doctest::Contains("row_sums: operands are on different devices (x on cpu, out on cuda)"),
                       optimus::Error);
  std::vector<float> gamma(2, 1.0f), beta(2, 0.0f), xhat(6), rstd(3), y(6);
  CHECK_THROWS_WITH_AS(
      optimus::ops::layernorm_normalize<float>(x_cpu, TensorView<const float>(out.data(), Shape{3}),
                                               TensorView<const float>(out.data(), Shape{3}),
                                               TensorView<const float>(gamma.data(), Shape{1, 2}, Device::cuda),
                                               TensorView<const float>(beta.data(), Shape{1, 2}), 2,
                                               TensorView<float>(xhat.data(), Shape{3, 2}),
                                               TensorView<float>(rstd.data(), Shape{3}),
                                               TensorView<float>(y.data(), Shape{3, 2})),
      doctest::Contains("gamma on cuda"), optimus::Error);
  CHECK(out == std::vector<float>(3, 0.0f));  // nothing was written
}

TEST_CASE("operands of the wrong shape are refused before anything is computed") {
  std::vector<double> x(6, 2.0), out(4, 0.0);
  CHECK_THROWS_WITH_AS(optimus::ops::row_sums<double>(TensorView<const double>(x.data(), Shape{3, 2}),
                                                      TensorView<double>(out.data(), Shape{4})),
                       doctest::Contains("row_sums: out has shape [4], expected 3x1"), optimus::Error);
  const std::vector<int> targets = {0, 1};
  std::vector<double> sums(6);
  CHECK_THROWS_WITH_AS(optimus::ops::cross_entropy_exp_sums<double>(
                           TensorView<double>(x.data(), Shape{3, 2}), TensorView<const double>(out.data(), Shape{3}),
                           TensorView<const int>(targets.data(), Shape{2}), 0, 0, TensorView<double>(sums.data(), Shape{6})),
                       doctest::Contains("rows 0..3 are outside the 2 targets"), optimus::Error);
}

TEST_CASE("row sums and maxima on the CPU") {
  const std::vector<double> x = {1, -2, 3, 4, 0.5, -6};
  std::vector<double> sum(2), max(2);
  optimus::ops::row_sums<double>(TensorView<const double>(x.data(), Shape{2, 3}), TensorView<double>(sum.data(), Shape{2}));
  optimus::ops::row_max<double>(TensorView<const double>(x.data(), Shape{2, 3}), TensorView<double>(max.data(), Shape{2}));
  CHECK(sum == std::vector<double>{2, -1.5});
  CHECK(max == std::vector<double>{3, 4});
}

TEST_CASE("mixed-precision GEMM: bf16 operands (strided, transposed), f32 accumulation, on the CPU") {
  using optimus::bf16;
  namespace ops = optimus::ops;
  // A: a 3x4 window (row stride 6) of a 3x6 buffer, used transposed: op(A) is 4x3; B: 3x2; C: 4x2.
  std::vector<float> a_buf(18), b(6);
  for (std::size_t e = 0; e < a_buf.size(); ++e) a_buf[e] = 0.1f + 0.37f * static_cast<float>(e) / 7.0f;
  for (std::size_t e = 0; e < b.size(); ++e) b[e] = -0.5f + 0.213f * static_cast<float>(e);
  const TensorView<const float> a(a_buf.data() + 1, Shape{3, 4}, Shape{6, 1}), bv(b.data(), Shape{3, 2});
  std::vector<bf16> a16(12), b16(6);
  ops::to_bf16(a, TensorView<bf16>(a16.data(), Shape{3, 4}));
  ops::to_bf16(bv, TensorView<bf16>(b16.data(), Shape{3, 2}));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) CHECK(a16[static_cast<std::size_t>(r * 4 + c)] == bf16(a(r, c)));  // strided read
  }
  std::vector<float> c(8, 1.0f), via_f32(8, 1.0f);
  const TensorView<const bf16> a16v(a16.data(), Shape{3, 4}), b16v(b16.data(), Shape{3, 2});
  ops::gemm(true, false, 2.0f, a16v, b16v, -1.0f, TensorView<float>(c.data(), Shape{4, 2}));
  // The same product on f32 operands with math = bf16 rounds them the same way.
  ops::gemm<float>(true, false, 2.0f, a, bv, -1.0f, TensorView<float>(via_f32.data(), Shape{4, 2}),
                   ops::Queue{nullptr, nullptr, ops::GemmMath::bf16, {}});
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      double rounded = 0, exact = 0;
      for (int k = 0; k < 3; ++k) {
        rounded += static_cast<double>(static_cast<float>(a16[static_cast<std::size_t>(k * 4 + i)])) *
                   static_cast<float>(b16[static_cast<std::size_t>(k * 2 + j)]);
        exact += static_cast<double>(a(k, i)) * bv(k, j);
      }
      const std::size_t e = static_cast<std::size_t>(i * 2 + j);
      CHECK(c[e] == doctest::Approx(2 * rounded - 1).epsilon(1e-6));
      CHECK(via_f32[e] == c[e]);
      CHECK(std::abs(c[e] - (2 * exact - 1)) > 1e-6);  // the rounding is visible: this is not the f32 product
    }
  }
  // Mixed devices and shapes are refused like every operation.
  CHECK_THROWS_WITH_AS(ops::gemm(true, false, 1.0f, a16v, TensorView<const bf16>(b16.data(), Shape{3, 2}, Device::cuda),
                                 0.0f, TensorView<float>(c.data(), Shape{4, 2})),
                       doctest::Contains("B on cuda"), optimus::Error);
  CHECK_THROWS_WITH_AS(ops::gemm(false, false, 1.0f, a16v, b16v, 0.0f, TensorView<float>(c.data(), Shape{4, 2})),
                       doctest::Contains("op(A) is 3x4, op(B) is 3x2"), optimus::Error);
  CHECK_THROWS_WITH_AS(ops::to_bf16(a, TensorView<bf16>(a16.data(), Shape{4, 3})), doctest::Contains("to_bf16"),
                       optimus::Error);
}

// Device dispatch of the layers' local operations: operands on different devices, or of the wrong shape, are
// refused with an error naming the operation and the operands (the numbers are tested through the layers).
#include <doctest/doctest.h>

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

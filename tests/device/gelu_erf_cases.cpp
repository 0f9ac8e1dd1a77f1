// GELU's exact form on a device against the host and against x Phi(x) (kernel_case_support.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernel_case_support.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::test::kernel_cases {

void gelu_erf(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 7, cols = 9, n = rows * cols;
  const Shape m{rows, cols};
  const Both<float> x(random_values(n, 60, 4.0), m, rank), dy(random_values(n, 61), m, rank);
  Both<float> y(std::vector<float>(static_cast<std::size_t>(n)), m, rank);
  Both<float> dx(std::vector<float>(static_cast<std::size_t>(n)), m, rank);
  ops::gelu_erf_forward<float>(x.in_host(), y.on_host(), host);
  ops::gelu_erf_forward<float>(x.in_device(), y.on_device(), q);
  ops::gelu_erf_backward<float>(x.in_host(), dy.in_host(), dx.on_host(), host);
  ops::gelu_erf_backward<float>(x.in_device(), dy.in_device(), dx.on_device(), q);
  expect.same("gelu_erf_forward", y);
  expect.same("gelu_erf_backward", dx);
  const auto cdf = [](double v) { return 0.5 * (1 + std::erf(v / std::sqrt(2.0))); };
  const auto pdf = [](double v) { return std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI); };
  std::vector<double> x64(x.host.begin(), x.host.end()), dy64(dy.host.begin(), dy.host.end());
  std::vector<double> y64(x64.size()), dx64(x64.size()), shifted(x64.size()), up(x64.size()), down(x64.size());
  const auto view = [&](std::vector<double>& v) { return TensorView<double>(v.data(), m, Device::cpu); };
  const auto cview = [&](const std::vector<double>& v) { return TensorView<const double>(v.data(), m, Device::cpu); };
  ops::gelu_erf_forward<double>(cview(x64), view(y64), host);
  ops::gelu_erf_backward<double>(cview(x64), cview(dy64), view(dx64), host);
  const double h = 1e-6;
  for (const auto& [step, out] : {std::pair{h, &up}, std::pair{-h, &down}}) {
    for (std::size_t e = 0; e < x64.size(); ++e) shifted[e] = x64[e] + step;
    ops::gelu_erf_forward<double>(cview(shifted), view(*out), host);
  }
  double f32_worst = 0, f64_worst = 0, difference_worst = 0;
  for (std::size_t e = 0; e < x64.size(); ++e) {
    const double v = x64[e], want = v * cdf(v), grad = dy64[e] * (cdf(v) + v * pdf(v));
    f32_worst = std::max({f32_worst, std::abs(y.host[e] - want) / (1 + std::abs(want)),
                          std::abs(dx.host[e] - grad) / (1 + std::abs(grad))});
    f64_worst = std::max({f64_worst, std::abs(y64[e] - want), std::abs(dx64[e] - grad)});
    difference_worst = std::max(difference_worst, std::abs(dx64[e] - dy64[e] * (up[e] - down[e]) / (2 * h)));
  }
  CHECK(f32_worst < 1e-6);
  CHECK(f64_worst < 1e-14);
  CHECK(difference_worst < 1e-7);
  CHECK(y.host[0] != 0.0f);  // the values are not trivially zero
  Both<float> narrow(std::vector<float>(static_cast<std::size_t>(rows)), Shape{rows, 1}, rank);
  CHECK_THROWS_WITH(ops::gelu_erf_forward<float>(x.in_device(), narrow.on_device(), q),
                    doctest::Contains("gelu_erf_forward: x has shape"));
}

}  // namespace optimus::test::kernel_cases

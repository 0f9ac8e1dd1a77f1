// Device dispatch of the layers' local operations: operands on different devices, or of the wrong shape, are
// refused with an error naming the operation and the operands (the numbers are tested through the layers).
#include <doctest/doctest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "optimus/core/ops.hpp"

namespace {

using optimus::Device;
using optimus::Shape;
using optimus::TensorView;
using optimus::Trans;
const optimus::ops::Queue kHost{};  // the host, f32 GEMMs

}  // namespace

TEST_CASE("an operation given CPU and CUDA tensors at once is refused, naming where each operand is") {
  std::vector<float> x(6, 1.0f), out(3, 0.0f);
  // The device views are never dereferenced: the device check comes first.
  const TensorView<const float> x_cpu(x.data(), Shape{3, 2}, Device::cpu);
  const TensorView<float> out_cuda(out.data(), Shape{3}, Device::cuda);
  CHECK_THROWS_WITH_AS(optimus::ops::row_sums<float>(x_cpu, out_cuda, kHost),
                       doctest::Contains("row_sums: operands are on different devices (x on cpu, out on cuda)"),
                       optimus::Error);
  std::vector<float> gamma(2, 1.0f), beta(2, 0.0f), xhat(6), rstd(3), y(6);
  CHECK_THROWS_WITH_AS(
      optimus::ops::layernorm_normalize<float>(x_cpu, TensorView<const float>(out.data(), Shape{3}, Device::cpu),
                                               TensorView<const float>(out.data(), Shape{3}, Device::cpu),
                                               TensorView<const float>(gamma.data(), Shape{1, 2}, Device::cuda),
                                               TensorView<const float>(beta.data(), Shape{1, 2}, Device::cpu),
                                               optimus::ops::Normalization{.hidden = 2, .eps = 1e-5, .centered = true},
                                               TensorView<float>(xhat.data(), Shape{3, 2}, Device::cpu),
                                               TensorView<float>(rstd.data(), Shape{3}, Device::cpu),
                                               TensorView<float>(y.data(), Shape{3, 2}, Device::cpu), kHost),
      doctest::Contains("gamma on cuda"), optimus::Error);
  CHECK(out == std::vector<float>(3, 0.0f));  // nothing was written
}

TEST_CASE("operands of the wrong shape are refused before anything is computed") {
  std::vector<double> x(6, 2.0), out(4, 0.0);
  CHECK_THROWS_WITH_AS(optimus::ops::row_sums<double>(TensorView<const double>(x.data(), Shape{3, 2}, Device::cpu),
                                                      TensorView<double>(out.data(), Shape{4}, Device::cpu), kHost),
                       doctest::Contains("row_sums: out has shape [4], expected 3x1"), optimus::Error);
  const std::vector<int> targets = {0, 1};
  std::vector<double> stats(12);
  CHECK_THROWS_WITH_AS(optimus::ops::cross_entropy_stats<double>(
                           TensorView<const double>(x.data(), Shape{3, 2}, Device::cpu),
                           TensorView<const int>(targets.data(), Shape{2}, Device::cpu), 0, 0, 10,
                           TensorView<double>(stats.data(), Shape{4, 3}, Device::cpu), kHost),
                       doctest::Contains("rows 0..3 are outside the 2 targets"), optimus::Error);
  CHECK_THROWS_WITH_AS(optimus::ops::cross_entropy_stats<double>(
                           TensorView<const double>(x.data(), Shape{2, 3}, Device::cpu),
                           TensorView<const int>(targets.data(), Shape{2}, Device::cpu), 0, 0, 10,
                           TensorView<double>(stats.data(), Shape{3, 4}, Device::cpu), kHost),
                       doctest::Contains("cross_entropy_stats: stats has shape [3, 4], expected 4x2"), optimus::Error);
}

TEST_CASE("row sums on the CPU") {
  const std::vector<double> x = {1, -2, 3, 4, 0.5, -6};
  std::vector<double> sum(2);
  optimus::ops::row_sums<double>(TensorView<const double>(x.data(), Shape{2, 3}, Device::cpu), TensorView<double>(sum.data(), Shape{2}, Device::cpu), kHost);
  CHECK(sum == std::vector<double>{2, -1.5});
}

TEST_CASE("mixed-precision GEMM: bf16 operands (strided, transposed), f32 accumulation, on the CPU") {
  using optimus::bf16;
  namespace ops = optimus::ops;
  // A: a 3x4 window (row stride 6) of a 3x6 buffer, used transposed: op(A) is 4x3; B: 3x2; C: 4x2.
  std::vector<float> a_buf(18), b(6);
  for (std::size_t e = 0; e < a_buf.size(); ++e) a_buf[e] = 0.1f + 0.37f * static_cast<float>(e) / 7.0f;
  for (std::size_t e = 0; e < b.size(); ++e) b[e] = -0.5f + 0.213f * static_cast<float>(e);
  const TensorView<const float> a(a_buf.data() + 1, Shape{3, 4}, Shape{6, 1}, Device::cpu), bv(b.data(), Shape{3, 2}, Device::cpu);
  std::vector<bf16> a16(12), b16(6);
  ops::to_bf16(a, TensorView<bf16>(a16.data(), Shape{3, 4}, Device::cpu), kHost);
  ops::to_bf16(bv, TensorView<bf16>(b16.data(), Shape{3, 2}, Device::cpu), kHost);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) CHECK(a16[static_cast<std::size_t>(r * 4 + c)] == bf16(a(r, c)));  // strided read
  }
  std::vector<float> c(8, 1.0f), via_f32(8, 1.0f);
  const TensorView<const bf16> a16v(a16.data(), Shape{3, 4}, Device::cpu), b16v(b16.data(), Shape{3, 2}, Device::cpu);
  ops::gemm(Trans::yes, Trans::no, 2.0f, a16v, b16v, -1.0f, TensorView<float>(c.data(), Shape{4, 2}, Device::cpu), kHost);
  // The same product on f32 operands with math = bf16 rounds them the same way.
  ops::gemm<float>(Trans::yes, Trans::no, 2.0f, a, bv, -1.0f, TensorView<float>(via_f32.data(), Shape{4, 2}, Device::cpu),
                   ops::Queue{.math = ops::GemmMath::bf16});
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
  CHECK_THROWS_WITH_AS(ops::gemm(Trans::yes, Trans::no, 1.0f, a16v, TensorView<const bf16>(b16.data(), Shape{3, 2}, Device::cuda),
                                 0.0f, TensorView<float>(c.data(), Shape{4, 2}, Device::cpu), kHost),
                       doctest::Contains("B on cuda"), optimus::Error);
  CHECK_THROWS_WITH_AS(ops::gemm(Trans::no, Trans::no, 1.0f, a16v, b16v, 0.0f,
                                 TensorView<float>(c.data(), Shape{4, 2}, Device::cpu), kHost),
                       doctest::Contains("op(A) is 3x4, op(B) is 3x2"), optimus::Error);
  CHECK_THROWS_WITH_AS(ops::to_bf16(a, TensorView<bf16>(a16.data(), Shape{4, 3}, Device::cpu), kHost),
                       doctest::Contains("to_bf16"),
                       optimus::Error);
  // Back to f32: exact, into a strided window.
  std::vector<float> wide(18, -7.0f);
  ops::to_f32(a16v, TensorView<float>(wide.data() + 2, Shape{3, 4}, Shape{6, 1}, Device::cpu), kHost);
  bool exact = true;
  for (int r = 0; r < 3; ++r) {
    for (int col = 0; col < 4; ++col) {
      exact = exact && wide[static_cast<std::size_t>(r * 6 + col + 2)] ==
                           static_cast<float>(a16[static_cast<std::size_t>(r * 4 + col)]);
    }
  }
  CHECK(exact);
  CHECK(wide[0] == -7.0f);  // outside the window: untouched
  CHECK_THROWS_WITH_AS(ops::to_f32(a16v, TensorView<float>(wide.data(), Shape{4, 3}, Device::cpu), kHost),
                       doctest::Contains("to_f32"),
                       optimus::Error);
}

TEST_CASE("GEMM epilogues: bias, and bias then GELU with GELU's input kept, on f32, f64 and bf16 operands") {
  namespace ops = optimus::ops;
  using optimus::bf16;
  // C [3, 4] = 0.5 A [3, 2] B [2, 4] - C0 (+ bias [1, 4]; then GELU, pre = its input).
  std::vector<double> a(6), b(8), c0(12), bias(4);
  for (std::size_t e = 0; e < a.size(); ++e) a[e] = 0.3 - 0.17 * static_cast<double>(e);
  for (std::size_t e = 0; e < b.size(); ++e) b[e] = -0.4 + 0.11 * static_cast<double>(e);
  for (std::size_t e = 0; e < c0.size(); ++e) c0[e] = 0.05 * static_cast<double>(e) - 0.2;
  for (std::size_t e = 0; e < bias.size(); ++e) bias[e] = 0.7 - 0.6 * static_cast<double>(e);
  auto check = [&]<class T>(T, bool bf16_operands) {
    CAPTURE(sizeof(T));
    CAPTURE(bf16_operands);
    std::vector<T> at(a.begin(), a.end()), bt(b.begin(), b.end()), biast(bias.begin(), bias.end());
    std::vector<bf16> a16(6), b16(8);
    for (std::size_t e = 0; e < 6; ++e) a16[e] = bf16(static_cast<float>(a[e]));
    for (std::size_t e = 0; e < 8; ++e) b16[e] = bf16(static_cast<float>(b[e]));
    const TensorView<const T> av(at.data(), Shape{3, 2}, Device::cpu), bv(bt.data(), Shape{2, 4}, Device::cpu),
        biasv(biast.data(), Shape{1, 4}, Device::cpu);
    // The product alone, and with each epilogue.
    auto product = [&](std::vector<T>& c, const ops::Epilogue<T>& epilogue) {
      c.assign(c0.begin(), c0.end());
      const TensorView<T> cv(c.data(), Shape{3, 4}, Device::cpu);
      if constexpr (std::is_same_v<T, float>) {
        if (bf16_operands) {
          ops::gemm(Trans::no, Trans::no, 0.5f, TensorView<const bf16>(a16.data(), Shape{3, 2}, Device::cpu),
                    TensorView<const bf16>(b16.data(), Shape{2, 4}, Device::cpu), -1.0f, cv, epilogue, kHost);
          return;
        }
      }
      ops::gemm<T>(Trans::no, Trans::no, T(0.5), av, bv, T(-1), cv, epilogue, kHost);
    };
    using Kind = typename ops::Epilogue<T>::Kind;
    std::vector<T> plain, with_bias, with_gelu, pre(12, T(99));
    product(plain, {});
    product(with_bias, {Kind::bias, biasv, {}});
    product(with_gelu, {Kind::bias_gelu, biasv, TensorView<T>(pre.data(), Shape{3, 4}, Device::cpu)});
    bool all = true;
    for (std::size_t e = 0; e < 12; ++e) {
      const T x = plain[e] + biast[e % 4];
      const T gelu = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
      all = all && with_bias[e] == x && pre[e] == x && std::abs(with_gelu[e] - gelu) <= T(1e-6) * (1 + std::abs(gelu));
    }
    CHECK(all);
    CHECK(with_gelu[0] != with_bias[0]);  // GELU really applied
    // An epilogue of the wrong shape, or on another device, is refused.
    std::vector<T> c(12);
    const TensorView<T> cv(c.data(), Shape{3, 4}, Device::cpu);
    CHECK_THROWS_WITH_AS(ops::gemm<T>(Trans::no, Trans::no, T(1), av, bv, T(0), cv,
                                      {Kind::bias, TensorView<const T>(biast.data(), Shape{1, 3}, Device::cpu), {}}, kHost),
                         doctest::Contains("the epilogue's bias has shape [1, 3], expected 1x4"), optimus::Error);
    CHECK_THROWS_WITH_AS(ops::gemm<T>(Trans::no, Trans::no, T(1), av, bv, T(0), cv,
                                      {Kind::bias_gelu, biasv, TensorView<T>(pre.data(), Shape{4, 3}, Device::cpu)}, kHost),
                         doctest::Contains("GELU's input (pre) has shape [4, 3], C is [3, 4]"), optimus::Error);
    CHECK_THROWS_WITH_AS(ops::gemm<T>(Trans::no, Trans::no, T(1), av, bv, T(0), cv,
                                      {Kind::bias, TensorView<const T>(biast.data(), Shape{1, 4}, Device::cuda), {}}, kHost),
                         doctest::Contains("(C on cpu, bias on cuda)"), optimus::Error);
  };
  check(0.0f, false);
  check(0.0, false);
  check(0.0f, true);
}

TEST_CASE("batched GEMM: matrices side by side or stacked, each the product gemm gives, shapes checked") {
  namespace ops = optimus::ops;
  // Three heads: A side by side [5, 3*4] (A_i [5, 4]), B side by side [6, 3*4] used transposed (B_i^T [4, 6]),
  // C stacked [3*5, 6]; then C stacked times B side by side: D_i = C_i B_i, side by side [5, 3*4].
  std::vector<float> a(60), b(72), c(90, 0.5f), d(60, -1.0f);
  for (std::size_t e = 0; e < a.size(); ++e) a[e] = std::sin(0.3f * static_cast<float>(e));
  for (std::size_t e = 0; e < b.size(); ++e) b[e] = std::cos(0.7f * static_cast<float>(e));
  const ops::BatchView<const float> av{TensorView<const float>(a.data(), Shape{5, 12}, Device::cpu), ops::Batched::side_by_side};
  const ops::BatchView<const float> bv{TensorView<const float>(b.data(), Shape{6, 12}, Device::cpu), ops::Batched::side_by_side};
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    const ops::Queue queue{.math = math};
    std::vector<float> cb = c, db = d;
    ops::gemm_batched<float>(Trans::no, Trans::yes, 2.0f, av, bv, 1.0f,
                             {TensorView<float>(cb.data(), Shape{15, 6}, Device::cpu), ops::Batched::stacked}, 3, queue);
    ops::gemm_batched<float>(Trans::no, Trans::no, 1.0f, {TensorView<const float>(cb.data(), Shape{15, 6}, Device::cpu), ops::Batched::stacked},
                             bv, 0.0f, {TensorView<float>(db.data(), Shape{5, 12}, Device::cpu), ops::Batched::side_by_side}, 3,
                             queue);
    bool same = true;
    for (std::int64_t i = 0; i < 3; ++i) {
      std::vector<float> ci(c.begin() + i * 30, c.begin() + (i + 1) * 30), di(20);
      ops::gemm<float>(Trans::no, Trans::yes, 2.0f, av.all.block(0, 4 * i, 5, 4), bv.all.block(0, 4 * i, 6, 4), 1.0f,
                       TensorView<float>(ci.data(), Shape{5, 6}, Device::cpu), queue);
      ops::gemm<float>(Trans::no, Trans::no, 1.0f, TensorView<const float>(ci.data(), Shape{5, 6}, Device::cpu),
                       bv.all.block(0, 4 * i, 6, 4), 0.0f, TensorView<float>(di.data(), Shape{5, 4}, Device::cpu), queue);
      for (std::size_t e = 0; e < 30; ++e) same = same && cb[static_cast<std::size_t>(i) * 30 + e] == ci[e];
      for (std::size_t r = 0; r < 5; ++r) {
        for (std::size_t col = 0; col < 4; ++col) {
          same = same && db[r * 12 + static_cast<std::size_t>(i) * 4 + col] == di[r * 4 + col];
        }
      }
    }
    CAPTURE(static_cast<int>(math));
    CHECK(same);
    CHECK(cb[0] != c[0]);
  }
  std::vector<float> out(90);
  CHECK_THROWS_WITH_AS(ops::gemm_batched<float>(Trans::no, Trans::yes, 1.0f, av, bv, 0.0f,
                                                {TensorView<float>(out.data(), Shape{15, 6}, Device::cpu), ops::Batched::stacked}, 5, kHost),
                       doctest::Contains("A has shape [5, 12], which does not hold 5 matrices side by side"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(ops::gemm_batched<float>(Trans::no, Trans::no, 1.0f, av, bv, 0.0f,
                                                {TensorView<float>(out.data(), Shape{15, 6}, Device::cpu), ops::Batched::stacked}, 3, kHost),
                       doctest::Contains("gemm_batched: op(A) is 5x4, op(B) is 6x4"), optimus::Error);
}

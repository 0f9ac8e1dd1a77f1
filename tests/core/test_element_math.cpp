// The CPU's element-wise arithmetic where it was rewritten for speed (issues 18 and 33): the f32 tanh behind GELU
// against tanh in f64, the f32 exp behind the softmaxes against exp in f64, dropout's grouped draws against the
// per-element definition, and the timeline's record of operations.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "optimus/core/element_math.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/timeline.hpp"

namespace {

namespace math = optimus::math;
using optimus::Device;
using optimus::Shape;
using optimus::TensorView;

}  // namespace

TEST_CASE("f32 tanh: within 1.2e-7 of tanh in f64 on [-12, 12], exactly +-1 beyond 10, odd; GELU as accurate") {
  double worst = 0, worst_gelu = 0, worst_derivative = 0;
  for (int i = -1'200'000; i <= 1'200'000; i += 7) {  // a 7e-5 grid
    const float v = static_cast<float>(i) * 1e-5f;
    worst = std::max(worst, std::abs(static_cast<double>(math::tanh_of(v)) - std::tanh(static_cast<double>(v))));
    const double gelu = math::gelu(static_cast<double>(v));
    worst_gelu = std::max(worst_gelu, std::abs(math::gelu(v) - gelu) / std::max(std::abs(gelu), 1.0));
    worst_derivative = std::max(worst_derivative, std::abs(math::gelu_derivative(v) -
                                                           math::gelu_derivative(static_cast<double>(v))));
    CHECK(math::tanh_of(-v) == -math::tanh_of(v));
  }
  CAPTURE(worst);
  CAPTURE(worst_gelu);
  CAPTURE(worst_derivative);
  CHECK(worst <= 1.2e-7);             // glibc's tanhf: 1.0e-7 on the same grid
  CHECK(worst_gelu <= 2.4e-7);        // of max(|GELU|, 1)
  CHECK(worst_derivative <= 1.2e-6);  // glibc's: 5.6e-7
  CHECK(math::tanh_of(10.5f) == 1.0f);
  CHECK(math::tanh_of(-1e30f) == -1.0f);
  CHECK(math::tanh_of(0.0f) == 0.0f);
  CHECK(std::isnan(math::gelu(std::numeric_limits<float>::quiet_NaN())));  // NaN still propagates through GELU
  CHECK(math::gelu(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
}

TEST_CASE("f32 exp of a softmax's terms: within 1.2e-7 relatively of exp in f64 on [-87, 0], 0 below, NaN kept") {
  double worst = 0;
  for (int i = -8'700'000; i <= 0; i += 3) {  // a 3e-5 grid
    const float v = static_cast<float>(i) * 1e-5f;
    const double want = std::exp(static_cast<double>(v));
    worst = std::max(worst, std::abs(static_cast<double>(math::exp_nonpositive(v)) - want) / want);
  }
  CAPTURE(worst);
  CHECK(worst <= 1.2e-7);  // expf: 6.0e-8
  CHECK(worst > 0);  // not expf itself
  CHECK(math::exp_nonpositive(0.0f) == 1.0f);
  CHECK(math::exp_nonpositive(-88.5f) == 0.0f);
  CHECK(math::exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(math::exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
  CHECK(math::exp_nonpositive(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(math::exp_nonpositive(-0.0f) == 1.0f);
  CHECK(math::exp_nonpositive(-1.5) == std::exp(-1.5));  // f64: exp itself
  // A little above 0 (a recomputed score minus its row's lse, rounded up): e^v too, never v itself, as the GPU's f32
  // attention backward met it. Above 88: +inf.
  double above = 0;
  for (int i = 1; i <= 1'000'000; i += 7) {  // (0, 10]
    const float v = static_cast<float>(i) * 1e-5f;
    const double want = std::exp(static_cast<double>(v));
    above = std::max(above, std::abs(static_cast<double>(math::exp_nonpositive(v)) - want) / want);
  }
  CAPTURE(above);
  CHECK(above <= 1.2e-7);
  CHECK(math::exp_nonpositive(1e-6f) > 1.0f);
  CHECK(math::exp_nonpositive(88.5f) == std::numeric_limits<float>::infinity());
  // A softmax of scores whose largest is far above the rest: the rest vanish, the largest is 1.
  CHECK(math::softmax_exp(-100.0f, 1.0f, 0.0f) == 0.0f);
  CHECK(math::softmax_exp(3.0f, 2.0f, 6.0f) == 1.0f);
}

TEST_CASE("dropout on the CPU: every alignment gives the per-element masks, at the rate 1 - p") {
  const double p = 0.3;
  const std::uint64_t seed = 77, stream = 5;
  for (const std::int64_t cols : {1, 3, 4, 13, 64}) {
    for (const std::uint64_t col0 : {0u, 1u, 2u, 3u, 6u}) {
      {
        CAPTURE(cols);
        CAPTURE(col0);
        const std::int64_t rows = 5, stride = 1, ld = cols + 3;  // rows apart by more than their width
        std::vector<float> x(static_cast<std::size_t>(rows * ld));
        for (std::size_t e = 0; e < x.size(); ++e) x[e] = 1.0f + static_cast<float>(e);
        const std::vector<float> before = x;
        optimus::ops::dropout<float>(TensorView<float>(x.data(), Shape{rows, cols}, Shape{ld, stride}, Device::cpu),
                                     40, col0, p, seed, stream, optimus::ops::Queue{});
        int wrong = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c) {
            const std::size_t e = static_cast<std::size_t>(r * ld + c * stride);
            const bool keep = math::dropout_keeps(p, seed, stream, 40 + static_cast<std::uint64_t>(r),
                                                  col0 + static_cast<std::uint64_t>(c));
            const float expected = keep ? before[e] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
            wrong += std::memcmp(&x[e], &expected, sizeof expected) != 0;
          }
        }
        CHECK(wrong == 0);
      }
    }
  }
  // The rate: 400 000 draws kept at 1 - p within 5 standard deviations (0.0036).
  std::vector<float> ones(400'000, 1.0f);
  optimus::ops::dropout<float>(TensorView<float>(ones.data(), Shape{400, 1000}, Device::cpu), 0, 3, p, seed, stream,
                               optimus::ops::Queue{});
  double kept = 0;
  for (float v : ones) kept += v != 0.0f;
  CHECK(kept / 400'000.0 == doctest::Approx(1.0 - p).epsilon(0.0036 / 0.7));
  CHECK(math::dropout_keeps(0.0, seed, stream, 1, 2));  // p = 0 keeps everything
}

TEST_CASE("a queue's timeline records CPU operations by kind, an operation run inside another as its own time") {
  optimus::Timeline timeline;
  const optimus::ops::Queue queue{.timeline = &timeline};
  std::vector<float> a(6 * 4, 0.5f), b(4 * 3, 0.25f), c(6 * 3), scores(4 * 4, 1.0f), probs(4 * 4);
  const TensorView<const float> av(a.data(), Shape{6, 4}, Device::cpu), bv(b.data(), Shape{4, 3}, Device::cpu);
  optimus::ops::gemm<float>(optimus::Trans::no, optimus::Trans::no, 1.0f, av, bv, 0.0f,
                            TensorView<float>(c.data(), Shape{6, 3}, Device::cpu), queue);
  optimus::ops::axpby<float>(2.0f, TensorView<const float>(c.data(), Shape{6, 3}, Device::cpu), 0.0f,
                             TensorView<float>(c.data(), Shape{6, 3}, Device::cpu), queue);
  const optimus::ops::AttentionShape shape{.seq = 2, .heads = 1, .dropout = 0.0, .seed = 0, .stream = 0,
                                           .first_batch = 0, .first_head = 0, .total_heads = 1,
                                           .causal = true, .lengths = {}};
  optimus::ops::flash_attention_forward<float>(TensorView<const float>(scores.data(), Shape{4, 3}, Device::cpu), shape,
                                               TensorView<float>(probs.data(), Shape{4, 1}, Device::cpu),
                                               TensorView<float>(probs.data() + 4, Shape{4}, Device::cpu), queue);
  int gemms = 0, elementwise = 0, attention = 0;
  for (const optimus::Timeline::Span& s : timeline.spans()) {
    gemms += s.kind == optimus::SpanKind::gemm;
    elementwise += s.kind == optimus::SpanKind::elementwise;
    attention += s.kind == optimus::SpanKind::attention;
  }
  CHECK(gemms == 1);
  CHECK(elementwise == 1);
  CHECK(attention == 1);
  // A GEMM with the bias + GELU epilogue runs three element-wise operations inside itself (the bias, GELU's input
  // kept, GELU): the GEMM's time is recorded in two pieces around them, and no span overlaps another.
  std::vector<float> bias(3, 0.1f), pre(6 * 3);
  const optimus::ops::Epilogue<float> epilogue{.kind = optimus::ops::Epilogue<float>::Kind::bias_gelu,
                                               .bias = TensorView<const float>(bias.data(), Shape{1, 3}, Device::cpu),
                                               .pre = TensorView<float>(pre.data(), Shape{6, 3}, Device::cpu)};
  timeline.clear();
  optimus::ops::gemm<float>(optimus::Trans::no, optimus::Trans::no, 1.0f, av, bv, 0.0f,
                            TensorView<float>(c.data(), Shape{6, 3}, Device::cpu), epilogue, queue);
  std::vector<optimus::SpanKind> kinds;
  for (const optimus::Timeline::Span& s : timeline.spans()) kinds.push_back(s.kind);
  using optimus::SpanKind;
  CHECK(kinds == std::vector<SpanKind>{SpanKind::gemm, SpanKind::elementwise, SpanKind::gemm, SpanKind::elementwise,
                                       SpanKind::gemm, SpanKind::elementwise, SpanKind::gemm});
  std::vector<optimus::Timeline::Span> spans = timeline.spans();
  std::sort(spans.begin(), spans.end(), [](const auto& x, const auto& y) { return x.start_us < y.start_us; });
  for (std::size_t k = 0; k < spans.size(); ++k) {
    CHECK(spans[k].end_us >= spans[k].start_us);
    if (k > 0) CHECK(spans[k].start_us >= spans[k - 1].end_us);
  }
  CHECK(pre[0] == doctest::Approx(0.6));  // the product ran: 4 x 0.5 x 0.25 + 0.1
  optimus::ops::axpby<float>(1.0f, TensorView<const float>(c.data(), Shape{6, 3}, Device::cpu), 0.0f,
                             TensorView<float>(c.data(), Shape{6, 3}, Device::cpu), optimus::ops::Queue{});
  CHECK(timeline.spans().size() == kinds.size());  // a queue without the timeline records nothing
}

// The fused attention (ops::flash_attention_*) on the CPU against the attention written from its formulas here, in
// f64 with whole [seq, seq] matrices: softmax over the keys j <= i (causal; bidirectional: every j; below the
// sequence's length where it is padded) of
// q_i.k_j / sqrt(d), dropout of the probabilities by the global mask (math::dropout_keeps), times V; and its
// backward. Sequences longer than a tile (64) and not a multiple of it, several heads of a slice of the global heads,
// with and without dropout.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "optimus/core/element_math.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/rng.hpp"

namespace {

using optimus::Device;
using optimus::Shape;
using optimus::TensorView;
using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  const optimus::CounterRng rng(seed);
  Matrix m(rows, cols);
  for (std::int64_t e = 0; e < m.size(); ++e) m.data()[e] = 2 * rng.uniform(0, static_cast<std::uint64_t>(e)) - 1;
  return m;
}

struct Attention {
  Matrix out, lse, dqkv;
};

// The formulas, head by head, with [seq, seq] matrices.
Attention by_formula(const Matrix& qkv, const Matrix& dout, const optimus::ops::AttentionShape& s) {
  const std::int64_t width = dout.cols(), d = width / s.heads, batches = qkv.rows() / s.seq;
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  Attention a{Matrix::Zero(qkv.rows(), width), Matrix::Zero(batches * s.heads * s.seq, 1),
              Matrix::Zero(qkv.rows(), 3 * width)};
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      const auto block = [&](const Matrix& m, std::int64_t col) { return m.block(b * s.seq, col, s.seq, d); };
      const Matrix q = block(qkv, t * d), k = block(qkv, width + t * d), v = block(qkv, 2 * width + t * d);
      const Matrix dO = block(dout, t * d);
      const auto mask_row = static_cast<std::uint64_t>(((s.first_batch + b) * s.total_heads + s.first_head + t) * s.seq);
      Matrix p = Matrix::Zero(s.seq, s.seq), mask = Matrix::Zero(s.seq, s.seq);
      const Matrix scores = scale * q * k.transpose();
      const std::int64_t length = s.lengths.data() == nullptr ? s.seq : s.lengths.data()[b];  // before the padding
      for (std::int64_t i = 0; i < s.seq; ++i) {
        const std::int64_t seen = std::min(s.causal ? i + 1 : s.seq, length);  // keys 0 .. seen - 1
        const double max = scores.row(i).head(seen).maxCoeff();
        double sum = 0;
        for (std::int64_t j = 0; j < seen; ++j) sum += std::exp(scores(i, j) - max);
        for (std::int64_t j = 0; j < seen; ++j) {
          p(i, j) = std::exp(scores(i, j) - max) / sum;
          const bool keep = s.dropout == 0 || optimus::math::dropout_keeps(s.dropout, s.seed, s.stream, mask_row + i, j);
          mask(i, j) = keep ? 1 / (1 - s.dropout) : 0;
        }
        a.lse((b * s.heads + t) * s.seq + i, 0) = max + std::log(sum);
      }
      const Matrix kept = p.cwiseProduct(mask);
      a.out.block(b * s.seq, t * d, s.seq, d) = kept * v;
      const Matrix dp = (dO * v.transpose()).cwiseProduct(mask);
      Matrix ds(s.seq, s.seq);
      for (std::int64_t i = 0; i < s.seq; ++i) {
        const double dot = p.row(i).dot(dp.row(i));
        ds.row(i) = scale * p.row(i).cwiseProduct((dp.row(i).array() - dot).matrix());
      }
      a.dqkv.block(b * s.seq, t * d, s.seq, d) = ds * k;
      a.dqkv.block(b * s.seq, width + t * d, s.seq, d) = ds.transpose() * q;
      a.dqkv.block(b * s.seq, 2 * width + t * d, s.seq, d) = kept.transpose() * dO;
    }
  }
  return a;
}

template <class T>
std::vector<T> values_of(const Matrix& m) {
  std::vector<T> v(static_cast<std::size_t>(m.size()));
  for (std::int64_t e = 0; e < m.size(); ++e) v[static_cast<std::size_t>(e)] = static_cast<T>(m.data()[e]);
  return v;
}

// The worst of |got - want| / (1 + |want|).
template <class T>
double worst(const std::vector<T>& got, const Matrix& want) {
  double w = 0;
  for (std::int64_t e = 0; e < want.size(); ++e) {
    w = std::max(w, std::abs(static_cast<double>(got[static_cast<std::size_t>(e)]) - want.data()[e]) /
                        (1 + std::abs(want.data()[e])));
  }
  return w;
}

// Checks the CPU's attention under `queue`'s GEMM math against the formulas in f64; returns out and dqkv side by side.
template <class T>
std::vector<T> check_against_formulas(const optimus::ops::AttentionShape& s, std::int64_t batches, std::int64_t d,
                                      double tolerance, const optimus::ops::Queue& queue = optimus::ops::Queue{}) {
  const std::int64_t n = batches * s.seq, width = s.heads * d;
  const Matrix qkv = 2.0 * random_matrix(n, 3 * width, 1), dout = random_matrix(n, width, 2);
  const Attention want = by_formula(qkv, dout, s);
  const std::vector<T> in = values_of<T>(qkv), grad = values_of<T>(dout);
  std::vector<T> out(static_cast<std::size_t>(n * width)), lse(static_cast<std::size_t>(n * s.heads)),
      dqkv(in.size(), T(7)), delta(lse.size());
  const TensorView<const T> qkv_view(in.data(), Shape{n, 3 * width}, Device::cpu);
  const TensorView<const T> lse_view(lse.data(), Shape{n * s.heads}, Device::cpu);
  optimus::ops::flash_attention_forward<T>(qkv_view, s, TensorView<T>(out.data(), Shape{n, width}, Device::cpu),
                                           TensorView<T>(lse.data(), Shape{n * s.heads}, Device::cpu), queue);
  const TensorView<const T> grad_view(grad.data(), Shape{n, width}, Device::cpu);
  optimus::ops::attention_delta<T>(TensorView<const T>(out.data(), Shape{n, width}, Device::cpu), grad_view, s,
                                   TensorView<T>(delta.data(), Shape{n * s.heads}, Device::cpu), queue);
  optimus::ops::flash_attention_backward<T>(qkv_view, grad_view, lse_view,
                                            TensorView<const T>(delta.data(), Shape{n * s.heads}, Device::cpu), s,
                                            TensorView<T>(dqkv.data(), Shape{n, 3 * width}, Device::cpu), queue);
  CHECK(worst(out, want.out) < tolerance);
  CHECK(worst(lse, want.lse) < tolerance);
  CHECK(worst(dqkv, want.dqkv) < tolerance);
  out.insert(out.end(), dqkv.begin(), dqkv.end());
  return out;
}

}  // namespace

TEST_CASE("flash attention on the CPU equals the attention's formulas, forward and backward, f64 and f32") {
  // 2 sequences of 70 (a tile of 64 and 6 more), 3 heads of d = 8 among 7 global heads, starting at head 2 of batch 1.
  for (const double p : {0.0, 0.2}) {
    CAPTURE(p);
    const optimus::ops::AttentionShape s{.seq = 70, .heads = 3, .dropout = p, .seed = 11, .stream = 5,
                                         .first_batch = 1, .first_head = 2, .total_heads = 7,
                                         .causal = true, .lengths = {}};
    check_against_formulas<double>(s, 2, 8, 1e-12);
    check_against_formulas<float>(s, 2, 8, 1e-5);
  }
  // A single short sequence (one partial tile) and a sequence of exactly two tiles.
  check_against_formulas<double>({.seq = 5, .heads = 1, .dropout = 0.5, .seed = 3, .stream = 1, .first_batch = 0,
                                  .first_head = 0, .total_heads = 1, .causal = true, .lengths = {}},
                                 1, 4, 1e-12);
  check_against_formulas<double>({.seq = 128, .heads = 2, .dropout = 0.0, .seed = 0, .stream = 0, .first_batch = 0,
                                  .first_head = 0, .total_heads = 2, .causal = true, .lengths = {}},
                                 1, 16, 1e-12);
}

TEST_CASE("bidirectional flash attention (an encoder's) on the CPU equals the formulas with every key seen; causal "
          "masking changes it") {
  // Sequences of 70 (a tile and 6 more) and 300 (two forward key tiles of 256 and 44 more), dropout off and on; f64,
  // f32, and f32 under mixed precision (its 64-key tiles).
  for (const double p : {0.0, 0.2}) {
    CAPTURE(p);
    optimus::ops::AttentionShape s{.seq = 70, .heads = 3, .dropout = p, .seed = 11, .stream = 5,
                                   .first_batch = 1, .first_head = 2, .total_heads = 7, .causal = false, .lengths = {}};
    const std::vector<double> bidirectional = check_against_formulas<double>(s, 2, 8, 1e-12);
    check_against_formulas<float>(s, 2, 8, 1e-5);
    s.seq = 300;
    check_against_formulas<double>(s, 1, 8, 1e-12);
    check_against_formulas<float>(s, 1, 16, 2e-2, optimus::ops::Queue{.math = optimus::ops::GemmMath::bf16});
    s.seq = 70;
    s.causal = true;
    const std::vector<double> causal = check_against_formulas<double>(s, 2, 8, 1e-12);
    std::size_t differ = 0;
    for (std::size_t e = 0; e < causal.size(); ++e) differ += std::abs(causal[e] - bidirectional[e]) > 1e-6 ? 1 : 0;
    CHECK(differ > causal.size() / 2);  // the mask matters: most outputs and gradients change
  }
}

TEST_CASE("flash attention on padded sequences (a key-padding mask) equals the formulas with the padding's keys "
          "unseen; the padding's keys get no gradient") {
  // 4 sequences of 70 (the query tiles and mixed precision's key tiles of 64: one and 6 more) padded after 70 (none),
  // 65 (a tile and one key), 1 (one key) and 64 (exactly a tile) tokens; bidirectional and causal, dropout off and
  // on; f64, f32, and f32 under mixed precision.
  const std::vector<int> lengths{70, 65, 1, 64};
  const TensorView<const int> on_cpu(lengths.data(), Shape{4}, Device::cpu);
  for (const bool causal : {false, true}) {
    for (const double p : {0.0, 0.2}) {
      CAPTURE(causal);
      CAPTURE(p);
      const optimus::ops::AttentionShape s{.seq = 70, .heads = 2, .dropout = p, .seed = 11, .stream = 5,
                                           .first_batch = 1, .first_head = 2, .total_heads = 7, .causal = causal,
                                           .lengths = on_cpu};
      const std::vector<double> padded = check_against_formulas<double>(s, 4, 8, 1e-12);
      check_against_formulas<float>(s, 4, 8, 1e-5);
      // (5e-2 under mixed precision: the one-token sequence's one key sums 70 queries' dS, each the rounding of
      // dP - D where exactly they cancel.)
      check_against_formulas<float>(s, 4, 16, 5e-2, optimus::ops::Queue{.math = optimus::ops::GemmMath::bf16});
      // Against the same attention unpadded: exactly the query rows whose keys the padding hides differ (causal: those
      // from the sequence's length on; bidirectional: every row of a padded sequence), the others within rounding.
      optimus::ops::AttentionShape whole = s;
      whole.lengths = {};
      const std::vector<double> unpadded = check_against_formulas<double>(whole, 4, 8, 1e-12);
      const std::int64_t seq = 70, width = 2 * 8, out_size = 4 * seq * width;  // out first, then dqkv
      std::int64_t changed = 0, expected = 0;
      for (std::int64_t b = 0; b < 4; ++b) {
        const std::int64_t length = lengths[static_cast<std::size_t>(b)];
        expected += causal ? seq - length : (length < seq ? seq : 0);
        for (std::int64_t i = 0; i < seq; ++i) {
          double most = 0;
          for (std::int64_t c = 0; c < width; ++c) {
            const auto e = static_cast<std::size_t>((b * seq + i) * width + c);
            most = std::max(most, std::abs(padded[e] - unpadded[e]));
          }
          changed += most > 1e-9 ? 1 : 0;
        }
      }
      CHECK(changed == expected);
      double padding_grads = 0;
      for (std::int64_t i = 2 * seq + 1; i < 3 * seq; ++i) {
        for (std::int64_t c = width; c < 3 * width; ++c) {
          padding_grads += std::abs(padded[static_cast<std::size_t>(out_size + i * 3 * width + c)]);
        }
      }
      CHECK(padding_grads == 0.0);
    }
  }
}

TEST_CASE("flash attention refuses shapes that are not an attention's, naming them") {
  std::vector<float> qkv(8 * 12), out(8 * 4), lse(8 * 2);
  const optimus::ops::AttentionShape s{.seq = 3, .heads = 2, .dropout = 0.0, .seed = 0, .stream = 0,
                                       .first_batch = 0, .first_head = 0, .total_heads = 2,
                                       .causal = true, .lengths = {}};
  CHECK_THROWS_WITH_AS(optimus::ops::flash_attention_forward<float>(
                           TensorView<const float>(qkv.data(), Shape{8, 12}, Device::cpu), s,
                           TensorView<float>(out.data(), Shape{8, 4}, Device::cpu),
                           TensorView<float>(lse.data(), Shape{16}, Device::cpu), optimus::ops::Queue{}),
                       doctest::Contains("out has shape [8, 4], not whole sequences of 3 rows by 2 heads"),
                       optimus::Error);
  const std::vector<int> lengths{3, 2, 1};  // two sequences of 3 rows, three lengths
  optimus::ops::AttentionShape padded = s;
  padded.lengths = TensorView<const int>(lengths.data(), Shape{3}, Device::cpu);
  CHECK_THROWS_WITH_AS(optimus::ops::flash_attention_forward<float>(
                           TensorView<const float>(qkv.data(), Shape{6, 12}, Device::cpu), padded,
                           TensorView<float>(out.data(), Shape{6, 4}, Device::cpu),
                           TensorView<float>(lse.data(), Shape{12}, Device::cpu), optimus::ops::Queue{}),
                       doctest::Contains("lengths has 3 elements, expected one per sequence (2)"), optimus::Error);
}

TEST_CASE("flash attention on the CPU under mixed precision rounds the products' operands to bf16, as a GPU's tensor "
          "cores take them, within bf16's tolerance of the formulas") {
  // 200 queries: 4 of the GPU's 64-key tiles, the last partial; head dimension 64, dropout on.
  const optimus::ops::AttentionShape s{.seq = 200, .heads = 2, .dropout = 0.1, .seed = 4, .stream = 2,
                                       .first_batch = 0, .first_head = 0, .total_heads = 2,
                                       .causal = true, .lengths = {}};
  const std::vector<float> exact = check_against_formulas<float>(s, 1, 64, 1e-5);
  const std::vector<float> mixed =
      check_against_formulas<float>(s, 1, 64, 2e-2, optimus::ops::Queue{.math = optimus::ops::GemmMath::bf16});
  std::size_t differ = 0;
  for (std::size_t e = 0; e < exact.size(); ++e) differ += exact[e] != mixed[e];
  CHECK(differ > exact.size() / 2);  // the rounding happened: most elements moved
  // f64 ignores the GEMM math: the same bits under either.
  CHECK(check_against_formulas<double>(s, 1, 64, 1e-12) ==
        check_against_formulas<double>(s, 1, 64, 1e-12, optimus::ops::Queue{.math = optimus::ops::GemmMath::bf16}));
}

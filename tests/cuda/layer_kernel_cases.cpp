// The CUDA layer kernels against host computations of the CPU layers' formulas (fp32 kernels vs double on
// the host, within 1e-5 relative), and bitwise where the CPU defines the bits: dropout masks, bf16 rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "device_buffer.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/cuda/layer_kernels.hpp"

namespace {

using optimus::test::DeviceBuffer;
using Host = std::vector<float>;

Host random_host(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  const optimus::CounterRng rng(seed);
  Host x(n);
  for (std::size_t e = 0; e < n; ++e) x[e] = static_cast<float>(scale * (2 * rng.uniform(0, e) - 1));
  return x;
}

void check_close(const Host& got, const std::vector<double>& expected, double tol = 1e-5) {
  REQUIRE(got.size() == expected.size());
  double scale = 0;
  for (double v : expected) scale = std::max(scale, std::abs(v));
  for (std::size_t e = 0; e < got.size(); ++e) {
    CAPTURE(e);
    CHECK(std::abs(got[e] - expected[e]) <= tol * std::max(1.0, scale));
  }
}

struct Fixture {
  optimus::cuda::DeviceAllocator alloc{0};
  optimus::cuda::Stream stream;
  cudaStream_t s() const { return stream.get(); }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "LayerNorm kernels: forward statistics and normalization, backward partials and dx") {
  const std::int64_t rows = 5, cols = 37;  // hidden = cols: one rank holds the whole row
  const Host x = random_host(rows * cols, 1, 3.0), gamma = random_host(cols, 2), beta = random_host(cols, 3);
  const Host dy = random_host(rows * cols, 4);
  DeviceBuffer<float> dx_in(alloc, x), dg(alloc, gamma), db(alloc, beta), ddy(alloc, dy);
  DeviceBuffer<float> sum(alloc, rows), sq(alloc, rows), xhat(alloc, rows * cols), rstd(alloc, rows),
      y(alloc, rows * cols), dgamma(alloc, cols), dbeta(alloc, cols), sums(alloc, 2 * rows), dx(alloc, rows * cols);
  optimus::cuda::row_sums(dx_in.ptr, rows, cols, sum.ptr, s());
  optimus::cuda::layernorm_square_deviations(dx_in.ptr, sum.ptr, cols, rows, cols, sq.ptr, s());
  optimus::cuda::layernorm_normalize(dx_in.ptr, sum.ptr, sq.ptr, dg.ptr, db.ptr, cols, rows, cols, xhat.ptr, rstd.ptr,
                                     y.ptr, s());
  optimus::cuda::layernorm_backward_partials(ddy.ptr, xhat.ptr, dg.ptr, rows, cols, dgamma.ptr, dbeta.ptr, sums.ptr, s());
  optimus::cuda::layernorm_backward_dx(ddy.ptr, xhat.ptr, dg.ptr, rstd.ptr, sums.ptr, cols, rows, cols, dx.ptr, s());
  stream.synchronize();

  std::vector<double> y_ref(x.size()), xhat_ref(x.size()), dx_ref(x.size()), dgamma_ref(cols, 0.0), dbeta_ref(cols, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= cols;
    for (std::int64_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    const double inv = 1 / std::sqrt(var / cols + 1e-5);
    double a = 0, b = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t e = r * cols + c;
      xhat_ref[e] = (x[e] - mean) * inv;
      y_ref[e] = xhat_ref[e] * gamma[c] + beta[c];
      a += dy[e] * gamma[c];
      b += dy[e] * gamma[c] * xhat_ref[e];
      dgamma_ref[c] += dy[e] * xhat_ref[e];
      dbeta_ref[c] += dy[e];
    }
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t e = r * cols + c;
      dx_ref[e] = inv * (dy[e] * gamma[c] - a / cols - xhat_ref[e] * b / cols);
    }
  }
  check_close(y.download(), y_ref);
  check_close(xhat.download(), xhat_ref);
  check_close(dgamma.download(), dgamma_ref);
  check_close(dbeta.download(), dbeta_ref);
  check_close(dx.download(), dx_ref);
}

TEST_CASE_FIXTURE(Fixture, "causal softmax forward and backward on stacked [seq, seq] tiles") {
  const std::int64_t tiles = 3, seq = 6;
  const float scale = 0.5f;
  const Host scores = random_host(tiles * seq * seq, 5, 4.0), dp = random_host(tiles * seq * seq, 6);
  DeviceBuffer<float> dscores(alloc, scores), ddp(alloc, dp), probs(alloc, scores.size()), ds(alloc, scores.size());
  optimus::cuda::causal_softmax_forward(dscores.ptr, scale, tiles, seq, probs.ptr, s());
  optimus::cuda::causal_softmax_backward(probs.ptr, ddp.ptr, scale, tiles, seq, ds.ptr, s());
  stream.synchronize();
  std::vector<double> p_ref(scores.size(), 0.0), ds_ref(scores.size());
  for (std::int64_t row = 0; row < tiles * seq; ++row) {
    const std::int64_t r = row % seq;
    double max = -1e300, sum = 0, dot = 0;
    for (std::int64_t c = 0; c <= r; ++c) max = std::max(max, double(scale) * scores[row * seq + c]);
    for (std::int64_t c = 0; c <= r; ++c) sum += std::exp(double(scale) * scores[row * seq + c] - max);
    for (std::int64_t c = 0; c <= r; ++c) p_ref[row * seq + c] = std::exp(double(scale) * scores[row * seq + c] - max) / sum;
    for (std::int64_t c = 0; c < seq; ++c) dot += dp[row * seq + c] * p_ref[row * seq + c];
    for (std::int64_t c = 0; c < seq; ++c) ds_ref[row * seq + c] = scale * p_ref[row * seq + c] * (dp[row * seq + c] - dot);
  }
  check_close(probs.download(), p_ref);
  check_close(ds.download(), ds_ref);
}

TEST_CASE_FIXTURE(Fixture, "dropout kernels draw the CPU's Philox masks bit for bit") {
  const double p = 0.3;
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  const std::uint64_t seed = 77, stream_id = 5;
  SUBCASE("a strided block of an activation") {
    const std::int64_t rows = 6, cols = 9, ld = 11, row0 = 10, col0 = 4;
    const Host x = random_host(rows * ld, 7);
    DeviceBuffer<float> d(alloc, x);
    optimus::cuda::dropout_apply(d.ptr, rows, cols, ld, row0, col0, p, seed, stream_id, s());
    const Host got = d.download();
    const optimus::CounterRng rng(seed, stream_id);
    int dropped = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < ld; ++c) {
        const std::size_t e = r * ld + c;
        const bool kept = c >= cols || rng.uniform(row0 + r, col0 + c) >= p;
        const float expected = c >= cols ? x[e] : (kept ? x[e] * keep : 0.0f);
        dropped += kept ? 0 : 1;
        CHECK(got[e] == expected);
      }
    }
    CHECK(dropped > 0);
  }
  SUBCASE("attention probabilities, tile by tile") {
    const std::int64_t batches = 2, heads = 2, seq = 4, first_batch = 1, total_heads = 4, first_head = 2;
    const Host x = random_host(batches * heads * seq * seq, 8);
    DeviceBuffer<float> d(alloc, x);
    optimus::cuda::attention_dropout_apply(d.ptr, batches, heads, seq, first_batch, total_heads, first_head, p, seed,
                                           stream_id, s());
    const Host got = d.download();
    const optimus::CounterRng rng(seed, stream_id);
    for (std::int64_t b = 0; b < batches; ++b) {
      for (std::int64_t t = 0; t < heads; ++t) {
        const std::uint64_t row0 = ((first_batch + b) * total_heads + first_head + t) * seq;
        for (std::int64_t r = 0; r < seq; ++r) {
          for (std::int64_t c = 0; c < seq; ++c) {
            const std::size_t e = ((b * heads + t) * seq + r) * seq + c;
            CHECK(got[e] == (rng.uniform(row0 + r, c) >= p ? x[e] * keep : 0.0f));
          }
        }
      }
    }
  }
}

TEST_CASE_FIXTURE(Fixture, "embedding lookup, positions, scatter-add and position gradients of a vocabulary slice") {
  const std::int64_t n = 8, width = 5, v0 = 3, vn = 4, seq = 4, max_seq = 6, row_offset = 2, rows = 4;
  const std::vector<int> tokens = {3, 0, 6, 4, 3, 7, 9, 5};
  const Host wte = random_host(vn * width, 9), wpe = random_host(max_seq * width, 10), grad = random_host(n * width, 11);
  DeviceBuffer<int> dtok(alloc, tokens);
  DeviceBuffer<float> dwte(alloc, wte), dwpe(alloc, wpe), dgrad(alloc, grad), partial(alloc, n * width),
      dw(alloc, Host(vn * width, 0.0f)), pos(alloc, max_seq * width);
  optimus::cuda::embedding_lookup(dwte.ptr, dtok.ptr, n, v0, vn, width, partial.ptr, s());
  optimus::cuda::embedding_scatter_add(dgrad.ptr, dtok.ptr, n, v0, vn, width, dw.ptr, s());
  optimus::cuda::position_grad(dgrad.ptr, row_offset, seq, rows, width, max_seq, pos.ptr, s());
  optimus::cuda::add_positions(dwpe.ptr, row_offset, seq, rows, width, partial.ptr, s());
  stream.synchronize();
  std::vector<double> look(n * width, 0.0), scat(vn * width, 0.0), pg(max_seq * width, 0.0);
  for (std::int64_t t = 0; t < n; ++t) {
    const int id = tokens[t];
    for (std::int64_t c = 0; c < width; ++c) {
      if (id >= v0 && id < v0 + vn) {
        look[t * width + c] = wte[(id - v0) * width + c];
        scat[(id - v0) * width + c] += grad[t * width + c];
      }
      if (t < rows) look[t * width + c] += wpe[((row_offset + t) % seq) * width + c];
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < width; ++c) pg[((row_offset + r) % seq) * width + c] += grad[r * width + c];
  }
  check_close(partial.download(), look);
  check_close(dw.download(), scat);
  check_close(pos.download(), pg);
}

TEST_CASE_FIXTURE(Fixture, "vocabulary-parallel cross-entropy: sums, probabilities, row losses and gradient") {
  const std::int64_t rows = 4, vn = 6, v0 = 6, row_offset = 1, n_tokens = 10;
  const std::vector<int> targets = {0, 7, 2, 11, 6, 9, 1, 3, 4, 5};  // rows 1..4 of the batch: 7, 2, 11, 6
  const Host logits = random_host(rows * vn, 12, 3.0);
  DeviceBuffer<int> dt(alloc, targets);
  DeviceBuffer<float> dl(alloc, logits), max(alloc, rows), sums(alloc, 2 * rows);
  DeviceBuffer<double> loss(alloc, rows);
  optimus::cuda::row_max(dl.ptr, rows, vn, max.ptr, s());
  optimus::cuda::cross_entropy_exp_sums(dl.ptr, max.ptr, dt.ptr, row_offset, v0, rows, vn, sums.ptr, s());
  optimus::cuda::cross_entropy_finish(dl.ptr, max.ptr, sums.ptr, rows, vn, loss.ptr, s());
  stream.synchronize();
  const Host probs = dl.download();
  const std::vector<double> row_loss = loss.download();
  optimus::cuda::cross_entropy_backward(dl.ptr, dt.ptr, row_offset, v0, rows, vn, n_tokens, s());
  stream.synchronize();
  std::vector<double> p_ref(logits.size()), g_ref(logits.size()), loss_ref(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -1e300, sum = 0;
    for (std::int64_t c = 0; c < vn; ++c) m = std::max(m, double(logits[r * vn + c]));
    for (std::int64_t c = 0; c < vn; ++c) sum += std::exp(logits[r * vn + c] - m);
    const int target = targets[row_offset + r];
    const bool here = target >= v0 && target < v0 + vn;
    loss_ref[r] = std::log(sum) + m - (here ? logits[r * vn + target - v0] : 0.0);
    for (std::int64_t c = 0; c < vn; ++c) {
      p_ref[r * vn + c] = std::exp(logits[r * vn + c] - m) / sum;
      g_ref[r * vn + c] = (p_ref[r * vn + c] - (target == v0 + c ? 1.0 : 0.0)) / n_tokens;
    }
  }
  check_close(probs, p_ref);
  for (std::int64_t r = 0; r < rows; ++r) CHECK(row_loss[r] == doctest::Approx(loss_ref[r]).epsilon(1e-5));
  check_close(dl.download(), g_ref);
}

TEST_CASE_FIXTURE(Fixture, "bf16 casts round like optimus::bf16; gradient norm; AdamW on fp32 masters") {
  Host x = random_host(1000, 13, 100.0);
  x.push_back(1.00390625f);  // a tie: 1 + 2^-8 rounds to even (1.0)
  x.push_back(1.01171875f);  // a tie that rounds up
  const auto n = static_cast<std::int64_t>(x.size());
  DeviceBuffer<float> dx(alloc, x), back(alloc, x.size());
  DeviceBuffer<optimus::bf16> half(alloc, x.size());
  optimus::cuda::to_bf16(dx.ptr, half.ptr, n, s());
  optimus::cuda::to_f32(half.ptr, back.ptr, n, s());
  DeviceBuffer<double> partials(alloc, optimus::cuda::sum_squares_partials()), norm2(alloc, 1);
  optimus::cuda::sum_squares(dx.ptr, n, partials.ptr, norm2.ptr, s());
  stream.synchronize();
  const auto h = half.download();
  const Host b = back.download();
  double sq = 0;
  for (std::size_t e = 0; e < x.size(); ++e) {
    CHECK(h[e] == optimus::bf16(x[e]));
    CHECK(b[e] == static_cast<float>(optimus::bf16(x[e])));
    sq += double(x[e]) * x[e];
  }
  CHECK(norm2.download()[0] == doctest::Approx(sq).epsilon(1e-12));

  // Two AdamW steps, against the CPU AdamW's element update (optimus/layers/gpt.cpp) in double on the host.
  Host master = random_host(257, 14), grad = random_host(257, 15), m(257, 0.0f), v(257, 0.0f);
  DeviceBuffer<float> dm_(alloc, master), dg(alloc, grad), dmom(alloc, m), dvar(alloc, v);
  DeviceBuffer<optimus::bf16> weights(alloc, master.size());
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, decay = 0.1, clip = 0.5;
  for (int t = 1; t <= 2; ++t) {
    const optimus::AdamWStep step{lr, b1, b2, eps, decay, clip, 1 - std::pow(b1, t), 1 - std::pow(b2, t)};
    optimus::cuda::adamw_update(dm_.ptr, dg.ptr, dmom.ptr, dvar.ptr, 257, step, weights.ptr, s());
    for (std::size_t e = 0; e < master.size(); ++e) {
      const double g = clip * grad[e];
      m[e] = static_cast<float>(b1 * m[e] + (1 - b1) * g);
      v[e] = static_cast<float>(b2 * v[e] + (1 - b2) * g * g);
      const double update = (m[e] / step.c1) / (std::sqrt(v[e] / step.c2) + eps);
      master[e] = static_cast<float>(master[e] - lr * (update + decay * master[e]));
    }
  }
  stream.synchronize();
  const Host got = dm_.download();
  const auto w = weights.download();
  for (std::size_t e = 0; e < master.size(); ++e) {
    CHECK(got[e] == doctest::Approx(master[e]).epsilon(1e-6));
    CHECK(w[e] == optimus::bf16(got[e]));
  }
}

// The oracle itself: the reference GPT's analytic gradients against central finite differences of its loss,
// for every parameter tensor, with dropout on; and one AdamW step against the formula.
#include <doctest/doctest.h>

#include <cmath>

#include "capture_binding.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"

using optimus::reference::Matrix;
using optimus::reference::Parameters;

TEST_CASE("reference GPT gradients match finite differences") {
  optimus::GptConfig c;
  c.vocab = 7;
  c.max_seq = 4;
  c.layers = 2;
  c.hidden = 8;
  c.heads = 2;
  c.ffn = 12;
  c.dropout = 0.2;
  c.seed = 5;
  Parameters p = optimus::reference::gpt_init(c);
  // Larger weights than GPT-2's 0.02 so that every path carries signal.
  std::uint64_t seed = 40;
  for (auto& [name, m] : p) m += 0.3 * optimus::reference::random_matrix(m.rows(), m.cols(), seed++);
  const std::vector<int> tokens = {1, 5, 2, 6, 0, 3}, targets = {5, 2, 6, 0, 3, 4};
  const auto loss = [&](const Parameters& q) {
    return optimus::reference::gpt_forward_backward(c, q, tokens, targets, 2, 7).loss;
  };
  const optimus::reference::GptResult r = optimus::reference::gpt_forward_backward(c, p, tokens, targets, 2, 7);
  CHECK(r.grads.size() == p.size());
  const double eps = 1e-5;
  for (const auto& [name, m] : p) {
    for (int pick = 0; pick < 3; ++pick) {
      const Eigen::Index e = (pick * 7919 + 13) % m.size();
      const Eigen::Index row = e / m.cols(), col = e % m.cols();
      Parameters plus = p, minus = p;
      plus[name](row, col) += eps;
      minus[name](row, col) -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      const double analytic = r.grads.at(name)(row, col);
      CAPTURE_BINDING(name);
      CAPTURE(row);
      CAPTURE(col);
      CHECK(std::abs(numeric - analytic) <= 1e-7 + 1e-5 * std::abs(analytic));
    }
  }
}

TEST_CASE("reference AdamW follows the formula, with clipping and decay on matrices only") {
  const optimus::AdamWConfig a{0.1, 0.9, 0.99, 1e-8, 0.5, 1.0};
  Parameters p{{"w.weight", Matrix::Constant(1, 2, 2.0)}, {"w.bias", Matrix::Constant(1, 1, 1.0)}};
  // Gradient norm 5 (3, 4, 0) is clipped to 1: the gradient becomes (0.6, 0.8, 0).
  Parameters g{{"w.weight", (Matrix(1, 2) << 3.0, 4.0).finished()}, {"w.bias", Matrix::Zero(1, 1)}};
  Parameters m, v;
  const double norm = optimus::reference::adamw_step(a, 1, p, g, m, v);
  CHECK(norm == doctest::Approx(5.0));
  // Step 1: m_hat = g, v_hat = g^2, update = g / (|g| + eps) ~= 1; weight: 2 - 0.1 * (1 + 0.5 * 2) = 1.8.
  CHECK(p.at("w.weight")(0, 0) == doctest::Approx(1.8).epsilon(1e-6));
  CHECK(p.at("w.weight")(0, 1) == doctest::Approx(1.8).epsilon(1e-6));
  CHECK(p.at("w.bias")(0, 0) == 1.0);  // zero gradient, no decay
  CHECK(m.at("w.weight")(0, 1) == doctest::Approx(0.1 * 0.8));
}

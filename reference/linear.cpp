// Reference Linear, LayerNorm, GELU and dropout.
#include <cmath>
#include <numbers>
#include <utility>

#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"
#include "optimus/reference/layers.hpp"

namespace optimus::reference {

Matrix linear_forward(const Matrix& x, const Matrix& w, const Matrix& b) {
  Matrix y = x * w;
  if (b.size() > 0) y.rowwise() += b.row(0);  // empty: a linear without a bias
  return y;
}

LinearGrads linear_backward(const Matrix& x, const Matrix& w, const Matrix& dy) {
  return {dy * w.transpose(), x.transpose() * dy, dy.colwise().sum()};
}

Matrix layernorm_forward(const Matrix& x, const Matrix& gamma, const Matrix& beta, double eps, LayerNormCache& cache) {
  const auto h = static_cast<double>(x.cols());
  cache.xhat.resize(x.rows(), x.cols());
  cache.rstd.resize(x.rows(), 1);
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double mean = x.row(r).sum() / h;
    const double var = (x.row(r).array() - mean).square().sum() / h;
    const double rstd = 1.0 / std::sqrt(var + eps);
    cache.rstd(r, 0) = rstd;
    cache.xhat.row(r) = (x.row(r).array() - mean) * rstd;
    y.row(r) = cache.xhat.row(r).array() * gamma.row(0).array() + beta.row(0).array();
  }
  return y;
}

LayerNormGrads layernorm_backward(const LayerNormCache& cache, const Matrix& gamma, const Matrix& dy) {
  const auto h = static_cast<double>(dy.cols());
  LayerNormGrads g;
  g.dgamma = (dy.array() * cache.xhat.array()).colwise().sum();
  g.dbeta = dy.colwise().sum();
  g.dx.resize(dy.rows(), dy.cols());
  for (Eigen::Index r = 0; r < dy.rows(); ++r) {
    const Eigen::RowVectorXd dxhat = dy.row(r).array() * gamma.row(0).array();
    const double mean_dxhat = dxhat.sum() / h;
    const double mean_dxhat_xhat = (dxhat.array() * cache.xhat.row(r).array()).sum() / h;
    g.dx.row(r) = cache.rstd(r, 0) * (dxhat.array() - mean_dxhat - cache.xhat.row(r).array() * mean_dxhat_xhat);
  }
  return g;
}

Matrix rmsnorm_forward(const Matrix& x, const Matrix& gamma, double eps, RmsNormCache& cache) {
  const auto h = static_cast<double>(x.cols());
  cache.x = x;
  cache.rstd.resize(x.rows(), 1);
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    cache.rstd(r, 0) = 1.0 / std::sqrt(x.row(r).squaredNorm() / h + eps);
    y.row(r) = x.row(r).array() * cache.rstd(r, 0) * gamma.row(0).array();
  }
  return y;
}

// With u = dy gamma and s = rstd = (sum x^2 / h + eps)^(-1/2), whose derivative by x_j is -s^3 x_j / h:
// dx_j = s u_j - x_j s^3 (sum_i u_i x_i) / h; dgamma = sum over rows of dy x s.
RmsNormGrads rmsnorm_backward(const RmsNormCache& cache, const Matrix& gamma, const Matrix& dy) {
  const auto h = static_cast<double>(dy.cols());
  RmsNormGrads g;
  g.dx.resize(dy.rows(), dy.cols());
  g.dgamma = Matrix::Zero(1, dy.cols());
  for (Eigen::Index r = 0; r < dy.rows(); ++r) {
    const double s = cache.rstd(r, 0);
    const Eigen::RowVectorXd u = dy.row(r).array() * gamma.row(0).array();
    const double ux = u.dot(cache.x.row(r));
    g.dx.row(r) = s * u.array() - cache.x.row(r).array() * (s * s * s * ux / h);
    g.dgamma.row(0).array() += dy.row(r).array() * cache.x.row(r).array() * s;
  }
  return g;
}

Matrix norm_forward(const NormSpec& spec, const Matrix& x, const Matrix& gamma, const Matrix& beta, NormCache& cache) {
  cache.spec = spec;
  if (spec.kind == NormSpec::Kind::rmsnorm) return rmsnorm_forward(x, gamma, spec.eps, cache.rmsnorm);
  return layernorm_forward(x, gamma, beta, spec.eps, cache.layernorm);
}

LayerNormGrads norm_backward(const NormCache& cache, const Matrix& gamma, const Matrix& dy) {
  if (cache.spec.kind == NormSpec::Kind::layernorm) return layernorm_backward(cache.layernorm, gamma, dy);
  RmsNormGrads g = rmsnorm_backward(cache.rmsnorm, gamma, dy);
  return {.dx = std::move(g.dx), .dgamma = std::move(g.dgamma), .dbeta = Matrix()};
}

namespace {
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;
}  // namespace

Matrix gelu_forward(const Matrix& x) {
  return x.unaryExpr([](double v) { return 0.5 * v * (1.0 + std::tanh(kGeluC * (v + kGeluA * v * v * v))); });
}

Matrix gelu_backward(const Matrix& x, const Matrix& dy) {
  const Matrix d = x.unaryExpr([](double v) {
    const double t = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluA * v * v);
  });
  return dy.cwiseProduct(d);
}

namespace {
double normal_cdf(double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); }
double normal_pdf(double v) { return std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::numbers::pi); }
}  // namespace

Matrix gelu_erf_forward(const Matrix& x) {
  return x.unaryExpr([](double v) { return v * normal_cdf(v); });
}

Matrix gelu_erf_backward(const Matrix& x, const Matrix& dy) {
  return dy.cwiseProduct(x.unaryExpr([](double v) { return normal_cdf(v) + v * normal_pdf(v); }));
}

Matrix dropout_mask(std::int64_t rows, std::int64_t cols, double p, std::uint64_t seed, std::uint64_t stream) {
  Matrix mask = Matrix::Ones(rows, cols);
  if (p <= 0.0) return mask;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      mask(r, c) = math::dropout_keeps(p, seed, stream, static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(c))
                       ? 1.0 / (1.0 - p)
                       : 0.0;
    }
  }
  return mask;
}

}  // namespace optimus::reference

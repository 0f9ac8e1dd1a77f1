// LayerNorm2D: row statistics by all-reduce along the grid row.
#include "optimus/layers/layernorm.hpp"

#include <cmath>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus {

template <class T>
LayerNorm2D<T>::LayerNorm2D(const Grid& grid, std::string name, std::int64_t hidden)
    : grid_(&grid),
      name_(std::move(name)),
      hidden_(hidden),
      gamma_(grid, hidden, MemoryKind::parameters, name_.c_str()),
      beta_(grid, hidden, MemoryKind::parameters, name_.c_str()),
      dgamma_(grid, hidden, MemoryKind::gradients, name_.c_str()),
      dbeta_(grid, hidden, MemoryKind::gradients, name_.c_str()) {}

template <class T>
DistMatrix<T> LayerNorm2D<T>::forward(const DistMatrix<T>& x, const Pass& pass) {
  OPTIMUS_CHECK(x.cols() == hidden_, name_, ": input has ", x.cols(), " columns, expected ", hidden_);
  const std::int64_t rows = x.local_rows(), cols = x.local_cols();
  const MemoryTag work{&grid_->memory(), MemoryKind::workspace};
  Tensor<T> gamma(Shape{1, cols}, work), beta(Shape{1, cols}, work);
  gamma_.gather_column_block(gamma.view());
  beta_.gather_column_block(beta.view());
  const auto X = x.local_map();

  // Pass 1: the mean of each row; pass 2: the variance around it.
  std::vector<T> stat(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) stat[static_cast<std::size_t>(r)] = X.row(r).sum();
  grid_->row().all_reduce(std::span<T>(stat), ReduceOp::sum);
  std::vector<T> mean(stat);
  for (T& m : mean) m /= static_cast<T>(hidden_);
  for (std::int64_t r = 0; r < rows; ++r) {
    stat[static_cast<std::size_t>(r)] = (X.row(r).array() - mean[static_cast<std::size_t>(r)]).square().sum();
  }
  grid_->row().all_reduce(std::span<T>(stat), ReduceOp::sum);

  DistMatrix<T> xhat(x.grid(), x.rows(), x.cols(), pass.training ? MemoryKind::activations : MemoryKind::workspace);
  Tensor<T> rstd(Shape{rows}, MemoryTag{&grid_->memory(), pass.training ? MemoryKind::activations : MemoryKind::workspace});
  auto XH = xhat.local_map();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    rstd.data()[r] = T(1) / std::sqrt(stat[ru] / static_cast<T>(hidden_) + T(1e-5));
    XH.row(r) = (X.row(r).array() - mean[ru]) * rstd.data()[r];
  }
  DistMatrix<T> y(x.grid(), x.rows(), x.cols());
  auto Y = y.local_map();
  const auto G = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(gamma.data(), cols);
  const auto B = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(beta.data(), cols);
  for (std::int64_t r = 0; r < rows; ++r) Y.row(r) = XH.row(r).array() * G + B;
  if (pass.training) {
    xhat_ = std::move(xhat);
    rstd_ = std::move(rstd);
  }
  return y;
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward(const DistMatrix<T>& dy) {
  OPTIMUS_CHECK(xhat_.has_value(), name_, ": backward without a training forward");
  const std::int64_t rows = dy.local_rows(), cols = dy.local_cols();
  const MemoryTag work{&grid_->memory(), MemoryKind::workspace};
  Tensor<T> gamma(Shape{1, cols}, work), partial(Shape{1, cols}, work);
  gamma_.gather_column_block(gamma.view());
  const auto G = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(gamma.data(), cols);
  const auto DY = dy.local_map();
  const auto XH = xhat_->local_map();

  // dgamma = sum_rows dy * xhat, dbeta = sum_rows dy.
  auto P = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>(partial.data(), cols);
  P = (DY.array() * XH.array()).colwise().sum();
  dgamma_.add_reduced_column_block(partial.view());
  P = DY.array().colwise().sum();
  dbeta_.add_reduced_column_block(partial.view());

  // Row sums of dxhat and dxhat*xhat over all h features: one all-reduce of 2 * rows values.
  std::vector<T> sums(static_cast<std::size_t>(2 * rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto dxhat = DY.row(r).array() * G;
    sums[static_cast<std::size_t>(2 * r)] = dxhat.sum();
    sums[static_cast<std::size_t>(2 * r + 1)] = (dxhat * XH.row(r).array()).sum();
  }
  grid_->row().all_reduce(std::span<T>(sums), ReduceOp::sum);
  DistMatrix<T> dx(dy.grid(), dy.rows(), dy.cols());
  auto DX = dx.local_map();
  const T inv_h = T(1) / static_cast<T>(hidden_);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T mean_dxhat = sums[static_cast<std::size_t>(2 * r)] * inv_h;
    const T mean_dxhat_xhat = sums[static_cast<std::size_t>(2 * r + 1)] * inv_h;
    DX.row(r) = rstd_.data()[r] * (DY.row(r).array() * G - mean_dxhat - XH.row(r).array() * mean_dxhat_xhat);
  }
  xhat_.reset();
  rstd_.reset();
  return dx;
}

template <class T>
void LayerNorm2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int q = grid_->q(), i = grid_->row_index(), j = grid_->col_index();
  const ShardLayout layout{ShardLayout::Kind::vector, q, i, j, 1, hidden_, 0};
  out.push_back({name_ + ".weight", {hidden_}, layout, gamma_.local(), dgamma_.local()});
  out.push_back({name_ + ".bias", {hidden_}, layout, beta_.local(), dbeta_.local()});
}

template <class T>
void LayerNorm2D<T>::zero_grad() {
  cpu::fill<T>(dgamma_.local(), T(0));
  cpu::fill<T>(dbeta_.local(), T(0));
}

template class LayerNorm2D<float>;
template class LayerNorm2D<double>;

}  // namespace optimus

// LayerNorm2D: row statistics by all-reduce along the grid row.
#include "optimus/layers/layernorm.hpp"

#include <span>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
LayerNorm2D<T>::LayerNorm2D(const Grid& grid, std::string name, std::int64_t hidden)
    : grid_(grid),
      name_(std::move(name)),
      hidden_(hidden),
      gamma_(grid, hidden, MemoryKind::parameters, name_.c_str()),
      beta_(grid, hidden, MemoryKind::parameters, name_.c_str()),
      dgamma_(grid, hidden, MemoryKind::gradients, name_.c_str()),
      dbeta_(grid, hidden, MemoryKind::gradients, name_.c_str()) {}

template <class T>
DistMatrix<T> LayerNorm2D<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  OPTIMUS_CHECK(x.cols() == hidden_, name_, ": input has ", x.cols(), " columns, expected ", hidden_);
  const std::int64_t rows = x.local_rows(), cols = x.local_cols();
  const MemoryTag work = grid_.tag(MemoryKind::workspace);
  Tensor<T> gamma(Shape{1, cols}, work), beta(Shape{1, cols}, work);
  gamma_.gather_column_block(gamma.view());
  beta_.gather_column_block(beta.view());

  // Pass 1: the sum of each row; pass 2: the squared deviations around its mean. Both are all-reduced along
  // the grid row, whose ranks hold the row's other columns.
  Tensor<T> row_sum(Shape{rows}, work, Init::none), sq_dev(Shape{rows}, work, Init::none);
  ops::row_sums<T>(x.local(), row_sum.view(), grid_.queue());
  grid_.row().all_reduce(std::span<T>(row_sum.data(), static_cast<std::size_t>(rows)), ReduceOp::sum);
  ops::layernorm_square_deviations<T>(x.local(), row_sum.view(), hidden_, sq_dev.view(), grid_.queue());
  grid_.row().all_reduce(std::span<T>(sq_dev.data(), static_cast<std::size_t>(rows)), ReduceOp::sum);

  const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
  DistMatrix<T> xhat(x.grid(), x.rows(), x.cols(), kept);
  Tensor<T> rstd(Shape{rows}, grid_.tag(kept));
  DistMatrix<T> y(x.grid(), x.rows(), x.cols());
  ops::layernorm_normalize<T>(x.local(), row_sum.view(), sq_dev.view(), gamma.view(), beta.view(), hidden_,
                              xhat.local(), rstd.view(), y.local(), grid_.queue());
  saved = Context{};
  if (pass.training) {
    saved.xhat.emplace(std::move(xhat), kept);  // bf16 under mixed precision
    saved.rstd = std::move(rstd);
    saved.mark = ContextMark(grid_);
  }
  return y;
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  saved.mark.check(grid_, name_);
  const std::int64_t rows = dy.local_rows(), cols = dy.local_cols();
  const MemoryTag work = grid_.tag(MemoryKind::workspace);
  Tensor<T> gamma(Shape{1, cols}, work), dgamma(Shape{1, cols}, work), dbeta(Shape{1, cols}, work);
  gamma_.gather_column_block(gamma.view());

  // dgamma = sum_rows dy * xhat, dbeta = sum_rows dy (reduce-scattered into the pieces), and the row sums of
  // dxhat and dxhat*xhat over all h features (one all-reduce of 2 * rows values).
  Tensor<T> sums(Shape{2 * rows}, work, Init::none), widened;  // widened: xhat in T when kept in bf16
  const TensorView<const T> xhat = saved.xhat->values(widened);
  ops::layernorm_backward_partials<T>(dy.local(), xhat, gamma.view(), dgamma.view(),
                                      dbeta.view(), sums.view(), grid_.queue());
  dgamma_.add_reduced_column_block(dgamma.view());
  dbeta_.add_reduced_column_block(dbeta.view());
  grid_.row().all_reduce(std::span<T>(sums.data(), static_cast<std::size_t>(2 * rows)), ReduceOp::sum);
  DistMatrix<T> dx(dy.grid(), dy.rows(), dy.cols());
  ops::layernorm_backward_dx<T>(dy.local(), xhat, gamma.view(), std::as_const(saved.rstd).view(),
                                sums.view(), hidden_, dx.local(), grid_.queue());
  return dx;
}

template <class T>
void LayerNorm2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int q = grid_.q(), i = grid_.row_index(), j = grid_.col_index();
  const ShardLayout layout{ShardLayout::Kind::vector, q, i, j, 1, hidden_, 0};
  out.push_back({name_ + ".weight", {hidden_}, layout, gamma_.local(), dgamma_.local()});
  out.push_back({name_ + ".bias", {hidden_}, layout, beta_.local(), dbeta_.local()});
}

template <class T>
void LayerNorm2D<T>::zero_grad() {
  ops::fill<T>(dgamma_.local(), T(0), grid_.queue());
  ops::fill<T>(dbeta_.local(), T(0), grid_.queue());
}

template class LayerNorm2D<float>;
template class LayerNorm2D<double>;

}  // namespace optimus

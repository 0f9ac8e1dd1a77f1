// LayerNorm2D: row statistics by all-reduce along the grid row.
#include "optimus/layers/layernorm.hpp"

#include <cmath>
#include <span>
#include <type_traits>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
LayerNorm2D<T>::LayerNorm2D(const Grid& grid, std::string name, std::int64_t hidden)
    : LayerNorm2D(grid, ParameterTags::of(grid), std::move(name), hidden) {}

template <class T>
LayerNorm2D<T>::LayerNorm2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t hidden)
    : LayerNorm2D(grid, tags, std::move(name), hidden, NormSpec{}) {}

template <class T>
LayerNorm2D<T>::LayerNorm2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t hidden,
                            NormSpec spec)
    : grid_(grid),
      name_(std::move(name)),
      hidden_(hidden),
      spec_(spec),
      gamma_(grid, hidden, tags.values, name_.c_str()),
      dgamma_(grid, hidden, tags.grads, name_.c_str()) {
  OPTIMUS_CHECK(spec.eps > 0 && std::isfinite(spec.eps), name_, ": eps = ", spec.eps, " is not a positive number");
  if (centered()) {
    beta_.emplace(grid, hidden, tags.values, name_.c_str());
    dbeta_.emplace(grid, hidden, tags.grads, name_.c_str());
  }
}

template <class T>
Tensor<T> LayerNorm2D<T>::row_sums_of(const DistMatrix<T>& x) const {
  if (!centered()) return Tensor<T>();  // RMSNorm takes the mean as 0: statistics() makes its zeros
  Tensor<T> row_sum(Shape{x.local_rows()}, grid_.tag(MemoryKind::workspace), Init::none);
  ops::row_sums<T>(x.local(), row_sum.view(), grid_.queue());
  return row_sum;
}

template <class T>
typename LayerNorm2D<T>::Statistics LayerNorm2D<T>::statistics(const DistMatrix<T>& x, Tensor<T> row_sum) const {
  OPTIMUS_CHECK(x.cols() == hidden_, name_, ": input has ", x.cols(), " columns, expected ", hidden_);
  const std::int64_t rows = x.local_rows(), cols = x.local_cols();
  OPTIMUS_CHECK(!centered() || row_sum.shape() == Shape{rows}, name_, ": the row sums have shape ", row_sum.shape(),
                ", expected [", rows, "]");
  const MemoryTag work = grid_.tag(MemoryKind::workspace);
  // RMSNorm takes none (row_sums_of, the block): zeros, the mean taken as 0.
  Statistics st{.row_sum = centered() ? std::move(row_sum) : Tensor<T>(Shape{rows}, work, Init::zero),
                .sq_dev = Tensor<T>(Shape{rows}, work, Init::none), .gamma = Tensor<T>(Shape{1, cols}, work),
                .beta = Tensor<T>(Shape{1, cols}, work)};  // beta stays 0 for RMSNorm
  gamma_.gather_column_block(st.gamma.view());
  if (beta_) beta_->gather_column_block(st.beta.view());
  // The row sums (pass 1) and the squared deviations around the mean (pass 2) are all-reduced along the grid row,
  // whose ranks hold the row's other columns.
  if (centered()) {
    grid_.row().all_reduce(std::span<T>(st.row_sum.data(), static_cast<std::size_t>(rows)), ReduceOp::sum);
  }
  ops::layernorm_square_deviations<T>(x.local(), std::as_const(st.row_sum).view(), hidden_, st.sq_dev.view(),
                                      grid_.queue());
  grid_.row().all_reduce(std::span<T>(st.sq_dev.data(), static_cast<std::size_t>(rows)), ReduceOp::sum);
  return st;
}

template <class T>
void LayerNorm2D<T>::keep(const Pass& pass, SavedActivation<T> xhat, Tensor<T> rstd, Context& saved) const {
  saved = Context{};
  if (!pass.training) return;
  saved.xhat.emplace(std::move(xhat));
  saved.rstd = std::move(rstd);
  saved.mark = ContextMark(grid_);
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  const Statistics st = statistics(x, row_sums_of(x));
  const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
  // Every element written by layernorm_normalize.
  DistMatrix<T> xhat = DistMatrix<T>::uninitialized(x.grid(), x.rows(), x.cols(), kept);
  Tensor<T> rstd(Shape{x.local_rows()}, grid_.tag(kept), Init::none);
  DistMatrix<T> y = DistMatrix<T>::uninitialized(x.grid(), x.rows(), x.cols(), MemoryKind::workspace);
  ops::layernorm_normalize<T>(x.local(), st.row_sum.view(), st.sq_dev.view(), st.gamma.view(), st.beta.view(),
                              normalization(), xhat.local(), rstd.view(), y.local(), grid_.queue());
  keep(pass, SavedActivation<T>(std::move(xhat), kept), std::move(rstd), saved);  // bf16 under mixed precision
  return y;
}

template <class T>
SavedActivation<T> LayerNorm2D<T>::forward_saved(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return forward_saved(x, row_sums_of(x), pass, saved);
}

template <class T>
SavedActivation<T> LayerNorm2D<T>::forward_saved(const DistMatrix<T>& x, Tensor<T> row_sum, const Pass& pass,
                                                 Context& saved) {
  const Statistics st = statistics(x, std::move(row_sum));
  const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
  SavedActivation<T> xhat = SavedActivation<T>::uninitialized(grid_, x.rows(), x.cols(), kept);
  SavedActivation<T> y = SavedActivation<T>::uninitialized(grid_, x.rows(), x.cols(), kept);
  Tensor<T> rstd(Shape{x.local_rows()}, grid_.tag(kept), Init::none);
  bool written = false;
  if constexpr (std::is_same_v<T, float>) {
    if (y.is_bf16()) {  // mixed precision: xhat and y written in bf16, no f32 copies
      ops::layernorm_normalize(x.local(), st.row_sum.view(), st.sq_dev.view(), st.gamma.view(), st.beta.view(),
                               normalization(), xhat.bf16_storage().view(), rstd.view(), y.bf16_storage().view(),
                               grid_.queue());
      written = true;
    }
  }
  if (!written) {
    ops::layernorm_normalize<T>(x.local(), st.row_sum.view(), st.sq_dev.view(), st.gamma.view(), st.beta.view(),
                                normalization(), xhat.storage().view(), rstd.view(), y.storage().view(),
                                grid_.queue());
  }
  keep(pass, std::move(xhat), std::move(rstd), saved);
  return y;
}

template <class T>
typename LayerNorm2D<T>::Partials LayerNorm2D<T>::partials(const DistMatrix<T>& dy, const SavedActivation<T>& xhat,
                                                           TensorView<const T> gamma) const {
  const std::int64_t rows = dy.local_rows(), cols = dy.local_cols();
  const MemoryTag work = grid_.tag(MemoryKind::workspace);
  Partials p{.dgamma = Tensor<T>(Shape{1, cols}, work), .dbeta = Tensor<T>(Shape{1, cols}, work),
             .sums = Tensor<T>(Shape{2 * rows}, work, Init::none)};
  if constexpr (std::is_same_v<T, float>) {
    if (xhat.is_bf16()) {
      ops::layernorm_backward_partials(dy.local(), xhat.bf16_block(), gamma, p.dgamma.view(), p.dbeta.view(),
                                       p.sums.view(), grid_.queue());
      return p;
    }
  }
  ops::layernorm_backward_partials<T>(dy.local(), xhat.block(), gamma, p.dgamma.view(), p.dbeta.view(), p.sums.view(),
                                      grid_.queue());
  return p;
}

template <class T>
void LayerNorm2D<T>::accumulate(const Partials& p) {
  dgamma_.add_reduced_column_block(p.dgamma.view());
  if (dbeta_) dbeta_->add_reduced_column_block(p.dbeta.view());
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward_split(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>* residual,
                                             WeightGradients* later) {
  saved.mark.check(grid_, name_);
  const std::int64_t rows = dy.local_rows(), cols = dy.local_cols();
  Tensor<T> gamma(Shape{1, cols}, grid_.tag(MemoryKind::workspace));
  gamma_.gather_column_block(gamma.view());

  // dgamma = sum_rows dy * xhat, dbeta = sum_rows dy (reduce-scattered into the pieces), and the row sums of
  // dxhat and dxhat*xhat over all h features (one all-reduce of 2 * rows values).
  const SavedActivation<T>& xhat = *saved.xhat;
  Partials p = partials(dy, xhat, std::as_const(gamma).view());
  if (later == nullptr) accumulate(p);
  grid_.row().all_reduce(std::span<T>(p.sums.data(), static_cast<std::size_t>(2 * rows)), ReduceOp::sum);
  DistMatrix<T> dx = DistMatrix<T>::uninitialized(dy.grid(), dy.rows(), dy.cols(), MemoryKind::workspace);
  if (residual != nullptr) {
    OPTIMUS_CHECK(residual->rows() == dy.rows() && residual->cols() == dy.cols(), name_, ": the residual gradient is ",
                  residual->rows(), "x", residual->cols(), ", dy is ", dy.rows(), "x", dy.cols());
  }
  const TensorView<const T> add = residual == nullptr ? TensorView<const T>{} : residual->local();
  const auto dx_from = [&](auto xhat_block) {
    ops::layernorm_backward_dx(std::as_const(dy).local(), xhat_block, std::as_const(gamma).view(),
                               std::as_const(saved.rstd).view(), std::as_const(p.sums).view(), normalization(), add,
                               dx.local(), grid_.queue());
  };
  if (!xhat.is_bf16()) {
    dx_from(xhat.block());
  } else if constexpr (std::is_same_v<T, float>) {  // mixed precision: xhat read as kept
    dx_from(xhat.bf16_block());
  }
  if (later != nullptr) {
    struct Held {
      SavedActivation<T> xhat;
      DistMatrix<T> dy;
      Tensor<T> gamma;
    };
    later->defer(Held{.xhat = std::move(*saved.xhat), .dy = dy.clone_as(MemoryKind::workspace),
                      .gamma = std::move(gamma)},
                 [this](Held& held) { accumulate(partials(held.dy, held.xhat, std::as_const(held.gamma).view())); });
  }
  return dx;
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr, nullptr);
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, nullptr, &later);
}

template <class T>
DistMatrix<T> LayerNorm2D<T>::backward_plus(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>& residual,
                                            WeightGradients* later) {
  return backward_split(std::move(saved), dy, &residual, later);
}

template <class T>
void LayerNorm2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int q = grid_.q(), i = grid_.row_index(), j = grid_.col_index();
  const Sharding layout{Sharding::Kind::vector, q, i, j, 1, hidden_, FusedColumns{}};
  out.push_back({name_ + ".weight", {hidden_}, layout, gamma_.local(), dgamma_.local()});
  if (beta_) out.push_back({name_ + ".bias", {hidden_}, layout, beta_->local(), dbeta_->local()});
}

template <class T>
void LayerNorm2D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  out.push_back({.value = &gamma_.storage(), .grad = &dgamma_.storage()});
  if (beta_) out.push_back({.value = &beta_->storage(), .grad = &dbeta_->storage()});
}

template <class T>
void LayerNorm2D<T>::zero_grad() {
  ops::fill<T>(dgamma_.local(), T(0), grid_.queue());
  if (dbeta_) ops::fill<T>(dbeta_->local(), T(0), grid_.queue());
}

template class LayerNorm2D<float>;
template class LayerNorm2D<double>;

}  // namespace optimus

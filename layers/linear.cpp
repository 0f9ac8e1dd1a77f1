// Linear2D: SUMMA products for the weight, a q*q-split bias.
#include "optimus/layers/linear.hpp"

#include <optional>
#include <type_traits>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/summa.hpp"

namespace optimus {

template <class T>
Linear2D<T>::Linear2D(const Grid& grid, std::string name, std::int64_t in, std::int64_t out)
    : Linear2D(grid, ParameterTags::of(grid), std::move(name), in, out, FusedColumns{}, true) {}

template <class T>
Linear2D<T>::Linear2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t in, std::int64_t out,
                      FusedColumns fused, bool bias)
    : grid_(grid),
      name_(std::move(name)),
      in_(in),
      out_(out),
      fused_(fused),
      w_(grid, in, out, tags.values),
      dw_(grid, in, out, tags.grads),
      w_bf16_(weight_copy_for(grid, w_, tags.values)) {
  if (bias) {
    b_.emplace(grid, out, tags.values, name_.c_str());
    db_.emplace(grid, out, tags.grads, name_.c_str());
  }
}

template <class T>
SummaOperand<T> Linear2D<T>::weight() {
  return weight_operand(std::as_const(w_), w_bf16_.get());
}

// y = x W + b, or gelu(x W + b) with pre = x W + b when `pre` is given: the bias (and GELU) are the epilogue of the
// product's last GEMM.
template <class T>
void Linear2D<T>::product(const SummaOperand<T>& x, DistMatrix<T>& y, DistMatrix<T>* pre) {
  OPTIMUS_CHECK(x.cols == in_, name_, ": input has ", x.cols, " columns, expected ", in_);
  Tensor<T> bias(Shape{1, out_ / grid_.q()}, grid_.tag(MemoryKind::workspace));  // zeros without a bias: x W + 0
  if (b_) b_->gather_column_block(bias.view());
  summa_ab(T(1), x, weight(), T(0), y, linear_epilogue(std::as_const(bias).view(), pre));
}

template <class T>
void Linear2D<T>::multiply(const DistMatrix<T>& x, const Pass& pass, Context& saved, DistMatrix<T>& y,
                           DistMatrix<T>* pre) {
  if (pass.training) {
    multiply(SavedActivation<T>(x, MemoryKind::activations), pass, saved, y, pre);  // cast once (bf16 math) for
    return;                                                                        // this product and dW's
  }
  saved = Context{};
  product(x, y, pre);
}

template <class T>
void Linear2D<T>::multiply(SavedActivation<T> x, const Pass& pass, Context& saved, DistMatrix<T>& y,
                           DistMatrix<T>* pre) {
  saved = Context{};
  if (!pass.training) {
    product(x, y, pre);
    return;
  }
  saved.x.emplace(std::move(x));
  product(*saved.x, y, pre);
  saved.mark = ContextMark(grid_);
}

template <class T>
DistMatrix<T> Linear2D<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  DistMatrix<T> y = DistMatrix<T>::uninitialized(x.grid(), x.rows(), out_, MemoryKind::workspace);  // beta = 0
  multiply(x, pass, saved, y, nullptr);
  return y;
}

template <class T>
ActivationOutput<T> Linear2D<T>::forward_gelu(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return ActivationOutput<T>::make(x.grid(), x.rows(), out_, pass,
                             [&](DistMatrix<T>& y, DistMatrix<T>* pre) { multiply(x, pass, saved, y, pre); });
}

template <class T>
DistMatrix<T> Linear2D<T>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  DistMatrix<T> y = DistMatrix<T>::uninitialized(x.grid(), x.rows(), out_, MemoryKind::workspace);  // beta = 0
  multiply(std::move(x), pass, saved, y, nullptr);
  return y;
}

template <class T>
ActivationOutput<T> Linear2D<T>::forward_gelu(SavedActivation<T> x, const Pass& pass, Context& saved) {
  const Grid grid = x.grid();  // a handle: x moves into the product
  const std::int64_t rows = x.rows();
  return ActivationOutput<T>::make(grid, rows, out_, pass, [&](DistMatrix<T>& y, DistMatrix<T>* pre) {
    multiply(std::move(x), pass, saved, y, pre);
  });
}

template <class T>
DistMatrix<T> Linear2D<T>::backward_checked(const Context& saved, const DistMatrix<T>& dy) const {
  saved.mark.check(grid_, name_);
  OPTIMUS_CHECK(dy.cols() == out_ && dy.rows() == saved.x->rows(), name_, ": output gradient is ", dy.rows(), "x",
                dy.cols(), ", expected ", saved.x->rows(), "x", out_);
  return DistMatrix<T>::uninitialized(dy.grid(), dy.rows(), in_, MemoryKind::workspace);  // dy w^T with beta = 0
}

template <class T>
Tensor<T> Linear2D<T>::bias_partial(const DistMatrix<T>& dy, std::optional<SavedActivation<T>>& dy_bf16) const {
  Tensor<T> partial(Shape{1, out_ / grid_.q()}, grid_.tag(MemoryKind::workspace), Init::none);
  if constexpr (std::is_same_v<T, float>) {
    if (SavedActivation<T>::keeps_bf16(grid_)) {
      dy_bf16.emplace(SavedActivation<T>::uninitialized(grid_, dy.rows(), dy.cols(), MemoryKind::workspace));
      ops::column_sums(dy.local(), partial.view(), dy_bf16->bf16_storage().view(), grid_.queue());
      return partial;
    }
  }
  if (!b_) return Tensor<T>();
  ops::column_sums<T>(dy.local(), partial.view(), grid_.queue());
  return partial;
}

template <class T>
DistMatrix<T> Linear2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  DistMatrix<T> dx = backward_checked(saved, dy);
  // Under bf16 math dY's bf16 copy, which both products take, is written by the bias gradient's pass over dY.
  std::optional<SavedActivation<T>> dy_bf16;
  const Tensor<T> bias = bias_partial(dy, dy_bf16);
  const SummaOperand<T> dy_operand = dy_bf16 ? SummaOperand<T>(*dy_bf16) : SummaOperand<T>(dy);
  // dX = dY W^T: its last reduction (along rows) stays in flight while dW += X^T dY multiplies (and reduces
  // along columns) and the bias gradient is reduced; overlapped or not, the result is bitwise the same.
  PendingProduct<T> dx_pending = summa_abt_async(T(1), dy_operand, weight(), T(0), dx);
  summa_atb(T(1), *saved.x, dy_operand, T(1), dw_);
  saved.x.reset();  // freed as soon as it is used
  if (db_) db_->add_reduced_column_block(bias.view());
  dx_pending.finish();
  return dx;
}

template <class T>
DistMatrix<T> Linear2D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  DistMatrix<T> dx = backward_checked(saved, dy);
  // Queued: dW from dY as the products take it (bf16 under bf16 math, written by the bias gradient's pass as the whole
  // backward does; else a copy) and db from this rank's column sums of dY in T, taken now (a row of out/q): the same
  // values in the same order as the whole backward's, so split or not, the bits are the same.
  std::optional<SavedActivation<T>> dy_bf16;
  Tensor<T> bias = bias_partial(dy, dy_bf16);
  SavedActivation<T> dy_kept = dy_bf16 ? std::move(*dy_bf16) : SavedActivation<T>(dy, MemoryKind::workspace);
  summa_abt(T(1), dy_kept, weight(), T(0), dx);
  struct Held {
    SavedActivation<T> x;
    SavedActivation<T> dy;
    Tensor<T> bias;
  };
  later.defer(Held{.x = std::move(*saved.x), .dy = std::move(dy_kept), .bias = std::move(bias)}, [this](Held& held) {
    summa_atb(T(1), held.x, held.dy, T(1), dw_);
    if (db_) db_->add_reduced_column_block(held.bias.view());
  });
  return dx;
}

template <class T>
void Linear2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const int q = grid_.q(), i = grid_.row_index(), j = grid_.col_index();
  // The caller may write W through its view: the copy is cast again before the next product.
  if (w_bf16_) w_bf16_->invalidate();
  out.push_back({name_ + ".weight", {in_, out_},
                 Sharding{Sharding::Kind::block, q, i, j, in_, out_, fused_}, w_.local(), dw_.local(),
                 w_bf16_.get()});
  if (b_) {
    out.push_back({name_ + ".bias", {out_}, Sharding{Sharding::Kind::vector, q, i, j, 1, out_, fused_},
                   b_->local(), db_->local()});
  }
}

template <class T>
void Linear2D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  if (w_bf16_) w_bf16_->invalidate();  // W's storage may be exchanged or written
  out.push_back({.value = &w_.storage(), .grad = &dw_.storage()});
  if (b_) out.push_back({.value = &b_->storage(), .grad = &db_->storage()});
}

template <class T>
void Linear2D<T>::zero_grad() {
  ops::fill<T>(dw_.local(), T(0), grid_.queue());
  if (db_) ops::fill<T>(db_->local(), T(0), grid_.queue());
}

template class Linear2D<float>;
template class Linear2D<double>;

}  // namespace optimus

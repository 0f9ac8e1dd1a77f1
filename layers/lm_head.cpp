// LmHead2D: tied logits and vocabulary-parallel cross-entropy.
#include "optimus/layers/lm_head.hpp"

#include <span>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/summa.hpp"

namespace optimus {

template <class T>
DistMatrix<T> LmHead2D<T>::logits(const DistMatrix<T>& x, const DistMatrix<T>& wte) const {
  return summa_abt(x, wte);
}

template <class T>
double LmHead2D<T>::forward(const DistMatrix<T>& x, const DistMatrix<T>& wte, const std::vector<int>& targets,
                            const Pass& pass) {
  const std::int64_t n = x.rows(), vocab = wte.rows();
  OPTIMUS_CHECK(static_cast<std::int64_t>(targets.size()) == n, "cross-entropy: ", targets.size(),
                " targets for ", n, " tokens");
  for (std::int64_t t = 0; t < n; ++t) {
    const int id = targets[static_cast<std::size_t>(t)];
    OPTIMUS_CHECK(id >= 0 && id < vocab, "cross-entropy: target id ", id, " at position ", t,
                  " is outside the vocabulary [0, ", vocab, ")");
  }
  DistMatrix<T> probs(x.grid(), n, vocab);  // logits, turned into probabilities in place
  if (pass.training) {
    x_.emplace(x, MemoryKind::activations);  // cast once (bf16 math) for this product and dwte's
    summa_abt(T(1), *x_, wte, T(0), probs);
  } else {
    summa_abt(T(1), x, wte, T(0), probs);
  }
  const std::int64_t rows = probs.local_rows(), v0 = probs.col_offset();
  const MemoryTag work = grid_->tag(MemoryKind::workspace);
  const Tensor<int> all_targets = upload(targets.data(), Shape{n}, work);  // where the logits live
  Tensor<T> max(Shape{rows}, work, Init::none), sums(Shape{2 * rows}, work, Init::none);
  ops::row_max<T>(std::as_const(probs).local(), max.view(), grid_->queue());
  grid_->row().all_reduce(std::span<T>(max.data(), static_cast<std::size_t>(rows)), ReduceOp::max);
  // (sum of exp, target logit) per row, reduced together.
  ops::cross_entropy_exp_sums<T>(probs.local(), max.view(), all_targets.view(), probs.row_offset(), v0, sums.view(),
                                 grid_->queue());
  grid_->row().all_reduce(std::span<T>(sums.data(), static_cast<std::size_t>(2 * rows)), ReduceOp::sum);
  Tensor<double> row_loss(Shape{rows}, work, Init::none);
  ops::cross_entropy_finish<T>(probs.local(), max.view(), sums.view(), row_loss.view(), grid_->queue());
  double local_loss = 0;  // this grid row's tokens; identical on the ranks of the row
  for (double l : download(row_loss)) local_loss += l;
  const double loss = grid_->col().all_reduce(local_loss, ReduceOp::sum) / static_cast<double>(n);
  if (pass.training) {  // dlogits = (softmax - onehot) / N, kept as backward's products take it
    ops::cross_entropy_backward<T>(probs.local(), all_targets.view(), probs.row_offset(), v0, grid_->queue());
    dlogits_.emplace(probs, MemoryKind::activations);
  }
  return loss;
}

template <class T>
DistMatrix<T> LmHead2D<T>::backward(const DistMatrix<T>& wte, DistMatrix<T>& dwte) {
  OPTIMUS_CHECK(dlogits_.has_value(), "cross-entropy: backward without a training forward");
  DistMatrix<T> dx(wte.grid(), dlogits_->rows(), wte.cols());
  summa_ab(T(1), *dlogits_, wte, T(0), dx);
  summa_atb(T(1), *dlogits_, *x_, T(1), dwte);
  x_.reset();
  dlogits_.reset();
  return dx;
}

template class LmHead2D<float>;
template class LmHead2D<double>;

}  // namespace optimus

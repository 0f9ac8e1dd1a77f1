// LmHead2D: tied logits and vocabulary-parallel cross-entropy.
#include "optimus/layers/lm_head.hpp"

#include <cmath>

#include "optimus/core/error.hpp"
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
  DistMatrix<T> probs = summa_abt(x, wte);  // logits, turned into probabilities in place
  auto L = probs.local_map();
  const std::int64_t rows = probs.local_rows(), v0 = probs.col_offset(), vn = probs.local_cols();
  std::vector<T> max(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) max[static_cast<std::size_t>(r)] = L.row(r).maxCoeff();
  grid_->row().all_reduce(std::span<T>(max), ReduceOp::max);
  // (sum of exp, target logit) per row, reduced together.
  std::vector<T> sums(static_cast<std::size_t>(2 * rows), T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const std::int64_t target = targets[static_cast<std::size_t>(probs.row_offset() + r)];
    if (target >= v0 && target < v0 + vn) sums[2 * ru + 1] = L(r, target - v0);
    L.row(r) = (L.row(r).array() - max[ru]).exp();
    sums[2 * ru] = L.row(r).sum();
  }
  grid_->row().all_reduce(std::span<T>(sums), ReduceOp::sum);
  double local_loss = 0;  // this grid row's tokens; identical on the ranks of the row
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    local_loss += std::log(static_cast<double>(sums[2 * ru])) + static_cast<double>(max[ru]) -
                  static_cast<double>(sums[2 * ru + 1]);
    L.row(r) /= sums[2 * ru];
  }
  const double loss = grid_->col().all_reduce(local_loss, ReduceOp::sum) / static_cast<double>(n);
  if (pass.training) {
    x_ = x.clone_as(MemoryKind::activations);
    probs_ = probs.clone_as(MemoryKind::activations);
    targets_ = targets;
  }
  return loss;
}

template <class T>
DistMatrix<T> LmHead2D<T>::backward(const DistMatrix<T>& wte, DistMatrix<T>& dwte) {
  OPTIMUS_CHECK(probs_.has_value(), "cross-entropy: backward without a training forward");
  DistMatrix<T>& dlogits = *probs_;  // softmax - onehot, over N
  const std::int64_t v0 = dlogits.col_offset(), vn = dlogits.local_cols();
  auto D = dlogits.local_map();
  for (std::int64_t r = 0; r < dlogits.local_rows(); ++r) {
    const std::int64_t target = targets_[static_cast<std::size_t>(dlogits.row_offset() + r)];
    if (target >= v0 && target < v0 + vn) D(r, target - v0) -= T(1);
  }
  D /= static_cast<T>(dlogits.rows());
  DistMatrix<T> dx = summa_ab(dlogits, wte);
  summa_atb(T(1), dlogits, *x_, T(1), dwte);
  x_.reset();
  probs_.reset();
  return dx;
}

template class LmHead2D<float>;
template class LmHead2D<double>;

}  // namespace optimus

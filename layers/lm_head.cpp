// LmHead2D: tied logits and vocabulary-parallel cross-entropy.
#include "optimus/layers/lm_head.hpp"

#include <limits>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/summa.hpp"
#include "cross_entropy.hpp"

namespace optimus {

void check_targets(const std::vector<int>& targets, std::int64_t n, std::int64_t vocab, std::int64_t mean_over) {
  OPTIMUS_CHECK(static_cast<std::int64_t>(targets.size()) == n, "cross-entropy: ", targets.size(), " targets for ", n,
                " tokens");
  OPTIMUS_CHECK(mean_over >= n, "cross-entropy: a mean over ", mean_over, " tokens cannot include all ", n,
                " of this pass");
  for (std::int64_t t = 0; t < n; ++t) {
    const int id = targets[static_cast<std::size_t>(t)];
    OPTIMUS_CHECK(id >= 0 && id < vocab, "cross-entropy: target id ", id, " at position ", t,
                  " is outside the vocabulary [0, ", vocab, ")");
  }
}

template <class T>
void LmHead2D<T>::mask_padding(DistMatrix<T>& logits) const {
  const std::int64_t v0 = logits.col_offset(), width = logits.local_cols();
  if (v0 + width <= vocab_) return;  // no padding id in this rank's columns
  if (mask_.numel() != width) {
    std::vector<T> host(static_cast<std::size_t>(width));
    for (std::int64_t c = 0; c < width; ++c) {
      host[static_cast<std::size_t>(c)] = v0 + c < vocab_ ? T(0) : -std::numeric_limits<T>::infinity();
    }
    mask_ = upload(host.data(), Shape{width}, grid_.tag(MemoryKind::workspace));
  }
  ops::add_row_broadcast<T>(std::as_const(mask_).view(), logits.local(), grid_.queue());
}

template <class T>
DistMatrix<T> LmHead2D<T>::logits(const DistMatrix<T>& x, const SummaOperand<T>& wte) const {
  DistMatrix<T> out(x.grid(), x.rows(), wte.rows);
  summa_abt(T(1), x, wte, T(0), out);
  mask_padding(out);
  return out;
}

template <class T>
double LmHead2D<T>::loss(const SummaOperand<T>& x, const SummaOperand<T>& wte, const std::vector<int>& targets,
                         std::int64_t mean_over, bool training, Context& saved) {
  const std::int64_t n = x.rows, vocab = vocab_;
  OPTIMUS_CHECK(wte.rows >= vocab_, "cross-entropy: wte has ", wte.rows, " rows for a vocabulary of ", vocab_);
  check_targets(targets, n, vocab, mean_over);
  DistMatrix<T> probs(*x.grid, n, wte.rows);  // logits
  summa_abt(T(1), x, wte, T(0), probs);
  const Tensor<int> all_targets = upload(targets.data(), Shape{n}, grid_.tag(MemoryKind::workspace));
  // This grid row's tokens' losses, identical on the ranks of the row (its owners of the vocabulary's slices); under
  // training dlogits = (softmax - onehot) / mean_over, kept as backward's products take them.
  const std::int64_t row_offset = probs.row_offset(), v0 = probs.col_offset();
  const double local_loss = detail::vocab_parallel_loss<T>(std::move(probs), all_targets.view(), row_offset, v0,
                                                           vocab, mean_over, training, grid_.row(), saved.dlogits);
  if (training) saved.mark = ContextMark(grid_);
  return grid_.col().all_reduce(local_loss, ReduceOp::sum) / static_cast<double>(mean_over);
}

template <class T>
double LmHead2D<T>::forward(const DistMatrix<T>& x, const SummaOperand<T>& wte, const std::vector<int>& targets,
                            std::int64_t mean_over, const Pass& pass, Context& saved) {
  if (pass.training) {  // x kept (cast once under bf16 math) for this product and dwte's
    return forward(SavedActivation<T>(x, MemoryKind::activations), wte, targets, mean_over, pass, saved);
  }
  saved = Context{};
  return loss(x, wte, targets, mean_over, false, saved);
}

template <class T>
double LmHead2D<T>::forward(SavedActivation<T> x, const SummaOperand<T>& wte, const std::vector<int>& targets,
                            std::int64_t mean_over, const Pass& pass, Context& saved) {
  saved = Context{};
  if (!pass.training) return loss(x, wte, targets, mean_over, false, saved);
  saved.x.emplace(std::move(x));
  return loss(*saved.x, wte, targets, mean_over, true, saved);
}

template <class T>
DistMatrix<T> LmHead2D<T>::backward(Context saved, const SummaOperand<T>& wte, DistMatrix<T>& dwte) {
  saved.mark.check(grid_, "cross-entropy");
  DistMatrix<T> dx(*wte.grid, saved.dlogits->rows(), wte.cols);
  summa_ab(T(1), *saved.dlogits, wte, T(0), dx);
  summa_atb(T(1), *saved.dlogits, *saved.x, T(1), dwte);
  return dx;
}

template <class T>
DistMatrix<T> LmHead2D<T>::backward(Context saved, const SummaOperand<T>& wte, DistMatrix<T>& dwte,
                                    WeightGradients& later) {
  saved.mark.check(grid_, "cross-entropy");
  DistMatrix<T> dx(*wte.grid, saved.dlogits->rows(), wte.cols);
  summa_ab(T(1), *saved.dlogits, wte, T(0), dx);
  struct Held {
    SavedActivation<T> dlogits, x;
  };
  later.defer(Held{.dlogits = std::move(*saved.dlogits), .x = std::move(*saved.x)},
              [&dwte](Held& held) { summa_atb(T(1), held.dlogits, held.x, T(1), dwte); });
  return dx;
}

template class LmHead2D<float>;
template class LmHead2D<double>;

}  // namespace optimus

// LmHead1D: tied logits on this rank's vocabulary slice and the vocabulary-parallel cross-entropy.
#include "optimus/layers/megatron/lm_head.hpp"

#include <limits>
#include <span>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/lm_head.hpp"
#include "../cross_entropy.hpp"

namespace optimus::megatron {

template <class T>
void LmHead1D<T>::mask_padding(DistMatrix<T>& logits, std::int64_t v0) {
  const std::int64_t width = logits.cols();
  if (v0 + width <= vocab_) return;  // no padding id in this rank's slice
  if (mask_.numel() != width) {
    std::vector<T> host(static_cast<std::size_t>(width));
    for (std::int64_t c = 0; c < width; ++c) {
      host[static_cast<std::size_t>(c)] = v0 + c < vocab_ ? T(0) : -std::numeric_limits<T>::infinity();
    }
    mask_ = upload(host.data(), Shape{width}, group_.local().tag(MemoryKind::workspace));
  }
  ops::add_row_broadcast<T>(std::as_const(mask_).view(), logits.local(), group_.local().queue());
}

template <class T>
DistMatrix<T> LmHead1D<T>::logits(const DistMatrix<T>& x, const DistMatrix<T>& wte, std::int64_t v0) {
  const Grid& local = group_.local();
  const std::int64_t n = x.rows(), slice = wte.rows(), p = group_.size();
  DistMatrix<T> mine(local, n, slice, MemoryKind::workspace);  // [N, V/p]
  ops::gemm<T>(Trans::no, Trans::yes, T(1), x.local(), wte.local(), T(0), mine.local(), local.queue());
  mask_padding(mine, v0);
  // The ranks' slices in rank order, [p][N, V/p], then side by side: [N, p * V/p].
  const auto count = static_cast<std::size_t>(n * slice);
  std::vector<T> all(count * static_cast<std::size_t>(p));
  const typename DistMatrix<T>::Matrix own = mine.local_to_host();
  group_.tp().all_gather(std::span<const T>(own.data(), count), std::span<T>(all));
  typename DistMatrix<T>::Matrix whole(n, p * slice);
  for (std::int64_t r = 0; r < p; ++r) {
    whole.block(0, r * slice, n, slice) = Eigen::Map<const typename DistMatrix<T>::Matrix>(
        all.data() + static_cast<std::size_t>(r) * count, n, slice);
  }
  return DistMatrix<T>::from_global(local, whole);
}

template <class T>
double LmHead1D<T>::loss(TensorView<const T> x_local, const DistMatrix<T>& wte, std::int64_t v0,
                         const std::vector<int>& targets, std::int64_t mean_over, bool training, Context& saved) {
  const std::int64_t n = x_local.size(0);
  check_targets(targets, n, vocab_, mean_over);
  const Grid& local = group_.local();
  const ops::Queue& queue = local.queue();
  DistMatrix<T> probs(local, n, wte.rows());  // this slice's logits
  ops::gemm<T>(Trans::no, Trans::yes, T(1), x_local, wte.local(), T(0), probs.local(), queue);
  const Tensor<int> all_targets = upload(targets.data(), Shape{n}, local.tag(MemoryKind::workspace));
  // Identical on every rank of the group (the slices' owners); under training dlogits kept.
  const double loss = detail::vocab_parallel_loss<T>(std::move(probs), all_targets.view(), 0, v0, vocab_, mean_over,
                                                     training, group_.tp(), saved.dlogits);
  if (training) saved.mark = ContextMark(local);
  return loss / static_cast<double>(mean_over);
}

template <class T>
double LmHead1D<T>::forward(const DistMatrix<T>& x, const DistMatrix<T>& wte, std::int64_t v0,
                            const std::vector<int>& targets, std::int64_t mean_over, const Pass& pass, Context& saved) {
  if (pass.training) {  // x kept (bf16 under mixed precision, as the products take it)
    return forward(SavedActivation<T>(x, MemoryKind::activations), wte, v0, targets, mean_over, pass, saved);
  }
  saved = Context{};
  return loss(x.local(), wte, v0, targets, mean_over, false, saved);
}

template <class T>
double LmHead1D<T>::forward(SavedActivation<T> x, const DistMatrix<T>& wte, std::int64_t v0,
                            const std::vector<int>& targets, std::int64_t mean_over, const Pass& pass, Context& saved) {
  saved = Context{};
  Tensor<T> widened;
  if (!pass.training) return loss(x.values(widened), wte, v0, targets, mean_over, false, saved);
  saved.x.emplace(std::move(x));
  return loss(saved.x->values(widened), wte, v0, targets, mean_over, true, saved);
}

namespace {

// dwte_r += dlogits_r^T x (this rank's rows; no communication).
template <class T>
void add_wte_gradient(const Grid& local, const SavedActivation<T>& dlogits, const SavedActivation<T>& x,
                      DistMatrix<T>& dwte) {
  Tensor<T> widened_dlogits, widened_x;
  ops::gemm<T>(Trans::yes, Trans::no, T(1), dlogits.values(widened_dlogits), x.values(widened_x), T(1), dwte.local(),
               local.queue());
}

}  // namespace

template <class T>
DistMatrix<T> LmHead1D<T>::input_gradient(const Context& saved, const DistMatrix<T>& wte) {
  const Grid& local = group_.local();
  saved.mark.check(local, "cross-entropy");
  Tensor<T> widened_dlogits;
  DistMatrix<T> dx(local, saved.dlogits->rows(), wte.cols());
  ops::gemm<T>(Trans::no, Trans::no, T(1), saved.dlogits->values(widened_dlogits), wte.local(), T(0), dx.local(),
               local.queue());
  all_reduce_sum(group_, dx);
  return dx;
}

template <class T>
DistMatrix<T> LmHead1D<T>::backward(Context saved, const DistMatrix<T>& wte, DistMatrix<T>& dwte) {
  DistMatrix<T> dx = input_gradient(saved, wte);
  add_wte_gradient(group_.local(), *saved.dlogits, *saved.x, dwte);
  return dx;
}

template <class T>
DistMatrix<T> LmHead1D<T>::backward(Context saved, const DistMatrix<T>& wte, DistMatrix<T>& dwte,
                                    WeightGradients& later) {
  DistMatrix<T> dx = input_gradient(saved, wte);
  struct Held {
    SavedActivation<T> dlogits, x;
  };
  const Grid& local = group_.local();
  later.defer(Held{.dlogits = std::move(*saved.dlogits), .x = std::move(*saved.x)},
              [&local, &dwte](Held& held) { add_wte_gradient(local, held.dlogits, held.x, dwte); });
  return dx;
}

template class LmHead1D<float>;
template class LmHead1D<double>;

}  // namespace optimus::megatron

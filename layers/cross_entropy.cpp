// The heads' vocabulary-parallel cross-entropy (cross_entropy.hpp).
#include "cross_entropy.hpp"

#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"

namespace optimus::detail {

template <class T>
double vocab_parallel_cross_entropy(TensorView<T> logits, TensorView<const int> targets,
                                    std::span<const int> host_targets, std::int64_t row_offset,
                                    std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                                    const LogitsGradient& gradient, Communicator& owners, const MemoryTag& work,
                                    const ops::Queue& queue) {
  const std::int64_t rows = logits.size(0);
  const auto n = static_cast<std::size_t>(rows);
  // [4, rows]: this slice's max, the max over the owners, the sum of exp(logit - max), the target logit.
  Tensor<T> stats(Shape{4, rows}, work, Init::none);
  ops::cross_entropy_stats<T>(std::as_const(logits), targets, row_offset, v0, vocab, stats.view(), queue);
  owners.all_reduce(std::span<T>(stats.data() + rows, n), ReduceOp::max);
  ops::cross_entropy_rescale<T>(stats.view(), queue);
  owners.all_reduce(std::span<T>(stats.data() + 2 * rows, 2 * n), ReduceOp::sum);
  if (gradient.into == LogitsGradient::Into::logits) {
    ops::cross_entropy_gradient<T>(logits, std::as_const(stats).view(), targets, row_offset, v0, vocab, mean_over,
                                   queue);
  }
  if (gradient.into == LogitsGradient::Into::bf16) {
    if constexpr (std::is_same_v<T, float>) {
      ops::cross_entropy_gradient(std::as_const(logits), std::as_const(stats).view(), targets, row_offset, v0, vocab,
                                  mean_over, gradient.block, queue);
    } else {
      OPTIMUS_CHECK(false, "cross-entropy: a gradient in bf16 is for f32 logits (mixed precision), not f64");
    }
  }
  const std::vector<T> reduced = download(stats);
  double loss = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (host_targets[static_cast<std::size_t>(row_offset) + r] == math::kIgnoredTarget) continue;  // not predicted
    loss += math::cross_entropy_loss(reduced[2 * n + r], reduced[n + r], reduced[3 * n + r]);
  }
  return loss;
}

template <class T>
double vocab_parallel_loss(DistMatrix<T> logits, TensorView<const int> targets, std::span<const int> host_targets,
                           std::int64_t row_offset,
                           std::int64_t v0, std::int64_t vocab, std::int64_t mean_over, bool training,
                           Communicator& owners, std::optional<SavedActivation<T>>& dlogits) {
  const Grid& grid = logits.grid();
  LogitsGradient gradient;
  std::optional<SavedActivation<T>> kept;  // the bf16 block the gradient kernel writes
  if (training && SavedActivation<T>::keeps_bf16(grid)) {
    kept.emplace(SavedActivation<T>::uninitialized(grid, logits.rows(), logits.cols(), MemoryKind::activations));
    gradient = {.into = LogitsGradient::Into::bf16, .block = kept->bf16_storage().view()};
  } else if (training) {
    gradient.into = LogitsGradient::Into::logits;
  }
  const double loss = vocab_parallel_cross_entropy<T>(logits.local(), targets, host_targets, row_offset, v0, vocab,
                                                      mean_over,
                                                      gradient, owners, grid.tag(MemoryKind::workspace), grid.queue());
  if (kept) {
    dlogits = std::move(kept);
  } else if (training) {
    dlogits.emplace(std::move(logits), MemoryKind::activations);
  }
  return loss;
}

template double vocab_parallel_loss<float>(DistMatrix<float>, TensorView<const int>, std::span<const int>, std::int64_t,
                                           std::int64_t,
                                           std::int64_t, std::int64_t, bool, Communicator&,
                                           std::optional<SavedActivation<float>>&);
template double vocab_parallel_loss<double>(DistMatrix<double>, TensorView<const int>, std::span<const int>,
                                            std::int64_t, std::int64_t,
                                            std::int64_t, std::int64_t, bool, Communicator&,
                                            std::optional<SavedActivation<double>>&);
template double vocab_parallel_cross_entropy<float>(TensorView<float>, TensorView<const int>, std::span<const int>,
                                                    std::int64_t,
                                                    std::int64_t, std::int64_t, std::int64_t, const LogitsGradient&,
                                                    Communicator&, const MemoryTag&, const ops::Queue&);
template double vocab_parallel_cross_entropy<double>(TensorView<double>, TensorView<const int>, std::span<const int>,
                                                     std::int64_t,
                                                     std::int64_t, std::int64_t, std::int64_t, const LogitsGradient&,
                                                     Communicator&, const MemoryTag&, const ops::Queue&);

}  // namespace optimus::detail

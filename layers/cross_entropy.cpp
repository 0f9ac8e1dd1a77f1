// The heads' vocabulary-parallel cross-entropy (cross_entropy.hpp).
#include "cross_entropy.hpp"

#include <span>
#include <utility>
#include <vector>

#include "optimus/core/element_math.hpp"

namespace optimus::detail {

template <class T>
double vocab_parallel_cross_entropy(TensorView<T> logits, TensorView<const int> targets, std::int64_t row_offset,
                                    std::int64_t v0, std::int64_t vocab, std::int64_t mean_over, bool gradient,
                                    Communicator& owners, const MemoryTag& work, const ops::Queue& queue) {
  const std::int64_t rows = logits.size(0);
  const auto n = static_cast<std::size_t>(rows);
  // [4, rows]: this slice's max, the max over the owners, the sum of exp(logit - max), the target logit.
  Tensor<T> stats(Shape{4, rows}, work, Init::none);
  ops::cross_entropy_stats<T>(std::as_const(logits), targets, row_offset, v0, vocab, stats.view(), queue);
  owners.all_reduce(std::span<T>(stats.data() + rows, n), ReduceOp::max);
  ops::cross_entropy_rescale<T>(stats.view(), queue);
  owners.all_reduce(std::span<T>(stats.data() + 2 * rows, 2 * n), ReduceOp::sum);
  if (gradient) {
    ops::cross_entropy_gradient<T>(logits, std::as_const(stats).view(), targets, row_offset, v0, vocab, mean_over,
                                   queue);
  }
  const std::vector<T> reduced = download(stats);
  double loss = 0;
  for (std::size_t r = 0; r < n; ++r) {
    loss += math::cross_entropy_loss(reduced[2 * n + r], reduced[n + r], reduced[3 * n + r]);
  }
  return loss;
}

template double vocab_parallel_cross_entropy<float>(TensorView<float>, TensorView<const int>, std::int64_t,
                                                    std::int64_t, std::int64_t, std::int64_t, bool, Communicator&,
                                                    const MemoryTag&, const ops::Queue&);
template double vocab_parallel_cross_entropy<double>(TensorView<double>, TensorView<const int>, std::int64_t,
                                                     std::int64_t, std::int64_t, std::int64_t, bool, Communicator&,
                                                     const MemoryTag&, const ops::Queue&);

}  // namespace optimus::detail

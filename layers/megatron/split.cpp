// Split1D's vocabulary-parallel work: lookups in this rank's rows of wte summed over the group, local logits of this
// rank's vocabulary slice.
#include "optimus/layers/megatron/split.hpp"

#include <span>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::megatron {

std::int64_t Split1D::vocab_rows(const Group& group, const GptConfig& config) {
  const int p = group.size();
  const std::int64_t stored = config.stored_vocab(p);
  OPTIMUS_CHECK(stored >= config.vocab && stored % p == 0, "Embedding1D: the stored vocabulary ", stored,
                " (padded_vocab = ", config.padded_vocab, ") must be a multiple of p = ", p, " no smaller than vocab = ",
                config.vocab);
  return stored / p;
}

Sharding Split1D::vocabulary_layout(const Group& group, const GptConfig& config) {
  const std::int64_t stored = config.stored_vocab(group.size());
  return Sharding{.kind = Sharding::Kind::rows, .q = 1, .i = 0, .j = 0, .rows = stored, .cols = config.hidden,
                  .fused = {}, .parts = group.size(), .part = group.rank(), .padding_rows = stored - config.vocab,
                  .padding_cols = 0};
}

Sharding Split1D::head_bias_layout(const Group& group, std::int64_t vocab, std::int64_t size) {
  const std::int64_t stored = size * group.size();
  return Sharding{.kind = Sharding::Kind::columns, .q = 1, .i = 0, .j = 0, .rows = 1, .cols = stored,
                  .fused = {}, .parts = group.size(), .part = group.rank(), .padding_rows = 0,
                  .padding_cols = stored - vocab};
}

template <class T>
DistMatrix<T> Split1D::look_up(const Group& group, const DistMatrix<T>& wte, TensorView<const int> ids,
                               std::int64_t hidden) {
  const Grid& local = group.local();
  DistMatrix<T> x(local, ids.size(0), hidden);
  ops::embedding_lookup<T>(wte.local(), ids, vocab_offset(group, 0, wte.rows()), x.local(), local.queue());
  all_reduce_sum(group, x);
  return x;
}

template <class T>
void Split1D::add_positions(const Group& group, const DistMatrix<T>& wpe, std::int64_t seq, DistMatrix<T>& x) {
  ops::add_positions<T>(wpe.local(), 0, seq, x.local(), group.local().queue());
}

template <class T>
void Split1D::add_lookup_gradient(const Group& group, const DistMatrix<T>& dx, TensorView<const int> ids,
                                  DistMatrix<T>& dwte) {
  ops::embedding_scatter_add<T>(dx.local(), ids, vocab_offset(group, 0, dwte.rows()), dwte.local(),
                                group.local().queue());
}

template <class T>
void Split1D::add_position_gradient(const Group& group, const DistMatrix<T>& dx, std::int64_t seq,
                                    DistMatrix<T>& dwpe) {
  const Grid& local = group.local();
  Tensor<T> positions(Shape{dwpe.rows(), dwpe.cols()}, local.tag(MemoryKind::workspace), Init::none);
  ops::position_grad<T>(dx.local(), 0, seq, positions.view(), local.queue());
  ops::axpby<T>(T(1), std::as_const(positions).view(), T(1), dwpe.local(), local.queue());
}

template <class T>
DistMatrix<T> Split1D::logits(const Group& group, const SummaOperand<T>& x, const SummaOperand<T>& w,
                              std::int64_t vocab) {
  OPTIMUS_CHECK(w.rows * group.size() >= vocab, "cross-entropy: wte has ", w.rows * group.size(),
                " rows for a vocabulary of ", vocab);
  const Grid& local = group.local();
  Tensor<T> widened_x, widened_w;
  DistMatrix<T> out(local, x.rows, w.rows);  // [N, V/p]
  ops::gemm<T>(Trans::no, Trans::yes, T(1), operand_values(x, widened_x), operand_values(w, widened_w), T(0),
               out.local(), local.queue());
  return out;
}

template <class T>
DistMatrix<T> Split1D::whole_logits(const Group& group, DistMatrix<T> logits) {
  // The ranks' slices in rank order, [p][N, V/p], then side by side: [N, p * V/p].
  const std::int64_t n = logits.rows(), slice = logits.cols(), p = group.size();
  const auto count = static_cast<std::size_t>(n * slice);
  std::vector<T> all(count * static_cast<std::size_t>(p));
  const typename DistMatrix<T>::Matrix own = logits.local_to_host();
  group.tp().all_gather(std::span<const T>(own.data(), count), std::span<T>(all));
  typename DistMatrix<T>::Matrix whole(n, p * slice);
  for (std::int64_t r = 0; r < p; ++r) {
    whole.block(0, r * slice, n, slice) = Eigen::Map<const typename DistMatrix<T>::Matrix>(
        all.data() + static_cast<std::size_t>(r) * count, n, slice);
  }
  return DistMatrix<T>::from_global(group.local(), whole);
}

template <class T>
DistMatrix<T> Split1D::input_gradient(const Group& group, const SavedActivation<T>& dlogits,
                                      const SummaOperand<T>& w) {
  const Grid& local = group.local();
  Tensor<T> widened_dlogits, widened_w;
  DistMatrix<T> dx(local, dlogits.rows(), w.cols);
  ops::gemm<T>(Trans::no, Trans::no, T(1), dlogits.values(widened_dlogits), operand_values(w, widened_w), T(0),
               dx.local(), local.queue());
  all_reduce_sum(group, dx);
  return dx;
}

template <class T>
void Split1D::add_weight_gradient(const Group& group, const SavedActivation<T>& dlogits, const SavedActivation<T>& x,
                                  DistMatrix<T>& dw) {
  Tensor<T> widened_dlogits, widened_x;
  ops::gemm<T>(Trans::yes, Trans::no, T(1), dlogits.values(widened_dlogits), x.values(widened_x), T(1), dw.local(),
               group.local().queue());
}

#define OPTIMUS_INSTANTIATE(T)                                                                                     \
  template DistMatrix<T> Split1D::look_up<T>(const Group&, const DistMatrix<T>&, TensorView<const int>,           \
                                             std::int64_t);                                                       \
  template void Split1D::add_positions<T>(const Group&, const DistMatrix<T>&, std::int64_t, DistMatrix<T>&);      \
  template void Split1D::add_lookup_gradient<T>(const Group&, const DistMatrix<T>&, TensorView<const int>,        \
                                                DistMatrix<T>&);                                                  \
  template void Split1D::add_position_gradient<T>(const Group&, const DistMatrix<T>&, std::int64_t,               \
                                                  DistMatrix<T>&);                                                \
  template DistMatrix<T> Split1D::logits<T>(const Group&, const SummaOperand<T>&, const SummaOperand<T>&,         \
                                            std::int64_t);                                                        \
  template DistMatrix<T> Split1D::whole_logits<T>(const Group&, DistMatrix<T>);                                   \
  template DistMatrix<T> Split1D::input_gradient<T>(const Group&, const SavedActivation<T>&,                      \
                                                    const SummaOperand<T>&);                                      \
  template void Split1D::add_weight_gradient<T>(const Group&, const SavedActivation<T>&, const SavedActivation<T>&, \
                                                DistMatrix<T>&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::megatron

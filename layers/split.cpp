// Split2D's vocabulary-parallel work: the embedding's lookups reduced along grid columns, the LM head's SUMMA products.
#include "optimus/layers/split.hpp"

#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

std::int64_t Split2D::vocab_rows(const Grid& grid, const GptConfig& config) { return config.stored_vocab(grid.q()); }

Sharding Split2D::vocabulary_layout(const Grid& grid, const GptConfig& config) {
  Sharding layout = table_layout(grid, vocab_rows(grid, config), config.hidden);
  layout.padding_rows = layout.rows - config.vocab;
  return layout;
}

Sharding Split2D::table_layout(const Grid& grid, std::int64_t rows, std::int64_t cols) {
  return Sharding{.kind = Sharding::Kind::block, .q = grid.q(), .i = grid.row_index(), .j = grid.col_index(),
                  .rows = rows, .cols = cols, .fused = {}, .parts = 1, .part = 0, .padding_rows = 0, .padding_cols = 0};
}

Sharding Split2D::head_bias_layout(const Grid& grid, std::int64_t vocab, std::int64_t size) {
  return Sharding{.kind = Sharding::Kind::vector, .q = grid.q(), .i = grid.row_index(), .j = grid.col_index(),
                  .rows = 1, .cols = size, .fused = {}, .parts = 1, .part = 0, .padding_rows = 0,
                  .padding_cols = size - vocab};
}

double Split2D::sum_over_rows(const Grid& grid, double value) { return grid.col().all_reduce(value, ReduceOp::sum); }

template <class T>
DistMatrix<T> Split2D::look_up(const Grid& grid, const DistMatrix<T>& wte, TensorView<const int> ids,
                               std::int64_t hidden) {
  const std::int64_t n = ids.size(0), width = wte.local_cols();
  // Partial lookups of all n tokens in this rank's vocabulary slice: [n, h/q].
  Tensor<T> partial(Shape{n, width}, grid.tag(MemoryKind::workspace), Init::none);
  ops::embedding_lookup<T>(wte.local(), ids, wte.row_offset(), partial.view(), grid.queue());
  DistMatrix<T> x(grid, n, hidden);
  grid.col().reduce_scatter(partial.data(), x.local().data(), static_cast<std::size_t>(x.local().numel()),
                            dtype_of<T>, ReduceOp::sum);
  return x;
}

template <class T>
void Split2D::add_positions(const Grid& grid, const DistMatrix<T>& wpe, std::int64_t seq, DistMatrix<T>& x) {
  // wpe's column block [max_seq, h/q], gathered along the column.
  Tensor<T> table(Shape{wpe.rows(), wpe.local_cols()}, grid.tag(MemoryKind::workspace));
  grid.col().all_gather(wpe.local().data(), table.data(), static_cast<std::size_t>(wpe.local().numel()), dtype_of<T>);
  ops::add_positions<T>(table.view(), x.row_offset(), seq, x.local(), grid.queue());
}

template <class T>
void Split2D::add_lookup_gradient(const Grid& grid, const DistMatrix<T>& dx, TensorView<const int> ids,
                                  DistMatrix<T>& dwte) {
  // Every token's gradient row (the column block, gathered) into this rank's vocabulary slice.
  Tensor<T> all(Shape{ids.size(0), dx.local_cols()}, grid.tag(MemoryKind::workspace));
  grid.col().all_gather(dx.local().data(), all.data(), static_cast<std::size_t>(dx.local().numel()), dtype_of<T>);
  ops::embedding_scatter_add<T>(all.view(), ids, dwte.row_offset(), dwte.local(), grid.queue());
}

template <class T>
void Split2D::add_position_gradient(const Grid& grid, const DistMatrix<T>& dx, std::int64_t seq, DistMatrix<T>& dwpe) {
  // This rank's rows summed per position, then reduced over the column into each rank's slice.
  const MemoryTag work = grid.tag(MemoryKind::workspace);
  Tensor<T> partial(Shape{dwpe.rows(), dx.local_cols()}, work, Init::none);
  ops::position_grad<T>(dx.local(), dx.row_offset(), seq, partial.view(), grid.queue());
  Tensor<T> piece(dwpe.local().shape(), work);
  grid.col().reduce_scatter(partial.data(), piece.data(), static_cast<std::size_t>(piece.numel()), dtype_of<T>,
                            ReduceOp::sum);
  ops::axpby<T>(T(1), piece.view(), T(1), dwpe.local(), grid.queue());
}

template <class T>
DistMatrix<T> Split2D::logits(const Grid& /*grid*/, const SummaOperand<T>& x, const SummaOperand<T>& w,
                              std::int64_t vocab) {
  OPTIMUS_CHECK(w.rows >= vocab, "cross-entropy: wte has ", w.rows, " rows for a vocabulary of ", vocab);
  DistMatrix<T> out(*x.grid, x.rows, w.rows);
  summa_abt(T(1), x, w, T(0), out);
  return out;
}

template <class T>
DistMatrix<T> Split2D::input_gradient(const Grid& /*grid*/, const SavedActivation<T>& dlogits,
                                      const SummaOperand<T>& w) {
  DistMatrix<T> dx(*w.grid, dlogits.rows(), w.cols);
  summa_ab(T(1), dlogits, w, T(0), dx);
  return dx;
}

template <class T>
void Split2D::add_weight_gradient(const Grid& /*grid*/, const SavedActivation<T>& dlogits, const SavedActivation<T>& x,
                                  DistMatrix<T>& dw) {
  summa_atb(T(1), dlogits, x, T(1), dw);
}

#define OPTIMUS_INSTANTIATE(T)                                                                                     \
  template DistMatrix<T> Split2D::look_up<T>(const Grid&, const DistMatrix<T>&, TensorView<const int>,            \
                                             std::int64_t);                                                       \
  template void Split2D::add_positions<T>(const Grid&, const DistMatrix<T>&, std::int64_t, DistMatrix<T>&);       \
  template void Split2D::add_lookup_gradient<T>(const Grid&, const DistMatrix<T>&, TensorView<const int>,         \
                                                DistMatrix<T>&);                                                  \
  template void Split2D::add_position_gradient<T>(const Grid&, const DistMatrix<T>&, std::int64_t,                \
                                                  DistMatrix<T>&);                                                \
  template DistMatrix<T> Split2D::logits<T>(const Grid&, const SummaOperand<T>&, const SummaOperand<T>&,          \
                                            std::int64_t);                                            \
  template DistMatrix<T> Split2D::input_gradient<T>(const Grid&, const SavedActivation<T>&,                       \
                                                    const SummaOperand<T>&);                                      \
  template void Split2D::add_weight_gradient<T>(const Grid&, const SavedActivation<T>&, const SavedActivation<T>&, \
                                                DistMatrix<T>&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

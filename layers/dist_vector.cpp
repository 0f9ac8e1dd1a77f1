// DistVector: q*q-way split vectors, gathered along and reduced over grid columns.
#include "optimus/layers/dist_vector.hpp"

#include <utility>

#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
DistVector<T>::DistVector(const Grid& grid, std::int64_t n, MemoryKind kind, const char* what)
    : DistVector(grid, n, grid.tag(kind), what) {}

template <class T>
DistVector<T>::DistVector(const Grid& grid, std::int64_t n, MemoryTag tag, const char* what) : grid_(grid), n_(n) {
  const std::int64_t qq = static_cast<std::int64_t>(grid.q()) * grid.q();
  OPTIMUS_CHECK(n % qq == 0, what, ": a vector of ", n, " elements cannot be split in q*q = ", qq,
                " pieces (q = ", grid.q(), ")");
  local_ = Tensor<T>(Shape{n / qq}, tag);
}

template <class T>
std::int64_t DistVector<T>::offset() const {
  return grid_.col_index() * n_ / grid_.q() + grid_.row_index() * local_size();
}

template <class T>
void DistVector<T>::gather_column_block(TensorView<T> out) const {
  OPTIMUS_CHECK(out.numel() == n_ / grid_.q(), "gather_column_block: output has ", out.numel(), " elements, expected ",
                n_ / grid_.q());
  grid_.col().all_gather(local_.data(), out.data(), static_cast<std::size_t>(local_size()), dtype_of<T>);
}

template <class T>
void DistVector<T>::add_reduced_column_block(TensorView<const T> partial) {
  OPTIMUS_CHECK(partial.numel() == n_ / grid_.q(), "add_reduced_column_block: input has ", partial.numel(),
                " elements, expected ", n_ / grid_.q());
  const Shape row{1, local_size()};
  Tensor<T> piece(row, grid_.tag(MemoryKind::workspace), Init::none);
  grid_.col().reduce_scatter(partial.data(), piece.data(), static_cast<std::size_t>(local_size()), dtype_of<T>,
                             ReduceOp::sum);
  ops::axpby<T>(T(1), std::as_const(piece).view(), T(1), local(), grid_.queue());
}

template class DistVector<float>;
template class DistVector<double>;

}  // namespace optimus

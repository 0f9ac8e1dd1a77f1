// SavedActivation: a block kept for the backward pass, in bf16 under mixed precision.
#include "optimus/grid/saved_activation.hpp"

#include <type_traits>
#include <utility>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/summa.hpp"

namespace optimus {

template <class T>
bool SavedActivation<T>::keeps_bf16(const Grid& grid) {
  return std::is_same_v<T, float> && grid.gemm_math() == ops::GemmMath::bf16;
}

template <class T>
SavedActivation<T>::SavedActivation(const DistMatrix<T>& m, MemoryKind kind)
    : grid_(m.grid()), rows_(m.rows()), cols_(m.cols()), is_bf16_(keeps_bf16(m.grid())) {
  keep(m.local(), kind);
}

template <class T>
SavedActivation<T>::SavedActivation(DistMatrix<T>&& m, MemoryKind kind)
    : grid_(m.grid()), rows_(m.rows()), cols_(m.cols()), is_bf16_(keeps_bf16(m.grid())) {
  if (!is_bf16_ && m.kind() == kind) {
    block_ = m.take_local();
    return;
  }
  keep(std::as_const(m).local(), kind);
  m.release();
}

template <class T>
SavedActivation<T>::SavedActivation(const Grid& grid, std::int64_t rows, std::int64_t cols)
    : grid_(grid), rows_(rows), cols_(cols), is_bf16_(keeps_bf16(grid)) {}

template <class T>
SavedActivation<T> SavedActivation<T>::uninitialized(const Grid& grid, std::int64_t rows, std::int64_t cols,
                                                     MemoryKind kind) {
  const int q = grid.q();
  OPTIMUS_CHECK(rows >= 0 && cols >= 0 && rows % q == 0 && cols % q == 0, "SavedActivation: a ", rows, "x", cols,
                " matrix does not split into q x q = ", q, "x", q, " blocks");
  SavedActivation s(grid, rows, cols);
  const Shape local{rows / q, cols / q};
  if (s.is_bf16_) {
    s.bf16_block_ = Tensor<bf16>(local, grid.tag(kind), Init::none);
  } else {
    s.block_ = Tensor<T>(local, grid.tag(kind), Init::none);
  }
  return s;
}

template <class T>
void SavedActivation<T>::keep(TensorView<const T> local, MemoryKind kind) {
  const MemoryTag tag = grid_.tag(kind);
  if constexpr (std::is_same_v<T, float>) {
    if (is_bf16_) {
      bf16_block_ = Tensor<bf16>(local.shape(), tag, Init::none);
      ops::to_bf16(local, bf16_block_.view(), grid_.queue());
      return;
    }
  }
  block_ = Tensor<T>(local.shape(), tag, Init::none);
  copy_bytes(block_.device_memory(), block_.data(), local.data(), block_.bytes());
}

template <class T>
TensorView<const T> SavedActivation<T>::values(Tensor<T>& scratch) const {
  return operand_values(SummaOperand<T>(*this), scratch);
}

template class SavedActivation<float>;
template class SavedActivation<double>;

}  // namespace optimus

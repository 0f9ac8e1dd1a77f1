// SavedOperand: a block kept for a later SUMMA product, in the precision the product takes.
#include "optimus/grid/summa_operand.hpp"

#include <type_traits>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
SavedOperand<T>::SavedOperand(const DistMatrix<T>& m, MemoryKind kind)
    : grid_(&m.grid()),
      rows_(m.rows()),
      cols_(m.cols()),
      is_bf16_(std::is_same_v<T, float> && m.grid().queue.math == ops::GemmMath::bf16) {
  const TensorView<const T> local = m.local();
  const MemoryTag tag = grid_->tag(kind);
  if constexpr (std::is_same_v<T, float>) {
    if (is_bf16_) {
      bf16_block_ = Tensor<bf16>(local.shape(), tag, Init::none);
      ops::to_bf16(local, bf16_block_.view(), grid_->queue);
      return;
    }
  }
  block_ = Tensor<T>(local.shape(), tag, Init::none);
  copy_bytes(block_.device_memory(), block_.data(), local.data(), block_.bytes());
}

template class SavedOperand<float>;
template class SavedOperand<double>;

}  // namespace optimus

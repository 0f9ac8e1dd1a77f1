// WeightCopy: a weight's bf16 copy, cast only when something other than the fused update may have written the master.
#include "optimus/layers/weight_copy.hpp"

#include <type_traits>
#include <utility>

#include "optimus/grid/saved_activation.hpp"

namespace optimus {

WeightCopy::WeightCopy(const Shape& shape, const MemoryTag& tag) : copy_(shape, tag, Init::none) {}

TensorView<const bf16> WeightCopy::current(TensorView<const float> master, const ops::Queue& queue) {
  if (!current_) {
    ops::to_bf16(master, copy_.view(), queue);
    current_ = true;
  }
  return std::as_const(copy_).view();
}

TensorView<bf16> WeightCopy::written_with_master() {
  current_ = true;
  return copy_.view();
}

template <class T>
std::unique_ptr<WeightCopy> weight_copy_for(const Grid& grid, const DistMatrix<T>& w, const MemoryTag& tag) {
  const bool beside_master = tag.device == grid.tag(MemoryKind::parameters).device;
  if (!SavedActivation<T>::keeps_bf16(grid) || !beside_master) return nullptr;
  return std::make_unique<WeightCopy>(w.local().shape(), tag);
}

template <class T>
SummaOperand<T> weight_operand(const DistMatrix<T>& w, WeightCopy* copy) {
  if constexpr (std::is_same_v<T, float>) {
    if (copy != nullptr) return SummaOperand<T>(w, copy->current(w.local(), w.grid().queue()));
  }
  return w;
}

template <class T>
void adamw_update_with(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v,
                       const AdamWStep& s, TensorView<bf16> copy, const ops::Queue& queue) {
  if constexpr (std::is_same_v<T, float>) {
    if (copy.data() != nullptr) {
      ops::adamw_update(value, grad, m, v, s, copy, queue);
      return;
    }
  }
  ops::adamw_update<T>(value, grad, m, v, s, queue);
}

#define OPTIMUS_INSTANTIATE(T)                                                                                  \
  template std::unique_ptr<WeightCopy> weight_copy_for<T>(const Grid&, const DistMatrix<T>&, const MemoryTag&); \
  template SummaOperand<T> weight_operand<T>(const DistMatrix<T>&, WeightCopy*);                                \
  template void adamw_update_with<T>(TensorView<T>, TensorView<const T>, TensorView<T>, TensorView<T>,          \
                                     const AdamWStep&, TensorView<bf16>, const ops::Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

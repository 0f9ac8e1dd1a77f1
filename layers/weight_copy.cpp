// WeightCopy: a weight's bf16 copy, cast only when something other than the fused update may have written the master.
#include "optimus/layers/weight_copy.hpp"

#include <utility>

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

}  // namespace optimus

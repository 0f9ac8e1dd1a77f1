// WeightGradients (weight_gradients.hpp): queued weight-gradient work, run in order.
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

void WeightGradients::run() {
  std::vector<std::function<void()>> work = std::move(work_);
  work_.clear();
  for (std::function<void()>& item : work) {
    item();
    item = nullptr;  // frees what the item held before the next runs
  }
}

}  // namespace optimus

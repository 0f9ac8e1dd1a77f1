// A layer made of other layers names its sublayers once, in order, and what walks them is written here once: their
// parameters (the order checkpoints and the optimizer's slots follow), the tensors behind them, zero_grad.
//
//   class MLP : public Sublayers<T, MLP<T, Split>> {
//     friend Sublayers<T, MLP<T, Split>>;
//     auto sublayers() { return std::tie(c_fc_, c_proj_); }  // references, in parameter order
//     ...
//   };
#pragma once

#include <tuple>
#include <vector>

#include "optimus/layers/parameter.hpp"

namespace optimus {

template <class T, class Layer>
class Sublayers {
 public:
  void parameters(std::vector<ParameterRef<T>>& out) {
    each([&](auto& s) { s.parameters(out); });
  }
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out) {
    each([&](auto& s) { s.parameter_storage(out); });
  }
  void zero_grad() {
    each([](auto& s) { s.zero_grad(); });
  }

 protected:
  // fn(sublayer) for each sublayer, in order.
  template <class Fn>
  void each(Fn&& fn) {
    std::apply([&](auto&... s) { (fn(s), ...); }, static_cast<Layer&>(*this).sublayers());
  }
};

}  // namespace optimus

// What a forward pass needs to know besides its input: the training step (for dropout masks) and whether
// it trains (saves activations for backward and applies dropout) or only infers.
#pragma once

#include <cstdint>

namespace optimus {

struct Pass {
  std::uint64_t step = 0;
  bool training = true;
};

}  // namespace optimus

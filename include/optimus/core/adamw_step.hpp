// The scalars of one AdamW step, shared by the CPU and CUDA implementations of the update (this header stays
// C++17-clean for the .cu files). Per element, in double, with g = clip * grad:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   w = w - lr * ((m / c1) / (sqrt(v / c2) + eps) + weight_decay * w)
#pragma once

namespace optimus {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double clip;    // gradient scale (global-norm clipping), 1 when not clipping
  double c1, c2;  // 1 - beta1^t, 1 - beta2^t
};

}  // namespace optimus

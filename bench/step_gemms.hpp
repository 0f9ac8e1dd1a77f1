// Where a step's time goes: the GEMMs of one forward + backward step of the layer/gpt benches at q = 1 (the
// model's own shapes), each timed alone on the bench's device in its GEMM math. Their sum is the step's time if
// everything else — element-wise kernels, the fused attention (whose products run inside it), casts, communication —
// were free; step_ms minus it is what that everything else costs.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optimus/core/device_memory.hpp"
#include "optimus/core/ops.hpp"
#include "traffic_model.hpp"

namespace optimus::bench {

// C[m, n] = op(A) op(B) with inner dimension k, `count` times per step.
struct GemmShape {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  std::int64_t count;
};

// Per block: the four linears (forward X W, backward dY W^T and X^T dY); with vocab > 0 also the tied LM head's logits
// and their two gradients.
std::vector<GemmShape> step_gemms(const BlockShape& shape, std::int64_t layers, std::int64_t vocab);

// Seconds per step of those GEMMs, through ops::gemm on tensors allocated from `device` (null: the host) with `queue`
// (its math: how they compute; bf16 math multiplies bf16 operands into f32, f32 and tf32 f32 operands); `synchronize`
// waits for the queue.
double time_gemms(const std::vector<GemmShape>& gemms, DeviceMemory* device, const ops::Queue& queue,
                  const std::function<void()>& synchronize);

}  // namespace optimus::bench

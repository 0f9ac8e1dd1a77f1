// CUDA element-wise kernels, stream-ordered, on device pointers (the GPU twins of optimus/core/kernels.hpp; their
// arithmetic is optimus/core/element_math.hpp's, shared with the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "optimus/core/element_math.hpp"

namespace optimus {
struct bf16;  // optimus/core/dtype.hpp (C++20; the .cu files that define these kernels compile as C++17)
}  // namespace optimus

namespace optimus::cuda {

// y[e] = value for e < n.
void fill(float* y, float value, std::int64_t n, cudaStream_t stream);
// y = alpha x + beta y, n elements.
void axpby(float alpha, const float* x, float beta, float* y, std::int64_t n, cudaStream_t stream);
// GELU (tanh form) and its derivative: y = gelu(x); dx = dy * gelu'(x) (dx may alias dy).
void gelu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);
// The same on x in bf16 (its values widened as they are read).
void gelu_backward_bf16(const bf16* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);
// y = bf16(gelu(x)), x_kept = bf16(x) (ops::gelu_forward into bf16).
void gelu_forward_bf16(const float* x, bf16* y, bf16* x_kept, std::int64_t n, cudaStream_t stream);

// acc[e] = math::combine(acc[e], x[e], op), n elements: the in-process reductions on the device, the host's bits.
void combine_into(float* acc, const float* x, std::int64_t n, math::Combine op, cudaStream_t stream);
void combine_into(double* acc, const double* x, std::int64_t n, math::Combine op, cudaStream_t stream);

}  // namespace optimus::cuda

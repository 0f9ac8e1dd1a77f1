// CUDA element-wise kernels, stream-ordered, on device pointers (the GPU twins of optimus/core/kernels.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace optimus::cuda {

// y[e] = value for e < n.
void fill(float* y, float value, std::int64_t n, cudaStream_t stream);
// y = alpha x + beta y, n elements.
void axpby(float alpha, const float* x, float beta, float* y, std::int64_t n, cudaStream_t stream);
// GELU (tanh form) and its derivative: y = gelu(x); dx = dy * gelu'(x) (dx may alias dy).
void gelu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);

// acc[e] = acc[e] (+, max or min) x[e], n elements: the in-process reductions on the device (max/min as
// std::max/std::min: acc < x ? x : acc), so that they give the host's results bit for bit.
enum class Combine { sum, max, min };
void combine_into(float* acc, const float* x, std::int64_t n, Combine op, cudaStream_t stream);
void combine_into(double* acc, const double* x, std::int64_t n, Combine op, cudaStream_t stream);

}  // namespace optimus::cuda

// gelu_erf_forward and gelu_erf_backward's CUDA kernels (gelu_erf.cpp describes the operation): one thread per element,
// grid-stride, erff and expf in f32 as the CPU body computes them in f32.
#include <cuda_runtime.h>

#include <cstdint>

#include "block_reduce.cuh"
#include "optimus/core/cuda_check.hpp"

namespace optimus::ops::detail {
namespace {

using cuda::detail::blocks_for;
using cuda::detail::kThreads;

constexpr float kRsqrt2 = 0.70710678118654752f, kRsqrt2Pi = 0.39894228040143268f;

__global__ void forward_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[i] = x[i] * (0.5f * (1.0f + erff(x[i] * kRsqrt2)));
  }
}

__global__ void backward_kernel(const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const float v = x[i];
    dx[i] = dy[i] * (0.5f * (1.0f + erff(v * kRsqrt2)) + v * expf(-0.5f * v * v) * kRsqrt2Pi);
  }
}

}  // namespace

void gelu_erf_forward_cuda(const float* x, float* y, std::int64_t n, void* stream) {
  if (n == 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void gelu_erf_backward_cuda(const float* x, const float* dy, float* dx, std::int64_t n, void* stream) {
  if (n == 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, dy, dx, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::ops::detail

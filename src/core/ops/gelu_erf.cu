// gelu_erf_forward and gelu_erf_backward's CUDA kernels (gelu_erf.cpp describes the operation): one thread per element,
// grid-stride, erff and expf in f32 as the CPU body computes them in f32.
#include <cuda_runtime.h>

#include <cstdint>

#include "optimus/core/error.hpp"

namespace optimus::ops::detail {
namespace {

constexpr int kThreads = 256;
constexpr float kRsqrt2 = 0.70710678118654752f, kRsqrt2Pi = 0.39894228040143268f;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  OPTIMUS_CHECK(status == cudaSuccess, what, " failed to launch: ", cudaGetErrorName(status), ": ",
                cudaGetErrorString(status));
}

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
  check_launch("gelu_erf_forward");
}

void gelu_erf_backward_cuda(const float* x, const float* dy, float* dx, std::int64_t n, void* stream) {
  if (n == 0) return;
  backward_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, dy, dx, n);
  check_launch("gelu_erf_backward");
}

}  // namespace optimus::ops::detail

// Element-wise CUDA kernels: grid-stride loops, launched on the caller's stream.
#include "block_reduce.cuh"
#include "optimus/core/bf16_bits.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;
using detail::value_of;

__global__ void fill_kernel(float* y, float value, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[e] = value;
  }
}

__global__ void axpby_kernel(float alpha, const float* x, float beta, float* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[e] = math::axpby(alpha, x[e], beta, y[e]);
  }
}

__global__ void gelu_forward_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[e] = math::gelu(x[e]);
  }
}

// y = bf16(gelu(x)) and x_kept = bf16(x), as bits (optimus::bf16's rounding).
__global__ void gelu_forward_bf16_kernel(const float* x, std::uint16_t* y, std::uint16_t* x_kept, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[e];
    y[e] = math::bf16_from_float_bits(__float_as_uint(math::gelu(v)));
    x_kept[e] = math::bf16_from_float_bits(__float_as_uint(v));
  }
}

// x in f32, or bf16 (its bits).
template <class X>
__global__ void gelu_backward_kernel(const X* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dx[e] = dy[e] * math::gelu_derivative(value_of(x[e]));
  }
}

template <class T>
__global__ void combine_kernel(T* acc, const T* x, std::int64_t n, math::Combine op) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    acc[e] = math::combine(acc[e], x[e], op);
  }
}

}  // namespace

void fill(float* y, float value, std::int64_t n, cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, value, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void axpby(float alpha, const float* x, float beta, float* y, std::int64_t n, cudaStream_t stream) {
  axpby_kernel<<<blocks_for(n), kThreads, 0, stream>>>(alpha, x, beta, y, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void gelu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream) {
  gelu_backward_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void gelu_forward_bf16(const float* x, bf16* y, bf16* x_kept, std::int64_t n, cudaStream_t stream) {
  gelu_forward_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, reinterpret_cast<std::uint16_t*>(y),
                                                                   reinterpret_cast<std::uint16_t*>(x_kept), n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void gelu_backward_bf16(const bf16* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream) {
  gelu_backward_kernel<std::uint16_t>
      <<<blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<const std::uint16_t*>(x), dy, dx, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void combine_into(float* acc, const float* x, std::int64_t n, math::Combine op, cudaStream_t stream) {
  if (n == 0) return;
  combine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, x, n, op);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void combine_into(double* acc, const double* x, std::int64_t n, math::Combine op, cudaStream_t stream) {
  if (n == 0) return;
  combine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, x, n, op);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

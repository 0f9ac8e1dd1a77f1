// bf16 casts, the gradient norm and AdamW with fp32 master weights (see layer_kernels.hpp).
#include <cuda_bf16.h>

#include "block_reduce.cuh"
#include "optimus/cuda/layer_kernels.hpp"
#include "optimus/cuda/check.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;

// optimus::bf16 is the 16 high bits of a float, like __nv_bfloat16; conversions round to nearest even.
__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = __float2bfloat16_rn(x[e]);
  }
}

// y[r, c] = x[r * ldx + c]: a matrix with strided rows into a contiguous bf16 copy.
__global__ void to_bf16_rows_kernel(const float* x, std::int64_t ldx, __nv_bfloat16* y, std::int64_t rows,
                                    std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = __float2bfloat16_rn(x[(e / cols) * ldx + e % cols]);
  }
}

__global__ void to_f32_kernel(const __nv_bfloat16* x, float* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = __bfloat162float(x[e]);
  }
}

// A fixed number of blocks, each summing a fixed strided subset: deterministic partials.
__global__ void sum_squares_partials_kernel(const float* g, std::int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    acc += static_cast<double>(g[e]) * g[e];
  }
  const double total = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* partials, std::int64_t count, double* out) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (std::int64_t e = threadIdx.x; e < count; e += kThreads) acc += partials[e];
  const double total = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) *out = total;
}

__global__ void adamw_kernel(float* master, const float* grad, float* m, float* v, std::int64_t n, AdamWStep s,
                             __nv_bfloat16* weight_bf16) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const double g = s.clip * static_cast<double>(grad[e]);
    m[e] = static_cast<float>(s.beta1 * m[e] + (1 - s.beta1) * g);
    v[e] = static_cast<float>(s.beta2 * v[e] + (1 - s.beta2) * g * g);
    const double update = (m[e] / s.c1) / (sqrt(v[e] / s.c2) + s.eps);
    master[e] = static_cast<float>(master[e] - s.lr * (update + s.weight_decay * master[e]));
    if (weight_bf16 != nullptr) weight_bf16[e] = __float2bfloat16_rn(master[e]);
  }
}

}  // namespace

void to_bf16(const float* x, bf16* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void to_bf16_rows(const float* x, std::int64_t ldx, bf16* y, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n == 0) return;
  to_bf16_rows_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, ldx, reinterpret_cast<__nv_bfloat16*>(y),
                                                                       rows, cols);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void to_f32(const bf16* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f32_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x), y, n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void sum_squares(const float* grad, std::int64_t n, double* partials, double* out, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(sum_squares_partials());
  sum_squares_partials_kernel<<<blocks, kThreads, 0, stream>>>(grad, n, partials);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, sum_squares_partials(), out);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void adamw_update(float* master, const float* grad, float* m, float* v, std::int64_t n, const AdamWStep& s,
                  bf16* weight_bf16, cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(master, grad, m, v, n, s,
                                                                reinterpret_cast<__nv_bfloat16*>(weight_bf16));
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

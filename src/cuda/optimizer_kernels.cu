// bf16 casts, the gradient norm and AdamW with fp32 master weights (see layer_kernels.hpp).
#include "block_reduce.cuh"
#include "optimus/core/bf16_bits.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/cuda/check.hpp"
#include "optimus/cuda/layer_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;

// bf16 as its 16 bits (optimus::bf16's rounding: to nearest even, NaN kept a NaN).
__device__ std::uint16_t bf16_of(float v) { return math::bf16_from_float_bits(__float_as_uint(v)); }

__global__ void to_bf16_kernel(const float* x, std::uint16_t* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = bf16_of(x[e]);
  }
}

// y[r, c] = x[r * ldx + c]: a matrix with strided rows into a contiguous bf16 copy.
__global__ void to_bf16_rows_kernel(const float* x, std::int64_t ldx, std::uint16_t* y, std::int64_t rows,
                                    std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = bf16_of(x[(e / cols) * ldx + e % cols]);
  }
}

__global__ void to_f32_kernel(const std::uint16_t* x, float* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = __uint_as_float(math::float_bits_from_bf16(x[e]));
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
                             std::uint16_t* weight_bf16) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    math::adamw(master[e], grad[e], m[e], v[e], s);
    if (weight_bf16 != nullptr) weight_bf16[e] = bf16_of(master[e]);
  }
}

}  // namespace

void to_bf16(const float* x, bf16* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, reinterpret_cast<std::uint16_t*>(y), n);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void to_bf16_rows(const float* x, std::int64_t ldx, bf16* y, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n == 0) return;
  to_bf16_rows_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, ldx, reinterpret_cast<std::uint16_t*>(y),
                                                                       rows, cols);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void to_f32(const bf16* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f32_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<const std::uint16_t*>(x), y, n);
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
                                                                reinterpret_cast<std::uint16_t*>(weight_bf16));
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

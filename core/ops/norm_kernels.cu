// Row/column reductions, bias broadcast and LayerNorm on local blocks (declared in cuda_kernels.hpp).
#include "block_reduce.cuh"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;
using detail::value_of;

// One block per row: out[r] = sum of x[r, :].
__global__ void row_sums_kernel(const float* x, std::int64_t cols, float* out) {
  __shared__ float shared[kThreads];
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) acc += row[c];
  const float total = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// Column sums over many rows. A block covers kColumnTile columns with kRowLanes lanes of rows (blockDim
// (kColumnTile, kRowLanes)): lane l sums rows l, l + kRowLanes, ... in order, then the lanes' partials are added in a
// fixed tree, so the bits are the same on every run. A warp reads four rows of 8 columns (32-byte sectors, all used).
// (One thread per column over all rows left the GPU nearly idle: 8 blocks for 2048 columns, 0.9 ms for an
// 8192 x 2048 f32 block on an H100, which reads it in about 25 us; this layout takes 64 us, docs/devices.md.)
constexpr int kColumnTile = 8;
constexpr int kRowLanes = 128;
static_assert(kColumnTile * kRowLanes <= 1024, "a block has at most 1024 threads");

// Sum of `value` over the block's row lanes, per column of the tile; lane 0 gets the total.
// `shared`: kRowLanes x kColumnTile floats, free again on return.
__device__ float lane_sum(float value, float (*shared)[kColumnTile]) {
  shared[threadIdx.y][threadIdx.x] = value;
  __syncthreads();
  for (int half = kRowLanes / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.y) < half) {
      shared[threadIdx.y][threadIdx.x] += shared[threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  const float total = shared[0][threadIdx.x];
  __syncthreads();
  return total;
}

// With x_bf16 not null, each element read is also written there in bf16 (the copy a linear layer's products take).
__global__ void column_sums_kernel(const float* x, std::int64_t rows, std::int64_t cols, float* out,
                                   std::uint16_t* x_bf16) {
  __shared__ float shared[kRowLanes][kColumnTile];
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(kColumnTile) + threadIdx.x;
  float acc = 0.0f;
  if (c < cols) {
#pragma unroll 4
    for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      const float v = x[r * cols + c];
      acc += v;
      if (x_bf16 != nullptr) x_bf16[r * cols + c] = detail::written(v, x_bf16);
    }
  }
  const float total = lane_sum(acc, shared);
  if (threadIdx.y == 0 && c < cols) out[c] = total;
}

__global__ void add_row_broadcast_kernel(const float* bias, float* y, std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] += bias[e % cols];
  }
}

__global__ void square_deviations_kernel(const float* x, const float* row_sum, float hidden, std::int64_t cols,
                                         float* out) {
  __shared__ float shared[kThreads];
  const float* row = x + blockIdx.x * cols;
  const float mean = math::layernorm_mean(row_sum[blockIdx.x], hidden);
  float acc = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) acc += (row[c] - mean) * (row[c] - mean);
  const float total = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

template <class Out>
__global__ void normalize_kernel(const float* x, const float* row_sum, const float* sq_dev, const float* gamma,
                                 const float* beta, float hidden, float eps, std::int64_t cols, Out* xhat, float* rstd,
                                 Out* y) {
  const std::int64_t r = blockIdx.x;
  const float mean = math::layernorm_mean(row_sum[r], hidden);
  const float s = math::layernorm_rstd(sq_dev[r], hidden, eps);
  if (threadIdx.x == 0) rstd[r] = s;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float h = math::layernorm_xhat(x[r * cols + c], mean, s);
    xhat[r * cols + c] = detail::written(h, xhat);
    y[r * cols + c] = detail::written(math::layernorm_y(h, gamma[c], beta[c]), y);
  }
}

// Row sums of dxhat = dy gamma and dxhat xhat: one block per row.
template <class X>
__global__ void backward_row_sums_kernel(const float* dy, const X* xhat, const float* gamma, std::int64_t cols,
                                         float* sums) {
  __shared__ float shared[kThreads];
  const std::int64_t r = blockIdx.x;
  float a = 0.0f, b = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float d = dy[r * cols + c] * gamma[c];
    a += d;
    b += d * value_of(xhat[r * cols + c]);
  }
  const float sa = detail::block_sum(a, shared);
  const float sb = detail::block_sum(b, shared);
  if (threadIdx.x == 0) {
    sums[2 * r] = sa;
    sums[2 * r + 1] = sb;
  }
}

// Column sums of dy xhat and dy, laid out as column_sums_kernel.
template <class X>
__global__ void backward_column_sums_kernel(const float* dy, const X* xhat, std::int64_t rows, std::int64_t cols,
                                            float* dgamma, float* dbeta) {
  __shared__ float shared[kRowLanes][kColumnTile];
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(kColumnTile) + threadIdx.x;
  float g = 0.0f, b = 0.0f;
  if (c < cols) {
#pragma unroll 4
    for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      const float d = dy[r * cols + c];
      g += d * value_of(xhat[r * cols + c]);
      b += d;
    }
  }
  const float g_total = lane_sum(g, shared);
  const float b_total = lane_sum(b, shared);
  if (threadIdx.y == 0 && c < cols) {
    dgamma[c] = g_total;
    dbeta[c] = b_total;
  }
}

template <class X>
__global__ void backward_dx_kernel(const float* dy, const X* xhat, const float* gamma, const float* rstd,
                                   const float* sums, float hidden, bool centered, const float* residual,
                                   std::int64_t cols, float* dx) {
  const std::int64_t r = blockIdx.x;
  const float mean_d = centered ? math::layernorm_mean(sums[2 * r], hidden) : 0.0f;
  const float mean_dx = math::layernorm_mean(sums[2 * r + 1], hidden);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const std::int64_t e = r * cols + c;
    const float d = math::layernorm_dx(dy[e], gamma[c], value_of(xhat[e]), rstd[r], mean_d, mean_dx);
    dx[e] = residual == nullptr ? d : residual[e] + d;
  }
}

unsigned column_blocks(std::int64_t cols) { return static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile); }
dim3 column_block() { return dim3(kColumnTile, kRowLanes); }

}  // namespace

void row_sums(const float* x, std::int64_t rows, std::int64_t cols, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  row_sums_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, out);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void column_sums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bf16* x_bf16,
                 cudaStream_t stream) {
  if (cols == 0) return;
  column_sums_kernel<<<column_blocks(cols), column_block(), 0, stream>>>(x, rows, cols, out,
                                                                          reinterpret_cast<std::uint16_t*>(x_bf16));
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void add_row_broadcast(const float* bias, float* y, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  add_row_broadcast_kernel<<<detail::blocks_for(rows * cols), kThreads, 0, stream>>>(bias, y, rows, cols);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void layernorm_square_deviations(const float* x, const float* row_sum, std::int64_t hidden, std::int64_t rows,
                                 std::int64_t cols, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  square_deviations_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, row_sum, static_cast<float>(hidden), cols, out);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void layernorm_normalize(const float* x, const float* row_sum, const float* sq_dev, const float* gamma,
                         const float* beta, std::int64_t hidden, float eps, std::int64_t rows, std::int64_t cols,
                         float* xhat, float* rstd, float* y, cudaStream_t stream) {
  if (rows == 0) return;
  normalize_kernel<float><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, row_sum, sq_dev, gamma, beta, static_cast<float>(hidden), eps, cols, xhat, rstd, y);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void layernorm_normalize_bf16(const float* x, const float* row_sum, const float* sq_dev, const float* gamma,
                              const float* beta, std::int64_t hidden, float eps, std::int64_t rows, std::int64_t cols,
                              bf16* xhat, float* rstd, bf16* y, cudaStream_t stream) {
  if (rows == 0) return;
  normalize_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, row_sum, sq_dev, gamma, beta, static_cast<float>(hidden), eps, cols, reinterpret_cast<std::uint16_t*>(xhat), rstd,
      reinterpret_cast<std::uint16_t*>(y));
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

namespace {

// xhat in f32 or bf16 (X: its bits).
template <class X>
void partials(const float* dy, const X* xhat, const float* gamma, std::int64_t rows, std::int64_t cols, float* dgamma,
              float* dbeta, float* sums, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  backward_column_sums_kernel<X><<<column_blocks(cols), column_block(), 0, stream>>>(dy, xhat, rows, cols, dgamma,
                                                                                     dbeta);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
  backward_row_sums_kernel<X><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(dy, xhat, gamma, cols, sums);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

template <class X>
void dx_of(const float* dy, const X* xhat, const float* gamma, const float* rstd, const float* sums,
           std::int64_t hidden, bool centered, const float* residual, std::int64_t rows, std::int64_t cols,
           float* dx, cudaStream_t stream) {
  if (rows == 0) return;
  backward_dx_kernel<X><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      dy, xhat, gamma, rstd, sums, static_cast<float>(hidden), centered, residual, cols, dx);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void layernorm_backward_partials(const float* dy, const float* xhat, const float* gamma, std::int64_t rows,
                                 std::int64_t cols, float* dgamma, float* dbeta, float* sums, cudaStream_t stream) {
  partials(dy, xhat, gamma, rows, cols, dgamma, dbeta, sums, stream);
}

void layernorm_backward_partials(const float* dy, const bf16* xhat, const float* gamma, std::int64_t rows,
                                 std::int64_t cols, float* dgamma, float* dbeta, float* sums, cudaStream_t stream) {
  partials(dy, reinterpret_cast<const std::uint16_t*>(xhat), gamma, rows, cols, dgamma, dbeta, sums, stream);
}

void layernorm_backward_dx(const float* dy, const float* xhat, const float* gamma, const float* rstd,
                           const float* sums, std::int64_t hidden, bool centered, const float* residual,
                           std::int64_t rows, std::int64_t cols, float* dx, cudaStream_t stream) {
  dx_of(dy, xhat, gamma, rstd, sums, hidden, centered, residual, rows, cols, dx, stream);
}

void layernorm_backward_dx(const float* dy, const bf16* xhat, const float* gamma, const float* rstd,
                           const float* sums, std::int64_t hidden, bool centered, const float* residual,
                           std::int64_t rows, std::int64_t cols, float* dx, cudaStream_t stream) {
  dx_of(dy, reinterpret_cast<const std::uint16_t*>(xhat), gamma, rstd, sums, hidden, centered, residual, rows, cols,
        dx, stream);
}

}  // namespace optimus::cuda

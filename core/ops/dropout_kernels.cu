// Dropout with the CPU's Philox masks, alone and fused into the block's residual paths (declared in cuda_kernels.hpp).
#include "block_reduce.cuh"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;

__global__ void dropout_kernel(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t row0,
                               std::uint64_t col0, double p, float keep_scale, std::uint64_t seed,
                               std::uint64_t stream_id) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t r = e / cols, c = e % cols;
    const bool keep = math::dropout_keeps(p, seed, stream_id, row0 + static_cast<std::uint64_t>(r),
                                          col0 + static_cast<std::uint64_t>(c));
    x[r * ld + c] = math::dropout(x[r * ld + c], keep, keep_scale);
  }
}

// The element of global (row, col) through the mask.
__device__ float masked(float v, const DropoutMask& m, std::int64_t r, std::int64_t c) {
  if (m.p <= 0.0) return v;
  const bool keep =
      math::dropout_keeps(m.p, m.seed, m.stream, m.row0 + static_cast<std::uint64_t>(r), m.col0 + static_cast<std::uint64_t>(c));
  return math::dropout(v, keep, m.keep_scale);
}

// One block per row: x = residual + dropout(x); row_sums[r] = the row's sum if row_sums is not null.
__global__ void dropout_residual_kernel(const float* residual, float* x, std::int64_t cols, DropoutMask mask,
                                        float* row_sums) {
  __shared__ float shared[kThreads];
  const std::int64_t r = blockIdx.x;
  float* row = x + r * cols;
  const float* add = residual + r * cols;
  float acc = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float v = add[c] + masked(row[c], mask, r, c);
    row[c] = v;
    acc += v;
  }
  if (row_sums == nullptr) return;  // uniform over the block: no thread reaches block_sum's barriers
  const float total = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) row_sums[r] = total;
}

__global__ void dropout_copy_kernel(const float* x, float* y, std::int64_t rows, std::int64_t cols, DropoutMask mask) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = masked(x[e], mask, e / cols, e % cols);
  }
}

}  // namespace

void dropout_residual(const float* residual, float* x, std::int64_t rows, std::int64_t cols, const DropoutMask& mask,
                      float* row_sums, cudaStream_t stream) {
  if (rows == 0) return;
  dropout_residual_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(residual, x, cols, mask, row_sums);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void dropout_copy(const float* x, float* y, std::int64_t rows, std::int64_t cols, const DropoutMask& mask,
                  cudaStream_t stream) {
  if (rows * cols == 0) return;
  dropout_copy_kernel<<<detail::blocks_for(rows * cols), kThreads, 0, stream>>>(x, y, rows, cols, mask);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void dropout_apply(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t row0,
                   std::uint64_t col0, double p, std::uint64_t seed, std::uint64_t stream_id, cudaStream_t stream) {
  if (p <= 0.0 || rows * cols == 0) return;
  OPTIMUS_CHECK(p < 1.0, "dropout probability must be below 1, got ", p);
  OPTIMUS_CHECK(row0 + static_cast<std::uint64_t>(rows) <= 0x100000000ull &&
                    col0 + static_cast<std::uint64_t>(cols) <= 0x100000000ull,
                "dropout: rows up to ", row0 + static_cast<std::uint64_t>(rows), " and columns up to ",
                col0 + static_cast<std::uint64_t>(cols), " exceed the 2^32 x 2^32 index space");
  dropout_kernel<<<detail::blocks_for(rows * cols), kThreads, 0, stream>>>(
      x, rows, cols, ld, row0, col0, p, static_cast<float>(1.0 / (1.0 - p)), seed, stream_id);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

// RoPE on the GPU (ops::rotary): one thread per pair of a query or key head, cos and sin taken in f64.
#include "block_reduce.cuh"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;

// Pair i of head `head` (heads of Q, then of K: `turned` heads in all) of row `row`, as cpu::rotary turns it.
__global__ void rotary_kernel(float* qkv, std::int64_t rows, std::int64_t cols, std::int64_t seq, std::int64_t d,
                              std::int64_t turned, double theta, float flip) {
  const std::int64_t half = d / 2, per_row = turned * half;  // pairs of Q and K in a row
  const std::int64_t n = rows * per_row;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t row = e / per_row, pair = e % per_row, head = pair / half, i = pair % half;
    const double angle = static_cast<double>(row % seq) * pow(theta, -2.0 * static_cast<double>(i) /
                                                                      static_cast<double>(d));
    const float c = static_cast<float>(cos(angle)), s = flip * static_cast<float>(sin(angle));
    float* const h = qkv + row * cols + head * d;
    const float a = h[i], b = h[i + half];
    h[i] = a * c - b * s;
    h[i + half] = b * c + a * s;
  }
}

}  // namespace

void rotary(float* qkv, std::int64_t rows, std::int64_t cols, std::int64_t seq, std::int64_t heads,
            std::int64_t kv_heads, double theta, bool inverse, cudaStream_t stream) {
  const std::int64_t d = cols / (heads + 2 * kv_heads), pairs = rows * (heads + kv_heads) * (d / 2);
  if (pairs == 0) return;
  rotary_kernel<<<detail::blocks_for(pairs), kThreads, 0, stream>>>(qkv, rows, cols, seq, d, heads + kv_heads, theta,
                                                                    inverse ? -1.0f : 1.0f);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

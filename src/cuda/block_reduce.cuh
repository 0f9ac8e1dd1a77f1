// Device helpers shared by the CUDA kernels: grid-stride loops and deterministic block reductions (a fixed
// tree over a fixed thread count, so the same inputs give the same bits on every run).
#pragma once

#include <cstdint>

namespace optimus::cuda::detail {

constexpr int kThreads = 256;  // every kernel here runs blocks of this many threads

inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// Sum of `value` over the block's kThreads threads; every thread gets the result. `shared`: kThreads
// elements of shared memory, free again on return.
template <class T>
__device__ T block_sum(T value, T* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

template <class T>
__device__ T block_max(T value, T* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      const T other = shared[threadIdx.x + half];
      if (other > shared[threadIdx.x]) shared[threadIdx.x] = other;
    }
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

}  // namespace optimus::cuda::detail

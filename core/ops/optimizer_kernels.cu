// bf16 casts, the gradient norm and AdamW with fp32 master weights (declared in cuda_kernels.hpp).
#include <cstddef>
#include <cstdint>

#include "block_reduce.cuh"
#include "optimus/core/bf16_bits.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

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

// Four values per thread and step (one 16-byte load, one 8-byte store; element 0 in the low bits): the same bits as
// to_bf16_kernel. (A GEMM operand of 16.7M values took 85 us on an H100 one value at a time with a division for its
// row, 33 us so: the memory's speed.)
__global__ void to_bf16_x4_kernel(const float4* x, uint2* y, std::int64_t n4) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n4;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const float4 v = x[e];
    y[e] = make_uint2(bf16_of(v.x) | static_cast<unsigned>(bf16_of(v.y)) << 16,
                      bf16_of(v.z) | static_cast<unsigned>(bf16_of(v.w)) << 16);
  }
}

// y[r, c] = x[r * ldx + c]: a matrix with strided rows into a contiguous bf16 copy (detail::rows_by_columns' grid).
__global__ void to_bf16_rows_kernel(const float* x, std::int64_t ldx, std::uint16_t* y, std::int64_t rows,
                                    std::int64_t cols) {
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (std::int64_t c = detail::first_column(); c < cols; c += detail::column_stride()) {
      y[r * cols + c] = bf16_of(x[r * ldx + c]);
    }
  }
}

__global__ void to_f32_kernel(const std::uint16_t* x, float* y, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    y[e] = __uint_as_float(math::float_bits_from_bf16(x[e]));
  }
}

// Four values per thread and step, as to_bf16_x4_kernel.
__global__ void to_f32_x4_kernel(const uint2* x, float4* y, std::int64_t n4) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n4;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const uint2 v = x[e];
    const auto wide = [](unsigned bits) { return __uint_as_float(math::float_bits_from_bf16(bits & 0xFFFFu)); };
    y[e] = make_float4(wide(v.x), wide(v.x >> 16), wide(v.y), wide(v.y >> 16));
  }
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// A conversion of n values: `fours(n / 4)` converts the first 4 (n / 4) four at a time where `vectorisable` (both
// pointers aligned for it), `ones(from)` the values from `from` on one at a time.
template <class Fours, class Ones>
void by_fours(bool vectorisable, std::int64_t n, Fours fours, Ones ones) {
  std::int64_t from = 0;
  if (vectorisable && n >= 4) {
    fours(n / 4);
    OPTIMUS_CHECK_CUDA(cudaGetLastError());
    from = 4 * (n / 4);
  }
  if (from == n) return;
  ones(from);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
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
  auto* bits = reinterpret_cast<std::uint16_t*>(y);
  by_fours(aligned(x, 16) && aligned(y, 8), n,
           [&](std::int64_t n4) {
             to_bf16_x4_kernel<<<detail::blocks_for(n4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                                                 reinterpret_cast<uint2*>(bits), n4);
           },
           [&](std::int64_t from) {
             to_bf16_kernel<<<detail::blocks_for(n - from), kThreads, 0, stream>>>(x + from, bits + from, n - from);
           });
}

void to_bf16_rows(const float* x, std::int64_t ldx, bf16* y, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (ldx == cols || rows == 1) {  // contiguous
    to_bf16(x, y, rows * cols, stream);
    return;
  }
  to_bf16_rows_kernel<<<detail::rows_by_columns(rows, cols), kThreads, 0, stream>>>(
      x, ldx, reinterpret_cast<std::uint16_t*>(y), rows, cols);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void to_f32(const bf16* x, float* y, std::int64_t n, cudaStream_t stream) {
  const auto* bits = reinterpret_cast<const std::uint16_t*>(x);
  by_fours(aligned(x, 8) && aligned(y, 16), n,
           [&](std::int64_t n4) {
             to_f32_x4_kernel<<<detail::blocks_for(n4), kThreads, 0, stream>>>(reinterpret_cast<const uint2*>(bits),
                                                                                reinterpret_cast<float4*>(y), n4);
           },
           [&](std::int64_t from) {
             to_f32_kernel<<<detail::blocks_for(n - from), kThreads, 0, stream>>>(bits + from, y + from, n - from);
           });
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

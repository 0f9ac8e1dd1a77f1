// SwiGLU and grouped-query attention's key/value heads on the GPU (ops::swiglu_*, ops::repeat_kv, ops::sum_kv):
// grid-stride loops, one thread per output element, as the CPU kernels compute them (cpu_llama_parts.cpp).
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

__device__ inline std::uint16_t to_bf16_bits(float v) { return math::bf16_from_float_bits(__float_as_uint(v)); }

// y [rows, f] (Y: float, or bf16 bits with gu_kept = bf16(gu) written too) from gu [rows, 2 f].
template <class Y>
__global__ void swiglu_forward_kernel(const float* gu, Y* y, std::uint16_t* gu_kept, std::int64_t rows,
                                      std::int64_t f) {
  const std::int64_t n = rows * f;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t r = e / f, c = e % f;
    const float g = gu[r * 2 * f + c], u = gu[r * 2 * f + f + c];
    const float v = math::silu(g) * u;
    if constexpr (sizeof(Y) == sizeof(float)) {
      y[e] = v;
    } else {
      y[e] = to_bf16_bits(v);
      gu_kept[r * 2 * f + c] = to_bf16_bits(g);
      gu_kept[r * 2 * f + f + c] = to_bf16_bits(u);
    }
  }
}

// dgu [rows, 2 f] from gu (G: float or bf16 bits) and dy [rows, f].
template <class G>
__global__ void swiglu_backward_kernel(const G* gu, const float* dy, float* dgu, std::int64_t rows, std::int64_t f) {
  const std::int64_t n = rows * f;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t r = e / f, c = e % f;
    const float g = value_of(gu[r * 2 * f + c]), u = value_of(gu[r * 2 * f + f + c]), d = dy[e];
    dgu[r * 2 * f + c] = d * u * math::silu_derivative(g);
    dgu[r * 2 * f + f + c] = d * math::silu(g);
  }
}

// full [rows, 3 heads d] from qkv [rows, (heads + 2 kv) d]: query head t reads key/value head t / (heads / kv).
template <class E>
__global__ void repeat_kv_kernel(const E* qkv, E* full, std::int64_t rows, std::int64_t d, std::int64_t heads,
                                 std::int64_t kv) {
  const std::int64_t full_width = 3 * heads * d, width = (heads + 2 * kv) * d, n = rows * full_width;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t r = e / full_width, c = e % full_width, part = c / (heads * d), t = (c % (heads * d)) / d,
                       i = c % d;
    const std::int64_t from = part == 0 ? c : heads * d + (part - 1) * kv * d + (t / (heads / kv)) * d + i;
    full[e] = qkv[r * width + from];
  }
}

// dqkv [rows, (heads + 2 kv) d] from dfull [rows, 3 heads d]: a key/value head's gradient summed over its query heads
// in increasing order.
__global__ void sum_kv_kernel(const float* dfull, float* dqkv, std::int64_t rows, std::int64_t d, std::int64_t heads,
                              std::int64_t kv) {
  const std::int64_t full_width = 3 * heads * d, width = (heads + 2 * kv) * d, n = rows * width;
  const std::int64_t group = heads / kv;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t r = e / width, c = e % width;
    const float* in = dfull + r * full_width;
    if (c < heads * d) {
      dqkv[e] = in[c];
      continue;
    }
    const std::int64_t k = c - heads * d, part = k / (kv * d), h = (k % (kv * d)) / d, i = k % d;
    const float* from = in + (1 + part) * heads * d + h * group * d + i;
    float sum = from[0];
    for (std::int64_t t = 1; t < group; ++t) sum += from[t * d];
    dqkv[e] = sum;
  }
}

}  // namespace

void swiglu_forward(const float* gu, float* y, std::int64_t rows, std::int64_t f, cudaStream_t stream) {
  if (rows * f == 0) return;
  swiglu_forward_kernel<float><<<blocks_for(rows * f), kThreads, 0, stream>>>(gu, y, nullptr, rows, f);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void swiglu_forward_bf16(const float* gu, bf16* y, bf16* gu_kept, std::int64_t rows, std::int64_t f,
                         cudaStream_t stream) {
  if (rows * f == 0) return;
  swiglu_forward_kernel<std::uint16_t><<<blocks_for(rows * f), kThreads, 0, stream>>>(
      gu, reinterpret_cast<std::uint16_t*>(y), reinterpret_cast<std::uint16_t*>(gu_kept), rows, f);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void swiglu_backward(const float* gu, const float* dy, float* dgu, std::int64_t rows, std::int64_t f,
                     cudaStream_t stream) {
  if (rows * f == 0) return;
  swiglu_backward_kernel<float><<<blocks_for(rows * f), kThreads, 0, stream>>>(gu, dy, dgu, rows, f);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void swiglu_backward_bf16(const bf16* gu, const float* dy, float* dgu, std::int64_t rows, std::int64_t f,
                          cudaStream_t stream) {
  if (rows * f == 0) return;
  swiglu_backward_kernel<std::uint16_t><<<blocks_for(rows * f), kThreads, 0, stream>>>(
      reinterpret_cast<const std::uint16_t*>(gu), dy, dgu, rows, f);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void repeat_kv(const float* qkv, float* full, std::int64_t rows, std::int64_t d, std::int64_t heads,
               std::int64_t kv_heads, cudaStream_t stream) {
  const std::int64_t n = rows * 3 * heads * d;
  if (n == 0) return;
  repeat_kv_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(qkv, full, rows, d, heads, kv_heads);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void repeat_kv_bf16(const bf16* qkv, bf16* full, std::int64_t rows, std::int64_t d, std::int64_t heads,
                    std::int64_t kv_heads, cudaStream_t stream) {
  const std::int64_t n = rows * 3 * heads * d;
  if (n == 0) return;
  repeat_kv_kernel<std::uint16_t><<<blocks_for(n), kThreads, 0, stream>>>(
      reinterpret_cast<const std::uint16_t*>(qkv), reinterpret_cast<std::uint16_t*>(full), rows, d, heads, kv_heads);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void sum_kv(const float* dfull, float* dqkv, std::int64_t rows, std::int64_t d, std::int64_t heads,
            std::int64_t kv_heads, cudaStream_t stream) {
  const std::int64_t n = rows * (heads + 2 * kv_heads) * d;
  if (n == 0) return;
  sum_kv_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dfull, dqkv, rows, d, heads, kv_heads);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

// Shared by the fused attention's CUDA kernels: the scalar ones (flash_attention.cu: f32 products, any math) and the
// tensor-core ones (flash_attention_mma.cu: bf16 operands, f32 accumulation, under GemmMath::bf16).
#pragma once

#include <cstdint>

#include "optimus/core/element_math.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda::detail {

// The probability's dropout: x / (1 - p) where the mask keeps (row, col), else 0; x itself without dropout.
__device__ inline float dropped(float x, const AttentionGeometry& g, std::uint64_t row, std::int64_t col) {
  if (g.dropout <= 0.0) return x;
  const bool keep = math::dropout_keeps(g.dropout, g.seed, g.stream, row, static_cast<std::uint64_t>(col));
  return math::dropout(x, keep, g.keep_scale);
}

// The global mask row of query 0 of head `head` of sequence `b` (the rows of query i follow).
__device__ inline std::uint64_t mask_row_of(const AttentionGeometry& g, std::int64_t b, std::int64_t head) {
  return static_cast<std::uint64_t>(((g.first_batch + b) * g.total_heads + g.first_head + head) * g.seq);
}

// The tensor-core kernels (head dimension <= 128) on qkv in f32 or in bf16 (In = std::uint16_t, its bits). out32 or
// out16 is null.
template <class In>
void mma_attention_forward(const In* qkv, const AttentionGeometry& g, float* out32, std::uint16_t* out16, float* lse,
                           cudaStream_t stream);
template <class In>
void mma_attention_backward(const In* qkv, const float* dout, const float* lse, const float* delta,
                            const AttentionGeometry& g, float* dqkv, cudaStream_t stream);

}  // namespace optimus::cuda::detail

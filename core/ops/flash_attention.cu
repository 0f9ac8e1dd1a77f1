// Fused attention, causal or bidirectional, on the GPU (cuda_kernels.hpp) with f32 products: FlashAttention-2's
// algorithm without its tensor-core tiling (mixed precision runs flash_attention_mma.cu's, with bf16 operands,
// instead). A thread owns one query row (forward, and the backward's dQ) or one key row (the backward's dK and dV) and
// keeps its head-dimension vectors in registers; the block stages kStage rows of the other operand in shared memory at
// a time. Correct and memory-light (no [seq, seq] matrix), slow: the products are scalar FMAs on CUDA cores. Dropout
// draws the global mask element by element (math::dropout_keeps), as the CPU does.
#include <cmath>

#include "block_reduce.cuh"
#include "flash_attention.cuh"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

constexpr int kRows = 64;       // threads of a block: one row each
constexpr int kStage = 32;      // rows of the other operand in shared memory at a time
constexpr int kMaxHead = flash_attention_max_head();

struct Head {
  const float* q;  // row i at q + i * stride (k = q + width, v = q + 2 * width)
  std::int64_t stride, width, d;
  std::uint64_t mask_row;  // the global mask row of query 0
  std::int64_t lse_row;    // (b * heads + t) * seq
};

__device__ Head head_of(const float* qkv, const AttentionGeometry& g) {
  const std::int64_t b = blockIdx.z, t = blockIdx.y, width = g.heads * g.d;
  return Head{qkv + b * g.seq * 3 * width + t * g.d, 3 * width, width, g.d, detail::mask_row_of(g, b, t),
              (b * g.heads + t) * g.seq};
}

using detail::dropped;

// The block's sequence's keys before its padding: lengths[b], or seq where none are padded.
__device__ std::int64_t keys_before_padding(const AttentionGeometry& g) {
  return g.lengths != nullptr ? g.lengths[blockIdx.z] : g.seq;
}

// One past the last key the block's queries see: its last query + 1 (causal), at most seq, at most the padding.
__device__ std::int64_t last_key(const AttentionGeometry& g) {
  const std::int64_t end = (blockIdx.x + 1) * static_cast<std::int64_t>(kRows);
  const std::int64_t unpadded = keys_before_padding(g);
  return g.causal && end < unpadded ? end : unpadded;
}

// Whether query i sees key j, j below the block's last_key: j <= i (causal), or any.
__device__ bool sees(const AttentionGeometry& g, std::int64_t i, std::int64_t j) { return !g.causal || j <= i; }

__device__ float dot(const float* a, const float* b, std::int64_t d) {
  float s = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// Stages rows first.. first + kStage of column block `offset` of head h's rows (0 past seq) into rows[kStage][kMaxHead].
__device__ void stage(const Head& h, std::int64_t seq, std::int64_t offset, std::int64_t first,
                      float (*rows)[kMaxHead]) {
  for (std::int64_t e = threadIdx.x; e < kStage * h.d; e += kRows) {
    const std::int64_t r = e / h.d, c = e % h.d, i = first + r;
    rows[r][c] = i < seq ? h.q[i * h.stride + offset + c] : 0.0f;
  }
}

template <class Out>
__global__ void forward_kernel(const float* qkv, AttentionGeometry g, Out* out, float* lse) {
  __shared__ float keys[kStage][kMaxHead], values[kStage][kMaxHead];
  const Head h = head_of(qkv, g);
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kRows) + threadIdx.x;
  const std::int64_t last = last_key(g);  // the keys some query of the block sees
  float q[kMaxHead], acc[kMaxHead];
  for (std::int64_t c = 0; c < h.d; ++c) {
    q[c] = i < g.seq ? h.q[i * h.stride + c] : 0.0f;
    acc[c] = 0.0f;
  }
  float max = -INFINITY, sum = 0.0f;
  for (std::int64_t j0 = 0; j0 < last; j0 += kStage) {
    stage(h, g.seq, h.width, j0, keys);
    stage(h, g.seq, 2 * h.width, j0, values);
    __syncthreads();
    for (int r = 0; r < kStage && i < g.seq && j0 + r < last && sees(g, i, j0 + r); ++r) {
      const float s = g.scale * dot(q, keys[r], h.d);
      if (s > max) {  // the running max grows: rescale what was summed against the old one
        const float rescale = math::exp_nonpositive(max - s);
        sum *= rescale;
        for (std::int64_t c = 0; c < h.d; ++c) acc[c] *= rescale;
        max = s;
      }
      const float p = math::exp_nonpositive(s - max);
      sum += p;
      const float kept = dropped(p, g, h.mask_row + static_cast<std::uint64_t>(i), j0 + r);
      for (std::int64_t c = 0; c < h.d; ++c) acc[c] += kept * values[r][c];
    }
    __syncthreads();
  }
  if (i >= g.seq) return;
  const std::int64_t b = blockIdx.z, t = blockIdx.y;
  for (std::int64_t c = 0; c < h.d; ++c) {
    out[(b * g.seq + i) * h.width + t * h.d + c] = detail::written(acc[c] / sum, out);
  }
  lse[h.lse_row + i] = max + logf(sum);
}

// D per query row and head, dout . out over the head's columns: a warp per (row, head), its lanes over the columns,
// then a fixed tree of shuffles (the same bits every run).
template <class Out>
__global__ void delta_kernel(const Out* out, const float* dout, AttentionGeometry g, float* delta) {
  const int lane = threadIdx.x & 31;
  const std::int64_t rows = g.batches * g.seq * g.heads, width = g.heads * g.d;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32; w < rows;
       w += warps) {
    const std::int64_t t = w % g.heads, row = w / g.heads;  // row = b * seq + i
    const Out* o = out + row * width + t * g.d;
    const float* y = dout + row * width + t * g.d;
    float sum = 0.0f;
    for (std::int64_t c = lane; c < g.d; c += 32) sum += y[c] * detail::value_of(o[c]);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[((row / g.seq) * g.heads + t) * g.seq + row % g.seq] = sum;
  }
}

// Per query row i: dQ = sum_j dS K over the keys j <= i, with D from attention_delta.
__global__ void backward_query_kernel(const float* qkv, const float* dout, const float* lse, const float* delta,
                                      AttentionGeometry g, float* dqkv) {
  __shared__ float keys[kStage][kMaxHead], values[kStage][kMaxHead];
  const Head h = head_of(qkv, g);
  const std::int64_t b = blockIdx.z, t = blockIdx.y;
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kRows) + threadIdx.x;
  const std::int64_t last = last_key(g);
  float q[kMaxHead], dO[kMaxHead], dq[kMaxHead];
  for (std::int64_t c = 0; c < h.d; ++c) {
    q[c] = i < g.seq ? h.q[i * h.stride + c] : 0.0f;
    dO[c] = i < g.seq ? dout[(b * g.seq + i) * h.width + t * h.d + c] : 0.0f;
    dq[c] = 0.0f;
  }
  const float l = i < g.seq ? lse[h.lse_row + i] : 0.0f;
  const float d_row = i < g.seq ? delta[h.lse_row + i] : 0.0f;
  const std::uint64_t row = h.mask_row + static_cast<std::uint64_t>(i);
  for (std::int64_t j0 = 0; j0 < last; j0 += kStage) {
    stage(h, g.seq, h.width, j0, keys);
    stage(h, g.seq, 2 * h.width, j0, values);
    __syncthreads();
    for (int r = 0; r < kStage && i < g.seq && j0 + r < last && sees(g, i, j0 + r); ++r) {
      const float p = math::exp_nonpositive(g.scale * dot(q, keys[r], h.d) - l);
      const float dp = dropped(dot(dO, values[r], h.d), g, row, j0 + r);
      const float ds = math::softmax_grad(p, dp, d_row, g.scale);
      for (std::int64_t c = 0; c < h.d; ++c) dq[c] += ds * keys[r][c];
    }
    __syncthreads();
  }
  if (i >= g.seq) return;
  for (std::int64_t c = 0; c < h.d; ++c) dqkv[(b * g.seq + i) * 3 * h.width + t * h.d + c] = dq[c];
}

// Per key row j: dK = sum_{i >= j} dS Q, dV = sum_{i >= j} (dropped P) dO.
__global__ void backward_key_kernel(const float* qkv, const float* dout, const float* lse, const float* delta,
                                    AttentionGeometry g, float* dqkv) {
  __shared__ float queries[kStage][kMaxHead], grads[kStage][kMaxHead];
  __shared__ float lses[kStage], deltas[kStage];
  const Head h = head_of(qkv, g);
  const std::int64_t b = blockIdx.z, t = blockIdx.y;
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kRows) + threadIdx.x;
  float k[kMaxHead], v[kMaxHead], dk[kMaxHead], dv[kMaxHead];
  for (std::int64_t c = 0; c < h.d; ++c) {
    k[c] = j < g.seq ? h.q[j * h.stride + h.width + c] : 0.0f;
    v[c] = j < g.seq ? h.q[j * h.stride + 2 * h.width + c] : 0.0f;
    dk[c] = dv[c] = 0.0f;
  }
  const Head dO{dout + b * g.seq * h.width + t * h.d, h.width, h.width, h.d, 0, 0};
  const std::int64_t keys = keys_before_padding(g);
  // The queries that see these keys: from the block's first key (causal), or all.
  const std::int64_t queries_from = g.causal ? blockIdx.x * static_cast<std::int64_t>(kRows) : 0;
  for (std::int64_t i0 = queries_from; i0 < g.seq; i0 += kStage) {
    stage(h, g.seq, 0, i0, queries);
    stage(dO, g.seq, 0, i0, grads);
    if (threadIdx.x < kStage) {
      const std::int64_t i = i0 + threadIdx.x;
      lses[threadIdx.x] = i < g.seq ? lse[h.lse_row + i] : 0.0f;
      deltas[threadIdx.x] = i < g.seq ? delta[h.lse_row + i] : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < kStage && j < keys; ++r) {  // a padding key: seen by no query, its gradients zero
      const std::int64_t i = i0 + r;
      if (!sees(g, i, j) || i >= g.seq) continue;
      const std::uint64_t row = h.mask_row + static_cast<std::uint64_t>(i);
      const float p = math::exp_nonpositive(g.scale * dot(queries[r], k, h.d) - lses[r]);
      const float dp = dropped(dot(grads[r], v, h.d), g, row, j);
      const float ds = math::softmax_grad(p, dp, deltas[r], g.scale);
      const float kept = dropped(p, g, row, j);
      for (std::int64_t c = 0; c < h.d; ++c) {
        dk[c] += ds * queries[r][c];
        dv[c] += kept * grads[r][c];
      }
    }
    __syncthreads();
  }
  if (j >= g.seq) return;
  float* row = dqkv + (b * g.seq + j) * 3 * h.width + t * h.d;
  for (std::int64_t c = 0; c < h.d; ++c) {
    row[h.width + c] = dk[c];
    row[2 * h.width + c] = dv[c];
  }
}

dim3 blocks_of(const AttentionGeometry& g) {
  return dim3(static_cast<unsigned>((g.seq + kRows - 1) / kRows), static_cast<unsigned>(g.heads),
              static_cast<unsigned>(g.batches));
}

}  // namespace


void flash_attention_forward(const float* qkv, const AttentionGeometry& g, float* out, float* lse,
                             cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  if (g.tensor_cores) return detail::mma_attention_forward(qkv, g, out, nullptr, lse, stream);
  forward_kernel<float><<<blocks_of(g), kRows, 0, stream>>>(qkv, g, out, lse);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void flash_attention_forward_bf16(const float* qkv, const AttentionGeometry& g, bf16* out, float* lse,
                                  cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  if (g.tensor_cores) {
    return detail::mma_attention_forward(qkv, g, nullptr, reinterpret_cast<std::uint16_t*>(out), lse, stream);
  }
  forward_kernel<std::uint16_t><<<blocks_of(g), kRows, 0, stream>>>(qkv, g, reinterpret_cast<std::uint16_t*>(out),
                                                                    lse);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void attention_delta(const float* out, const float* dout, const AttentionGeometry& g, float* delta,
                     cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  delta_kernel<<<detail::blocks_for(32 * g.batches * g.seq * g.heads), detail::kThreads, 0, stream>>>(out, dout, g,
                                                                                                      delta);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void attention_delta(const bf16* out, const float* dout, const AttentionGeometry& g, float* delta,
                     cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  delta_kernel<<<detail::blocks_for(32 * g.batches * g.seq * g.heads), detail::kThreads, 0, stream>>>(
      reinterpret_cast<const std::uint16_t*>(out), dout, g, delta);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void flash_attention_backward(const float* qkv, const float* dout, const float* lse, const float* delta,
                              const AttentionGeometry& g, float* dqkv, cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  if (g.tensor_cores) return detail::mma_attention_backward(qkv, dout, lse, delta, g, dqkv, stream);
  backward_query_kernel<<<blocks_of(g), kRows, 0, stream>>>(qkv, dout, lse, delta, g, dqkv);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
  backward_key_kernel<<<blocks_of(g), kRows, 0, stream>>>(qkv, dout, lse, delta, g, dqkv);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void flash_attention_forward_mixed(const bf16* qkv, const AttentionGeometry& g, bf16* out, float* lse,
                                   cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  detail::mma_attention_forward(reinterpret_cast<const std::uint16_t*>(qkv), g, nullptr,
                                reinterpret_cast<std::uint16_t*>(out), lse, stream);
}

void flash_attention_backward_mixed(const bf16* qkv, const float* dout, const float* lse, const float* delta,
                                    const AttentionGeometry& g, float* dqkv, cudaStream_t stream) {
  if (g.batches * g.seq == 0) return;
  detail::mma_attention_backward(reinterpret_cast<const std::uint16_t*>(qkv), dout, lse, delta, g, dqkv, stream);
}

}  // namespace optimus::cuda

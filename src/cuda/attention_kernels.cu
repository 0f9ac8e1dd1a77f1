// Causal softmax (forward and backward) and dropout with the CPU's Philox masks (see layer_kernels.hpp).
#include "block_reduce.cuh"
#include "optimus/core/element_math.hpp"
#include "optimus/cuda/check.hpp"
#include "optimus/cuda/layer_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::kThreads;

// One block per score row; row r of its tile keeps columns 0..r.
__global__ void causal_softmax_forward_kernel(const float* scores, float scale, std::int64_t seq, float* probs) {
  __shared__ float shared[kThreads];
  const std::int64_t row = blockIdx.x, r = row % seq;
  const float* in = scores + row * seq;
  float* out = probs + row * seq;
  float max = -INFINITY;
  for (std::int64_t c = threadIdx.x; c <= r; c += kThreads) max = fmaxf(max, scale * in[c]);
  max = detail::block_max(max, shared);
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < seq; c += kThreads) {
    const float e = c <= r ? math::softmax_exp(in[c], scale, max) : 0.0f;
    out[c] = e;
    sum += e;
  }
  sum = detail::block_sum(sum, shared);
  for (std::int64_t c = threadIdx.x; c <= r; c += kThreads) out[c] = math::normalized(out[c], sum);
}

__global__ void causal_softmax_backward_kernel(const float* probs, const float* dp, float scale, std::int64_t seq,
                                               float* ds) {
  __shared__ float shared[kThreads];
  const std::int64_t row = blockIdx.x;
  const float* p = probs + row * seq;
  const float* d = dp + row * seq;
  float dot = 0.0f;
  for (std::int64_t c = threadIdx.x; c < seq; c += kThreads) dot += d[c] * p[c];
  dot = detail::block_sum(dot, shared);
  for (std::int64_t c = threadIdx.x; c < seq; c += kThreads) ds[row * seq + c] = math::softmax_grad(p[c], d[c], dot, scale);
}

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

__global__ void attention_dropout_kernel(float* probs, std::int64_t batches, std::int64_t heads, std::int64_t seq,
                                         std::int64_t first_batch, std::int64_t total_heads, std::int64_t first_head,
                                         double p, float keep_scale, std::uint64_t seed, std::uint64_t stream_id) {
  const std::int64_t n = batches * heads * seq * seq;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t local_row = e / seq, c = e % seq;
    const std::int64_t b = local_row / (heads * seq), t = (local_row / seq) % heads, r = local_row % seq;
    const auto row = static_cast<std::uint64_t>(((first_batch + b) * total_heads + first_head + t) * seq + r);
    probs[e] = math::dropout(probs[e], math::dropout_keeps(p, seed, stream_id, row, static_cast<std::uint64_t>(c)),
                             keep_scale);
  }
}

}  // namespace

void causal_softmax_forward(const float* scores, float scale, std::int64_t tiles, std::int64_t seq, float* probs,
                            cudaStream_t stream) {
  if (tiles * seq == 0) return;
  causal_softmax_forward_kernel<<<static_cast<unsigned>(tiles * seq), kThreads, 0, stream>>>(scores, scale, seq, probs);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void causal_softmax_backward(const float* probs, const float* dp, float scale, std::int64_t tiles, std::int64_t seq,
                             float* ds, cudaStream_t stream) {
  if (tiles * seq == 0) return;
  const auto rows = static_cast<unsigned>(tiles * seq);
  causal_softmax_backward_kernel<<<rows, kThreads, 0, stream>>>(probs, dp, scale, seq, ds);
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

void attention_dropout_apply(float* probs, std::int64_t batches, std::int64_t heads, std::int64_t seq,
                             std::int64_t first_batch, std::int64_t total_heads, std::int64_t first_head, double p,
                             std::uint64_t seed, std::uint64_t stream_id, cudaStream_t stream) {
  if (p <= 0.0 || batches * heads * seq == 0) return;
  OPTIMUS_CHECK(p < 1.0, "dropout probability must be below 1, got ", p);
  attention_dropout_kernel<<<detail::blocks_for(batches * heads * seq * seq), kThreads, 0, stream>>>(
      probs, batches, heads, seq, first_batch, total_heads, first_head, p, static_cast<float>(1.0 / (1.0 - p)), seed,
      stream_id);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace optimus::cuda

// Vocabulary-parallel embedding lookup/scatter and cross-entropy on local blocks (declared in cuda_kernels.hpp).
// Scatter-adds loop over tokens in order for each element: deterministic, and the CPU's order.
#include <cmath>

#include "block_reduce.cuh"
#include "optimus/core/element_math.hpp"
#include "optimus/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace optimus::cuda {
namespace {

using detail::column_stride;
using detail::first_column;
using detail::kThreads;
using detail::rows_by_columns;
using detail::written;

__global__ void lookup_kernel(const float* wte, const int* tokens, std::int64_t n, std::int64_t v0, std::int64_t vn,
                              std::int64_t width, float* partial) {
  for (std::int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const std::int64_t id = tokens[t];
    const bool inside = id >= v0 && id < v0 + vn;
    for (std::int64_t c = first_column(); c < width; c += column_stride()) {
      partial[t * width + c] = inside ? wte[(id - v0) * width + c] : 0.0f;
    }
  }
}

__global__ void add_positions_kernel(const float* wpe, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                                     std::int64_t width, float* x) {
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* position = wpe + ((row_offset + r) % seq) * width;
    for (std::int64_t c = first_column(); c < width; c += column_stride()) x[r * width + c] += position[c];
  }
}

// dwte[id - v0, c] += grad[t, c] for the tokens t in order. A thread owns a column c and the vocabulary rows
// v = id - v0 with v % kScatterBuckets == blockIdx.y: it reads every token id but adds only its rows', each row's
// tokens in order (the CPU's order, so the same bits), and the GPU gets kScatterBuckets times the threads of one
// per column (which left most of it idle, each thread adding a whole batch of rows in turn).
constexpr int kScatterBuckets = 64;

__global__ void scatter_add_kernel(const float* grad, const int* tokens, std::int64_t n, std::int64_t v0,
                                   std::int64_t vn, std::int64_t width, float* dwte) {
  const std::int64_t c = first_column();
  if (c >= width) return;
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t v = tokens[t] - v0;
    if (v >= 0 && v < vn && v % kScatterBuckets == blockIdx.y) dwte[v * width + c] += grad[t * width + c];
  }
}

__global__ void position_grad_kernel(const float* dx, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                                     std::int64_t width, std::int64_t max_seq, float* partial) {
  const std::int64_t e = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (e >= max_seq * width) return;
  const std::int64_t pos = e / width, c = e % width;
  float acc = 0.0f;
  if (pos < seq) {  // the rows r with (row_offset + r) % seq == pos, in order (not a division for every row)
    for (std::int64_t r = ((pos - row_offset) % seq + seq) % seq; r < rows; r += seq) acc += dx[r * width + c];
  }
  partial[e] = acc;
}

// One block per row: each thread an online softmax over its columns (a running max m and the sum of exp(x - m),
// rescaled when m grows), then the block's pairs combined: the block's max, each thread's sum rescaled to it, summed.
// One read of the row.
__global__ void stats_kernel(const float* logits, const int* targets, std::int64_t row_offset, std::int64_t v0,
                             std::int64_t valid, std::int64_t rows, std::int64_t vn, float* stats) {
  __shared__ float shared[kThreads];
  const std::int64_t r = blockIdx.x;
  const float* row = logits + r * vn;
  float m = -INFINITY, s = 0.0f;
  for (std::int64_t c = threadIdx.x; c < valid; c += kThreads) {
    const float x = row[c];
    if (x > m) {
      s = s * math::exp_nonpositive(m - x) + 1.0f;
      m = x;
    } else {
      s += math::exp_nonpositive(x - m);
    }
  }
  const float row_max = detail::block_max(m, shared);
  const float sum = detail::block_sum(m == -INFINITY ? 0.0f : s * math::exp_nonpositive(m - row_max), shared);
  if (threadIdx.x == 0) {
    const std::int64_t target = targets[row_offset + r];
    stats[r] = stats[rows + r] = row_max;
    stats[2 * rows + r] = sum;
    stats[3 * rows + r] = target >= v0 && target < v0 + valid ? row[target - v0] : 0.0f;
  }
}

__global__ void rescale_kernel(float* stats, std::int64_t rows) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (r < rows) stats[2 * rows + r] *= math::exp_nonpositive(stats[r] - stats[rows + r]);
}

// Out: float (in place: dlogits == logits) or std::uint16_t (bf16 bits).
template <class Out>
__global__ void gradient_kernel(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                                std::int64_t v0, std::int64_t valid, std::int64_t rows, std::int64_t vn,
                                float tokens, Out* dlogits) {
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const bool ignored = targets[row_offset + r] == math::kIgnoredTarget;  // not predicted: no gradient
    const std::int64_t target = targets[row_offset + r] - v0;
    const float max = stats[rows + r], sum = stats[2 * rows + r];
    for (std::int64_t c = first_column(); c < vn; c += column_stride()) {
      const float x = logits[r * vn + c];
      const float g = c < valid && !ignored ? math::cross_entropy_grad(math::normalized(math::softmax_exp(x, 1.0f, max), sum),
                                                           c == target, tokens)
                                : 0.0f;
      dlogits[r * vn + c] = written(g, dlogits);
    }
  }
}

template <class Out>
void launch_gradient(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                     std::int64_t v0, std::int64_t vocab, std::int64_t rows, std::int64_t vn, std::int64_t n_tokens,
                     Out* dlogits, cudaStream_t stream) {
  if (rows * vn == 0) return;
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - v0, 0, vn);
  gradient_kernel<Out><<<rows_by_columns(rows, vn), kThreads, 0, stream>>>(
      logits, stats, targets, row_offset, v0, valid, rows, vn, static_cast<float>(n_tokens), dlogits);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

unsigned blocks_of(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void embedding_lookup(const float* wte, const int* tokens, std::int64_t n, std::int64_t v0, std::int64_t vn,
                      std::int64_t width, float* partial, cudaStream_t stream) {
  if (n * width == 0) return;
  lookup_kernel<<<rows_by_columns(n, width), kThreads, 0, stream>>>(wte, tokens, n, v0, vn, width, partial);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void add_positions(const float* wpe, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                   std::int64_t width, float* x, cudaStream_t stream) {
  if (rows * width == 0) return;
  add_positions_kernel<<<rows_by_columns(rows, width), kThreads, 0, stream>>>(wpe, row_offset, seq, rows, width, x);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void embedding_scatter_add(const float* grad, const int* tokens, std::int64_t n, std::int64_t v0, std::int64_t vn,
                           std::int64_t width, float* dwte, cudaStream_t stream) {
  if (n * width == 0) return;
  scatter_add_kernel<<<dim3(blocks_of(width), kScatterBuckets), kThreads, 0, stream>>>(grad, tokens, n, v0, vn, width,
                                                                                      dwte);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void position_grad(const float* dx, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                   std::int64_t width, std::int64_t max_seq, float* partial, cudaStream_t stream) {
  if (max_seq * width == 0) return;
  position_grad_kernel<<<blocks_of(max_seq * width), kThreads, 0, stream>>>(dx, row_offset, seq, rows, width, max_seq,
                                                                             partial);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void cross_entropy_stats(const float* logits, const int* targets, std::int64_t row_offset, std::int64_t v0,
                         std::int64_t vocab, std::int64_t rows, std::int64_t vn, float* stats, cudaStream_t stream) {
  if (rows == 0) return;
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - v0, 0, vn);
  stats_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets, row_offset, v0, valid, rows, vn,
                                                                      stats);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void cross_entropy_rescale(float* stats, std::int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  rescale_kernel<<<blocks_of(rows), kThreads, 0, stream>>>(stats, rows);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

void cross_entropy_gradient(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                            std::int64_t v0, std::int64_t vocab, std::int64_t rows, std::int64_t vn,
                            std::int64_t n_tokens, float* dlogits, cudaStream_t stream) {
  launch_gradient(logits, stats, targets, row_offset, v0, vocab, rows, vn, n_tokens, dlogits, stream);
}

void cross_entropy_gradient(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                            std::int64_t v0, std::int64_t vocab, std::int64_t rows, std::int64_t vn,
                            std::int64_t n_tokens, bf16* dlogits, cudaStream_t stream) {
  launch_gradient(logits, stats, targets, row_offset, v0, vocab, rows, vn, n_tokens,
                  reinterpret_cast<std::uint16_t*>(dlogits), stream);
}

}  // namespace optimus::cuda

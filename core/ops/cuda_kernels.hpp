// Internal to core: the CUDA kernels of the operations (core/ops/*.cu), stream-ordered, on one rank's local
// blocks (device pointers, row-major). The operations (the .cpp files here) launch them through dispatch.hpp's
// run (OPTIMUS_CUDA_LAUNCH); their arithmetic is optimus/core/element_math.hpp's, shared with the CPU bodies, and they
// split the work exactly as the CPU layers do, so a layer runs: local partial sums here, the same row/column
// collectives (on device buffers), then the finishing kernel here. fp32 math throughout; bf16 enters through the casts
// and cuBLASLt (bf16 GEMM operands, fp32 master weights in AdamW).
//
// Shapes: x, y, dy, dx, xhat: [rows, cols]; gamma, beta: [cols]; per-row vectors: [rows].
//
// C++17-clean, and without the CUDA headers: the .cu files that define these compile as C++17, and the operations'
// sources include this in every build (a build without CUDA checks the launches' calls and never makes them).
#pragma once

#include <cstdint>

#include "optimus/core/adamw_step.hpp"
#include "optimus/core/element_math.hpp"

struct CUstream_st;
typedef CUstream_st* cudaStream_t;  // as <cuda_runtime.h> declares it

namespace optimus {
struct bf16;  // optimus/core/dtype.hpp (C++20)
}  // namespace optimus

namespace optimus::cuda {

// ---- element-wise (the GPU twins of optimus/core/kernels.hpp) --------------------------------------------
// y[e] = value for e < n.
void fill(float* y, float value, std::int64_t n, cudaStream_t stream);
// y = alpha x + beta y, n elements.
void axpby(float alpha, const float* x, float beta, float* y, std::int64_t n, cudaStream_t stream);
// GELU (tanh form) and its derivative: y = gelu(x); dx = dy * gelu'(x) (dx may alias dy).
void gelu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);
// The same on x in bf16 (its values widened as they are read).
void gelu_backward_bf16(const bf16* x, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);
// y = bf16(gelu(x)), x_kept = bf16(x) (ops::gelu_forward into bf16).
void gelu_forward_bf16(const float* x, bf16* y, bf16* x_kept, std::int64_t n, cudaStream_t stream);

// acc[e] = math::combine(acc[e], x[e], op), n elements: the in-process reductions on the device, the host's bits.
void combine_into(float* acc, const float* x, std::int64_t n, math::Combine op, cudaStream_t stream);
void combine_into(double* acc, const double* x, std::int64_t n, math::Combine op, cudaStream_t stream);

// ---- rows and columns --------------------------------------------------------------------------------
// out[r] = sum_c x[r, c]   (one block per row, deterministic)
void row_sums(const float* x, std::int64_t rows, std::int64_t cols, float* out, cudaStream_t stream);
// out[c] = sum_r x[r, c]   (lanes of rows per column tile, added in a fixed tree: deterministic); where x_bf16 is not
// null, also x_bf16 = bf16(x), each element cast as it is read
void column_sums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bf16* x_bf16,
                 cudaStream_t stream);
// y[r, c] += bias[c]
void add_row_broadcast(const float* bias, float* y, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// ---- LayerNorm over `hidden` features, `cols` of them local (the row's other columns on other ranks) ------
// out[r] = sum_c (x[r, c] - mean[r])^2 with mean[r] = row_sum[r] / hidden (row_sum reduced over the row).
void layernorm_square_deviations(const float* x, const float* row_sum, std::int64_t hidden, std::int64_t rows,
                                 std::int64_t cols, float* out, cudaStream_t stream);
// rstd[r] = 1 / sqrt(sq_dev[r] / hidden + eps); xhat = (x - mean) rstd; y = xhat gamma + beta.
void layernorm_normalize(const float* x, const float* row_sum, const float* sq_dev, const float* gamma,
                         const float* beta, std::int64_t hidden, float eps, std::int64_t rows, std::int64_t cols, float* xhat,
                         float* rstd, float* y, cudaStream_t stream);
// The same writing xhat and y in bf16 (rounded to nearest even, as the casts).
void layernorm_normalize_bf16(const float* x, const float* row_sum, const float* sq_dev, const float* gamma,
                              const float* beta, std::int64_t hidden, float eps, std::int64_t rows, std::int64_t cols, bf16* xhat,
                              float* rstd, bf16* y, cudaStream_t stream);
// Local partials of the backward: dgamma[c] = sum_r dy xhat, dbeta[c] = sum_r dy (columns, rows in order), and
// sums[2r] = sum_c dy gamma, sums[2r+1] = sum_c dy gamma xhat (to be reduced over the row).
void layernorm_backward_partials(const float* dy, const float* xhat, const float* gamma, std::int64_t rows,
                                 std::int64_t cols, float* dgamma, float* dbeta, float* sums, cudaStream_t stream);
// dx = rstd (dy gamma - sums[2r]/hidden - xhat sums[2r+1]/hidden), with the reduced sums (not centered, RMSNorm:
// without the sums[2r] term); + residual where it is not null (the block's residual gradient, fused).
void layernorm_backward_dx(const float* dy, const float* xhat, const float* gamma, const float* rstd,
                           const float* sums, std::int64_t hidden, bool centered, const float* residual,
                           std::int64_t rows,
                           std::int64_t cols, float* dx, cudaStream_t stream);
// The same two on xhat as kept in bf16 (its values widened as they are read).
void layernorm_backward_partials(const float* dy, const bf16* xhat, const float* gamma, std::int64_t rows,
                                 std::int64_t cols, float* dgamma, float* dbeta, float* sums, cudaStream_t stream);
void layernorm_backward_dx(const float* dy, const bf16* xhat, const float* gamma, const float* rstd,
                           const float* sums, std::int64_t hidden, bool centered, const float* residual,
                           std::int64_t rows,
                           std::int64_t cols, float* dx, cudaStream_t stream);

// ---- dropout (partition-independent: optimus/layers/dropout.hpp) -----------------------------------------
// x[r, c] *= keep ? 1/(1-p) : 0 where keep = CounterRng(seed, stream).uniform(row0 + r, col0 + c) >= p; x has
// row stride ld. Bitwise the CPU's mask (one Philox implementation, optimus/core/philox.hpp).
void dropout_apply(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t row0,
                   std::uint64_t col0, double p, std::uint64_t seed, std::uint64_t stream_id, cudaStream_t stream);
// ops::DropoutMask for the kernels (p = 0: every element kept, as is).
struct DropoutMask {
  std::uint64_t row0 = 0, col0 = 0;
  double p = 0.0;
  float keep_scale = 1.0f;  // 1 / (1 - p)
  std::uint64_t seed = 0, stream = 0;
};
// RoPE on the query and key columns of qkv [rows, cols], in place (ops::rotary: rows whole sequences of seq; heads
// query and kv_heads key/value heads of cols / (heads + 2 kv_heads) columns; angles, cos and sin in f64).
void rotary(float* qkv, std::int64_t rows, std::int64_t cols, std::int64_t seq, std::int64_t heads,
            std::int64_t kv_heads, double theta, bool inverse, cudaStream_t stream);

// SwiGLU (ops::swiglu_*): gu [rows, 2 f] = [gate | up], y [rows, f]; the bf16 forms write y and gu_kept in bf16, or
// read gu in bf16.
void swiglu_forward(const float* gu, float* y, std::int64_t rows, std::int64_t f, cudaStream_t stream);
void swiglu_forward_bf16(const float* gu, bf16* y, bf16* gu_kept, std::int64_t rows, std::int64_t f,
                         cudaStream_t stream);
void swiglu_backward(const float* gu, const float* dy, float* dgu, std::int64_t rows, std::int64_t f,
                     cudaStream_t stream);
void swiglu_backward_bf16(const bf16* gu, const float* dy, float* dgu, std::int64_t rows, std::int64_t f,
                          cudaStream_t stream);
// Grouped-query attention's key/value heads (ops::repeat_kv, ops::sum_kv): qkv [rows, (heads + 2 kv_heads) d], full
// [rows, 3 heads d].
void repeat_kv(const float* qkv, float* full, std::int64_t rows, std::int64_t d, std::int64_t heads,
               std::int64_t kv_heads, cudaStream_t stream);
void repeat_kv_bf16(const bf16* qkv, bf16* full, std::int64_t rows, std::int64_t d, std::int64_t heads,
                    std::int64_t kv_heads, cudaStream_t stream);
void sum_kv(const float* dfull, float* dqkv, std::int64_t rows, std::int64_t d, std::int64_t heads,
            std::int64_t kv_heads, cudaStream_t stream);

// The block's residual paths (ops::dropout_residual, ops::dropout_copy; contiguous [rows, cols]):
// x = residual + dropout(x), and row_sums[r] = the row's sum where row_sums is not null (one block per row);
// y = dropout(x).
void dropout_residual(const float* residual, float* x, std::int64_t rows, std::int64_t cols, const DropoutMask& mask,
                      float* row_sums, cudaStream_t stream);
void dropout_copy(const float* x, float* y, std::int64_t rows, std::int64_t cols, const DropoutMask& mask,
                  cudaStream_t stream);


// ---- embedding ----------------------------------------------------------------------------------------
// partial[t, :] = wte[tokens[t] - v0, :] if tokens[t] is in [v0, v0 + vn), else 0. wte: [vn, width].
void embedding_lookup(const float* wte, const int* tokens, std::int64_t n, std::int64_t v0, std::int64_t vn,
                      std::int64_t width, float* partial, cudaStream_t stream);
// x[r, :] += wpe[(row_offset + r) % seq, :]
void add_positions(const float* wpe, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                   std::int64_t width, float* x, cudaStream_t stream);
// dwte[tokens[t] - v0, :] += grad[t, :] for tokens in the slice, tokens in order (deterministic, the CPU's order).
void embedding_scatter_add(const float* grad, const int* tokens, std::int64_t n, std::int64_t v0, std::int64_t vn,
                           std::int64_t width, float* dwte, cudaStream_t stream);
// partial[pos, :] = sum over local rows r with (row_offset + r) % seq == pos of dx[r, :]; partial: [max_seq, width].
void position_grad(const float* dx, std::int64_t row_offset, std::int64_t seq, std::int64_t rows,
                   std::int64_t width, std::int64_t max_seq, float* partial, cudaStream_t stream);

// ---- fused causal attention (optimus/core/ops.hpp's flash_attention_*; flash_attention.cu) ---------------------------
struct AttentionGeometry {
  std::int64_t batches = 0, seq = 0, heads = 0, d = 0;  // qkv [batches * seq, 3 * heads * d]
  float scale = 0.0f;                                     // 1 / sqrt(d)
  double dropout = 0.0;
  float keep_scale = 1.0f;  // 1 / (1 - dropout)
  std::uint64_t seed = 0, stream = 0;
  std::int64_t first_batch = 0, first_head = 0, total_heads = 0;
  // Mixed precision (GemmMath::bf16): the products on tensor cores, their operands (Q, K, V, dO, the probabilities
  // and dS) rounded to bf16, f32 accumulation; else f32 products on CUDA cores.
  bool tensor_cores = false;
  bool causal = true;  // query i sees keys 0..i; false: every key of its sequence
  const int* lengths = nullptr;  // [batches] on the device: sequence b's keys from lengths[b] on are padding; or none
};
// The largest head dimension the kernels take.
constexpr int flash_attention_max_head() { return 128; }
void flash_attention_forward(const float* qkv, const AttentionGeometry& g, float* out, float* lse,
                             cudaStream_t stream);
// The same writing out in bf16 (mixed precision: out is c_proj's operand).
void flash_attention_forward_bf16(const float* qkv, const AttentionGeometry& g, bf16* out, float* lse,
                                  cudaStream_t stream);
// D per query row and head (delta [batches * heads * seq]) = dout . out over the head's columns; out in f32 or bf16.
void attention_delta(const float* out, const float* dout, const AttentionGeometry& g, float* delta,
                     cudaStream_t stream);
void attention_delta(const bf16* out, const float* dout, const AttentionGeometry& g, float* delta,
                     cudaStream_t stream);
void flash_attention_backward(const float* qkv, const float* dout, const float* lse, const float* delta,
                              const AttentionGeometry& g, float* dqkv, cudaStream_t stream);
// Mixed precision's on qkv kept in bf16: the tensor-core kernels whatever g.tensor_cores says.
void flash_attention_forward_mixed(const bf16* qkv, const AttentionGeometry& g, bf16* out, float* lse,
                                   cudaStream_t stream);
void flash_attention_backward_mixed(const bf16* qkv, const float* dout, const float* lse, const float* delta,
                                    const AttentionGeometry& g, float* dqkv, cudaStream_t stream);

// ---- vocabulary-parallel cross-entropy (logits [rows, vn] of a vocabulary slice starting at v0; ids from `vocab`
// on are padding; stats [4, rows] as optimus/core/ops.hpp describes) ---------------------------------------------
// One read of the logits: stats = (m, m, sum of exp(logit - m), target logit or 0) per row, a block per row.
void cross_entropy_stats(const float* logits, const int* targets, std::int64_t row_offset, std::int64_t v0,
                         std::int64_t vocab, std::int64_t rows, std::int64_t vn, float* stats, cudaStream_t stream);
// stats[2, r] *= exp(stats[0, r] - stats[1, r]).
void cross_entropy_rescale(float* stats, std::int64_t rows, cudaStream_t stream);
// dlogits = (exp(logit - M) / S - onehot(target)) / n_tokens, 0 for padding ids: in place of the logits (dlogits ==
// logits), or into bf16 (mixed precision).
void cross_entropy_gradient(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                            std::int64_t v0, std::int64_t vocab, std::int64_t rows, std::int64_t vn,
                            std::int64_t n_tokens, float* dlogits, cudaStream_t stream);
void cross_entropy_gradient(const float* logits, const float* stats, const int* targets, std::int64_t row_offset,
                            std::int64_t v0, std::int64_t vocab, std::int64_t rows, std::int64_t vn,
                            std::int64_t n_tokens, bf16* dlogits, cudaStream_t stream);

// ---- mixed precision and the optimizer -------------------------------------------------------------------
void to_bf16(const float* x, bf16* y, std::int64_t n, cudaStream_t stream);
// y[r, c] = bf16(x[r * ldx + c]): rows of a strided f32 matrix into a contiguous [rows, cols] bf16 one.
void to_bf16_rows(const float* x, std::int64_t ldx, bf16* y, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream);
void to_f32(const bf16* x, float* y, std::int64_t n, cudaStream_t stream);
// out[0] = sum of grad^2 in double (deterministic: fixed per-block partials, then one block). `partials`:
// device scratch of sum_squares_partials() doubles.
constexpr std::int64_t sum_squares_partials() { return 256; }  // ops::sum_squares_scratch() is this + 1
void sum_squares(const float* grad, std::int64_t n, double* partials, double* out, cudaStream_t stream);

// The AdamW element update (optimus/core/adamw_step.hpp) on fp32 master weights, moments m, v; when
// `weight_bf16` is not null the updated weights are also written there in bf16 for the next step's compute.
void adamw_update(float* master, const float* grad, float* m, float* v, std::int64_t n, const AdamWStep& s,
                  bf16* weight_bf16, cudaStream_t stream);

}  // namespace optimus::cuda

// Local operations of the layers on one rank's blocks, dispatched by where the tensors live: the CPU (f32 and f64), or
// an accelerator — the simulated device or a GPU (f32; each operation described once in core/ops/; their GEMMs:
// optimus/core/gemm_engine.hpp) — whose work is queued on the queue's stream and completes asynchronously. All
// operands of one call must be on the same device; otherwise the call throws optimus::Error naming the operation and
// the operands' devices. Shapes are checked, and on an accelerator the layouts its kernels take (stated below).
//
// They split the work as the 2D layers need it: a rank computes partial row statistics here, the layer reduces
// them along its grid row, and the finishing operation here uses the reduced values.
//   x, y, dy, dx, xhat: [rows, cols] (rows contiguous); gamma, beta: [1, cols]; per-row vectors: [rows];
//   LayerNorm's `sums`: [2 * rows]; `hidden`: the full row width (cols * q).
#pragma once

#include <cstdint>

#include "optimus/core/reduce_op.hpp"
#include "optimus/core/adamw_step.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/core/trans.hpp"

namespace optimus {
class DeviceStream;  // optimus/core/device_runtime.hpp
class GemmEngine;    // optimus/core/gemm_engine.hpp
class Timeline;      // optimus/core/timeline.hpp
}  // namespace optimus

namespace optimus::ops {

// How f32 GEMMs compute: full f32; TF32 tensor cores (f32 operands rounded to TF32 on the GPU, f32 accumulation;
// full f32 on the CPU); or mixed precision: operands rounded to bf16 (round to nearest even), products accumulated
// and written in f32. bf16 gives the same numbers on both devices up to summation order. f64 GEMMs ignore it.
enum class GemmMath { f32, tf32, bf16 };

// Where the work of an operation runs: on an accelerator, its stream (required: there is no default stream to fall
// back on — the legacy default stream would not be ordered with the streams Optimus uses) and its GEMM engine (needed
// by gemm); how f32 GEMMs compute, on every device; and where gemm puts the bf16 copies of its operands (math =
// bf16; on an accelerator, `scratch.device` must be its memory). Queue{} is the host with f32 GEMMs.
struct Queue {
  DeviceStream* stream = nullptr;
  GemmEngine* gemm = nullptr;
  GemmMath math = GemmMath::f32;
  MemoryTag scratch = {};
  Timeline* timeline = nullptr;  // records each operation run on the CPU, by kind (timeline.hpp), if set
};

// C = alpha op(A) op(B) + beta C; op(A): [m, k], op(B): [k, n], C: [m, n] (optimus/core/kernels.hpp's gemm).
// CPU: cpu::gemm (f32, f64; any row strides); accelerator: its GemmEngine through queue.gemm (f32; rows contiguous).
// f32 products follow queue.math; with bf16 the operands are first copied to bf16 (scratch) and multiplied by the
// overload below. k = 0 gives C = beta C (then the epilogue); an empty C does nothing.
template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          const Queue& queue);
// The mixed-precision product: bf16 operands, f32 accumulation and output (any row strides on the CPU, where the
// operands are widened to f32 exactly; contiguous rows on an accelerator, bf16 -> f32 GEMMs).
void gemm(Trans trans_a, Trans trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, const Queue& queue);
// What a GEMM does to its result before storing it: fused into the GEMM where cuBLASLt offers it, applied right after
// it otherwise (on the CPU always; the same values up to rounding):
//   none      : C = alpha op(A) op(B) + beta C
//   bias      : C = alpha op(A) op(B) + beta C + bias                    bias: [1, n], added to every row
//   bias_gelu : pre = alpha op(A) op(B) + beta C + bias; C = gelu(pre)   pre: [m, n] (GELU's input, for its derivative)
template <class T>
struct Epilogue {
  enum class Kind { none, bias, bias_gelu };
  Kind kind = Kind::none;
  TensorView<const T> bias;  // [1, n] unless none
  TensorView<T> pre;         // [m, n] for bias_gelu
  // The epilogue of rows [r0, r0 + rows) of C.
  Epilogue rows(std::int64_t r0, std::int64_t count) const {
    return {.kind = kind, .bias = bias, .pre = kind == Kind::bias_gelu ? pre.block(r0, 0, count, pre.size(1)) : pre};
  }
  // Throws optimus::Error, naming `op`, unless the epilogue fits a C of shape `c` [m, n]: bias [1, n], pre [m, n].
  void check_fits(const char* op, const Shape& c) const {
    if (kind == Kind::none) return;
    OPTIMUS_CHECK(bias.rank() == 2 && bias.size(0) == 1 && bias.size(1) == c[1], op, ": the epilogue's bias has shape ",
                  bias.shape(), ", expected 1x", c[1]);
    OPTIMUS_CHECK(kind != Kind::bias_gelu || pre.shape() == c, op, ": GELU's input (pre) has shape ", pre.shape(),
                  ", C is ", c);
  }
};
template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          const Epilogue<T>& epilogue, const Queue& queue);
void gemm(Trans trans_a, Trans trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, const Epilogue<float>& epilogue, const Queue& queue);
// A batch of equal-shaped matrices inside one view: side by side (matrix i is columns [i*w, (i+1)*w) of a
// [rows, batch*w] view: attention's heads in a block of Q, K or V) or stacked (matrix i is rows [i*r, (i+1)*r) of a
// [batch*r, cols] view: attention's per-head score tiles).
enum class Batched { side_by_side, stacked };
template <class T>
struct BatchView {
  TensorView<T> all;
  Batched layout;
  // Matrix i of `batch`.
  TensorView<T> matrix(std::int64_t i, std::int64_t batch) const {
    return layout == Batched::side_by_side ? all.block(0, i * (all.size(1) / batch), all.size(0), all.size(1) / batch)
                                           : all.block(i * (all.size(0) / batch), 0, all.size(0) / batch, all.size(1));
  }
};
// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch: one strided-batched GEMM on an accelerator (rows
// contiguous), gemm on each matrix on the CPU — the same numbers as `batch` gemm calls, math included. The batch
// must divide the batched dimension of each view; shapes are checked.
template <class T>
void gemm_batched(Trans trans_a, Trans trans_b, T alpha, BatchView<const T> a, BatchView<const T> b, T beta,
                  BatchView<T> c, std::int64_t batch, const Queue& queue);
// y = bf16(x), rounding to nearest even (x, y: the same shape; any row strides on the CPU; on an accelerator x's rows
// contiguous and y contiguous).
void to_bf16(TensorView<const float> x, TensorView<bf16> y, const Queue& queue);
// y = float(x), exact (x, y: the same shape; any row strides on the CPU, contiguous on an accelerator).
void to_f32(TensorView<const bf16> x, TensorView<float> y, const Queue& queue);

// ---- element-wise (CPU: optimus/core/kernels.hpp, any row stride; accelerator: contiguous) ---------------------
// y = value; y = alpha x + beta y; y[r, :] += row; out[0, :] = sum over rows of x; GELU (tanh form) and its
// derivative dx = dy gelu'(x) (dx may alias dy). x, y, dy, dx: [m, n]; row, out: [1, n].
template <class T>
void fill(TensorView<T> y, T value, const Queue& queue);
template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y, const Queue& queue);
template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y, const Queue& queue);
template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue);
// The same on f32 writing x_bf16 = bf16(x) in the same pass (mixed precision: a linear layer's output gradient, whose
// column sums are its bias gradient and whose bf16 copy its products take): the bits of column_sums and to_bf16,
// without a cast kernel. x, x_bf16: contiguous, one shape.
void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16, const Queue& queue);
template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y, const Queue& queue);
template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, const Queue& queue);
// The same on GELU's input as kept in bf16 (mixed precision): the f32 form's bits on x's values, read as they are.
void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx, const Queue& queue);
// GELU's exact form (BERT's; PyTorch's approximate='none'): y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, and its
// backward dx = dy (Phi(x) + x phi(x)), phi the standard normal density; operands contiguous, one shape (ops/gelu_erf.cpp).
template <class T>
void gelu_erf_forward(TensorView<const T> x, TensorView<T> y, const Queue& queue);
template <class T>
void gelu_erf_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, const Queue& queue);
// GELU under mixed precision, writing what the MLP keeps, both in bf16: y = bf16(gelu(x)) for the next product and
// x_kept = bf16(x) for GELU's backward — the bits of gelu_forward followed by to_bf16 of each, without their f32 copies.
// x, y, x_kept: contiguous, one shape.
void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept, const Queue& queue);

// SwiGLU (Shazeer 2020; Llama's MLP): gu [m, 2f] holds [gate | up] (a rank's matching columns side by side), y [m, f]
// = silu(gate) * up; its backward dgu [m, 2f] = [dy * up * silu'(gate) | dy * silu(gate)] (element_math.hpp).
// Contiguous.
template <class T>
void swiglu_forward(TensorView<const T> gu, TensorView<T> y, const Queue& queue);
template <class T>
void swiglu_backward(TensorView<const T> gu, TensorView<const T> dy, TensorView<T> dgu, const Queue& queue);
// Under mixed precision, writing what the MLP keeps, both in bf16: y = bf16(silu(gate) * up) for c_proj and gu_kept =
// bf16(gu) for the backward — the bits of swiglu_forward followed by to_bf16 of each.
void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept, const Queue& queue);
// The backward on gu as kept in bf16: the f32 form's bits on its values.
void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu, const Queue& queue);

// Dropout of a block whose element (r, c) is element (row0 + r, col0 + c) of the global activation:
// x = math::dropout_keeps(p, seed, stream, row0 + r, col0 + c) ? x / (1 - p) : 0 (element_math.hpp); a
// dropped element is 0 even if it was inf or NaN. Rows contiguous; p in [0, 1).
template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream, const Queue& queue);

// The same mask as one value, for the fused residual kernels below.
struct DropoutMask {
  std::uint64_t row0 = 0, col0 = 0;  // where the block is in the global activation
  double p = 0.0;                    // in [0, 1); 0 keeps every element
  std::uint64_t seed = 0, stream = 0;
};

// ---- the block's residual paths, fused (layers/block_logic.hpp) -------------------------------------------
// x = residual + dropout(x), x being a sublayer's output with its bias already added by the GEMM's epilogue; and
// where row_sums is not empty ([rows]), row_sums[r] = sum_c x[r, c] as row_sums computes it: the first statistic of
// the LayerNorm that follows, taken while the row is written. The values (and on the CPU the bits) of dropout, then
// axpby(1, residual, 1, x), then row_sums. residual, x: [rows, cols], rows contiguous.
template <class T>
void dropout_residual(TensorView<const T> residual, TensorView<T> x, const DropoutMask& mask, TensorView<T> row_sums,
                      const Queue& queue);
// y = dropout(x), out of place: the gradient that continues along the residual path stays whole while its dropped
// copy enters the sublayer's backward. x, y: [rows, cols], rows contiguous.
template <class T>
void dropout_copy(TensorView<const T> x, TensorView<T> y, const DropoutMask& mask, const Queue& queue);

// ---- rotary position embedding (RoPE, Su et al. 2021) as Hugging Face's Llama applies it ------------------------
// In each head of d columns, column i < d/2 pairs with column i + d/2 ("rotate half") and the pair turns by the angle
// pos * theta^(-2i/d), pos = r % seq for row r (rows are whole sequences):
//   forward: (a, b) -> (a cos - b sin, b cos + a sin);  inverse (the backward): (a, b) -> (a cos + b sin, b cos - a sin).
// Applied in place to the query and key columns of qkv [rows, (heads + 2 kv_heads) * d] (columns [Q | K | V]: heads
// query heads, kv_heads key and value heads, d even); V is untouched. The angle, cos and sin are taken in f64 on every
// device, then rounded to T.
struct Rotary {
  std::int64_t seq = 0, heads = 0, kv_heads = 0;
  double theta = 10000;
  bool inverse = false;
};
template <class T>
void rotary(TensorView<T> qkv, const Rotary& rotary, const Queue& queue);

// ---- grouped-query attention (GQA): each key/value head serves heads / kv_heads query heads ------------------
// full [rows, 3 heads d] = qkv [rows, (heads + 2 kv_heads) d] (columns [Q | K | V]) with K and V widened to a head per
// query head: query head t reads key/value head t / (heads / kv_heads) (Hugging Face's repeat_kv). Contiguous; qkv in
// f32, f64 or bf16 (as saved under mixed precision).
struct KvHeads {
  std::int64_t heads = 0, kv_heads = 0;  // this block's query heads and key/value heads (kv_heads divides heads)
};
template <class T>
void repeat_kv(TensorView<const T> qkv, TensorView<T> full, const KvHeads& kv, const Queue& queue);
void repeat_kv(TensorView<const bf16> qkv, TensorView<bf16> full, const KvHeads& kv, const Queue& queue);
// Its backward: dqkv [rows, (heads + 2 kv_heads) d] from dfull [rows, 3 heads d]: dQ copied, each key and value head's
// gradient the sum of its query heads' in increasing order. Contiguous.
template <class T>
void sum_kv(TensorView<const T> dfull, TensorView<T> dqkv, const KvHeads& kv, const Queue& queue);

// acc = acc (+, max or min) x element-wise, f32 or f64 (the in-process reductions on a device; max and min as
// std::max and std::min, so that every device gives the host's bits). acc, x: contiguous, the same shape.
template <class T>
void reduce_into(TensorView<T> acc, TensorView<const T> x, ReduceOp op, const Queue& queue);

// ---- fused attention (FlashAttention-2's algorithm), causal or bidirectional, on a rank's block of sequences -----
// No [seq, seq] matrix is ever whole in memory: queries and keys are taken in tiles, the softmax online (a running max
// and sum per query, the output rescaled as the max grows), and the backward recomputes each tile's probabilities
// from the saved log-sum-exp of its query rows. Memory: the output and `lse`, O(batches * heads * seq).
//   qkv : [batches * seq, 3 * width], columns [Q | K | V], each width = heads * d wide, head t's d columns at t * d;
//   out : [batches * seq, width], head-major columns (the heads' outputs side by side);
//   lse : [batches * heads * seq], row (b * heads + t) * seq + i: log of sum over the keys j query i sees (j <= i when
//         causal, else every j < seq; j < L_b where sequences are padded) of exp(scale q_i . k_j), scale = 1 / sqrt(d).
// Dropout on the probabilities: query i of head t of sequence b draws from the global mask's row
// ((first_batch + b) * total_heads + first_head + t) * seq + i, column j (math::dropout_keeps), as ops::dropout on
// the whole [seq, seq] tile would.
struct AttentionShape {
  std::int64_t seq = 0, heads = 0;  // this block's sequence length and heads (d = width / heads)
  double dropout = 0.0;
  std::uint64_t seed = 0, stream = 0;
  std::int64_t first_batch = 0, first_head = 0, total_heads = 0;  // where the block's tiles are in the global mask
  // Query i sees keys 0..i of its sequence (a decoder's); false: every key of its sequence (an encoder's).
  bool causal = true;
  // [batches] on the operands' device, or absent (TensorView{}): sequence b's length L_b in [1, seq] before its
  // padding — every query of it sees only keys j < L_b (with the causal mask, j <= min(i, L_b - 1)); the padded
  // queries' outputs are those of queries that see its L_b keys. Absent: L_b = seq, the same bits as before.
  TensorView<const int> lengths;
};

template <class T>
void flash_attention_forward(TensorView<const T> qkv, const AttentionShape& shape, TensorView<T> out,
                             TensorView<T> lse, const Queue& queue);
// The same writing out in bf16 (f32 only; mixed precision: out is the next GEMM's operand): the bits of the f32 forward
// followed by to_bf16, without its f32 copy.
void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse, const Queue& queue);
// Mixed precision's attention on qkv as kept in bf16 (no f32 copy of it): the products' operands are bf16 whatever
// queue.math says — on a GPU the tensor-core kernels; on the CPU the f32 form with GemmMath::bf16 on qkv widened
// (the same bits as that form, whose rounding of qkv does nothing to bf16 values).
void flash_attention_forward(TensorView<const bf16> qkv, const AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse, const Queue& queue);
// The softmax backward's row term from the forward's output (FlashAttention-2's D): delta [batches * heads * seq]
// (lse's layout) = per query row and head, the sum over the head's columns of dout * out, which equals the sum over
// keys of P dP (dropout included: out = dropped(P) V). out as the forward wrote it (bf16 under mixed precision).
template <class T>
void attention_delta(TensorView<const T> out, TensorView<const T> dout, const AttentionShape& shape,
                     TensorView<T> delta, const Queue& queue);
void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const AttentionShape& shape,
                     TensorView<float> delta, const Queue& queue);
// dqkv [batches * seq, 3 * width] (overwritten) from dout [batches * seq, width], the forward's lse and attention_delta's
// delta (lse's shape).
template <class T>
void flash_attention_backward(TensorView<const T> qkv, TensorView<const T> dout, TensorView<const T> lse,
                              TensorView<const T> delta, const AttentionShape& shape, TensorView<T> dqkv,
                              const Queue& queue);
// The same on qkv in bf16 (mixed precision, as its forward above).
void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout, TensorView<const float> lse,
                              TensorView<const float> delta, const AttentionShape& shape, TensorView<float> dqkv,
                              const Queue& queue);

// ---- optimizer ------------------------------------------------------------------------------------------
// The sum of squares of x, in double. On an accelerator it reduces deterministic per-block partials into `scratch`
// (sum_squares_scratch() doubles on the same device) and waits for the queue; on the CPU scratch may be empty.
constexpr std::int64_t sum_squares_scratch() { return 257; }
template <class T>
double sum_squares(TensorView<const T> x, TensorView<double> scratch, const Queue& queue);
// AdamW on one parameter shard: value, m, v updated in place from grad (all the same shape).
template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v, const AdamWStep& s,
                  const Queue& queue);
// The same on an f32 shard that has a bf16 copy (value_bf16, value's shape: layers/weight_copy.hpp), written from the
// updated values in the same pass: bitwise to_bf16 of the new value, without a cast kernel of its own.
void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m, TensorView<float> v,
                  const AdamWStep& s, TensorView<bf16> value_bf16, const Queue& queue);

// ---- row statistics -----------------------------------------------------------------------------------
// out[r] = sum_c x[r, c]
template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue);

// ---- LayerNorm -----------------------------------------------------------------------------------------
// A row norm over `hidden` features: LayerNorm (centered) or RMSNorm (not centered), eps inside the square root. The
// forward's centering is the row sums its caller passes (zeros for RMSNorm, with beta zero: xhat = x rstd, y = xhat
// gamma); the backward drops the mean term where the norm is not centered.
struct Normalization {
  std::int64_t hidden = 0;
  double eps = 1e-5;
  bool centered = true;
};

// out[r] = sum_c (x[r, c] - row_sum[r] / hidden)^2
template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out, const Queue& queue);
// rstd[r] = 1 / sqrt(sq_dev[r] / hidden + eps); xhat = (x - mean) rstd with mean = row_sum[r] / hidden;
// y = xhat gamma + beta.
template <class T>
void layernorm_normalize(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                         TensorView<const T> gamma, TensorView<const T> beta, const Normalization& norm,
                         TensorView<T> xhat, TensorView<T> rstd, TensorView<T> y, const Queue& queue);
// The same writing xhat and y in bf16 (f32 only; mixed precision: the LayerNorm's output is the next GEMM's operand
// and xhat is kept for backward, both in bf16): the bits of layernorm_normalize followed by to_bf16 of each, without
// their f32 copies.
void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                         TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                         TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y, const Queue& queue);
// dgamma[c] = sum_r dy xhat, dbeta[c] = sum_r dy; sums[2r] = sum_c dy gamma, sums[2r+1] = sum_c dy gamma xhat.
template <class T>
void layernorm_backward_partials(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                                 TensorView<T> dgamma, TensorView<T> dbeta, TensorView<T> sums, const Queue& queue);
// dx = rstd (dy gamma - sums[2r] / hidden - xhat sums[2r+1] / hidden), with the row-reduced sums (RMSNorm: without
// the sums[2r] term); plus
// residual[r, c] where residual is not empty ([rows, cols]: the gradient arriving along the block's residual path,
// added as the row is written — the bits of axpby(1, residual, 1, dx) after it).
template <class T>
void layernorm_backward_dx(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                           TensorView<const T> rstd, TensorView<const T> sums, const Normalization& norm,
                           TensorView<const T> residual, TensorView<T> dx, const Queue& queue);
// The same two on xhat as kept in bf16 (mixed precision): the f32 forms' bits on its values, read as they are.
void layernorm_backward_partials(TensorView<const float> dy, TensorView<const bf16> xhat,
                                 TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                 TensorView<float> sums, const Queue& queue);
void layernorm_backward_dx(TensorView<const float> dy, TensorView<const bf16> xhat, TensorView<const float> gamma,
                           TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                           TensorView<const float> residual, TensorView<float> dx, const Queue& queue);

// ---- vocabulary-parallel embedding: this rank's slice [v0, v0 + vn) of wte, its column block of width `width` ------
// partial[t, :] = wte[tokens[t] - v0, :] for tokens in the slice, else 0. wte: [vn, width]; partial: [n, width].
template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial,
                      const Queue& queue);
// x[r, :] += wpe[(row_offset + r) % seq, :]. wpe: [max_seq, width]; x: [rows, width].
template <class T>
void add_positions(TensorView<const T> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<T> x,
                   const Queue& queue);
// dwte[tokens[t] - v0, :] += grad[t, :] for tokens in the slice, in token order. grad: [n, width].
template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0, TensorView<T> dwte,
                           const Queue& queue);
// partial[pos, :] = sum of dx[r, :] over rows with (row_offset + r) % seq == pos (overwrites);
// partial: [max_seq, width].
template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial,
                   const Queue& queue);

// ---- vocabulary-parallel cross-entropy on logits [rows, vn] of the columns [v0, v0 + vn) of a vocabulary whose ids
// from `vocab` on are padding (no target, no probability) --------------------------------------------------------
// Two passes over the logits, as llm.c's fused classifier has one: a read for the row statistics, then (training) a
// read and a write of the gradient in their place; between them, two reductions of `rows` numbers over the ranks
// that share the rows (layers/cross_entropy.hpp). targets: [n_tokens] for the whole batch, this block's rows at
// row_offset.. : each an id, or math::kIgnoredTarget (element_math.hpp) where the position is not predicted (a masked
// LM's unmasked positions): such a row has no target logit and a gradient of zeros.
//
// stats: [4, rows], from one read of the logits (online softmax: a running max, the sum rescaled when it grows):
//   stats[0, r] = m, the row's largest logit of the slice's ids below `vocab` (-inf where it has none);
//   stats[1, r] = m again, the copy the ranks sharing the rows reduce to their max M;
//   stats[2, r] = sum over those ids of exp(logit - m);
//   stats[3, r] = the target logit where the target is in the slice, else 0.
template <class T>
void cross_entropy_stats(TensorView<const T> logits, TensorView<const int> targets, std::int64_t row_offset,
                         std::int64_t v0, std::int64_t vocab, TensorView<T> stats, const Queue& queue);
// Once stats[1] holds M: stats[2, r] *= exp(m - M), the slice's sum relative to M (then summed over the ranks with
// stats[3]).
template <class T>
void cross_entropy_rescale(TensorView<T> stats, const Queue& queue);
// With stats reduced (M and S = the row's sum of exp(logit - M)): dlogits = (softmax - onehot(target)) / mean_over in
// place of the logits, softmax = exp(logit - M) / S, and 0 for the padding ids and the rows whose target is
// math::kIgnoredTarget; the gradient of a mean over `mean_over` tokens (the targets' own count of predicted positions,
// or a whole batch's when these are one micro-batch of it).
template <class T>
void cross_entropy_gradient(TensorView<T> logits, TensorView<const T> stats, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                            const Queue& queue);
// The same written into dlogits [rows, vn] in bf16 (mixed precision: the head's products take it so), the logits left
// as they are: the bits of the in-place form followed by to_bf16, without its f32 result.
void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                            TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                            std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits, const Queue& queue);

}  // namespace optimus::ops

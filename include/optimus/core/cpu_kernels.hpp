// For the library's backends (core's operations, and the simulated device, which runs them): the CPU backend of
// optimus/core/ops.hpp beyond the public kernels of optimus/core/kernels.hpp — row statistics, LayerNorm, the fused
// attention, dropout, the embedding and cross-entropy, the optimizer, casts and the in-process reductions. They compute
// on host views whose shapes ops has already checked (the same semantics and shapes as the ops of the same name), with
// the per-element arithmetic of optimus/core/element_math.hpp. The simulated device runs these same functions on its
// memory, so its results are the CPU's bit for bit.
#pragma once

#include <cstdint>

#include "optimus/core/adamw_step.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::cpu {

// ---- casts (any row strides) and reductions -----------------------------------------------------------------
void to_bf16(TensorView<const float> x, TensorView<bf16> y);
void to_f32(TensorView<const bf16> x, TensorView<float> y);
// acc[e] = combine(acc[e], x[e]) over n contiguous elements.
template <class T>
void combine(T* acc, const T* x, std::int64_t n, math::Combine op);

// The sum of n contiguous values in kSumLanes lanes: lane l adds x[l], x[l + 16], ... in order, the last values
// (n mod 16) going to lanes 0, 1, ..., then the lanes combine pairwise (lane l with l + 8, then + 4, + 2, + 1). One
// order at any vector width (each lane's additions stay in order when GCC vectorises the lanes), and sixteen
// independent sums instead of one chain whose every addition waits for the last (cpu_sums.cpp).
constexpr std::int64_t kSumLanes = 16;
template <class T>
T lane_sum(const T* x, std::int64_t n);
// out[c] = exp(x[c] - max) over n contiguous values, out possibly x (the loop vectorises: math::softmax_exp has no call
// in f32): the fused attention's and the cross-entropy's exponentials (cpu_sums.cpp).
template <class T>
void exps(const T* x, T max, std::int64_t n, T* out);

// ---- rows and LayerNorm ----------------------------------------------------------------------------------
// The sum of a row of n contiguous values, in row_sums' order (every kernel that sums a row for LayerNorm uses it).
template <class T>
T row_sum(const T* x, std::int64_t n);
template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out);
template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out);
template <class T>
void layernorm_normalize(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                         TensorView<const T> gamma, TensorView<const T> beta, const ops::Normalization& norm,
                         TensorView<T> xhat, TensorView<T> rstd, TensorView<T> y);
void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                         TensorView<const float> gamma, TensorView<const float> beta, const ops::Normalization& norm,
                         TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y);
// xhat in T, or (X = bf16, T = float) as kept under mixed precision: the same bits on its values.
template <class T, class X>
void layernorm_backward_partials(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma,
                                 TensorView<T> dgamma, TensorView<T> dbeta, TensorView<T> sums);
template <class T, class X>
void layernorm_backward_dx(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma,
                           TensorView<const T> rstd, TensorView<const T> sums, const ops::Normalization& norm,
                           TensorView<const T> residual, TensorView<T> dx);

// ---- attention ---------------------------------------------------------------------------------------------
template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream);
template <class T>
void dropout_residual(TensorView<const T> residual, TensorView<T> x, const ops::DropoutMask& mask,
                      TensorView<T> row_sums);
template <class T>
void dropout_copy(TensorView<const T> x, TensorView<T> y, const ops::DropoutMask& mask);
// RoPE on qkv's query and key columns, in place (ops::rotary; contiguous).
template <class T>
void rotary(TensorView<T> qkv, const ops::Rotary& rotary);
// SwiGLU (ops::swiglu_*; contiguous): T in f32 or f64; the bf16 forms are the f32 form's bits, rounded or widened.
template <class T>
void swiglu_forward(TensorView<const T> gu, TensorView<T> y);
void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept);
template <class T>
void swiglu_backward(TensorView<const T> gu, TensorView<const T> dy, TensorView<T> dgu);
void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu);
// Grouped-query attention's key/value heads widened to a head per query head, and the gradient summed back
// (ops::repeat_kv, ops::sum_kv; contiguous). repeat_kv: T in f32, f64 or bf16.
template <class T>
void repeat_kv(TensorView<const T> qkv, TensorView<T> full, const ops::KvHeads& kv);
template <class T>
void sum_kv(TensorView<const T> dfull, TensorView<T> dqkv, const ops::KvHeads& kv);
// column_sums' bits in out [1, cols] and x_bf16 = bf16(x), in the same pass over x (contiguous).
void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16);
// GELU's backward on its input kept in bf16: dx = dy * gelu'(x widened), the f32 form's bits. Contiguous.
void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx);
// y = bf16(gelu(x)), x_kept = bf16(x): the f32 GELU's bits, rounded (contiguous).
void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept);

// math: GemmMath::bf16 rounds the products' operands as a GPU's tensor cores take them (cpu_flash_attention.cpp).
template <class T>
void flash_attention_forward(TensorView<const T> qkv, const ops::AttentionShape& shape, TensorView<T> out,
                             TensorView<T> lse, ops::GemmMath math);
void flash_attention_forward(TensorView<const float> qkv, const ops::AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse, ops::GemmMath math);
template <class T>
void attention_delta(TensorView<const T> out, TensorView<const T> dout, const ops::AttentionShape& shape,
                     TensorView<T> delta);
void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const ops::AttentionShape& shape,
                     TensorView<float> delta);
template <class T>
void flash_attention_backward(TensorView<const T> qkv, TensorView<const T> dout, TensorView<const T> lse,
                              TensorView<const T> delta, const ops::AttentionShape& shape, TensorView<T> dqkv,
                              ops::GemmMath math);
// qkv in bf16: the f32 forms above under GemmMath::bf16 on qkv widened.
void flash_attention_forward(TensorView<const bf16> qkv, const ops::AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse);
void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout, TensorView<const float> lse,
                              TensorView<const float> delta, const ops::AttentionShape& shape, TensorView<float> dqkv);

// ---- embedding and cross-entropy ---------------------------------------------------------------------------
template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial);
template <class T>
void add_positions(TensorView<const T> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<T> x);
template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0,
                           TensorView<T> dwte);
template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial);
template <class T>
void cross_entropy_stats(TensorView<const T> logits, TensorView<const int> targets, std::int64_t row_offset,
                         std::int64_t v0, std::int64_t vocab, TensorView<T> stats);
template <class T>
void cross_entropy_rescale(TensorView<T> stats);
template <class T>
void cross_entropy_gradient(TensorView<T> logits, TensorView<const T> stats, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over);
// Into dlogits in bf16, the logits unchanged: the in-place form's bits, rounded.
void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                            TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                            std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits);

// ---- the optimizer -------------------------------------------------------------------------------------------
template <class T>
double sum_squares(TensorView<const T> x);
template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v,
                  const AdamWStep& s);
// The same, then value_bf16 = bf16(value) per element (contiguous, value's shape).
void adamw_update_with_copy(TensorView<float> value, TensorView<const float> grad, TensorView<float> m,
                            TensorView<float> v, const AdamWStep& s, TensorView<bf16> value_bf16);

}  // namespace optimus::cpu

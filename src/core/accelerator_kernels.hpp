// Internal to src/: the kernels of an accelerator, one implementation per device, chosen by CMake like the CPU GEMM
// backend: the simulated device's (src/sim/kernels.cpp: the CPU kernels queued on its streams) and CUDA's
// (src/cuda/kernels.cpp, or src/core/cuda_absent.cpp in a build without CUDA, whose kernels refuse with a message).
// ops (ops_*.cpp) validates first — shapes, one device, f32, the layouts named in optimus/core/ops.hpp, a stream of
// the operands' device in the queue — and then calls these; each queues its work on queue.stream.
#pragma once

#include <cstdint>

#include "optimus/core/element_math.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::ops::detail {

class AcceleratorKernels {
 public:
  virtual ~AcceleratorKernels() = default;

  // ---- casts and element-wise (contiguous unless said otherwise) ----
  virtual void to_bf16(TensorView<const float> x, TensorView<bf16> y, const Queue& q) const = 0;  // x: rows contiguous
  virtual void to_f32(TensorView<const bf16> x, TensorView<float> y, const Queue& q) const = 0;
  virtual void fill(TensorView<float> y, float value, const Queue& q) const = 0;
  virtual void axpby(float alpha, TensorView<const float> x, float beta, TensorView<float> y, const Queue& q) const = 0;
  virtual void add_row_broadcast(TensorView<const float> row, TensorView<float> y, const Queue& q) const = 0;
  virtual void column_sums(TensorView<const float> x, TensorView<float> out, const Queue& q) const = 0;
  virtual void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16,
                           const Queue& q) const = 0;
  virtual void gelu_forward(TensorView<const float> x, TensorView<float> y, const Queue& q) const = 0;
  virtual void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept,
                            const Queue& q) const = 0;  // x contiguous
  virtual void gelu_backward(TensorView<const float> x, TensorView<const float> dy, TensorView<float> dx,
                             const Queue& q) const = 0;
  virtual void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx,
                             const Queue& q) const = 0;
  // x: rows contiguous.
  virtual void dropout(TensorView<float> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
                       std::uint64_t stream, const Queue& q) const = 0;
  // The fused residual kernels; row_sums may be TensorView{} (none wanted).
  virtual void dropout_residual(TensorView<const float> residual, TensorView<float> x, const DropoutMask& mask,
                                TensorView<float> row_sums, const Queue& q) const = 0;
  virtual void rotary(TensorView<float> qkv, const Rotary& rotary, const Queue& q) const = 0;
  virtual void swiglu_forward(TensorView<const float> gu, TensorView<float> y, const Queue& q) const = 0;
  virtual void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept,
                              const Queue& q) const = 0;
  virtual void swiglu_backward(TensorView<const float> gu, TensorView<const float> dy, TensorView<float> dgu,
                               const Queue& q) const = 0;
  virtual void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu,
                               const Queue& q) const = 0;
  virtual void repeat_kv(TensorView<const float> qkv, TensorView<float> full, const KvHeads& kv,
                         const Queue& q) const = 0;
  virtual void repeat_kv(TensorView<const bf16> qkv, TensorView<bf16> full, const KvHeads& kv,
                         const Queue& q) const = 0;
  virtual void sum_kv(TensorView<const float> dfull, TensorView<float> dqkv, const KvHeads& kv,
                      const Queue& q) const = 0;
  virtual void dropout_copy(TensorView<const float> x, TensorView<float> y, const DropoutMask& mask,
                            const Queue& q) const = 0;
  // acc = combine(acc, x): the in-process reductions, f32 and f64.
  virtual void combine(TensorView<float> acc, TensorView<const float> x, math::Combine op, const Queue& q) const = 0;
  virtual void combine(TensorView<double> acc, TensorView<const double> x, math::Combine op,
                       const Queue& q) const = 0;

  // ---- softmax, rows, LayerNorm ----
  virtual void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape,
                                       TensorView<float> out, TensorView<float> lse, const Queue& q) const = 0;
  virtual void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape,
                                       TensorView<bf16> out, TensorView<float> lse, const Queue& q) const = 0;
  virtual void attention_delta(TensorView<const float> out, TensorView<const float> dout, const AttentionShape& shape,
                               TensorView<float> delta, const Queue& q) const = 0;
  virtual void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const AttentionShape& shape,
                               TensorView<float> delta, const Queue& q) const = 0;
  virtual void flash_attention_backward(TensorView<const float> qkv, TensorView<const float> dout,
                                        TensorView<const float> lse, TensorView<const float> delta,
                                        const AttentionShape& shape, TensorView<float> dqkv,
                                        const Queue& q) const = 0;
  // qkv in bf16: mixed precision's attention (ops.hpp).
  virtual void flash_attention_forward(TensorView<const bf16> qkv, const AttentionShape& shape,
                                       TensorView<bf16> out, TensorView<float> lse, const Queue& q) const = 0;
  virtual void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout,
                                        TensorView<const float> lse, TensorView<const float> delta,
                                        const AttentionShape& shape, TensorView<float> dqkv,
                                        const Queue& q) const = 0;
  virtual void row_sums(TensorView<const float> x, TensorView<float> out, const Queue& q) const = 0;
  virtual void layernorm_square_deviations(TensorView<const float> x, TensorView<const float> row_sum,
                                           std::int64_t hidden, TensorView<float> out, const Queue& q) const = 0;
  virtual void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum,
                                   TensorView<const float> sq_dev, TensorView<const float> gamma,
                                   TensorView<const float> beta, const Normalization& norm, TensorView<float> xhat,
                                   TensorView<float> rstd, TensorView<float> y, const Queue& q) const = 0;
  virtual void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum,
                                   TensorView<const float> sq_dev, TensorView<const float> gamma,
                                   TensorView<const float> beta, const Normalization& norm, TensorView<bf16> xhat,
                                   TensorView<float> rstd, TensorView<bf16> y, const Queue& q) const = 0;
  virtual void layernorm_backward_partials(TensorView<const float> dy, TensorView<const float> xhat,
                                           TensorView<const float> gamma, TensorView<float> dgamma,
                                           TensorView<float> dbeta, TensorView<float> sums, const Queue& q) const = 0;
  // residual may be TensorView{} (nothing to add).
  virtual void layernorm_backward_dx(TensorView<const float> dy, TensorView<const float> xhat,
                                     TensorView<const float> gamma, TensorView<const float> rstd,
                                     TensorView<const float> sums, const Normalization& norm,
                                     TensorView<const float> residual, TensorView<float> dx, const Queue& q) const = 0;
  // The same two on xhat as kept in bf16.
  virtual void layernorm_backward_partials(TensorView<const float> dy, TensorView<const bf16> xhat,
                                           TensorView<const float> gamma, TensorView<float> dgamma,
                                           TensorView<float> dbeta, TensorView<float> sums, const Queue& q) const = 0;
  virtual void layernorm_backward_dx(TensorView<const float> dy, TensorView<const bf16> xhat,
                                     TensorView<const float> gamma, TensorView<const float> rstd,
                                     TensorView<const float> sums, const Normalization& norm,
                                     TensorView<const float> residual, TensorView<float> dx, const Queue& q) const = 0;

  // ---- embedding and cross-entropy ----
  virtual void embedding_lookup(TensorView<const float> wte, TensorView<const int> tokens, std::int64_t v0,
                                TensorView<float> partial, const Queue& q) const = 0;
  virtual void add_positions(TensorView<const float> wpe, std::int64_t row_offset, std::int64_t seq,
                             TensorView<float> x, const Queue& q) const = 0;
  virtual void embedding_scatter_add(TensorView<const float> grad, TensorView<const int> tokens, std::int64_t v0,
                                     TensorView<float> dwte, const Queue& q) const = 0;
  virtual void position_grad(TensorView<const float> dx, std::int64_t row_offset, std::int64_t seq,
                             TensorView<float> partial, const Queue& q) const = 0;
  virtual void cross_entropy_stats(TensorView<const float> logits, TensorView<const int> targets,
                                   std::int64_t row_offset, std::int64_t v0, std::int64_t vocab,
                                   TensorView<float> stats, const Queue& q) const = 0;
  virtual void cross_entropy_rescale(TensorView<float> stats, const Queue& q) const = 0;
  virtual void cross_entropy_gradient(TensorView<float> logits, TensorView<const float> stats,
                                      TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                                      std::int64_t vocab, std::int64_t mean_over, const Queue& q) const = 0;
  virtual void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                                      TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                                      std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits,
                                      const Queue& q) const = 0;

  // ---- the optimizer ----
  // Sum of squares into scratch[sum_squares_scratch() - 1] (a device double; the rest is the kernel's partials).
  virtual void sum_squares(TensorView<const float> x, TensorView<double> scratch, const Queue& q) const = 0;
  // value_bf16: a default view (null data), or value's bf16 copy written from the updated values (ops::adamw_update's
  // fused form).
  virtual void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m,
                            TensorView<float> v, const AdamWStep& s, TensorView<bf16> value_bf16,
                            const Queue& q) const = 0;
};

// The kernels of the simulated device (src/sim/kernels.cpp) and of CUDA (src/cuda/kernels.cpp), which their runtimes
// give as DeviceRuntime::kernels().
const AcceleratorKernels& sim_kernels();
const AcceleratorKernels& cuda_kernels();

}  // namespace optimus::ops::detail

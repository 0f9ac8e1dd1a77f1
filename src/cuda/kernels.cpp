// CUDA's kernels (src/core/accelerator_kernels.hpp): each launches its CUDA kernel (optimus/cuda/kernels.hpp,
// layer_kernels.hpp) on the queue's stream. GPU-only code: CI compiles it, a GPU runs it; the same calls, validated
// the same way by ops, run on the simulated device in CI.
#include <cmath>

#include "../core/accelerator_kernels.hpp"
#include "optimus/cuda/kernels.hpp"
#include "optimus/cuda/layer_kernels.hpp"
#include "optimus/cuda/runtime.hpp"

namespace optimus::ops::detail {
namespace {

// The kernels' view of an attention of `rows` query rows and `width` output columns (ops checked the shapes), on
// tensor cores under mixed precision.
cuda::AttentionGeometry geometry(const AttentionShape& s, std::int64_t rows, std::int64_t width, const Queue& q) {
  const std::int64_t d = width / s.heads;
  OPTIMUS_CHECK(d <= cuda::flash_attention_max_head(), "flash attention on the GPU: head dimension ", d,
                " is larger than the ", cuda::flash_attention_max_head(), " its kernels take");
  return cuda::AttentionGeometry{.batches = rows / s.seq,
                                 .seq = s.seq,
                                 .heads = s.heads,
                                 .d = d,
                                 .scale = 1.0f / std::sqrt(static_cast<float>(d)),
                                 .dropout = s.dropout,
                                 .keep_scale = static_cast<float>(1.0 / (1.0 - s.dropout)),
                                 .seed = s.seed,
                                 .stream = s.stream,
                                 .first_batch = s.first_batch,
                                 .first_head = s.first_head,
                                 .total_heads = s.total_heads,
                                 .tensor_cores = q.math == GemmMath::bf16};
}

cudaStream_t stream_of(const Queue& q) { return cuda::native(*q.stream, "CUDA kernel"); }

cuda::DropoutMask mask_of(const DropoutMask& m) {
  return {.row0 = m.row0, .col0 = m.col0, .p = m.p, .keep_scale = static_cast<float>(1.0 / (1.0 - m.p)),
          .seed = m.seed, .stream = m.stream};
}

class CudaKernels final : public AcceleratorKernels {
 public:
  void to_bf16(TensorView<const float> x, TensorView<bf16> y, const Queue& q) const override {
    cuda::to_bf16_rows(x.data(), x.stride(0), y.data(), x.size(0), x.size(1), stream_of(q));
  }
  void to_f32(TensorView<const bf16> x, TensorView<float> y, const Queue& q) const override {
    cuda::to_f32(x.data(), y.data(), x.numel(), stream_of(q));
  }
  void fill(TensorView<float> y, float value, const Queue& q) const override {
    cuda::fill(y.data(), value, y.numel(), stream_of(q));
  }
  void axpby(float alpha, TensorView<const float> x, float beta, TensorView<float> y, const Queue& q) const override {
    cuda::axpby(alpha, x.data(), beta, y.data(), y.numel(), stream_of(q));
  }
  void add_row_broadcast(TensorView<const float> row, TensorView<float> y, const Queue& q) const override {
    cuda::add_row_broadcast(row.data(), y.data(), y.size(0), y.size(1), stream_of(q));
  }
  void column_sums(TensorView<const float> x, TensorView<float> out, const Queue& q) const override {
    cuda::column_sums(x.data(), x.size(0), x.size(1), out.data(), nullptr, stream_of(q));
  }
  void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16,
                   const Queue& q) const override {
    cuda::column_sums(x.data(), x.size(0), x.size(1), out.data(), x_bf16.data(), stream_of(q));
  }
  void gelu_forward(TensorView<const float> x, TensorView<float> y, const Queue& q) const override {
    cuda::gelu_forward(x.data(), y.data(), x.numel(), stream_of(q));
  }
  void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept,
                    const Queue& q) const override {
    cuda::gelu_forward_bf16(x.data(), y.data(), x_kept.data(), x.numel(), stream_of(q));
  }
  void gelu_backward(TensorView<const float> x, TensorView<const float> dy, TensorView<float> dx,
                     const Queue& q) const override {
    cuda::gelu_backward(x.data(), dy.data(), dx.data(), x.numel(), stream_of(q));
  }
  void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx,
                     const Queue& q) const override {
    cuda::gelu_backward_bf16(x.data(), dy.data(), dx.data(), x.numel(), stream_of(q));
  }
  void dropout(TensorView<float> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
               std::uint64_t stream, const Queue& q) const override {
    cuda::dropout_apply(x.data(), x.size(0), x.size(1), x.stride(0), row0, col0, p, seed, stream, stream_of(q));
  }
  void dropout_residual(TensorView<const float> residual, TensorView<float> x, const DropoutMask& mask,
                        TensorView<float> row_sums, const Queue& q) const override {
    cuda::dropout_residual(residual.data(), x.data(), rows(x), cols(x), mask_of(mask),
                           row_sums.rank() == 0 ? nullptr : row_sums.data(), stream_of(q));
  }
  void rotary(TensorView<float> qkv, const Rotary& r, const Queue& q) const override {
    cuda::rotary(qkv.data(), rows(qkv), qkv.size(1), r.seq, r.heads, r.kv_heads, r.theta, r.inverse, stream_of(q));
  }
  void swiglu_forward(TensorView<const float> gu, TensorView<float> y, const Queue& q) const override {
    cuda::swiglu_forward(gu.data(), y.data(), rows(y), cols(y), stream_of(q));
  }
  void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept,
                      const Queue& q) const override {
    cuda::swiglu_forward_bf16(gu.data(), y.data(), gu_kept.data(), rows(y), cols(y), stream_of(q));
  }
  void swiglu_backward(TensorView<const float> gu, TensorView<const float> dy, TensorView<float> dgu,
                       const Queue& q) const override {
    cuda::swiglu_backward(gu.data(), dy.data(), dgu.data(), rows(dy), cols(dy), stream_of(q));
  }
  void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu,
                       const Queue& q) const override {
    cuda::swiglu_backward_bf16(gu.data(), dy.data(), dgu.data(), rows(dy), cols(dy), stream_of(q));
  }
  void repeat_kv(TensorView<const float> qkv, TensorView<float> full, const KvHeads& kv,
                 const Queue& q) const override {
    cuda::repeat_kv(qkv.data(), full.data(), rows(qkv), cols(full) / (3 * kv.heads), kv.heads, kv.kv_heads,
                    stream_of(q));
  }
  void repeat_kv(TensorView<const bf16> qkv, TensorView<bf16> full, const KvHeads& kv,
                 const Queue& q) const override {
    cuda::repeat_kv_bf16(qkv.data(), full.data(), rows(qkv), cols(full) / (3 * kv.heads), kv.heads, kv.kv_heads,
                         stream_of(q));
  }
  void sum_kv(TensorView<const float> dfull, TensorView<float> dqkv, const KvHeads& kv,
              const Queue& q) const override {
    cuda::sum_kv(dfull.data(), dqkv.data(), rows(dfull), cols(dfull) / (3 * kv.heads), kv.heads, kv.kv_heads,
                 stream_of(q));
  }
  void dropout_copy(TensorView<const float> x, TensorView<float> y, const DropoutMask& mask,
                    const Queue& q) const override {
    cuda::dropout_copy(x.data(), y.data(), rows(x), cols(x), mask_of(mask), stream_of(q));
  }
  void combine(TensorView<float> acc, TensorView<const float> x, math::Combine op, const Queue& q) const override {
    cuda::combine_into(acc.data(), x.data(), acc.numel(), op, stream_of(q));
  }
  void combine(TensorView<double> acc, TensorView<const double> x, math::Combine op, const Queue& q) const override {
    cuda::combine_into(acc.data(), x.data(), acc.numel(), op, stream_of(q));
  }

  void row_sums(TensorView<const float> x, TensorView<float> out, const Queue& q) const override {
    cuda::row_sums(x.data(), rows(x), cols(x), out.data(), stream_of(q));
  }
  void layernorm_square_deviations(TensorView<const float> x, TensorView<const float> row_sum, std::int64_t hidden,
                                   TensorView<float> out, const Queue& q) const override {
    cuda::layernorm_square_deviations(x.data(), row_sum.data(), hidden, rows(x), cols(x), out.data(), stream_of(q));
  }
  void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                           TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                           TensorView<float> xhat, TensorView<float> rstd, TensorView<float> y,
                           const Queue& q) const override {
    cuda::layernorm_normalize(x.data(), row_sum.data(), sq_dev.data(), gamma.data(), beta.data(), norm.hidden,
                              static_cast<float>(norm.eps), rows(x), cols(x), xhat.data(), rstd.data(), y.data(),
                              stream_of(q));
  }
  void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                           TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                           TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y,
                           const Queue& q) const override {
    cuda::layernorm_normalize_bf16(x.data(), row_sum.data(), sq_dev.data(), gamma.data(), beta.data(), norm.hidden,
                                   static_cast<float>(norm.eps), rows(x), cols(x), xhat.data(), rstd.data(), y.data(),
                                   stream_of(q));
  }
  void layernorm_backward_partials(TensorView<const float> dy, TensorView<const float> xhat,
                                   TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                   TensorView<float> sums, const Queue& q) const override {
    cuda::layernorm_backward_partials(dy.data(), xhat.data(), gamma.data(), rows(dy), cols(dy), dgamma.data(),
                                      dbeta.data(), sums.data(), stream_of(q));
  }
  void layernorm_backward_dx(TensorView<const float> dy, TensorView<const float> xhat, TensorView<const float> gamma,
                             TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                             TensorView<const float> residual, TensorView<float> dx, const Queue& q) const override {
    cuda::layernorm_backward_dx(dy.data(), xhat.data(), gamma.data(), rstd.data(), sums.data(), norm.hidden,
                                norm.centered,
                                residual.rank() == 0 ? nullptr : residual.data(), rows(dy), cols(dy), dx.data(),
                                stream_of(q));
  }
  void layernorm_backward_partials(TensorView<const float> dy, TensorView<const bf16> xhat,
                                   TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                   TensorView<float> sums, const Queue& q) const override {
    cuda::layernorm_backward_partials(dy.data(), xhat.data(), gamma.data(), rows(dy), cols(dy), dgamma.data(),
                                      dbeta.data(), sums.data(), stream_of(q));
  }
  void layernorm_backward_dx(TensorView<const float> dy, TensorView<const bf16> xhat, TensorView<const float> gamma,
                             TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                             TensorView<const float> residual, TensorView<float> dx, const Queue& q) const override {
    cuda::layernorm_backward_dx(dy.data(), xhat.data(), gamma.data(), rstd.data(), sums.data(), norm.hidden,
                                norm.centered,
                                residual.rank() == 0 ? nullptr : residual.data(), rows(dy), cols(dy), dx.data(),
                                stream_of(q));
  }

  void embedding_lookup(TensorView<const float> wte, TensorView<const int> tokens, std::int64_t v0,
                        TensorView<float> partial, const Queue& q) const override {
    cuda::embedding_lookup(wte.data(), tokens.data(), tokens.numel(), v0, rows(wte), cols(wte), partial.data(),
                           stream_of(q));
  }
  void add_positions(TensorView<const float> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<float> x,
                     const Queue& q) const override {
    cuda::add_positions(wpe.data(), row_offset, seq, rows(x), cols(x), x.data(), stream_of(q));
  }
  void embedding_scatter_add(TensorView<const float> grad, TensorView<const int> tokens, std::int64_t v0,
                             TensorView<float> dwte, const Queue& q) const override {
    cuda::embedding_scatter_add(grad.data(), tokens.data(), tokens.numel(), v0, rows(dwte), cols(dwte), dwte.data(),
                                stream_of(q));
  }
  void position_grad(TensorView<const float> dx, std::int64_t row_offset, std::int64_t seq, TensorView<float> partial,
                     const Queue& q) const override {
    cuda::position_grad(dx.data(), row_offset, seq, rows(dx), cols(dx), rows(partial), partial.data(), stream_of(q));
  }
  void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<bf16> out,
                               TensorView<float> lse, const Queue& q) const override {
    cuda::flash_attention_forward_bf16(qkv.data(), geometry(shape, out.size(0), out.size(1), q), out.data(), lse.data(),
                                       stream_of(q));
  }
  void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<float> out,
                               TensorView<float> lse, const Queue& q) const override {
    cuda::flash_attention_forward(qkv.data(), geometry(shape, out.size(0), out.size(1), q), out.data(), lse.data(),
                                  stream_of(q));
  }
  void attention_delta(TensorView<const float> out, TensorView<const float> dout, const AttentionShape& shape,
                       TensorView<float> delta, const Queue& q) const override {
    cuda::attention_delta(out.data(), dout.data(), geometry(shape, dout.size(0), dout.size(1), q), delta.data(),
                          stream_of(q));
  }
  void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const AttentionShape& shape,
                       TensorView<float> delta, const Queue& q) const override {
    cuda::attention_delta(out.data(), dout.data(), geometry(shape, dout.size(0), dout.size(1), q), delta.data(),
                          stream_of(q));
  }
  void flash_attention_backward(TensorView<const float> qkv, TensorView<const float> dout,
                                TensorView<const float> lse, TensorView<const float> delta,
                                const AttentionShape& shape, TensorView<float> dqkv, const Queue& q) const override {
    cuda::flash_attention_backward(qkv.data(), dout.data(), lse.data(), delta.data(),
                                   geometry(shape, dout.size(0), dout.size(1), q), dqkv.data(), stream_of(q));
  }
  void flash_attention_forward(TensorView<const bf16> qkv, const AttentionShape& shape, TensorView<bf16> out,
                               TensorView<float> lse, const Queue& q) const override {
    cuda::flash_attention_forward_mixed(qkv.data(), geometry(shape, out.size(0), out.size(1), q), out.data(),
                                        lse.data(), stream_of(q));
  }
  void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout,
                                TensorView<const float> lse, TensorView<const float> delta,
                                const AttentionShape& shape, TensorView<float> dqkv, const Queue& q) const override {
    cuda::flash_attention_backward_mixed(qkv.data(), dout.data(), lse.data(), delta.data(),
                                         geometry(shape, dout.size(0), dout.size(1), q), dqkv.data(), stream_of(q));
  }
  void cross_entropy_stats(TensorView<const float> logits, TensorView<const int> targets, std::int64_t row_offset,
                           std::int64_t v0, std::int64_t vocab, TensorView<float> stats,
                           const Queue& q) const override {
    cuda::cross_entropy_stats(logits.data(), targets.data(), row_offset, v0, vocab, rows(logits), cols(logits),
                              stats.data(), stream_of(q));
  }
  void cross_entropy_rescale(TensorView<float> stats, const Queue& q) const override {
    cuda::cross_entropy_rescale(stats.data(), stats.numel() / 4, stream_of(q));
  }
  void cross_entropy_gradient(TensorView<float> logits, TensorView<const float> stats, TensorView<const int> targets,
                              std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                              const Queue& q) const override {
    cuda::cross_entropy_gradient(logits.data(), stats.data(), targets.data(), row_offset, v0, vocab, rows(logits),
                                 cols(logits), mean_over, logits.data(), stream_of(q));
  }
  void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                              TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                              std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits,
                              const Queue& q) const override {
    cuda::cross_entropy_gradient(logits.data(), stats.data(), targets.data(), row_offset, v0, vocab, rows(logits),
                                 cols(logits), mean_over, dlogits.data(), stream_of(q));
  }

  void sum_squares(TensorView<const float> x, TensorView<double> scratch, const Queue& q) const override {
    cuda::sum_squares(x.data(), x.numel(), scratch.data(), scratch.data() + cuda::sum_squares_partials(),
                      stream_of(q));
  }
  void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m, TensorView<float> v,
                    const AdamWStep& s, TensorView<bf16> value_bf16, const Queue& q) const override {
    cuda::adamw_update(value.data(), grad.data(), m.data(), v.data(), value.numel(), s,
                       value_bf16.data(), stream_of(q));
  }

 private:
  template <class T>
  static std::int64_t rows(const TensorView<T>& x) { return x.rank() == 2 ? x.size(0) : 1; }
  template <class T>
  static std::int64_t cols(const TensorView<T>& x) { return x.rank() == 2 ? x.size(1) : x.numel(); }
};

}  // namespace

const AcceleratorKernels& cuda_kernels() {
  static const CudaKernels kernels;  // stateless
  return kernels;
}

}  // namespace optimus::ops::detail

// Fused attention (causal or bidirectional) and grouped-query attention's key/value heads (optimus/core/ops.hpp), each
// described once: its checks, its CPU body (cpu_kernels.hpp; the simulated device runs it on its stream) and its CUDA
// launch (flash_attention.cu, flash_attention_mma.cu, llama_kernels.cu), through dispatch.hpp's run.
#include <cmath>
#include <type_traits>

#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::cols_of;
using detail::in;
using detail::rows_of;
using detail::run;

// The CUDA kernels' view of an attention of `rows` query rows and `width` output columns (the checks below passed), on
// tensor cores under mixed precision.
cuda::AttentionGeometry geometry(const AttentionShape& s, std::int64_t rows, std::int64_t width, GemmMath math,
                                 TensorView<const int> lengths) {
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
                                 .tensor_cores = math == GemmMath::bf16,
                                 .causal = s.causal,
                                 .lengths = lengths.data()};
}

// The shape as a CPU body reads it: its lengths at the host address the dispatch passes (the simulated device's).
AttentionShape on_host(AttentionShape s, TensorView<const int> lengths) {
  s.lengths = lengths;
  return s;
}

// qkv [N, 3 * width] and a [N, width] operand of whole sequences of shape.seq, width split evenly into shape.heads,
// an lse of N * heads, and a dropout probability in [0, 1).
template <class Q, class O, class L>
void check_attention(const char* op, const TensorView<Q>& qkv, const char* out_name, const TensorView<O>& out,
                     const TensorView<L>& lse, const AttentionShape& s) {
  OPTIMUS_CHECK(s.seq > 0 && s.heads > 0 && s.dropout >= 0.0 && s.dropout < 1.0, op, ": sequence length ", s.seq,
                ", heads ", s.heads, " and dropout ", s.dropout, " (in [0, 1)) are not an attention's");
  OPTIMUS_CHECK(out.rank() == 2 && out.size(0) % s.seq == 0 && out.size(1) % s.heads == 0 && out.size(1) > 0, op,
                ": ", out_name, " has shape ", out.shape(), ", not whole sequences of ", s.seq, " rows by ", s.heads,
                " heads");
  OPTIMUS_CHECK(qkv.rank() == 2 && qkv.size(0) == out.size(0) && qkv.size(1) == 3 * out.size(1), op, ": qkv has shape ",
                qkv.shape(), ", expected [", out.size(0), ", ", 3 * out.size(1), "]");
  OPTIMUS_CHECK(lse.numel() == out.size(0) * s.heads, op, ": lse has ", lse.numel(), " elements, expected ",
                out.size(0) * s.heads, " (one per query row and head)");
  OPTIMUS_CHECK(detail::absent(s.lengths) || s.lengths.numel() == out.size(0) / s.seq, op, ": lengths has ",
                s.lengths.numel(), " elements, expected one per sequence (", out.size(0) / s.seq, ")");
}

// The forward into out of element type Out (T, or bf16 for an f32 forward) from qkv of element type Q (T, or bf16).
template <class T, class Q, class Out>
void forward_into(const char* op, TensorView<const Q> qkv, const AttentionShape& shape, TensorView<Out> out,
                  TensorView<T> lse, const Queue& queue) {
  check_attention(op, qkv, "out", out, lse, shape);
  run<T>(
      op, queue,
      [shape, math = queue.math](auto qkv_, auto lengths_, auto out_, auto lse_) {
        if constexpr (std::is_same_v<Q, bf16>) {
          cpu::flash_attention_forward(qkv_, on_host(shape, lengths_), out_, lse_);
        } else {
          cpu::flash_attention_forward(qkv_, on_host(shape, lengths_), out_, lse_, math);
        }
      },
      [shape, math = queue.math](auto qkv_, auto lengths_, auto out_, auto lse_, cudaStream_t s) {
        const auto g = [&] { return geometry(shape, out_.size(0), out_.size(1), math, lengths_); };
        if constexpr (std::is_same_v<Q, bf16>) {
          OPTIMUS_CUDA_LAUNCH(cuda::flash_attention_forward_mixed(qkv_.data(), g(), out_.data(), lse_.data(), s));
        } else if constexpr (std::is_same_v<Out, bf16>) {
          OPTIMUS_CUDA_LAUNCH(cuda::flash_attention_forward_bf16(qkv_.data(), g(), out_.data(), lse_.data(), s));
        } else {
          OPTIMUS_CUDA_LAUNCH(cuda::flash_attention_forward(qkv_.data(), g(), out_.data(), lse_.data(), s));
        }
      },
      in("qkv", qkv), in("lengths", shape.lengths), detail::out("out", out), detail::out("lse", lse));
}

// D from the output of element type O (T, or bf16 with T = float).
template <class T, class O>
void delta_into(TensorView<const O> out, TensorView<const T> dout, const AttentionShape& shape, TensorView<T> delta,
                const Queue& queue) {
  const char* op = "attention_delta";
  OPTIMUS_CHECK(shape.seq > 0 && shape.heads > 0, op, ": sequence length ", shape.seq, " and heads ", shape.heads,
                " are not an attention's");
  OPTIMUS_CHECK(dout.rank() == 2 && dout.size(0) % shape.seq == 0 && dout.size(1) % shape.heads == 0, op,
                ": dout has shape ", dout.shape(), ", not whole sequences of ", shape.seq, " rows by ", shape.heads,
                " heads");
  OPTIMUS_CHECK(out.shape() == dout.shape(), op, ": out has shape ", out.shape(), ", dout ", dout.shape());
  OPTIMUS_CHECK(delta.numel() == dout.size(0) * shape.heads, op, ": delta has ", delta.numel(),
                " elements, expected ", dout.size(0) * shape.heads, " (one per query row and head)");
  run<T>(
      op, queue, [shape](auto out_, auto dout_, auto delta_) { cpu::attention_delta(out_, dout_, shape, delta_); },
      [shape, math = queue.math](auto out_, auto dout_, auto delta_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::attention_delta(out_.data(), dout_.data(),
                                                  geometry(shape, dout_.size(0), dout_.size(1), math, {}),
                                                  delta_.data(),
                                                  s));
      },
      in("out", out), in("dout", dout), detail::out("delta", delta));
}

// The backward from qkv of element type Q (T, or bf16 with T = float).
template <class T, class Q>
void backward_into(TensorView<const Q> qkv, TensorView<const T> dout, TensorView<const T> lse,
                   TensorView<const T> delta, const AttentionShape& shape, TensorView<T> dqkv, const Queue& queue) {
  const char* op = "flash_attention_backward";
  check_attention(op, qkv, "dout", dout, lse, shape);
  OPTIMUS_CHECK(dqkv.shape() == qkv.shape(), op, ": dqkv has shape ", dqkv.shape(), ", expected ", qkv.shape());
  OPTIMUS_CHECK(delta.numel() == lse.numel(), op, ": delta has ", delta.numel(), " elements, expected ", lse.numel());
  run<T>(
      op, queue,
      [shape, math = queue.math](auto qkv_, auto lengths_, auto dout_, auto lse_, auto delta_, auto dqkv_) {
        if constexpr (std::is_same_v<Q, bf16>) {
          cpu::flash_attention_backward(qkv_, dout_, lse_, delta_, on_host(shape, lengths_), dqkv_);
        } else {
          cpu::flash_attention_backward(qkv_, dout_, lse_, delta_, on_host(shape, lengths_), dqkv_, math);
        }
      },
      [shape, math = queue.math](auto qkv_, auto lengths_, auto dout_, auto lse_, auto delta_, auto dqkv_,
                                 cudaStream_t s) {
        const auto g = [&] { return geometry(shape, dout_.size(0), dout_.size(1), math, lengths_); };
        if constexpr (std::is_same_v<Q, bf16>) {
          OPTIMUS_CUDA_LAUNCH(cuda::flash_attention_backward_mixed(qkv_.data(), dout_.data(), lse_.data(),
                                                                   delta_.data(), g(), dqkv_.data(), s));
        } else {
          OPTIMUS_CUDA_LAUNCH(cuda::flash_attention_backward(qkv_.data(), dout_.data(), lse_.data(), delta_.data(),
                                                             g(), dqkv_.data(), s));
        }
      },
      in("qkv", qkv), in("lengths", shape.lengths), in("dout", dout), in("lse", lse), in("delta", delta),
      detail::out("dqkv", dqkv));
}

}  // namespace

template <class T>
void flash_attention_forward(TensorView<const T> qkv, const AttentionShape& shape, TensorView<T> out,
                             TensorView<T> lse, const Queue& queue) {
  forward_into("flash_attention_forward", qkv, shape, out, lse, queue);
}

void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse, const Queue& queue) {
  forward_into("flash_attention_forward (bf16 out)", qkv, shape, out, lse, queue);
}

void flash_attention_forward(TensorView<const bf16> qkv, const AttentionShape& shape, TensorView<bf16> out,
                             TensorView<float> lse, const Queue& queue) {
  forward_into("flash_attention_forward (bf16 qkv)", qkv, shape, out, lse, queue);
}

template <class T>
void attention_delta(TensorView<const T> out, TensorView<const T> dout, const AttentionShape& shape,
                     TensorView<T> delta, const Queue& queue) {
  delta_into(out, dout, shape, delta, queue);
}

void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const AttentionShape& shape,
                     TensorView<float> delta, const Queue& queue) {
  delta_into(out, dout, shape, delta, queue);
}

void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout, TensorView<const float> lse,
                              TensorView<const float> delta, const AttentionShape& shape, TensorView<float> dqkv,
                              const Queue& queue) {
  backward_into(qkv, dout, lse, delta, shape, dqkv, queue);
}

template <class T>
void flash_attention_backward(TensorView<const T> qkv, TensorView<const T> dout, TensorView<const T> lse,
                              TensorView<const T> delta, const AttentionShape& shape, TensorView<T> dqkv,
                              const Queue& queue) {
  backward_into(qkv, dout, lse, delta, shape, dqkv, queue);
}

namespace {
// qkv [rows, (heads + 2 kv_heads) d] beside full [rows, 3 heads d].
template <class Q, class F>
void check_kv(const char* op, const TensorView<Q>& qkv, const TensorView<F>& full, const KvHeads& kv) {
  OPTIMUS_CHECK(kv.heads > 0 && kv.kv_heads > 0 && kv.heads % kv.kv_heads == 0, op, ": kv_heads = ", kv.kv_heads,
                " does not divide heads = ", kv.heads);
  OPTIMUS_CHECK(qkv.rank() == 2 && full.rank() == 2 && qkv.size(0) == full.size(0) && full.size(1) % (3 * kv.heads) == 0 &&
                    qkv.size(1) == (kv.heads + 2 * kv.kv_heads) * (full.size(1) / (3 * kv.heads)),
                op, ": qkv ", qkv.shape(), " and the widened ", full.shape(), " are not [Q | K | V] of ", kv.heads,
                " query and ", kv.kv_heads, " key/value heads");
}

template <class T>
void repeat_any(TensorView<const T> qkv, TensorView<T> full, const KvHeads& kv, const Queue& queue) {
  const char* op = "repeat_kv";
  check_kv(op, qkv, full, kv);
  using Dispatched = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
  run<Dispatched>(
      op, queue, [kv](auto qkv_, auto full_) { cpu::repeat_kv<T>(qkv_, full_, kv); },
      [kv](auto qkv_, auto full_, cudaStream_t s) {
        const std::int64_t d = cols_of(full_) / (3 * kv.heads);
        if constexpr (std::is_same_v<T, bf16>) {
          OPTIMUS_CUDA_LAUNCH(
              cuda::repeat_kv_bf16(qkv_.data(), full_.data(), rows_of(qkv_), d, kv.heads, kv.kv_heads, s));
        } else {
          OPTIMUS_CUDA_LAUNCH(cuda::repeat_kv(qkv_.data(), full_.data(), rows_of(qkv_), d, kv.heads, kv.kv_heads, s));
        }
      },
      in("qkv", qkv), detail::out("full", full));
}
}  // namespace

template <class T>
void repeat_kv(TensorView<const T> qkv, TensorView<T> full, const KvHeads& kv, const Queue& queue) {
  repeat_any(qkv, full, kv, queue);
}

void repeat_kv(TensorView<const bf16> qkv, TensorView<bf16> full, const KvHeads& kv, const Queue& queue) {
  repeat_any(qkv, full, kv, queue);
}

template <class T>
void sum_kv(TensorView<const T> dfull, TensorView<T> dqkv, const KvHeads& kv, const Queue& queue) {
  const char* op = "sum_kv";
  check_kv(op, dqkv, dfull, kv);
  run<T>(
      op, queue, [kv](auto dfull_, auto dqkv_) { cpu::sum_kv<T>(dfull_, dqkv_, kv); },
      [kv](auto dfull_, auto dqkv_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::sum_kv(dfull_.data(), dqkv_.data(), rows_of(dfull_), cols_of(dfull_) / (3 * kv.heads),
                                         kv.heads, kv.kv_heads, s));
      },
      in("dfull", dfull), detail::out("dqkv", dqkv));
}

#define OPTIMUS_INSTANTIATE(T)                                                                                   \
  template void flash_attention_forward<T>(TensorView<const T>, const AttentionShape&, TensorView<T>,          \
                                           TensorView<T>, const Queue&);                                         \
  template void attention_delta<T>(TensorView<const T>, TensorView<const T>, const AttentionShape&, TensorView<T>, \
                                   const Queue&);                                                                \
  template void flash_attention_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,     \
                                            TensorView<const T>, const AttentionShape&, TensorView<T>,          \
                                            const Queue&);                                                      \
  template void repeat_kv<T>(TensorView<const T>, TensorView<T>, const KvHeads&, const Queue&);                 \
  template void sum_kv<T>(TensorView<const T>, TensorView<T>, const KvHeads&, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

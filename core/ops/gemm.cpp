// GEMM (optimus/core/ops.hpp): cpu::gemm on the host; on an accelerator its GemmEngine (optimus/core/gemm_engine.hpp:
// cuBLASLt or the simulated device's), with the epilogue fused where the engine takes it and applied after the GEMM
// otherwise; in f32/f64 or with bf16 operands and f32 accumulation (mixed precision). Casts between f32 and bf16.
#include <utility>

#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"
#include "optimus/core/gemm_engine.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::ops {
namespace {

using detail::contiguous;
using detail::contiguous_rows;
using detail::dispatch;

// op(A): [m, k], op(B): [k, n], C: [m, n], or an error naming the shapes.
template <class A, class B, class C>
void check_product(const char* op, Trans trans_a, Trans trans_b, const TensorView<A>& a, const TensorView<B>& b,
                   const TensorView<C>& c) {
  OPTIMUS_CHECK(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, op, ": needs matrices, got ", a.shape(), ", ",
                b.shape(), ", ", c.shape());
  const bool ta = trans_a == Trans::yes, tb = trans_b == Trans::yes;
  const std::int64_t m = ta ? a.size(1) : a.size(0), k = ta ? a.size(0) : a.size(1);
  const std::int64_t kb = tb ? b.size(1) : b.size(0), n = tb ? b.size(0) : b.size(1);
  OPTIMUS_CHECK(k == kb && c.size(0) == m && c.size(1) == n, op, ": op(A) is ", m, "x", k, ", op(B) is ", kb, "x", n,
                ", C is ", c.shape());
}

// The epilogue's operands: the bias [1, n] and GELU's input [m, n] on C's device, or an error naming them.
template <class T>
void check_epilogue(const char* op, const Epilogue<T>& e, const TensorView<T>& c) {
  using Kind = typename Epilogue<T>::Kind;
  e.check_fits(op, c.shape());
  if (e.kind == Kind::none) return;
  detail::common_device(op, {detail::any_layout("C", c), detail::any_layout("bias", e.bias)});
  if (e.kind == Kind::bias) return;
  detail::common_device(op, {detail::any_layout("C", c), detail::any_layout("pre", e.pre)});
}

// C = beta C on rows contiguous C (k = 0), row by row when C has a row stride of its own.
template <class T>
void scale_by_beta(T beta, const TensorView<T>& c, const Queue& queue) {
  const bool whole = c.is_contiguous();
  for (std::int64_t r = 0; r < (whole ? 1 : c.size(0)); ++r) {
    const TensorView<T> part = whole ? c : c.block(r, 0, 1, c.size(1));
    if (beta == T(0)) {
      fill<T>(part, T(0), queue);
    } else {
      axpby<T>(T(0), part, beta, part, queue);
    }
  }
}

// The epilogue applied after the GEMM, where it was not fused: bias, then pre = C and C = gelu(pre).
template <class T>
void apply_epilogue(const Epilogue<T>& e, const TensorView<T>& c, const Queue& queue) {
  using Kind = typename Epilogue<T>::Kind;
  if (e.kind == Kind::none) return;
  add_row_broadcast<T>(e.bias, c, queue);
  if (e.kind == Kind::bias) return;
  axpby<T>(T(1), TensorView<const T>(c), T(0), e.pre, queue);
  gelu_forward<T>(TensorView<const T>(e.pre), c, queue);
}

// The queue's GEMM engine, of the operands' device.
GemmEngine& engine_of(const char* op, const Queue& queue, Device where) {
  OPTIMUS_CHECK(queue.gemm != nullptr, op, ": operands on ", name_of(where),
                " need the device's GEMM engine in the queue (ops::Queue::gemm)");
  OPTIMUS_CHECK(queue.gemm->device() == where, op, ": operands on ", name_of(where), " but the queue's GEMM engine is ",
                name_of(queue.gemm->device()), "'s");
  return *queue.gemm;
}

GemmPrecision precision_of(GemmMath math) { return math == GemmMath::tf32 ? GemmPrecision::tf32 : GemmPrecision::f32; }

// The row-major product on an accelerator (shapes already checked; rows contiguous): k = 0 and empty outputs here,
// the rest by the engine, with the epilogue fused where it takes it.
template <class In>
void accelerated_gemm(const char* op, GemmPrecision precision, Trans trans_a, Trans trans_b, float alpha,
                      const TensorView<const In>& a, const TensorView<const In>& b, float beta,
                      const TensorView<float>& c, const Epilogue<float>& epilogue, const Queue& queue) {
  const std::int64_t m = c.size(0), n = c.size(1), k = trans_a == Trans::yes ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_by_beta(beta, c, queue);
    apply_epilogue(epilogue, c, queue);
    return;
  }
  GemmEngine& engine = engine_of(op, queue, c.device());
  GemmCall call{.precision = precision, .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
                .alpha = alpha, .beta = beta, .a = a.data(), .lda = a.stride(0), .b = b.data(), .ldb = b.stride(0),
                .c = c.data(), .ldc = c.stride(0)};
  using Kind = Epilogue<float>::Kind;
  if (epilogue.kind != Kind::none && epilogue.bias.is_contiguous() &&
      (epilogue.kind == Kind::bias || epilogue.pre.stride(1) == 1)) {
    using Fused = GemmCall::Epilogue::Kind;
    call.epilogue = {.kind = epilogue.kind == Kind::bias ? Fused::bias : Fused::bias_gelu,
                     .bias = epilogue.bias.data(),
                     .pre = epilogue.kind == Kind::bias_gelu ? epilogue.pre.data() : nullptr,
                     .ld_pre = epilogue.kind == Kind::bias_gelu ? epilogue.pre.stride(0) : 0};
    if (engine.run(call, *queue.stream)) return;
    call.epilogue = {};  // not fused: the engine ran nothing
  }
  engine.run(call, *queue.stream);
  apply_epilogue(epilogue, c, queue);
}

// The strided-batched form: matrix 0 of each view and the element strides between matrices.
template <class In>
void accelerated_gemm_batched(const char* op, GemmPrecision precision, Trans trans_a, Trans trans_b, float alpha,
                              const BatchView<const In>& a, const BatchView<const In>& b, float beta,
                              const BatchView<float>& c, std::int64_t batch, const Queue& queue) {
  const TensorView<const In> a0 = a.matrix(0, batch), b0 = b.matrix(0, batch);
  const TensorView<float> c0 = c.matrix(0, batch);
  const std::int64_t k = trans_a == Trans::yes ? a0.size(0) : a0.size(1);
  if (c0.numel() == 0 || k == 0) {  // rare: matrix by matrix
    for (std::int64_t i = 0; i < batch; ++i) {
      accelerated_gemm(op, precision, trans_a, trans_b, alpha, a.matrix(i, batch), b.matrix(i, batch), beta,
                       c.matrix(i, batch), Epilogue<float>{}, queue);
    }
    return;
  }
  const auto stride = [&](const auto& v, const auto& first) {
    return batch > 1 ? static_cast<std::int64_t>(v.matrix(1, batch).data() - first.data()) : 0;
  };
  const GemmCall call{.precision = precision, .trans_a = trans_a, .trans_b = trans_b, .m = c0.size(0),
                      .n = c0.size(1), .k = k, .alpha = alpha, .beta = beta, .a = a0.data(), .lda = a0.stride(0),
                      .b = b0.data(), .ldb = b0.stride(0), .c = c0.data(), .ldc = c0.stride(0),
                      .batch = {.count = batch, .stride_a = stride(a, a0), .stride_b = stride(b, b0),
                                .stride_c = stride(c, c0)}};
  engine_of(op, queue, c0.device()).run(call, *queue.stream);
}

// `batch` matrices fit the view (its batched dimension divides), or an error naming the operand.
template <class T>
void check_batch(const char* op, const char* name, const BatchView<T>& v, std::int64_t batch) {
  const bool side = v.layout == Batched::side_by_side;
  OPTIMUS_CHECK(v.all.rank() == 2 && batch > 0 && v.all.size(side ? 1 : 0) % batch == 0, op, ": ", name, " has shape ",
                v.all.shape(), ", which does not hold ", batch, side ? " matrices side by side" : " stacked matrices");
}

// x widened to a contiguous host f32 matrix (exact: every bf16 is a float).
Tensor<float> widen(const TensorView<const bf16>& x) {
  Tensor<float> out(x.shape(), MemoryTag{}, Init::none);
  cpu::to_f32(x, out.view());
  return out;
}

// f32 operands as bf16 copies in the queue's scratch (the same shapes, contiguous).
std::pair<Tensor<bf16>, Tensor<bf16>> bf16_copies(const TensorView<const float>& a, const TensorView<const float>& b,
                                                   const Queue& queue) {
  Tensor<bf16> a16(a.shape(), queue.scratch, Init::none), b16(b.shape(), queue.scratch, Init::none);
  to_bf16(a, a16.view(), queue);
  to_bf16(b, b16.view(), queue);
  return {std::move(a16), std::move(b16)};
}

}  // namespace

template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          const Epilogue<T>& epilogue, const Queue& queue) {
  const char* op = "gemm";
  check_product(op, trans_a, trans_b, a, b, c);
  check_epilogue(op, epilogue, c);
  if constexpr (std::is_same_v<T, float>) {
    if (queue.math == GemmMath::bf16) {
      const auto [a16, b16] = bf16_copies(a, b, queue);
      gemm(trans_a, trans_b, alpha, a16.view(), b16.view(), beta, c, epilogue, queue);
      return;  // the copies are freed in stream order: the GEMM on the same stream has read them first
    }
  }
  dispatch<T>(op, {contiguous_rows("A", a), contiguous_rows("B", b), contiguous_rows("C", c)}, queue,
              [&] {
                cpu::gemm<T>(trans_a, trans_b, alpha, a, b, beta, c);
                apply_epilogue(epilogue, c, queue);
              },
              [&] {
                if constexpr (std::is_same_v<T, float>) {  // dispatch refuses f64 on accelerators before
                  accelerated_gemm(op, precision_of(queue.math), trans_a, trans_b, alpha, a, b, beta, c, epilogue,
                                   queue);
                }
              });
}

template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          const Queue& queue) {
  gemm(trans_a, trans_b, alpha, a, b, beta, c, Epilogue<T>{}, queue);
}

void gemm(Trans trans_a, Trans trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, const Epilogue<float>& epilogue, const Queue& queue) {
  const char* op = "gemm (bf16 operands)";
  check_product(op, trans_a, trans_b, a, b, c);
  check_epilogue(op, epilogue, c);
  dispatch<float>(op, {contiguous_rows("A", a), contiguous_rows("B", b), contiguous_rows("C", c)}, queue,
                  [&] {
                    const Tensor<float> a32 = widen(a), b32 = widen(b);
                    cpu::gemm<float>(trans_a, trans_b, alpha, a32.view(), b32.view(), beta, c);
                    apply_epilogue(epilogue, c, queue);
                  },
                  [&] {
                    accelerated_gemm(op, GemmPrecision::bf16_to_f32, trans_a, trans_b, alpha, a, b, beta, c, epilogue,
                                     queue);
                  });
}

void gemm(Trans trans_a, Trans trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, const Queue& queue) {
  gemm(trans_a, trans_b, alpha, a, b, beta, c, Epilogue<float>{}, queue);
}

template <class T>
void gemm_batched(Trans trans_a, Trans trans_b, T alpha, BatchView<const T> a, BatchView<const T> b, T beta,
                  BatchView<T> c, std::int64_t batch, const Queue& queue) {
  const char* op = "gemm_batched";
  check_batch(op, "A", a, batch);
  check_batch(op, "B", b, batch);
  check_batch(op, "C", c, batch);
  check_product(op, trans_a, trans_b, a.matrix(0, batch), b.matrix(0, batch), c.matrix(0, batch));
  dispatch<T>(op, {contiguous_rows("A", a.all), contiguous_rows("B", b.all), contiguous_rows("C", c.all)}, queue,
              [&] {
                for (std::int64_t i = 0; i < batch; ++i) {
                  gemm(trans_a, trans_b, alpha, a.matrix(i, batch), b.matrix(i, batch), beta, c.matrix(i, batch),
                       queue);
                }
              },
              [&] {
                if constexpr (std::is_same_v<T, float>) {  // dispatch refuses f64 on accelerators before
                  if (queue.math == GemmMath::bf16) {  // the whole views cast once; the copies keep the batch layout
                    const auto [a16, b16] = bf16_copies(a.all, b.all, queue);
                    accelerated_gemm_batched(op, GemmPrecision::bf16_to_f32, trans_a, trans_b, alpha,
                                             BatchView<const bf16>{a16.view(), a.layout},
                                             BatchView<const bf16>{b16.view(), b.layout}, beta, c, batch, queue);
                    return;
                  }
                  accelerated_gemm_batched(op, precision_of(queue.math), trans_a, trans_b, alpha, a, b, beta, c,
                                           batch, queue);
                }
              });
}

void to_bf16(TensorView<const float> x, TensorView<bf16> y, const Queue& queue) {
  const char* op = "to_bf16";
  OPTIMUS_CHECK(x.shape() == y.shape() && x.rank() == 2, op, ": x is ", x.shape(), ", y is ", y.shape(),
                " (expected two matrices of one shape)");
  detail::run<float>(
      op, queue, [](auto x_, auto y_) { cpu::to_bf16(x_, y_); },
      [](auto x_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::to_bf16_rows(x_.data(), x_.stride(0), y_.data(), x_.size(0), x_.size(1), s));
      },
      detail::rows(detail::in("x", x)), detail::out("y", y));
}

void to_f32(TensorView<const bf16> x, TensorView<float> y, const Queue& queue) {
  const char* op = "to_f32";
  OPTIMUS_CHECK(x.shape() == y.shape() && x.rank() == 2, op, ": x is ", x.shape(), ", y is ", y.shape(),
                " (expected two matrices of one shape)");
  detail::run<float>(
      op, queue, [](auto x_, auto y_) { cpu::to_f32(x_, y_); },
      [](auto x_, auto y_, cudaStream_t s) { OPTIMUS_CUDA_LAUNCH(cuda::to_f32(x_.data(), y_.data(), x_.numel(), s)); },
      detail::in("x", x), detail::out("y", y));
}

#define OPTIMUS_INSTANTIATE(T)                                                                                      \
  template void gemm<T>(Trans, Trans, T, TensorView<const T>, TensorView<const T>, T, TensorView<T>, const Queue&);  \
  template void gemm<T>(Trans, Trans, T, TensorView<const T>, TensorView<const T>, T, TensorView<T>,                \
                        const Epilogue<T>&, const Queue&);                                                          \
  template void gemm_batched<T>(Trans, Trans, T, BatchView<const T>, BatchView<const T>, T, BatchView<T>,           \
                                std::int64_t, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

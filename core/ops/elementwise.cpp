// Element-wise operations, dropout and the in-process reductions (optimus/core/ops.hpp), each described once: its
// checks, its CPU body (optimus/core/kernels.hpp, cpu_kernels.hpp; the simulated device runs it on its stream) and its
// CUDA launch (elementwise.cu, dropout_kernels.cu, llama_kernels.cu, rotary_kernels.cu), through dispatch.hpp's run.
#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::ops {
namespace {

using detail::cols_of;
using detail::cuda_mask;
using detail::in;
using detail::out;
using detail::rows;
using detail::rows_of;
using detail::run;

template <class T>
void check_same_shape(const char* op, const TensorView<T>& a, const char* b_name, const Shape& b) {
  OPTIMUS_CHECK(a.shape() == b, op, ": ", b_name, " has shape ", b, ", expected ", a.shape());
}

math::Combine combine_of(ReduceOp op) {
  return op == ReduceOp::sum ? math::Combine::sum : op == ReduceOp::max ? math::Combine::max : math::Combine::min;
}

}  // namespace

template <class T>
void fill(TensorView<T> y, T value, const Queue& queue) {
  run<T>(
      "fill", queue, [value](auto y_) { cpu::fill<T>(y_, value); },
      [value](auto y_, cudaStream_t s) { OPTIMUS_CUDA_LAUNCH(cuda::fill(y_.data(), value, y_.numel(), s)); },
      out("y", y));
}

template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y, const Queue& queue) {
  check_same_shape("axpby", x, "y", y.shape());
  run<T>(
      "axpby", queue, [alpha, beta](auto x_, auto y_) { cpu::axpby<T>(alpha, x_, beta, y_); },
      [alpha, beta](auto x_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::axpby(alpha, x_.data(), beta, y_.data(), y_.numel(), s));
      },
      in("x", x), out("y", y));
}

template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y, const Queue& queue) {
  OPTIMUS_CHECK(y.rank() == 2 && row.numel() == y.size(1), "add_row_broadcast: row has shape ", row.shape(),
                ", y has shape ", y.shape());
  run<T>(
      "add_row_broadcast", queue, [](auto row_, auto y_) { cpu::add_row_broadcast<T>(row_, y_); },
      [](auto row_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::add_row_broadcast(row_.data(), y_.data(), y_.size(0), y_.size(1), s));
      },
      in("row", row), out("y", y));
}

template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue) {
  OPTIMUS_CHECK(x.rank() == 2 && out.numel() == x.size(1), "column_sums: out has shape ", out.shape(),
                ", x has shape ", x.shape());
  run<T>(
      "column_sums", queue, [](auto x_, auto out_) { cpu::column_sums<T>(x_, out_); },
      [](auto x_, auto out_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::column_sums(x_.data(), x_.size(0), x_.size(1), out_.data(), nullptr, s));
      },
      in("x", x), detail::out("out", out));
}

void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16, const Queue& queue) {
  const char* op = "column_sums (with x in bf16)";
  OPTIMUS_CHECK(x.rank() == 2 && out.numel() == x.size(1), op, ": out has shape ", out.shape(), ", x has shape ",
                x.shape());
  check_same_shape(op, x, "x_bf16", x_bf16.shape());
  run<float>(
      op, queue, [](auto x_, auto out_, auto c) { cpu::column_sums(x_, out_, c); },
      [](auto x_, auto out_, auto c, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::column_sums(x_.data(), x_.size(0), x_.size(1), out_.data(), c.data(), s));
      },
      in("x", x), detail::out("out", out), detail::out("x_bf16", x_bf16));
}

template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y, const Queue& queue) {
  check_same_shape("gelu_forward", x, "y", y.shape());
  run<T>(
      "gelu_forward", queue, [](auto x_, auto y_) { cpu::gelu_forward<T>(x_, y_); },
      [](auto x_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::gelu_forward(x_.data(), y_.data(), x_.numel(), s));
      },
      in("x", x), out("y", y));
}

void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept, const Queue& queue) {
  const char* op = "gelu_forward (into bf16)";
  check_same_shape(op, x, "y", y.shape());
  check_same_shape(op, x, "x_kept", x_kept.shape());
  run<float>(
      op, queue, [](auto x_, auto y_, auto k) { cpu::gelu_forward(x_, y_, k); },
      [](auto x_, auto y_, auto k, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::gelu_forward_bf16(x_.data(), y_.data(), k.data(), x_.numel(), s));
      },
      in("x", x), out("y", y), out("x_kept", x_kept));
}

template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, const Queue& queue) {
  check_same_shape("gelu_backward", x, "dy", dy.shape());
  check_same_shape("gelu_backward", x, "dx", dx.shape());
  run<T>(
      "gelu_backward", queue, [](auto x_, auto dy_, auto dx_) { cpu::gelu_backward<T>(x_, dy_, dx_); },
      [](auto x_, auto dy_, auto dx_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::gelu_backward(x_.data(), dy_.data(), dx_.data(), x_.numel(), s));
      },
      in("x", x), in("dy", dy), out("dx", dx));
}

void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx, const Queue& queue) {
  check_same_shape("gelu_backward (bf16 x)", x, "dy", dy.shape());
  check_same_shape("gelu_backward (bf16 x)", x, "dx", dx.shape());
  run<float>(
      "gelu_backward (bf16 x)", queue, [](auto x_, auto dy_, auto dx_) { cpu::gelu_backward(x_, dy_, dx_); },
      [](auto x_, auto dy_, auto dx_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::gelu_backward_bf16(x_.data(), dy_.data(), dx_.data(), x_.numel(), s));
      },
      in("x", x), in("dy", dy), out("dx", dx));
}

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream, const Queue& queue) {
  OPTIMUS_CHECK(p >= 0.0 && p < 1.0, "dropout: the probability must be in [0, 1), got ", p);
  if (p == 0.0) return;
  OPTIMUS_CHECK(x.rank() == 2 && (x.stride(1) == 1 || x.size(1) <= 1),
                "dropout: needs a matrix with contiguous rows, got shape ", x.shape(), " and strides ", x.strides());
  OPTIMUS_CHECK(row0 + static_cast<std::uint64_t>(x.size(0)) <= 0x100000000ull &&
                    col0 + static_cast<std::uint64_t>(x.size(1)) <= 0x100000000ull,
                "dropout: rows up to ", row0 + static_cast<std::uint64_t>(x.size(0)), " and columns up to ",
                col0 + static_cast<std::uint64_t>(x.size(1)), " exceed the 2^32 x 2^32 index space of the masks");
  run<T>(
      "dropout", queue, [=](auto x_) { cpu::dropout<T>(x_, row0, col0, p, seed, stream); },
      [=](auto x_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::dropout_apply(x_.data(), x_.size(0), x_.size(1), x_.stride(0), row0, col0, p, seed, stream, s));
      },
      rows(out("x", x)));
}

namespace {

// The mask's checks, as dropout's; `x` is the block it draws for.
template <class T>
void check_mask(const char* op, const TensorView<T>& x, const DropoutMask& mask) {
  OPTIMUS_CHECK(mask.p >= 0.0 && mask.p < 1.0, op, ": the probability must be in [0, 1), got ", mask.p);
  OPTIMUS_CHECK(x.rank() == 2 && (x.stride(1) == 1 || x.size(1) <= 1), op,
                ": needs a matrix with contiguous rows, got shape ", x.shape(), " and strides ", x.strides());
  OPTIMUS_CHECK(mask.row0 + static_cast<std::uint64_t>(x.size(0)) <= 0x100000000ull &&
                    mask.col0 + static_cast<std::uint64_t>(x.size(1)) <= 0x100000000ull,
                op, ": rows up to ", mask.row0 + static_cast<std::uint64_t>(x.size(0)), " and columns up to ",
                mask.col0 + static_cast<std::uint64_t>(x.size(1)),
                " exceed the 2^32 x 2^32 index space of the masks");
}

}  // namespace

template <class T>
void dropout_residual(TensorView<const T> residual, TensorView<T> x, const DropoutMask& mask, TensorView<T> row_sums,
                      const Queue& queue) {
  const char* op = "dropout_residual";
  check_mask(op, x, mask);
  check_same_shape(op, x, "residual", residual.shape());
  OPTIMUS_CHECK(row_sums.rank() == 0 || row_sums.shape() == Shape{x.size(0)}, op, ": row_sums has shape ",
                row_sums.shape(), ", expected [", x.size(0), "]");  // TensorView{}: no sums wanted
  run<T>(op, queue, [mask](auto r, auto x_, auto sums) { cpu::dropout_residual<T>(r, x_, mask, sums); },
         [mask](auto r, auto x_, auto sums, cudaStream_t s) {
           OPTIMUS_CUDA_LAUNCH(cuda::dropout_residual(r.data(), x_.data(), rows_of(x_), cols_of(x_), cuda_mask(mask),
                                                      sums.rank() == 0 ? nullptr : sums.data(), s));
         },
         in("residual", residual), out("x", x), out("row_sums", row_sums));
}

namespace {
// gu [m, 2f] against y (or dy) [m, f].
template <class G, class Y>
void check_swiglu(const char* op, const TensorView<G>& gu, const TensorView<Y>& y) {
  OPTIMUS_CHECK(gu.rank() == 2 && y.rank() == 2 && gu.size(0) == y.size(0) && gu.size(1) == 2 * y.size(1), op,
                ": gu has shape ", gu.shape(), ", expected [rows, 2 f] beside ", y.shape());
}
}  // namespace

template <class T>
void swiglu_forward(TensorView<const T> gu, TensorView<T> y, const Queue& queue) {
  check_swiglu("swiglu_forward", gu, y);
  run<T>(
      "swiglu_forward", queue, [](auto gu_, auto y_) { cpu::swiglu_forward<T>(gu_, y_); },
      [](auto gu_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::swiglu_forward(gu_.data(), y_.data(), rows_of(y_), cols_of(y_), s));
      },
      in("gu", gu), out("y", y));
}

void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept, const Queue& queue) {
  const char* op = "swiglu_forward (into bf16)";
  check_swiglu(op, gu, y);
  check_same_shape(op, gu, "gu_kept", gu_kept.shape());
  run<float>(
      op, queue, [](auto gu_, auto y_, auto k) { cpu::swiglu_forward(gu_, y_, k); },
      [](auto gu_, auto y_, auto k, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::swiglu_forward_bf16(gu_.data(), y_.data(), k.data(), rows_of(y_), cols_of(y_), s));
      },
      in("gu", gu), out("y", y), out("gu_kept", gu_kept));
}

template <class T>
void swiglu_backward(TensorView<const T> gu, TensorView<const T> dy, TensorView<T> dgu, const Queue& queue) {
  const char* op = "swiglu_backward";
  check_swiglu(op, gu, dy);
  check_same_shape(op, gu, "dgu", dgu.shape());
  run<T>(
      op, queue, [](auto gu_, auto dy_, auto dgu_) { cpu::swiglu_backward<T>(gu_, dy_, dgu_); },
      [](auto gu_, auto dy_, auto dgu_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::swiglu_backward(gu_.data(), dy_.data(), dgu_.data(), rows_of(dy_), cols_of(dy_), s));
      },
      in("gu", gu), in("dy", dy), out("dgu", dgu));
}

void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu,
                     const Queue& queue) {
  const char* op = "swiglu_backward (on bf16)";
  check_swiglu(op, gu, dy);
  check_same_shape(op, gu, "dgu", dgu.shape());
  run<float>(
      op, queue, [](auto gu_, auto dy_, auto dgu_) { cpu::swiglu_backward(gu_, dy_, dgu_); },
      [](auto gu_, auto dy_, auto dgu_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::swiglu_backward_bf16(gu_.data(), dy_.data(), dgu_.data(), rows_of(dy_), cols_of(dy_), s));
      },
      in("gu", gu), in("dy", dy), out("dgu", dgu));
}

template <class T>
void dropout_copy(TensorView<const T> x, TensorView<T> y, const DropoutMask& mask, const Queue& queue) {
  const char* op = "dropout_copy";
  check_mask(op, x, mask);
  check_same_shape(op, x, "y", y.shape());
  run<T>(
      op, queue, [mask](auto x_, auto y_) { cpu::dropout_copy<T>(x_, y_, mask); },
      [mask](auto x_, auto y_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::dropout_copy(x_.data(), y_.data(), rows_of(x_), cols_of(x_), cuda_mask(mask), s));
      },
      in("x", x), out("y", y));
}

template <class T>
void rotary(TensorView<T> qkv, const Rotary& r, const Queue& queue) {
  const char* op = "rotary";
  const std::int64_t heads = r.heads + 2 * r.kv_heads;  // of Q, K and V
  OPTIMUS_CHECK(qkv.rank() == 2 && r.heads > 0 && r.kv_heads > 0 && r.heads % r.kv_heads == 0 && r.seq > 0 &&
                    qkv.size(1) % heads == 0 && (qkv.size(1) / heads) % 2 == 0 && qkv.size(0) % r.seq == 0,
                op, ": qkv ", qkv.shape(), " is not whole sequences of ", r.seq, " rows by [Q | K | V] of ", r.heads,
                " query and ", r.kv_heads, " key/value heads of an even dimension");
  OPTIMUS_CHECK(std::isfinite(r.theta) && r.theta > 1.0, op, ": theta = ", r.theta, " must be finite and above 1");
  run<T>(
      op, queue, [r](auto qkv_) { cpu::rotary<T>(qkv_, r); },
      [r](auto qkv_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::rotary(qkv_.data(), rows_of(qkv_), qkv_.size(1), r.seq, r.heads, r.kv_heads, r.theta,
                                         r.inverse, s));
      },
      out("qkv", qkv));
}

template <class T>
void reduce_into(TensorView<T> acc, TensorView<const T> x, ReduceOp op, const Queue& queue) {
  check_same_shape("reduce_into", x, "acc", acc.shape());
  const math::Combine how = combine_of(op);
  run<T, true>(
      "reduce_into", queue, [how](auto acc_, auto x_) { cpu::combine(acc_.data(), x_.data(), acc_.numel(), how); },
      [how](auto acc_, auto x_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::combine_into(acc_.data(), x_.data(), acc_.numel(), how, s));
      },
      out("acc", acc), in("x", x));
}

#define OPTIMUS_INSTANTIATE(T)                                                                               \
  template void fill<T>(TensorView<T>, T, const Queue&);                                                     \
  template void axpby<T>(T, TensorView<const T>, T, TensorView<T>, const Queue&);                            \
  template void add_row_broadcast<T>(TensorView<const T>, TensorView<T>, const Queue&);                      \
  template void column_sums<T>(TensorView<const T>, TensorView<T>, const Queue&);                            \
  template void gelu_forward<T>(TensorView<const T>, TensorView<T>, const Queue&);                           \
  template void gelu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, const Queue&);     \
  template void dropout<T>(TensorView<T>, std::uint64_t, std::uint64_t, double, std::uint64_t, std::uint64_t, \
                           const Queue&);                                                                    \
  template void dropout_residual<T>(TensorView<const T>, TensorView<T>, const DropoutMask&, TensorView<T>,       \
                                    const Queue&);                                                           \
  template void rotary<T>(TensorView<T>, const Rotary&, const Queue&);                                       \
  template void swiglu_forward<T>(TensorView<const T>, TensorView<T>, const Queue&);                         \
  template void swiglu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, const Queue&);   \
  template void dropout_copy<T>(TensorView<const T>, TensorView<T>, const DropoutMask&, const Queue&);       \
  template void reduce_into<T>(TensorView<T>, TensorView<const T>, ReduceOp, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

// The optimizer's element-wise work (optimus/core/ops.hpp), each described once: its checks, its CPU body
// (cpu_kernels.hpp; the simulated device runs it on its stream) and its CUDA launch (optimizer_kernels.cu), through
// dispatch.hpp's run.
#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::in;
using detail::out;
using detail::run;

// AdamW's operands: one shape, contiguous (else an error naming `op` and the shapes).
template <class T>
void check_update(const char* op, const TensorView<T>& value, const TensorView<const T>& grad, const TensorView<T>& m,
                  const TensorView<T>& v) {
  OPTIMUS_CHECK(grad.shape() == value.shape() && m.shape() == value.shape() && v.shape() == value.shape(), op,
                ": value ", value.shape(), ", grad ", grad.shape(), ", m ", m.shape(), ", v ", v.shape(),
                " must have one shape");
  OPTIMUS_CHECK(value.is_contiguous() && grad.is_contiguous() && m.is_contiguous() && v.is_contiguous(), op,
                ": operands must be contiguous");
}

}  // namespace

template <class T>
double sum_squares(TensorView<const T> x, TensorView<double> scratch, const Queue& queue) {
  const char* op = "sum_squares";
  OPTIMUS_CHECK(x.is_contiguous(), op, ": x must be contiguous");
  if (detail::device_of(op, in("x", x), out("scratch", scratch)) == Device::cpu) {
    const Timeline::Operation timed(queue.timeline, SpanKind::elementwise);
    return cpu::sum_squares(x);
  }
  // On a device: the sum into the scratch's last double (the rest is the CUDA kernel's partials), then to the host.
  OPTIMUS_CHECK(scratch.numel() >= sum_squares_scratch(), op, ": scratch holds ", scratch.numel(), " doubles, needs ",
                sum_squares_scratch());
  run<T>(
      op, queue,
      [](auto x_, auto scratch_) { scratch_.data()[sum_squares_scratch() - 1] = cpu::sum_squares(x_); },
      [](auto x_, auto scratch_, cudaStream_t stream) {
        OPTIMUS_CUDA_LAUNCH(cuda::sum_squares(x_.data(), x_.numel(), scratch_.data(),
                                              scratch_.data() + (sum_squares_scratch() - 1), stream));
      },
      in("x", x), out("scratch", scratch));
  double result = 0;  // pageable: the copy completes before it returns
  queue.stream->runtime().copy_async(&result, scratch.data() + (sum_squares_scratch() - 1), sizeof(double),
                                     *queue.stream);
  return result;
}

template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v, const AdamWStep& s,
                  const Queue& queue) {
  const char* op = "adamw_update";
  check_update(op, value, grad, m, v);
  run<T>(
      op, queue, [s](auto w, auto g, auto m_, auto v_) { cpu::adamw_update(w, g, m_, v_, s); },
      [s](auto w, auto g, auto m_, auto v_, cudaStream_t stream) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::adamw_update(w.data(), g.data(), m_.data(), v_.data(), w.numel(), s, nullptr, stream));
      },
      out("value", value), in("grad", grad), out("m", m), out("v", v));
}

void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m, TensorView<float> v,
                  const AdamWStep& s, TensorView<bf16> value_bf16, const Queue& queue) {
  const char* op = "adamw_update (with a bf16 copy)";
  OPTIMUS_CHECK(value_bf16.shape() == value.shape() && value_bf16.is_contiguous(), op, ": the copy is ",
                value_bf16.shape(), ", the value ", value.shape(), " (one shape, contiguous)");
  check_update(op, value, grad, m, v);
  run<float>(
      op, queue, [s](auto w, auto g, auto m_, auto v_, auto w16) { cpu::adamw_update_with_copy(w, g, m_, v_, s, w16); },
      [s](auto w, auto g, auto m_, auto v_, auto w16, cudaStream_t stream) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::adamw_update(w.data(), g.data(), m_.data(), v_.data(), w.numel(), s, w16.data(), stream));
      },
      out("value", value), in("grad", grad), out("m", m), out("v", v), out("value_bf16", value_bf16));
}

#define OPTIMUS_INSTANTIATE(T)                                                          \
  template double sum_squares<T>(TensorView<const T>, TensorView<double>, const Queue&); \
  template void adamw_update<T>(TensorView<T>, TensorView<const T>, TensorView<T>, TensorView<T>, const AdamWStep&, \
                                const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

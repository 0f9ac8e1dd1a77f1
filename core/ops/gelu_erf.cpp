// ops::gelu_erf_forward and gelu_erf_backward (optimus/core/ops.hpp), described once: the checks, the CPU body (which
// the simulated device runs on its stream) and the CUDA launch (gelu_erf.cu).
#include <cmath>
#include <cstdint>

#include "dispatch.hpp"

namespace optimus::ops {
namespace detail {

// gelu_erf.cu: the kernels over n elements on `stream` (a cudaStream_t).
void gelu_erf_forward_cuda(const float* x, float* y, std::int64_t n, void* stream);
void gelu_erf_backward_cuda(const float* x, const float* dy, float* dx, std::int64_t n, void* stream);

}  // namespace detail
namespace {

template <class A, class B>
void check_same_shape(const char* op, const char* a_name, const TensorView<A>& a, const char* b_name,
                      const TensorView<B>& b) {
  OPTIMUS_CHECK(a.shape() == b.shape(), op, ": ", a_name, " has shape ", a.shape(), " but ", b_name, " has shape ",
                b.shape());
  OPTIMUS_CHECK(a.is_contiguous() && b.is_contiguous(), op, ": ", a_name, " and ", b_name,
                " must be contiguous; their strides are ", a.strides(), " and ", b.strides());
}

// Phi(x), the standard normal distribution function, and phi(x), its density.
template <class T>
T normal_cdf(T x) {
  return T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
}
template <class T>
T normal_pdf(T x) {
  return std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);  // 1 / sqrt(2 pi)
}

}  // namespace

template <class T>
void gelu_erf_forward(TensorView<const T> x, TensorView<T> y, const Queue& queue) {
  check_same_shape("gelu_erf_forward", "x", x, "y", y);
  detail::run<T>(
      "gelu_erf_forward", queue,
      [](TensorView<const T> x_, TensorView<T> y_) {
        const T* in = x_.data();
        T* out = y_.data();
        for (std::int64_t i = 0; i < x_.numel(); ++i) out[i] = in[i] * normal_cdf(in[i]);
      },
      [](auto x_, auto y_, void* stream) {
        OPTIMUS_CUDA_LAUNCH(detail::gelu_erf_forward_cuda(x_.data(), y_.data(), x_.numel(), stream));
      },
      detail::in("x", x), detail::out("y", y));
}

template <class T>
void gelu_erf_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, const Queue& queue) {
  check_same_shape("gelu_erf_backward", "x", x, "dy", dy);
  check_same_shape("gelu_erf_backward", "x", x, "dx", dx);
  detail::run<T>(
      "gelu_erf_backward", queue,
      [](TensorView<const T> x_, TensorView<const T> dy_, TensorView<T> dx_) {
        const T *in = x_.data(), *grad = dy_.data();
        T* out = dx_.data();
        for (std::int64_t i = 0; i < x_.numel(); ++i) {
          out[i] = grad[i] * (normal_cdf(in[i]) + in[i] * normal_pdf(in[i]));
        }
      },
      [](auto x_, auto dy_, auto dx_, void* stream) {
        OPTIMUS_CUDA_LAUNCH(detail::gelu_erf_backward_cuda(x_.data(), dy_.data(), dx_.data(), x_.numel(), stream));
      },
      detail::in("x", x), detail::in("dy", dy), detail::out("dx", dx));
}

template void gelu_erf_forward<float>(TensorView<const float>, TensorView<float>, const Queue&);
template void gelu_erf_forward<double>(TensorView<const double>, TensorView<double>, const Queue&);
template void gelu_erf_backward<float>(TensorView<const float>, TensorView<const float>, TensorView<float>,
                                       const Queue&);
template void gelu_erf_backward<double>(TensorView<const double>, TensorView<const double>, TensorView<double>,
                                        const Queue&);

}  // namespace optimus::ops

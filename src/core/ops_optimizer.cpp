// The optimizer's element-wise work, dispatched by device (optimus/core/ops.hpp).
#include <cmath>

#include "ops_dispatch.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/layer_kernels.hpp"
#include "optimus/cuda/runtime.hpp"
#endif

namespace optimus::ops {

template <class T>
double sum_squares(TensorView<const T> x, TensorView<double> scratch, [[maybe_unused]] Queue queue) {
  const char* op = "sum_squares";
  OPTIMUS_CHECK(x.is_contiguous(), op, ": x must be contiguous");
  if (detail::on_cuda<T>(op, {{"x", x.device()}, {"scratch", scratch.device()}})) {
    OPTIMUS_CHECK(scratch.numel() >= sum_squares_scratch(), op, ": scratch holds ", scratch.numel(),
                  " doubles, needs ", sum_squares_scratch());
    double result = 0;
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      double* partials = scratch.data();
      double* total = partials + cuda::sum_squares_partials();
      cuda::sum_squares(x.data(), x.numel(), partials, total, detail::stream_of(queue));
      const cudaStream_t stream = detail::stream_of(queue);
      OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(&result, total, sizeof(double), cudaMemcpyDeviceToHost, stream));
      OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream));
    }
#endif
    return result;
  }
  double sq = 0;
  for (std::int64_t e = 0; e < x.numel(); ++e) sq += static_cast<double>(x.data()[e]) * x.data()[e];
  return sq;
}

template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v, const AdamWStep& s,
                  [[maybe_unused]] Queue queue) {
  const char* op = "adamw_update";
  OPTIMUS_CHECK(grad.shape() == value.shape() && m.shape() == value.shape() && v.shape() == value.shape(), op,
                ": value ", value.shape(), ", grad ", grad.shape(), ", m ", m.shape(), ", v ", v.shape(),
                " must have one shape");
  OPTIMUS_CHECK(value.is_contiguous() && grad.is_contiguous() && m.is_contiguous() && v.is_contiguous(), op,
                ": operands must be contiguous");
  if (detail::on_cuda<T>(op, {{"value", value.device()}, {"grad", grad.device()}, {"m", m.device()},
                              {"v", v.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::adamw_update(value.data(), grad.data(), m.data(), v.data(), value.numel(), s, nullptr,
                         detail::stream_of(queue));
    }
#endif
    return;
  }
  T* w = value.data();
  const T* g_ = grad.data();
  T* mm = m.data();
  T* vv = v.data();
  for (std::int64_t e = 0; e < value.numel(); ++e) {
    const double g = s.clip * static_cast<double>(g_[e]);
    mm[e] = static_cast<T>(s.beta1 * mm[e] + (1 - s.beta1) * g);
    vv[e] = static_cast<T>(s.beta2 * vv[e] + (1 - s.beta2) * g * g);
    const double update = (mm[e] / s.c1) / (std::sqrt(vv[e] / s.c2) + s.eps);
    w[e] = static_cast<T>(w[e] - s.lr * (update + s.weight_decay * w[e]));
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                    \
  template double sum_squares<T>(TensorView<const T>, TensorView<double>, Queue); \
  template void adamw_update<T>(TensorView<T>, TensorView<const T>, TensorView<T>, TensorView<T>, const AdamWStep&, \
                                Queue);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

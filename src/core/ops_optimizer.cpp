// The optimizer's element-wise work (optimus/core/ops.hpp): checks, then the one dispatch (ops_dispatch.hpp).
#include "cpu_kernels.hpp"
#include "ops_dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::contiguous;
using detail::dispatch;

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
  return dispatch<T>(op, {contiguous("x", x), contiguous("scratch", scratch)}, queue,
                     [&] { return cpu::sum_squares(x); },
                     [&](const auto& k) {
                       OPTIMUS_CHECK(scratch.numel() >= sum_squares_scratch(), op, ": scratch holds ", scratch.numel(),
                                     " doubles, needs ", sum_squares_scratch());
                       k.sum_squares(x, scratch, queue);
                       double result = 0;  // pageable: the copy completes before it returns
                       queue.stream->runtime().copy_async(&result, scratch.data() + (sum_squares_scratch() - 1),
                                                          sizeof(double), *queue.stream);
                       return result;
                     });
}

template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v, const AdamWStep& s,
                  const Queue& queue) {
  const char* op = "adamw_update";
  check_update(op, value, grad, m, v);
  dispatch<T>(op, {contiguous("value", value), contiguous("grad", grad), contiguous("m", m), contiguous("v", v)}, queue,
              [&] { cpu::adamw_update(value, grad, m, v, s); },
              [&](const auto& k) { k.adamw_update(value, grad, m, v, s, TensorView<bf16>(), queue); });
}

void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m, TensorView<float> v,
                  const AdamWStep& s, TensorView<bf16> value_bf16, const Queue& queue) {
  const char* op = "adamw_update (with a bf16 copy)";
  OPTIMUS_CHECK(value_bf16.shape() == value.shape() && value_bf16.is_contiguous(), op, ": the copy is ",
                value_bf16.shape(), ", the value ", value.shape(), " (one shape, contiguous)");
  check_update(op, value, grad, m, v);
  dispatch<float>(op,
                  {contiguous("value", value), contiguous("grad", grad), contiguous("m", m), contiguous("v", v),
                   contiguous("value_bf16", value_bf16)},
                  queue, [&] { cpu::adamw_update_with_copy(value, grad, m, v, s, value_bf16); },
                  [&](const auto& k) { k.adamw_update(value, grad, m, v, s, value_bf16, queue); });
}

#define OPTIMUS_INSTANTIATE(T)                                                          \
  template double sum_squares<T>(TensorView<const T>, TensorView<double>, const Queue&); \
  template void adamw_update<T>(TensorView<T>, TensorView<const T>, TensorView<T>, TensorView<T>, const AdamWStep&, \
                                const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

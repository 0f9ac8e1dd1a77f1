// CPU backend: the optimizer's element-wise work, bf16 casts and the in-process reductions (cpu_kernels.hpp).
#include "optimus/core/cpu_kernels.hpp"

namespace optimus::cpu {

void to_bf16(TensorView<const float> x, TensorView<bf16> y) {
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) y(r, c) = bf16(x(r, c));
  }
}

void to_f32(TensorView<const bf16> x, TensorView<float> y) {
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) y(r, c) = static_cast<float>(x(r, c));
  }
}

template <class T>
void combine(T* acc, const T* x, std::int64_t n, math::Combine op) {
  for (std::int64_t e = 0; e < n; ++e) acc[e] = math::combine(acc[e], x[e], op);
}

template <class T>
double sum_squares(TensorView<const T> x) {
  double sq = 0;
  for (std::int64_t e = 0; e < x.numel(); ++e) sq += static_cast<double>(x.data()[e]) * x.data()[e];
  return sq;
}

template <class T>
void adamw_update(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v,
                  const AdamWStep& s) {
  for (std::int64_t e = 0; e < value.numel(); ++e) math::adamw(value.data()[e], grad.data()[e], m.data()[e], v.data()[e], s);
}

void adamw_update_with_copy(TensorView<float> value, TensorView<const float> grad, TensorView<float> m,
                            TensorView<float> v, const AdamWStep& s, TensorView<bf16> value_bf16) {
  for (std::int64_t e = 0; e < value.numel(); ++e) {
    math::adamw(value.data()[e], grad.data()[e], m.data()[e], v.data()[e], s);
    value_bf16.data()[e] = bf16(value.data()[e]);
  }
}

#define OPTIMUS_INSTANTIATE(T)                                              \
  template void combine<T>(T*, const T*, std::int64_t, math::Combine);      \
  template double sum_squares<T>(TensorView<const T>);                      \
  template void adamw_update<T>(TensorView<T>, TensorView<const T>, TensorView<T>, TensorView<T>, const AdamWStep&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

// Internal to comm: the one reduction of the in-process staging areas (in_process.cpp's on the host,
// device_staging.cpp's on a device).
#pragma once

#include <cstddef>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::detail {

// acc[e] = acc[e] op x[e] for `count` elements of `dtype` — f32 or f64, what Communicator::check_reducible lets
// through — in memory on `where`, on `queue` (ops::reduce_into: the CPU's kernel on the host, the device's on a device;
// the same element arithmetic either way, so every staging area gives the host's bits).
inline void reduce_staged(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op, Device where,
                          const ops::Queue& queue) {
  const Shape shape{static_cast<std::int64_t>(count)};
  if (dtype == DType::f32) {
    ops::reduce_into<float>(TensorView<float>(static_cast<float*>(acc), shape, where),
                            TensorView<const float>(static_cast<const float*>(x), shape, where), op, queue);
  } else {
    ops::reduce_into<double>(TensorView<double>(static_cast<double*>(acc), shape, where),
                             TensorView<const double>(static_cast<const double*>(x), shape, where), op, queue);
  }
}

// out[e] = a[e] op b[e] for `count` elements of f32 or f64 in host memory, in one pass: the bits of copying a into out
// and reduce_staged(out, b) (math::combine, as the CPU's reduce_into).
inline void combine_host(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op) {
  const auto run = [&]<class T>() {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    const auto each = [&]<math::Combine C>() {  // one loop per operation, so that it vectorises
      for (std::size_t e = 0; e < count; ++e) o[e] = math::combine(x[e], y[e], C);
    };
    if (op == ReduceOp::sum) {
      each.template operator()<math::Combine::sum>();
    } else if (op == ReduceOp::max) {
      each.template operator()<math::Combine::max>();
    } else {
      each.template operator()<math::Combine::min>();
    }
  };
  if (dtype == DType::f32) {
    run.template operator()<float>();
  } else {
    run.template operator()<double>();
  }
}

}  // namespace optimus::detail

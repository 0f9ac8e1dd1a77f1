// Element-wise operations and dropout, dispatched by device (optimus/core/ops.hpp): optimus::cpu kernels on the
// CPU, optimus::cuda kernels (contiguous fp32) on the GPU.
#include <type_traits>

#include "ops_dispatch.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/rng.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/kernels.hpp"
#include "optimus/cuda/layer_kernels.hpp"
#endif

namespace optimus::ops {
namespace {


// Whether the operands are on the GPU (then also contiguous: the CUDA kernels take no strides), or on the CPU.
template <class T>
bool on_cuda(const char* op, std::initializer_list<std::pair<const char*, Device>> operands,
             std::initializer_list<bool> contiguous) {
  if (!detail::on_cuda<T>(op, operands)) return false;
  for (bool c : contiguous) OPTIMUS_CHECK(c, op, ": CUDA operands must be contiguous");
  return true;
}

template <class T>
void check_same_shape(const char* op, const TensorView<T>& a, const char* b_name, const Shape& b) {
  OPTIMUS_CHECK(a.shape() == b, op, ": ", b_name, " has shape ", b, ", expected ", a.shape());
}

#if OPTIMUS_HAVE_CUDA
using detail::stream_of;
#endif

}  // namespace

template <class T>
void fill(TensorView<T> y, T value, [[maybe_unused]] Queue queue) {
  if (on_cuda<T>("fill", {{"y", y.device()}}, {y.is_contiguous()})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) cuda::fill(y.data(), value, y.numel(), stream_of(queue));
#endif
    return;
  }
  cpu::fill<T>(y, value);
}

template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y, [[maybe_unused]] Queue queue) {
  check_same_shape("axpby", x, "y", y.shape());
  if (on_cuda<T>("axpby", {{"x", x.device()}, {"y", y.device()}}, {x.is_contiguous(), y.is_contiguous()})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) cuda::axpby(alpha, x.data(), beta, y.data(), y.numel(), stream_of(queue));
#endif
    return;
  }
  cpu::axpby<T>(alpha, x, beta, y);
}

template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y, [[maybe_unused]] Queue queue) {
  if (on_cuda<T>("add_row_broadcast", {{"row", row.device()}, {"y", y.device()}},
                 {row.is_contiguous(), y.is_contiguous()})) {
    OPTIMUS_CHECK(y.rank() == 2 && row.numel() == y.size(1), "add_row_broadcast: row has shape ", row.shape(),
                  ", y has shape ", y.shape());
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::add_row_broadcast(row.data(), y.data(), y.size(0), y.size(1), stream_of(queue));
    }
#endif
    return;
  }
  cpu::add_row_broadcast<T>(row, y);
}

template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out, [[maybe_unused]] Queue queue) {
  if (on_cuda<T>("column_sums", {{"x", x.device()}, {"out", out.device()}}, {x.is_contiguous(), out.is_contiguous()})) {
    OPTIMUS_CHECK(x.rank() == 2 && out.numel() == x.size(1), "column_sums: out has shape ", out.shape(),
                  ", x has shape ", x.shape());
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::column_sums(x.data(), x.size(0), x.size(1), out.data(), stream_of(queue));
    }
#endif
    return;
  }
  cpu::column_sums<T>(x, out);
}

template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y, [[maybe_unused]] Queue queue) {
  check_same_shape("gelu_forward", x, "y", y.shape());
  if (on_cuda<T>("gelu_forward", {{"x", x.device()}, {"y", y.device()}}, {x.is_contiguous(), y.is_contiguous()})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) cuda::gelu_forward(x.data(), y.data(), x.numel(), stream_of(queue));
#endif
    return;
  }
  cpu::gelu_forward<T>(x, y);
}

template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, [[maybe_unused]] Queue queue) {
  check_same_shape("gelu_backward", x, "dy", dy.shape());
  check_same_shape("gelu_backward", x, "dx", dx.shape());
  if (on_cuda<T>("gelu_backward", {{"x", x.device()}, {"dy", dy.device()}, {"dx", dx.device()}},
                 {x.is_contiguous(), dy.is_contiguous(), dx.is_contiguous()})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::gelu_backward(x.data(), dy.data(), dx.data(), x.numel(), stream_of(queue));
    }
#endif
    return;
  }
  cpu::gelu_backward<T>(x, dy, dx);
}

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream, [[maybe_unused]] Queue queue) {
  if (p <= 0.0) return;
  OPTIMUS_CHECK(x.rank() == 2 && (x.stride(1) == 1 || x.size(1) <= 1),
                "dropout: needs a matrix with contiguous rows, got shape ", x.shape(), " and strides ", x.strides());
  OPTIMUS_CHECK(p < 1.0, "dropout probability must be below 1, got ", p);
  if (on_cuda<T>("dropout", {{"x", x.device()}}, {true})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::dropout_apply(x.data(), x.size(0), x.size(1), x.stride(0), row0, col0, p, seed, stream, stream_of(queue));
    }
#endif
    return;
  }
  const CounterRng rng(seed, stream);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) {
      const bool keep = rng.uniform(row0 + static_cast<std::uint64_t>(r), col0 + static_cast<std::uint64_t>(c)) >= p;
      x(r, c) = keep ? x(r, c) * scale : T(0);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                               \
  template void fill<T>(TensorView<T>, T, Queue);                                                            \
  template void axpby<T>(T, TensorView<const T>, T, TensorView<T>, Queue);                                   \
  template void add_row_broadcast<T>(TensorView<const T>, TensorView<T>, Queue);                             \
  template void column_sums<T>(TensorView<const T>, TensorView<T>, Queue);                                   \
  template void gelu_forward<T>(TensorView<const T>, TensorView<T>, Queue);                                  \
  template void gelu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, Queue);            \
  template void dropout<T>(TensorView<T>, std::uint64_t, std::uint64_t, double, std::uint64_t, std::uint64_t, \
                           Queue);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

// GEMM dispatched by device (optimus/core/ops.hpp): cpu::gemm on the host, cuBLASLt on the GPU.
#include "ops_dispatch.hpp"
#include "optimus/core/kernels.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/lt_gemm.hpp"
#endif

namespace optimus::ops {

template <class T>
void gemm(bool trans_a, bool trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          [[maybe_unused]] Queue queue) {
  const char* op = "gemm";
  if (!detail::on_cuda<T>(op, {{"A", a.device()}, {"B", b.device()}, {"C", c.device()}})) {
    cpu::gemm<T>(trans_a ? cpu::Trans::yes : cpu::Trans::no, trans_b ? cpu::Trans::yes : cpu::Trans::no, alpha, a, b,
                 beta, c);
    return;
  }
  OPTIMUS_CHECK(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, op, ": needs matrices, got ", a.shape(), ", ",
                b.shape(), ", ", c.shape());
  const std::int64_t m = trans_a ? a.size(1) : a.size(0), k = trans_a ? a.size(0) : a.size(1);
  const std::int64_t kb = trans_b ? b.size(1) : b.size(0), n = trans_b ? b.size(0) : b.size(1);
  OPTIMUS_CHECK(k == kb && c.size(0) == m && c.size(1) == n, op, ": op(A) is ", m, "x", k, ", op(B) is ", kb, "x", n,
                ", C is ", c.shape());
  OPTIMUS_CHECK(a.stride(1) == 1 && b.stride(1) == 1 && c.stride(1) == 1, op, ": CUDA operands need contiguous rows");
  OPTIMUS_CHECK(queue.gemm != nullptr, op, ": CUDA operands need the device's GEMM engine in the queue");
#if OPTIMUS_HAVE_CUDA
  if constexpr (std::is_same_v<T, float>) {
    queue.gemm->run(queue.tf32 ? cuda::GemmPrecision::tf32 : cuda::GemmPrecision::f32, trans_a, trans_b, m, n, k,
                    alpha, a.data(), a.stride(0), b.data(), b.stride(0), beta, c.data(), c.stride(0),
                    detail::stream_of(queue));
  }
#endif
}

template void gemm<float>(bool, bool, float, TensorView<const float>, TensorView<const float>, float,
                          TensorView<float>, Queue);
template void gemm<double>(bool, bool, double, TensorView<const double>, TensorView<const double>, double,
                           TensorView<double>, Queue);

}  // namespace optimus::ops

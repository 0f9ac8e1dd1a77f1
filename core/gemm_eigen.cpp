// CPU GEMM on Eigen's own product kernels (one thread: Optimus builds Eigen without OpenMP). Its kernel is the
// build's: the vector instructions Eigen was compiled for (OPTIMUS_ARCH's -march), judged, never changed.
#include <Eigen/Core>
#include <string>

#include "gemm_backend.hpp"
#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::cpu {
namespace detail {

template <class T>
void gemm_rowmajor(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                   std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
  const ConstMap A(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const ConstMap B(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) {
    C.setZero();
  } else if (beta != T(1)) {
    C *= beta;
  }
  if (!trans_a && !trans_b) {
    C.noalias() += alpha * A * B;
  } else if (!trans_a) {
    C.noalias() += alpha * A * B.transpose();
  } else if (!trans_b) {
    C.noalias() += alpha * A.transpose() * B;
  } else {
    C.noalias() += alpha * A.transpose() * B.transpose();
  }
}

template void gemm_rowmajor<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                   std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void gemm_rowmajor<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                    std::int64_t, const double*, std::int64_t, double, double*, std::int64_t);

}  // namespace detail

namespace {

std::string eigen_version() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
}

// The widest packets this build of Eigen uses.
SimdLevel eigen_simd() {
#if defined(EIGEN_VECTORIZE_AVX512)
  return SimdLevel::avx512;
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
  return SimdLevel::avx2;
#elif defined(EIGEN_VECTORIZE_AVX)
  return SimdLevel::avx;
#elif defined(EIGEN_VECTORIZE_SSE2)
  return SimdLevel::sse;
#else
  return SimdLevel::unknown;
#endif
}

}  // namespace

BlasKernel blas_kernel() {
  const SimdLevel simd = eigen_simd();
  return {.library = "Eigen " + eigen_version(), .kernel = std::string(name_of(simd)) + " packets", .simd = simd,
          .chosen_by = "this build's (OPTIMUS_ARCH sets -march; or use OpenBLAS, libopenblas-dev)",
          .config = "Eigen " + eigen_version() + " (" + std::string(Eigen::SimdInstructionSetsInUse()) + ")",
          .changeable = false};
}

BlasKernel use_blas_kernel(const std::string& kernel) {
  OPTIMUS_FAIL("use_blas_kernel(", kernel, "): the Eigen backend's kernel is fixed when Optimus is compiled (",
               blas_kernel().kernel, "; OPTIMUS_ARCH sets -march)");
}

std::string gemm_backend() { return "Eigen " + eigen_version() + " (1 thread)"; }

void set_gemm_threads(int /*threads*/) {}

void prepare_gemm(int /*threads_at_once*/) {}  // Eigen's products allocate their blocks per call, with operator new
void release_gemm_buffer() {}

}  // namespace optimus::cpu

// CPU GEMM on OpenBLAS's cblas interface. OpenBLAS sizes its thread pool from OPENBLAS_NUM_THREADS;
// Optimus runs one rank per core, so the scripts and tests set it to 1 and gemm_backend() reports it.
#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "gemm_backend.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::cpu {
namespace detail {
namespace {

int blas_int(std::int64_t x, const char* what) {
  OPTIMUS_CHECK(x <= INT_MAX, "gemm: ", what, " = ", x, " exceeds the 32-bit BLAS interface");
  return static_cast<int>(x);
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

template <>
void gemm_rowmajor<float>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                          std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), blas_int(m, "m"), blas_int(n, "n"), blas_int(k, "k"), alpha, a,
              blas_int(lda, "lda"), b, blas_int(ldb, "ldb"), beta, c, blas_int(ldc, "ldc"));
}

template <>
void gemm_rowmajor<double>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
                           const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
                           double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), blas_int(m, "m"), blas_int(n, "n"), blas_int(k, "k"), alpha, a,
              blas_int(lda, "lda"), b, blas_int(ldb, "ldb"), beta, c, blas_int(ldc, "ldc"));
}

}  // namespace detail

std::string gemm_backend() {
  return std::string(openblas_get_config()) + " (" + std::to_string(openblas_get_num_threads()) +
         " thread" + (openblas_get_num_threads() == 1 ? ")" : "s)");
}

void prepare_gemm() {
  // OpenBLAS 0.3's BUFFER_SIZE on x86-64 (32 << 22 bytes) plus its alignment page, with room to spare.
  static constexpr std::size_t kBufferBytes = (std::size_t{32} << 22) + (std::size_t{1} << 20);
  static std::once_flag prepared;  // OpenBLAS's buffer is per process, like this flag
  std::call_once(prepared, [] {
    void* probe = std::malloc(kBufferBytes);
    OPTIMUS_CHECK(probe != nullptr, "out of memory: OpenBLAS needs a working buffer of about ", kBufferBytes,
                  " bytes per thread and malloc could not provide it (an address-space limit, ulimit -v?)");
    std::free(probe);
    // A product large enough to take the buffer (smaller ones may use OpenBLAS's small-matrix kernels instead).
    constexpr int n = 256;
    const std::vector<double> a(static_cast<std::size_t>(n) * n, 1.0);
    std::vector<double> c(static_cast<std::size_t>(n) * n, 0.0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(), n);
  });
}

void set_gemm_threads(int threads) {
  OPTIMUS_CHECK(threads >= 1, "set_gemm_threads needs at least one thread, got ", threads);
  openblas_set_num_threads(threads);
}

}  // namespace optimus::cpu

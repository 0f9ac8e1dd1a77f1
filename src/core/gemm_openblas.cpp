// CPU GEMM on OpenBLAS's cblas interface. OpenBLAS sizes its thread pool from OPENBLAS_NUM_THREADS;
// Optimus runs one rank per core, so the scripts and tests set it to 1 and gemm_backend() reports it.
#include <cblas.h>

#include <climits>
#include <string>

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

void set_gemm_threads(int threads) {
  OPTIMUS_CHECK(threads >= 1, "set_gemm_threads needs at least one thread, got ", threads);
  openblas_set_num_threads(threads);
}

}  // namespace optimus::cpu

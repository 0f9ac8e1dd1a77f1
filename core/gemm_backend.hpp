// The one place where the CPU GEMM backend differs: Eigen (gemm_eigen.cpp) or OpenBLAS (gemm_openblas.cpp),
// chosen at configure time by OPTIMUS_CPU_GEMM.
#pragma once

#include <cstdint>

namespace optimus::cpu::detail {

// C = alpha * op(A) * op(B) + beta * C on row-major arrays with leading dimensions (elements).
// op(A): [m, k], op(B): [k, n], C: [m, n]; k > 0; beta == 0 overwrites C.
template <class T>
void gemm_rowmajor(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                   std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

}  // namespace optimus::cpu::detail

// The ScaLAPACK peer: p?gemm on the same grid, the same data and the same block layout as Optimus
// (block size m/q x n/q, so each process holds exactly the block Optimus gives it; ScaLAPACK's local
// arrays are column-major copies made before timing). Built only when ScaLAPACK is found; otherwise
// available() is false.
#pragma once

#include <Eigen/Core>
#include <string>

#include "optimus/grid/dist_matrix.hpp"

namespace optimus::bench {

bool scalapack_available();
// Which BLAS ScaLAPACK runs on, e.g. "OpenBLAS 0.3.21 ... (1 thread)".
std::string scalapack_blas();

template <class T>
struct PgemmRun {
  double seconds = 0;  // median over iterations of the max over ranks
  typename DistMatrix<T>::Matrix local_c;  // this rank's block of the result, row-major
};

// C = op_a(A) * op_b(B) with op = 'N' or 'T', as ScaLAPACK computes it; m, n, k are op(A) * op(B)'s shapes.
template <class T>
PgemmRun<T> run_pgemm(const Grid& grid, char op_a, char op_b, const DistMatrix<T>& a, const DistMatrix<T>& b,
                      std::int64_t m, std::int64_t n, std::int64_t k, int warmup, int iters);

}  // namespace optimus::bench

// p?gemm through BLACS on the Optimus grid communicator (row-major process order, as Optimus).
#include "scalapack.hpp"

#include <dlfcn.h>
#include <mpi.h>

#include "optimus/comm/mpi_communicator.hpp"
#include "optimus/core/error.hpp"
#include "timing.hpp"

extern "C" {
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridinit(int* context, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int context);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* context, const int* lld, int* info);
void pdgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);
void psgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
             const float* a, const int* ia, const int* ja, const int* desca, const float* b, const int* ib,
             const int* jb, const int* descb, const float* beta, float* c, const int* ic, const int* jc,
             const int* descc);
}

namespace optimus::bench {
namespace {

void pgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
           const double* a, const int* desca, const double* b, const int* descb, const double* beta, double* c,
           const int* descc) {
  const int one = 1;
  pdgemm_(ta, tb, m, n, k, alpha, a, &one, &one, desca, b, &one, &one, descb, beta, c, &one, &one, descc);
}
void pgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
           const float* a, const int* desca, const float* b, const int* descb, const float* beta, float* c,
           const int* descc) {
  const int one = 1;
  psgemm_(ta, tb, m, n, k, alpha, a, &one, &one, desca, b, &one, &one, descb, beta, c, &one, &one, descc);
}

// A descriptor for a global rows x cols matrix in blocks of rows/q x cols/q: one block per process.
struct Descriptor {
  int desc[9];
  Descriptor(int context, std::int64_t rows, std::int64_t cols, int q) {
    const int m = static_cast<int>(rows), n = static_cast<int>(cols);
    const int mb = m / q, nb = n / q, zero = 0, lld = std::max(1, mb);
    int info = 0;
    descinit_(desc, &m, &n, &mb, &nb, &zero, &zero, &context, &lld, &info);
    OPTIMUS_CHECK(info == 0, "descinit_ failed for a ", rows, "x", cols, " matrix (info = ", info, ")");
  }
};

}  // namespace

bool scalapack_available() { return true; }

std::string scalapack_blas() {
  using Config = char* (*)();
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  if (auto config = reinterpret_cast<Config>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    return std::string(config()) + " (1 thread)";
  }
  return "the system BLAS (libblas.so.3)";
}

template <class T>
PgemmRun<T> run_pgemm(const Grid& grid, char op_a, char op_b, const DistMatrix<T>& a, const DistMatrix<T>& b,
                      std::int64_t m, std::int64_t n, std::int64_t k, int warmup, int iters) {
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(&grid.grid());
  OPTIMUS_CHECK(mpi != nullptr, "the ScaLAPACK comparison needs the MPI backend");
  const int q = grid.q();
  const int handle = Csys2blacs_handle(mpi->native());
  int context = handle;
  Cblacs_gridinit(&context, "Row", q, q);
  int nprow = 0, npcol = 0, myrow = 0, mycol = 0;
  Cblacs_gridinfo(context, &nprow, &npcol, &myrow, &mycol);
  OPTIMUS_CHECK(myrow == grid.row_index() && mycol == grid.col_index(), "BLACS placed grid rank (", grid.row_index(),
                ", ", grid.col_index(), ") at (", myrow, ", ", mycol, ")");

  using LocalCol = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const LocalCol a_local = a.local_map();  // column-major copies of the same blocks
  const LocalCol b_local = b.local_map();
  LocalCol c_local = LocalCol::Zero(m / q, n / q);
  const Descriptor da(context, a.rows(), a.cols(), q), db(context, b.rows(), b.cols(), q), dc(context, m, n, q);
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const T one = 1, zero = 0;
  PgemmRun<T> run;
  run.seconds = time_max_over_ranks(grid.grid(), warmup, iters, [&] {
    pgemm(&op_a, &op_b, &im, &in, &ik, &one, a_local.data(), da.desc, b_local.data(), db.desc, &zero, c_local.data(),
          dc.desc);
  });
  run.local_c = c_local;
  Cblacs_gridexit(context);
  Cfree_blacs_system_handle(handle);
  return run;
}

template PgemmRun<float> run_pgemm<float>(const Grid&, char, char, const DistMatrix<float>&,
                                          const DistMatrix<float>&, std::int64_t, std::int64_t, std::int64_t, int,
                                          int);
template PgemmRun<double> run_pgemm<double>(const Grid&, char, char, const DistMatrix<double>&,
                                            const DistMatrix<double>&, std::int64_t, std::int64_t, std::int64_t, int,
                                            int);

}  // namespace optimus::bench

// Built when ScaLAPACK is not found: the comparison columns read "n/a".
#include "optimus/core/error.hpp"
#include "scalapack.hpp"

namespace optimus::bench {

bool scalapack_available() { return false; }
std::string scalapack_blas() { return "not built (install libscalapack-openmpi-dev and reconfigure)"; }

template <class T>
PgemmRun<T> run_pgemm(const Grid&, char, char, const DistMatrix<T>&, const DistMatrix<T>&, std::int64_t, std::int64_t,
                      std::int64_t, int, int) {
  OPTIMUS_FAIL("optimus-bench was built without ScaLAPACK");
}

template PgemmRun<float> run_pgemm<float>(const Grid&, char, char, const DistMatrix<float>&,
                                          const DistMatrix<float>&, std::int64_t, std::int64_t, std::int64_t, int,
                                          int);
template PgemmRun<double> run_pgemm<double>(const Grid&, char, char, const DistMatrix<double>&,
                                            const DistMatrix<double>&, std::int64_t, std::int64_t, std::int64_t, int,
                                            int);

}  // namespace optimus::bench

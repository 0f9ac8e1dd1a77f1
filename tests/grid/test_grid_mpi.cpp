// Grid, DistMatrix and SUMMA under mpiexec: at world size N, every q with q*q dividing N.
#include <doctest/doctest.h>

#include "summa_cases.hpp"
#include "test_world.hpp"

namespace {
void on_grids(void (*check)(optimus::Communicator&, int)) {
  optimus::Communicator& world = optimus::test::world();
  for (int q = 1; q * q <= world.size(); ++q) {
    if (world.size() % (q * q) != 0) continue;
    CAPTURE(q);
    check(world, q);
  }
}
}  // namespace

TEST_CASE("MPI grid coordinates and communicators") { on_grids(optimus::test::check_grid); }
TEST_CASE("MPI DistMatrix round trip and partition-independent fill") { on_grids(optimus::test::check_dist_matrix); }
TEST_CASE("MPI SUMMA products match Eigen with exact traffic") { on_grids(optimus::test::check_summa); }
TEST_CASE("MPI SUMMA with bf16 operands matches Eigen on the rounded inputs, panels moving in bf16") {
  on_grids(optimus::test::check_summa_bf16);
}
TEST_CASE("MPI SUMMA on saved operands: bf16 copies under bf16 math, the same products") {
  on_grids(optimus::test::check_saved_operands);
}
TEST_CASE("MPI SUMMA AB with a bias and GELU epilogue") { on_grids(optimus::test::check_summa_epilogue); }
TEST_CASE("MPI bad input gives the same error on every rank") { on_grids(optimus::test::check_bad_input); }
TEST_CASE("MPI pipeline grids: every pp and q with pp*q*q dividing the world, the rest as replicas") {
  optimus::Communicator& world = optimus::test::world();
  for (int q = 1; q * q <= world.size(); ++q) {
    for (int pp = 1; pp * q * q <= world.size(); ++pp) {
      if (world.size() % (pp * q * q) != 0) continue;
      CAPTURE(q);
      CAPTURE(pp);
      optimus::test::check_pipeline_grid(world, q, pp);
    }
  }
}

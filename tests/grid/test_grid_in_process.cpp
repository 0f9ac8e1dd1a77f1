// Grid, DistMatrix and SUMMA on the in-process backend: q = 1..4, and dp = 2 x q = 2.
#include <doctest/doctest.h>

#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "summa_cases.hpp"

namespace {
void on_grids(void (*check)(optimus::Communicator&, int)) {
  for (int q = 1; q <= 4; ++q) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { check(w, q); });
  }
  optimus::test::run_in_process(8, [&](optimus::Communicator& w) { check(w, 2); });  // dp = 2
}
}  // namespace

TEST_CASE("in-process grid coordinates and communicators") { on_grids(optimus::test::check_grid); }
TEST_CASE("in-process DistMatrix round trip and partition-independent fill") {
  on_grids(optimus::test::check_dist_matrix);
}
TEST_CASE("in-process SUMMA products match Eigen with exact traffic") { on_grids(optimus::test::check_summa); }
TEST_CASE("in-process SUMMA with bf16 operands matches Eigen on the rounded inputs, panels moving in bf16") {
  on_grids(optimus::test::check_summa_bf16);
}
TEST_CASE("in-process SUMMA on saved operands: bf16 copies under bf16 math, the same products") {
  on_grids(optimus::test::check_saved_operands);
}
TEST_CASE("in-process SUMMA AB with a bias and GELU epilogue") { on_grids(optimus::test::check_summa_epilogue); }
TEST_CASE("in-process bad input gives the same error on every rank") { on_grids(optimus::test::check_bad_input); }
TEST_CASE("in-process pipeline grids: pp stages of q x q grids, dp replicas") {
  struct Shape {
    int dp, pp, q;
  };
  for (const Shape s : {Shape{1, 2, 2}, Shape{1, 4, 1}, Shape{2, 3, 1}, Shape{2, 2, 2}, Shape{1, 2, 3}}) {
    CAPTURE(s.dp);
    CAPTURE(s.pp);
    CAPTURE(s.q);
    optimus::test::run_in_process(s.dp * s.pp * s.q * s.q,
                                  [&](optimus::Communicator& w) { optimus::test::check_pipeline_grid(w, s.q, s.pp); });
  }
}

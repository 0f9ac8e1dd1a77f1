// The MPI backend under mpiexec at 1, 4, 9 and 16 ranks.
#include <doctest/doctest.h>

#include "collective_cases.hpp"
#include "test_world.hpp"

TEST_CASE("MPI collectives") {
  CHECK(optimus::test::world().backend() == "mpi");
  optimus::test::check_collectives(optimus::test::world());
}
TEST_CASE("MPI counters follow the documented convention exactly") { optimus::test::check_counters(optimus::test::world()); }
TEST_CASE("MPI non-blocking operations complete in any wait order") {
  optimus::test::check_nonblocking(optimus::test::world());
}
TEST_CASE("MPI split and argument errors") { optimus::test::check_split_and_errors(optimus::test::world()); }

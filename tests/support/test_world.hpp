// What the MPI-aware test main hands to test cases: the world communicator of this test run.
#pragma once

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

// The world of the test run: MPI_COMM_WORLD's duplicate under mpiexec, one rank otherwise.
Communicator& world();

// Runs doctest on every rank; returns the exit status every rank agrees on.
int run_doctest(int argc, char** argv, Communicator& world);

}  // namespace optimus::test

// What the MPI-aware test main hands to test cases: the world communicator of this test run.
#pragma once

#include <chrono>
#include <functional>

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

// The world of the test run: MPI_COMM_WORLD's duplicate under mpiexec, one rank otherwise.
Communicator& world();

// The watchdog's timeout for the test run: OPTIMUS_TEST_TIMEOUT=SECONDS, 0 (off) when not set. The suites then run
// with the watchdog on, and a false alarm fails them.
std::chrono::milliseconds watchdog_timeout();

// optimus::run_in_process, with watchdog_timeout() set on each rank's world (and so on everything split from it).
void run_in_process(int size, const std::function<void(Communicator& world)>& fn);

// Runs doctest on every rank; returns the exit status every rank agrees on.
int run_doctest(int argc, char** argv, Communicator& world);

}  // namespace optimus::test

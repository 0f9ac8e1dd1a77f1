// The MPI-aware doctest main: every rank runs every case; failures are combined, rank 0 reports its own
// output and, for every other rank that failed, that rank's output; every rank exits with the same status.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <iostream>
#include <sstream>
#include <vector>

#include "optimus/comm/process.hpp"
#include "test_world.hpp"

namespace optimus::test {
namespace {
Communicator* the_world = nullptr;  // set once by main, read by test cases
}  // namespace

Communicator& world() { return *the_world; }

int run_doctest(int argc, char** argv, Communicator& comm) {
  doctest::Context dt;
  dt.applyCommandLine(argc, argv);
  std::ostringstream captured;
  if (comm.rank() != 0) dt.setCout(&captured);
  const int status = dt.run();
  if (dt.shouldExit()) return status;

  // Gather each rank's status, then the text of the ranks that failed, to rank 0.
  const int p = comm.size();
  std::vector<double> statuses(static_cast<std::size_t>(p));
  const double mine = status;
  comm.all_gather(&mine, statuses.data(), 1, DType::f64);
  int failed_ranks = 0;
  for (int r = 1; r < p; ++r) {
    if (statuses[static_cast<std::size_t>(r)] == 0) continue;
    ++failed_ranks;
    // Texts travel as their length (a count, exact in f64), then as bytes.
    const std::string text = captured.str();
    double length = static_cast<double>(text.size());
    if (comm.rank() == r) comm.send(&length, 1, DType::f64, 0, 1);
    if (comm.rank() == 0) comm.recv(&length, 1, DType::f64, r, 1);
    if (comm.rank() == r) comm.send(text.data(), text.size(), DType::u8, 0, 2);
    if (comm.rank() == 0) {
      std::string report(static_cast<std::size_t>(length), '\0');
      comm.recv(report.data(), report.size(), DType::u8, r, 2);
      std::cout << "======== rank " << r << " of " << p << " failed; its report:\n" << report;
    }
  }
  const bool any_failed = status != 0 || failed_ranks > 0;
  if (comm.rank() == 0 && p > 1) {
    std::cout << (any_failed ? "FAILED" : "passed") << " on " << p << " ranks ("
              << failed_ranks + (status != 0) << " failed)\n";
  }
  return any_failed ? 1 : 0;
}

}  // namespace optimus::test

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  optimus::test::the_world = &ctx.world();
  ctx.world().set_timeout(optimus::test::watchdog_timeout());  // 0: off
  return optimus::test::run_doctest(argc, argv, ctx.world());
}

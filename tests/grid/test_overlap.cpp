// Overlapped SUMMA: bitwise identical to blocking, and correct under random delays, at q = 2, 3 — in-process
// and under mpiexec (4 and 9 ranks).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "optimus/comm/in_process.hpp"
#include "overlap_cases.hpp"
#include "test_world.hpp"

// The in-process cases run in the one-rank launch only: under mpiexec every rank would repeat them.
namespace {
bool in_process_launch() { return optimus::test::world().size() == 1; }
}  // namespace

TEST_CASE("overlapped and blocking SUMMA and GPT step are bitwise identical (in-process q = 2, 3)") {
  if (!in_process_launch()) return;
  for (int q : {2, 3}) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { optimus::test::check_overlap_bitwise(w, q); });
  }
}

TEST_CASE("random delays before communication: no deadlock, right answers (in-process q = 2, 3)") {
  if (!in_process_launch()) return;
  for (int q : {2, 3}) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { optimus::test::check_random_delays(w, q); });
  }
}

TEST_CASE("SUMMA's GEMMs poll the transfers in flight only where the communicator needs it (in-process q = 2, 3)") {
  if (!in_process_launch()) return;
  for (int q : {2, 3}) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { optimus::test::check_polling(w, q); });
  }
}

TEST_CASE("bucketed data-parallel gradient reduction: overlapped equals blocking bitwise (dp = 2 x q = 2)") {
  if (!in_process_launch()) return;
  optimus::test::run_in_process(8, [](optimus::Communicator& w) { optimus::test::check_data_parallel_overlap(w, 2); });
}

TEST_CASE("the timeline records SUMMA's GEMMs and writes a Chrome trace of every rank") {
  if (!in_process_launch()) return;
  const std::string path = "timeline_trace_in_process.json";
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) { optimus::test::check_timeline(w, 2, path); });
}

TEST_CASE("the same under mpiexec at q = sqrt(world size)") {
  optimus::Communicator& world = optimus::test::world();
  const int q = static_cast<int>(std::lround(std::sqrt(world.size())));
  if (q * q != world.size() || q < 2) return;
  optimus::test::check_overlap_bitwise(world, q);
  optimus::test::check_random_delays(world, q);
  optimus::test::check_polling(world, q);
}

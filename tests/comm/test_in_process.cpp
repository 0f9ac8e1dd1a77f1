// The in-process backend at several world sizes, and its failure path: no hang when a rank throws.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "collective_cases.hpp"
#include "delaying_communicator.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"

using optimus::Communicator;

TEST_CASE("in-process collectives, counters, non-blocking waits and splits at 1..5 ranks") {
  for (int p = 1; p <= 5; ++p) {
    CAPTURE(p);
    optimus::run_in_process(p, [](Communicator& w) {
      CHECK(w.backend() == "in-process");
      optimus::test::check_collectives(w);
      optimus::test::check_counters(w);
      optimus::test::check_nonblocking(w);
      optimus::test::check_split_and_errors(w);
    });
  }
}

TEST_CASE("a rank that throws wakes the others instead of leaving them in a collective") {
  std::atomic<int> woken{0};
  auto run = [&] {
    optimus::run_in_process(4, [&](Communicator& w) {
      if (w.rank() == 2) OPTIMUS_FAIL("rank 2 gives up");
      try {
        w.barrier();  // would wait forever for rank 2
      } catch (const optimus::Error&) {
        ++woken;
        throw;
      }
    });
  };
  CHECK_THROWS_WITH_AS(run(), doctest::Contains("rank 2 gives up"), optimus::Error);
  CHECK(woken == 3);
}

TEST_CASE("recv of the wrong size is refused with both sizes") {
  auto run = [] {
    optimus::run_in_process(2, [](Communicator& w) {
      double x[2] = {1, 2};
      if (w.rank() == 0) w.send(x, 2, optimus::DType::f64, 1, 0);
      if (w.rank() == 1) w.recv(x, 1, optimus::DType::f64, 0, 0);
    });
  };
  CHECK_THROWS_WITH_AS(run(), doctest::Contains("expected 8 bytes but the message has 16"), optimus::Error);
}

TEST_CASE("a rank's own copy moves every byte between its buffers and the staging area, also after splits") {
  std::atomic<long> copied{0};
  optimus::run_in_process(4, [&](Communicator& w) {
    optimus::set_in_process_copy(w, [&](void* dst, const void* src, std::size_t n) {
      copied += static_cast<long>(n);
      std::memcpy(dst, src, n);
    });
    // The collectives give the same answers through the copy, on the world and on a split.
    optimus::test::check_collectives(w);
    const long before = copied.load();
    std::unique_ptr<Communicator> half = w.split(w.rank() % 2, w.rank());
    double x = w.rank() + 1.0;
    half->all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);
    CHECK(x == (w.rank() % 2 == 0 ? 1.0 + 3.0 : 2.0 + 4.0));
    w.barrier();
    CHECK(copied.load() > before);  // the split communicator copies through it too
  });
  CHECK(copied.load() > 0);
}

TEST_CASE("setting an in-process copy on another backend is refused") {
  optimus::run_in_process(1, [](Communicator& w) {
    optimus::test::DelayingCommunicator slow(w, 1, 0);
    CHECK_THROWS_WITH_AS(optimus::set_in_process_copy(slow, [](void*, const void*, std::size_t) {}),
                         doctest::Contains("not in-process"), optimus::Error);
  });
}

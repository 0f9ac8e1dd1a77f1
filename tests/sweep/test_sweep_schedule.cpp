// The sweep's schedulers (optimus/sweep/schedule.hpp): one member's double-buffered copies against the recurrence they
// follow, the rules every timeline keeps (chain order, one run per slot, two buffers, work conserved) on random sweeps
// under both schedulers, Sharded-LRTF against round-robin where one member is long, the Gantt chart, and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/sweep/schedule.hpp"

namespace sw = optimus::sweep;

namespace {

// The member's runs in chain order, as (step, shard, backward, compute, copy).
struct Expected {
  int step, shard;
  bool backward;
  double compute, copy;
};
std::vector<Expected> chain(const sw::MemberWork& m) {
  std::vector<Expected> out;
  const int shards = static_cast<int>(m.shards.size());
  for (int step = 0; step < m.steps; ++step) {
    for (int k = 0; k < shards; ++k) out.push_back({step, k, false, m.shards[k].forward, m.shards[k].copy});
    for (int k = shards - 1; k >= 0; --k) out.push_back({step, k, true, m.shards[k].backward, m.shards[k].copy});
  }
  return out;
}

std::vector<sw::MemberWork> random_sweep(std::mt19937& rng, int members) {
  std::uniform_int_distribution<int> shards(1, 4), steps(1, 3);
  std::uniform_real_distribution<double> compute(0.1, 2.0), copy(0.0, 1.5);
  std::vector<sw::MemberWork> out;
  for (int m = 0; m < members; ++m) {
    sw::MemberWork w{.name = std::string(1, static_cast<char>('a' + m)), .shards = {}, .steps = steps(rng)};
    for (int k = shards(rng); k > 0; --k) w.shards.push_back({compute(rng), compute(rng), copy(rng)});
    out.push_back(w);
  }
  return out;
}

// Every rule a timeline keeps; the sweep's total compute.
double check_rules(const std::vector<sw::MemberWork>& members, int slots, const sw::SweepTimeline& t) {
  double total = 0, longest = 0, makespan = 0;
  std::size_t runs = 0;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const std::vector<Expected> want = chain(members[m]);
    runs += want.size();
    std::size_t i = 0;
    double ready = 0, chain_compute = 0;
    for (const sw::ShardRun& r : t.runs) {
      if (r.member != static_cast<int>(m)) continue;
      REQUIRE(i < want.size());
      CHECK(r.step == want[i].step);
      CHECK(r.shard == want[i].shard);
      CHECK(r.backward == want[i].backward);
      CHECK(r.end - r.start == doctest::Approx(want[i].compute).epsilon(1e-12));
      CHECK(r.copy_start + want[i].copy <= r.start + 1e-12);  // copied before it computes
      CHECK(r.start >= ready);                                  // after the member's previous run
      ready = r.end;
      chain_compute += want[i].compute;
      ++i;
    }
    CHECK(i == want.size());
    total += chain_compute;
    longest = std::max(longest, chain_compute);
  }
  CHECK(t.runs.size() == runs);
  for (int s = 0; s < slots; ++s) {
    const sw::ShardRun* previous = nullptr;
    for (const sw::ShardRun& r : t.runs) {
      if (r.slot != s) continue;
      REQUIRE((r.slot >= 0 && r.slot < slots));
      if (previous != nullptr) {
        CHECK(r.start >= previous->end);          // one run at a time
        CHECK(r.copy_start >= previous->start);   // two buffers: the copy waits for the previous run to compute
      }
      previous = &r;
    }
  }
  for (const sw::ShardRun& r : t.runs) makespan = std::max(makespan, r.end);
  CHECK(t.makespan == makespan);
  CHECK(t.makespan >= longest - 1e-12);
  CHECK(t.makespan >= total / slots - 1e-12);
  return total;
}

}  // namespace

TEST_CASE("sweep: one member on one slot, each copy hidden behind the compute before it where it can be") {
  for (const double copy : {0.5, 3.5, 10.0}) {
    const sw::MemberWork m{.name = "solo", .shards = {{2, 4, copy}, {3, 5, copy}}, .steps = 2};
    const sw::SweepTimeline t = sw::simulate({m}, 1, sw::Scheduler::lrtf);
    check_rules({m}, 1, t);
    // start_1 = copy; start_i = start_{i-1} + max(copy, compute_{i-1}): the copy starts as the previous run computes.
    const std::vector<Expected> c = chain(m);
    double start = copy;
    for (std::size_t i = 1; i < c.size(); ++i) start += std::max(copy, c[i - 1].compute);
    CAPTURE(copy);
    CHECK(t.makespan == doctest::Approx(start + c.back().compute).epsilon(1e-12));
  }
}

TEST_CASE("sweep: random sweeps keep every rule under both schedulers; one slot without copies is never idle") {
  std::mt19937 rng(54);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<sw::MemberWork> members = random_sweep(rng, 1 + trial % 6);
    for (const sw::Scheduler scheduler : {sw::Scheduler::lrtf, sw::Scheduler::round_robin}) {
      for (int slots = 1; slots <= 4; ++slots) {
        CAPTURE(trial);
        CAPTURE(slots);
        check_rules(members, slots, sw::simulate(members, slots, scheduler));
      }
      std::vector<sw::MemberWork> free_copies = members;
      for (sw::MemberWork& m : free_copies) {
        for (sw::ShardCosts& c : m.shards) c.copy = 0;
      }
      const sw::SweepTimeline t = sw::simulate(free_copies, 1, scheduler);
      CHECK(t.makespan == doctest::Approx(check_rules(free_copies, 1, t)).epsilon(1e-12));
    }
  }
}

TEST_CASE("sweep: Sharded-LRTF keeps the long member moving; round-robin delays it") {
  // One member of 3 steps x 8 runs of 1 s, three of 2 runs of 1 s, two slots, free copies: the long chain (24 s) bounds
  // the makespan, and LRTF reaches it by giving the short members the other slot.
  std::vector<sw::MemberWork> members{{.name = "long", .shards = {{1, 1, 0}, {1, 1, 0}, {1, 1, 0}, {1, 1, 0}},
                                       .steps = 3}};
  for (const char* name : {"a", "b", "c"}) members.push_back({.name = name, .shards = {{1, 1, 0}}, .steps = 1});
  const sw::SweepTimeline lrtf = sw::simulate(members, 2, sw::Scheduler::lrtf);
  const sw::SweepTimeline round_robin = sw::simulate(members, 2, sw::Scheduler::round_robin);
  check_rules(members, 2, lrtf);
  check_rules(members, 2, round_robin);
  CHECK(lrtf.makespan == 24);
  CHECK(round_robin.makespan > lrtf.makespan);
  double previous_end = 0;
  for (const sw::ShardRun& r : lrtf.runs) {
    if (r.member != 0) continue;
    CHECK(r.start == previous_end);  // the long member never waits for a slot
    previous_end = r.end;
  }
}

TEST_CASE("sweep: the Gantt chart") {
  const std::vector<sw::MemberWork> members{{.name = "x", .shards = {{1, 1, 0}}, .steps = 1},
                                            {.name = "y", .shards = {{2, 2, 0}}, .steps = 1}};
  const sw::SweepTimeline t = sw::simulate(members, 2, sw::Scheduler::lrtf);  // y on slot 0 (longer), x on slot 1
  CHECK(t.makespan == 4);
  CHECK(sw::gantt(t, members, 2, 8) ==
        "slot 0 |BBBBBBBB|\n"
        "slot 1 |AAAA....|\n"
        "  A  x (1 shards, 1 steps)\n"
        "  B  y (1 shards, 1 steps)\n");
}

TEST_CASE("sweep: bad input is named") {
  const sw::MemberWork good{.name = "good", .shards = {{1, 1, 0}}, .steps = 1};
  CHECK_THROWS_WITH_AS(sw::simulate({good}, 0, sw::Scheduler::lrtf), doctest::Contains("0 slots"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::simulate({good, {.name = "empty", .shards = {}, .steps = 1}}, 1, sw::Scheduler::lrtf),
                       doctest::Contains("member 'empty' has no shards"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::simulate({{.name = "neg", .shards = {{1, 1, 0}, {1, -2, 0}}, .steps = 1}}, 1,
                                    sw::Scheduler::round_robin),
                       doctest::Contains("member 'neg' shard 1 has a cost of -2"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::simulate({{.name = "idle", .shards = {{1, 1, 0}}, .steps = 0}}, 1, sw::Scheduler::lrtf),
                       doctest::Contains("member 'idle' trains 0 steps"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::parse_scheduler("fifo"), doctest::Contains("unknown scheduler 'fifo'"), optimus::Error);
  CHECK(sw::parse_scheduler("round-robin") == sw::Scheduler::round_robin);
  CHECK(sw::name_of(sw::Scheduler::lrtf) == "lrtf");
}

// The sweep's schedulers (optimus/sweep/schedule.hpp): one member's double-buffered copies against the recurrence they
// follow, the rules every timeline keeps (chain order, one run per slot, two buffers, work conserved) on random sweeps
// under every scheduler, Sharded-LRTF against round-robin where one member is long, the model-parallel baseline against
// the members' solo runs and against LRTF, the Gantt chart and the Chrome trace, and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
    for (const sw::Scheduler scheduler :
         {sw::Scheduler::lrtf, sw::Scheduler::round_robin, sw::Scheduler::model_parallel}) {
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

TEST_CASE("sweep: the runtime's placement keeps every rule, each shard on its own slot; one member is its chain") {
  std::mt19937 rng(56);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<sw::MemberWork> members = random_sweep(rng, 1 + trial % 6);
    for (const sw::Scheduler scheduler : {sw::Scheduler::lrtf, sw::Scheduler::round_robin}) {
      for (int slots = 1; slots <= 4; ++slots) {
        CAPTURE(trial);
        CAPTURE(slots);
        const sw::SweepTimeline t = sw::simulate(members, slots, scheduler, sw::ShardPlacement::slot_per_shard);
        check_rules(members, slots, t);
        for (const sw::ShardRun& r : t.runs) CHECK(r.slot == r.shard % slots);
      }
    }
  }
  // Without copies, one member's runs follow each other: the makespan is its chain's compute.
  const sw::MemberWork one{.name = "one", .shards = {{1, 2, 0}, {3, 4, 0}, {5, 6, 0}}, .steps = 2};
  CHECK(sw::simulate({one}, 2, sw::Scheduler::lrtf, sw::ShardPlacement::slot_per_shard).makespan == 42);
  // Two equal members of two shards on two slots: the second member's shard 0 runs while the first's shard 1 does.
  const sw::MemberWork even{.name = "m", .shards = {{1, 1, 0}, {1, 1, 0}}, .steps = 1};
  CHECK(sw::simulate({even, even}, 2, sw::Scheduler::round_robin, sw::ShardPlacement::slot_per_shard).makespan <
        sw::simulate({even, even}, 1, sw::Scheduler::round_robin, sw::ShardPlacement::slot_per_shard).makespan);
}

TEST_CASE("sweep: the runtime's placement runs a step's ends on every slot after its last backward; HYDRA's adds them "
          "to the backwards") {
  // forward 1 and backward 2 per shard; the ends 3 (shard 0) and 5 (shard 1): a step is 1 + 1 + 2 + 2 + max(3, 5)
  const sw::MemberWork one{.name = "one", .shards = {{1, 2, 0, 3}, {1, 2, 0, 5}}, .steps = 2};
  for (const sw::Scheduler scheduler : {sw::Scheduler::lrtf, sw::Scheduler::model_parallel}) {
    CAPTURE(sw::name_of(scheduler));
    const sw::SweepTimeline t = sw::simulate({one}, 2, scheduler, sw::ShardPlacement::slot_per_shard);
    CHECK(t.makespan == 22);
    REQUIRE(t.runs.size() == 2 * 6);
    for (const sw::ShardRun& r : t.runs) {
      CHECK(r.slot == r.shard);
      if (!r.step_end) continue;
      CHECK(r.start == 11.0 * r.step + 6);  // both at once, once shard 0's backward has ended
      CHECK(r.end - r.start == (r.shard == 0 ? 3 : 5));
    }
    for (const sw::ShardRun& r : t.runs) {
      if (r.step == 1 && !r.step_end && !r.backward && r.shard == 0) CHECK(r.start == 11);  // after both ends
    }
    CHECK(sw::chrome_trace(t, {one}).find("one E shard 1 step 0") != std::string::npos);
  }
  // The pipeline baseline of one micro-batch: the same chain, the stages' ends at once after it.
  const sw::SweepTimeline piped = sw::simulate_pipeline({one}, 2, {.kind = optimus::pipeline::Kind::one_f_one_b,
                                                                   .micro_batches = 1});
  CHECK(piped.makespan == 22);
  CHECK(std::count_if(piped.runs.begin(), piped.runs.end(), [](const sw::ShardRun& r) { return r.step_end; }) == 4);
  // HYDRA's placement: each shard's end follows its backward, in the chain: 1 + 1 + (2 + 5) + (2 + 3) per step.
  CHECK(sw::simulate({one}, 2, sw::Scheduler::lrtf, sw::ShardPlacement::any_slot).makespan == 28);

  // The runtime's LRTF between members with as many steps left: the one with more of its step run on the slot. At 2 s
  // slot 1 may run x's backward (x's forward ran there) or y's forward: it runs x's.
  const sw::MemberWork x{.name = "x", .shards = {{1, 1, 0}, {1, 1, 0}}, .steps = 1};
  const sw::MemberWork y{.name = "y", .shards = x.shards, .steps = 1};
  const sw::SweepTimeline t = sw::simulate({x, y}, 2, sw::Scheduler::lrtf, sw::ShardPlacement::slot_per_shard);
  int checked = 0;
  for (const sw::ShardRun& r : t.runs) {
    if (r.slot != 1 || r.start != 2) continue;
    CHECK(r.member == 0);
    CHECK(r.backward);
    ++checked;
  }
  CHECK(checked == 1);

  // Its remaining training time is each member's own: steps left times its step's compute. Three short members (one
  // run of 1 s) before a long one (3 steps of 8 runs of 1 s) on two slots: the long member starts first and never
  // waits (24 s), the short ones fill the gaps.
  std::vector<sw::MemberWork> members;
  for (const char* name : {"a", "b", "c"}) members.push_back({.name = name, .shards = {{1, 1, 0}}, .steps = 1});
  members.push_back({.name = "long", .shards = {{1, 1, 0}, {1, 1, 0}, {1, 1, 0}, {1, 1, 0}}, .steps = 3});
  const sw::SweepTimeline pinned = sw::simulate(members, 2, sw::Scheduler::lrtf, sw::ShardPlacement::slot_per_shard);
  CHECK(pinned.makespan == 24);
  double previous_end = 0;
  for (const sw::ShardRun& r : pinned.runs) {
    if (r.member != 3) continue;
    CHECK(r.start == previous_end);
    previous_end = r.end;
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

TEST_CASE("sweep: the model-parallel baseline runs the members one at a time, shard k on slot k mod D") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    const std::vector<sw::MemberWork> members = random_sweep(rng, 2 + trial % 5);
    CAPTURE(trial);
    // On one slot: the members' solo runs back to back.
    double solo = 0;
    for (const sw::MemberWork& m : members) solo += sw::simulate({m}, 1, sw::Scheduler::lrtf).makespan;
    const sw::SweepTimeline one = sw::simulate(members, 1, sw::Scheduler::model_parallel);
    check_rules(members, 1, one);
    CHECK(one.makespan == doctest::Approx(solo).epsilon(1e-12));
    for (int slots = 2; slots <= 4; ++slots) {
      const sw::SweepTimeline t = sw::simulate(members, slots, sw::Scheduler::model_parallel);
      check_rules(members, slots, t);
      double previous_end = 0, end = 0;
      int member = 0;
      for (const sw::ShardRun& r : t.runs) {
        CHECK(r.slot == r.shard % slots);
        if (r.member != member) {  // the next member starts after the last one ends
          CHECK(r.member == member + 1);
          previous_end = end;
          member = r.member;
        }
        CHECK(r.copy_start >= previous_end);
        end = std::max(end, r.end);
      }
    }
  }
}

TEST_CASE("sweep: eight equal members on D slots — LRTF against their solo runs one after another and against model "
          "parallelism") {
  const sw::MemberWork member{.name = "", .shards = {{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}}, .steps = 2};
  std::vector<sw::MemberWork> members(8, member);
  for (std::size_t m = 0; m < members.size(); ++m) members[m].name = std::string(1, static_cast<char>('a' + m));
  const double sequential = sw::simulate(members, 1, sw::Scheduler::model_parallel).makespan;
  for (const int slots : {2, 4}) {
    const double lrtf = sw::simulate(members, slots, sw::Scheduler::lrtf).makespan;
    const double model_parallel = sw::simulate(members, slots, sw::Scheduler::model_parallel).makespan;
    CAPTURE(slots);
    CHECK(sequential / lrtf >= 0.9 * slots);      // HYDRA's claim for task parallelism: near-linear in D
    CHECK(model_parallel / lrtf >= 0.9 * slots);  // one member's chain at a time cannot use D slots
  }
}

TEST_CASE("sweep: the Chrome trace holds every run and copy") {
  const std::vector<sw::MemberWork> members{{.name = "x", .shards = {{1, 2, 0.25}}, .steps = 1},
                                            {.name = "y", .shards = {{2, 3, 0.5}, {1, 1, 0.5}}, .steps = 1}};
  const sw::SweepTimeline t = sw::simulate(members, 2, sw::Scheduler::lrtf);
  const nlohmann::json trace = nlohmann::json::parse(sw::chrome_trace(t, members));
  const nlohmann::json& events = trace.at("traceEvents");
  REQUIRE(events.size() == 2 * t.runs.size());
  for (std::size_t i = 0; i < t.runs.size(); ++i) {
    const sw::ShardRun& r = t.runs[i];
    const nlohmann::json& run = events[2 * i];
    const nlohmann::json& copy = events[2 * i + 1];
    CHECK(run.at("tid").get<int>() == r.slot);
    CHECK(run.at("ts").get<double>() == doctest::Approx(r.start * 1e6));
    CHECK(run.at("dur").get<double>() == doctest::Approx((r.end - r.start) * 1e6));
    CHECK(run.at("name").get<std::string>().find(r.backward ? " B shard " : " F shard ") != std::string::npos);
    CHECK(copy.at("ts").get<double>() == doctest::Approx(r.copy_start * 1e6));
    CHECK(copy.at("pid").get<int>() == 1);
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
  CHECK(sw::parse_scheduler("model-parallel") == sw::Scheduler::model_parallel);
  CHECK(sw::name_of(sw::Scheduler::lrtf) == "lrtf");
}

TEST_CASE("sweep: the pipeline baseline runs each member's steps as pipelines, member after member") {
  // x: 4 shards in 2 stages of 2 (forward 2, backward 4 per stage and batch); y: 2 shards, one per stage.
  const std::vector<sw::MemberWork> members{{.name = "x", .shards = {{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}},
                                             .steps = 2},
                                            {.name = "y", .shards = {{2, 4, 0}, {2, 4, 0}}, .steps = 1}};
  for (const auto kind : {optimus::pipeline::Kind::gpipe, optimus::pipeline::Kind::one_f_one_b}) {
    CAPTURE(optimus::pipeline::name_of(kind));
    const sw::SweepTimeline t = sw::simulate_pipeline(members, 2, {.kind = kind, .micro_batches = 4});
    // A step of 2 stages and 4 micro-batches of forward 0.5 and backward 1 per stage: (m + S - 1)(F + B) = 7.5 s.
    CHECK(t.makespan == 3 * 7.5);
    REQUIRE(t.runs.size() == 3 * 2 * 8);  // member steps x stages x (F and B of 4 micro-batches)
    std::vector<std::vector<int>> per_micro(2, std::vector<int>(4, 0));
    for (const sw::ShardRun& r : t.runs) {
      CHECK(r.copy_seconds == 0);
      CHECK(r.copy_start == r.start);
      CHECK(r.end - r.start == (r.backward ? 1.0 : 0.5));
      CHECK(r.shards == (r.member == 0 ? 2 : 1));
      CHECK(r.shard == r.slot * r.shards);
      REQUIRE((r.micro_batch >= 0 && r.micro_batch < 4));
      if (r.member == 0) ++per_micro[static_cast<std::size_t>(r.slot)][static_cast<std::size_t>(r.micro_batch)];
      // Member y starts after member x's last step; each step after the one before.
      const double step_start = r.member == 0 ? 7.5 * r.step : 15.0;
      CHECK(r.start >= step_start);
      CHECK(r.end <= step_start + 7.5);
    }
    for (const auto& stage : per_micro) CHECK(stage == std::vector<int>(4, 4));  // F and B of 2 steps each
    for (std::size_t i = 0; i < t.runs.size(); ++i) {  // one run at a time on a slot
      for (std::size_t j = i + 1; j < t.runs.size(); ++j) {
        const sw::ShardRun &a = t.runs[i], &b = t.runs[j];
        if (a.slot == b.slot) CHECK((a.end <= b.start || b.end <= a.start));
      }
    }
  }
  // More slots than shards: a stage per shard, the other slots idle.
  const sw::SweepTimeline wide = sw::simulate_pipeline({members[1]}, 4, {.kind = optimus::pipeline::Kind::gpipe,
                                                                         .micro_batches = 4});
  CHECK(wide.makespan == 7.5);
  for (const sw::ShardRun& r : wide.runs) CHECK(r.slot < 2);
  // The pipeline's trace names each stage's shards and micro-batch, and has no copies.
  const nlohmann::json trace = nlohmann::json::parse(
      sw::chrome_trace(sw::simulate_pipeline({members[0]}, 2, {.kind = optimus::pipeline::Kind::gpipe,
                                                               .micro_batches = 2}),
                       {members[0]}));
  CHECK(trace.at("traceEvents").size() == 2 * 2 * 4);
  CHECK(trace.at("traceEvents")[0].at("name").get<std::string>() == "x F shards 0-1 micro-batch 0 step 0");
}

TEST_CASE("sweep: LRTF against the pipeline baseline, and the pipeline's bad input") {
  // Eight equal members of 4 shards (forward 1, backward 2, copy 0.5), 2 steps, on 4 slots: the pipeline of 4
  // micro-batches fills its stages to (m + S - 1) / m of the ideal; LRTF keeps every slot busy.
  const std::vector<sw::MemberWork> members(
      8, sw::MemberWork{.name = "m", .shards = {{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.5}}, .steps = 2});
  const double lrtf = sw::simulate(members, 4, sw::Scheduler::lrtf).makespan;
  const double pipelined = sw::simulate_pipeline(members, 4, {.kind = optimus::pipeline::Kind::one_f_one_b,
                                                              .micro_batches = 4}).makespan;
  CHECK(pipelined == 8 * 2 * (4 + 3) * 0.75);  // (m + S - 1)(F + B), F = 0.25 and B = 0.5 per micro-batch and stage
  CHECK(lrtf == 48.5);
  CHECK(pipelined / lrtf > 1.5);
  const std::vector<sw::MemberWork> one{members[0]};
  CHECK_THROWS_WITH_AS(sw::simulate(one, 2, sw::Scheduler::pipeline), doctest::Contains("simulate_pipeline"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(sw::simulate_pipeline(one, 2, {.kind = optimus::pipeline::Kind::interleaved,
                                                      .micro_batches = 4}),
                       doctest::Contains("gpipe or 1f1b, not interleaved"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::simulate_pipeline(one, 2, {.kind = optimus::pipeline::Kind::gpipe, .micro_batches = 0}),
                       doctest::Contains("on 0 micro-batches"), optimus::Error);
  CHECK(sw::parse_scheduler("pipeline") == sw::Scheduler::pipeline);
  CHECK(sw::name_of(sw::Scheduler::pipeline) == "pipeline");
}

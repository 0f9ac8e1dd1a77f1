// Message-driven execution's rules (pipeline/dynamic_order.hpp) and its replay: any sequence of allowed operations
// finishes every stage's list (never stuck), holds no more activation bytes than the list's own order, and keeps
// each chunk's micro-batch order; the replay's choices by hand, and jitter's draws.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "optimus/pipeline/dynamic_order.hpp"
#include "optimus/pipeline/memory.hpp"
#include "optimus/pipeline/simulator.hpp"
#include "same_error.hpp"

namespace pp = optimus::pipeline;
using pp::Kind;
using pp::Work;

namespace {

struct Shape {
  Kind kind;
  int stages, micro_batches, chunks;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int s : {1, 2, 3, 4}) {
    for (int m : {1, 2, 4, 8}) {
      for (Kind k : {Kind::gpipe, Kind::one_f_one_b, Kind::zero_bubble}) out.push_back({k, s, m, 1});
      if (m % s == 0) out.push_back({Kind::interleaved, s, m, 2});
      out.push_back({Kind::wave, s, m, 2});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("any sequence of allowed operations runs the whole list within the list's peak bytes, chunks in order") {
  std::mt19937 random(7);
  for (const Shape& shape : shapes()) {
    const pp::Schedule s = pp::make_schedule(
        {.kind = shape.kind, .stages = shape.stages, .micro_batches = shape.micro_batches, .chunks = shape.chunks});
    std::vector<pp::ChunkBytes> bytes;  // arbitrary, unequal bytes per virtual stage
    for (int u = 0; u < s.virtual_stages(); ++u) {
      const std::int64_t saved = 100 + static_cast<std::int64_t>(random() % 900);
      bytes.push_back({.saved = saved, .weight = saved / (2 + u % 3)});
    }
    const std::vector<std::int64_t> bound = pp::peak_activation_bytes(s, bytes);
    for (int stage = 0; stage < s.stages; ++stage) {
      for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(std::string(pp::name_of(s.kind)));
        CAPTURE(s.stages);
        CAPTURE(s.micro_batches);
        CAPTURE(stage);
        pp::DynamicOrder order(s, stage);
        std::vector<std::size_t> ran;
        while (!order.done()) {
          const std::vector<std::size_t> allowed = order.allowed();
          REQUIRE(!allowed.empty());
          // the static order's next is always allowed
          CHECK(std::find(allowed.begin(), allowed.end(), order.first_not_run()) != allowed.end());
          const std::size_t i = allowed[random() % allowed.size()];
          order.ran(i);
          ran.push_back(i);
        }
        CHECK(pp::peak_activation_bytes(s, stage, ran, bytes) <= bound[static_cast<std::size_t>(stage)]);
        // each (work, chunk) in micro-batch order, each backward after its forward (B_weight after B_input)
        const std::vector<pp::Op>& ops = s.ops[static_cast<std::size_t>(stage)];
        std::vector<std::vector<int>> next(4, std::vector<int>(static_cast<std::size_t>(s.chunks), 0));
        std::vector<std::vector<std::vector<bool>>> done(
            4, std::vector<std::vector<bool>>(static_cast<std::size_t>(s.chunks),
                                              std::vector<bool>(static_cast<std::size_t>(s.micro_batches), false)));
        for (std::size_t i : ran) {
          const pp::Op& op = ops[i];
          const auto w = static_cast<std::size_t>(op.work), c = static_cast<std::size_t>(op.chunk);
          CHECK(op.micro_batch == next[w][c]++);
          const auto k = static_cast<std::size_t>(op.micro_batch);
          if (op.work == Work::backward || op.work == Work::backward_input) {
            CHECK(done[static_cast<std::size_t>(Work::forward)][c][k]);
          }
          if (op.work == Work::backward_weight) CHECK(done[static_cast<std::size_t>(Work::backward_input)][c][k]);
          done[w][c][k] = true;
        }
      }
    }
  }
}

TEST_CASE("the rules by hand: 1F1B, S = 2, stage 0, m = 3 (F0 F1 B0 F2 B1 B2)") {
  const pp::Schedule s = pp::make_schedule({.kind = Kind::one_f_one_b, .stages = 2, .micro_batches = 3});
  pp::DynamicOrder order(s, 0);
  CHECK(order.allowed() == std::vector<std::size_t>{0});  // F0: B0 needs it, F1 comes after F0
  order.ran(0);
  CHECK(order.allowed() == std::vector<std::size_t>{1, 2});  // F1 (listed before B0) or B0
  order.ran(2);                                              // B0 early: its gradient came first
  CHECK(order.allowed() == std::vector<std::size_t>{1});     // F1; F2 waits for F1, B1 for F1
  order.ran(1);
  CHECK(order.allowed() == std::vector<std::size_t>{3, 4});  // F2 (B0 listed before it has run) or B1
  // a forward never runs ahead of a backward listed before it: in 1F1B, F2 waits for B0 — memory stays at 2
  pp::DynamicOrder fresh(s, 0);
  fresh.ran(0);
  fresh.ran(1);
  CHECK_FALSE(fresh.allows(3));
  CHECK(optimus::test::error_of([&] { fresh.ran(3); }) ==
        "pipeline dynamic order: stage 0 may not run operation 3 (F2) now");
  CHECK(optimus::test::error_of([&] { pp::DynamicOrder(s, 2); }) ==
        "pipeline dynamic order: stage 2 of a schedule of 2 stages");
  CHECK(pp::parse_order("dynamic") == pp::Order::dynamic);
  CHECK(pp::parse_order("static") == pp::Order::static_order);
  CHECK(optimus::test::error_of([] { pp::parse_order("eager"); }) ==
        "pipeline execution 'eager' is not one of: static, dynamic");
}

TEST_CASE("replays: without jitter both orders match the published 1F1B; slow forwards on stage 0, by hand") {
  for (int stages : {2, 4}) {
    const pp::Schedule s = pp::make_schedule({.kind = Kind::one_f_one_b, .stages = stages, .micro_batches = 8});
    const std::vector<pp::Costs> unit(static_cast<std::size_t>(stages), pp::Costs{.forward = 1, .backward = 2});
    for (pp::Order order : {pp::Order::static_order, pp::Order::dynamic}) {
      const pp::Simulation sim = pp::simulate(s, unit, pp::Replay{.execution = {.order = order, .jitter = 0}, .step = 0});
      CHECK(sim.makespan == 3 * (8 + stages - 1));
    }
  }
  // GPipe, S = 2, m = 2, stage 0's forwards take 3 (F = 1 elsewhere, B = 1). Statically stage 1 runs F0 [3,4], waits for
  // F1 [6,7], then B0 [7,8] B1 [8,9], and stage 0 B0 [8,9] B1 [9,10]: 10. Dynamically stage 1 runs B0 [4,5] while F1
  // is on its way, F1 [6,7], B1 [7,8]; stage 0's B0 [6,7], B1 [8,9]: 9.
  const pp::Schedule g = pp::make_schedule({.kind = Kind::gpipe, .stages = 2, .micro_batches = 2});
  const std::vector<pp::Costs> costs{pp::Costs{.forward = 3, .backward = 1}, pp::Costs{.forward = 1, .backward = 1}};
  const pp::Simulation fixed = pp::simulate(g, costs, pp::Replay{});
  const pp::Simulation dynamic =
      pp::simulate(g, costs, pp::Replay{.execution = {.order = pp::Order::dynamic, .jitter = 0}, .step = 0});
  CHECK(fixed.makespan == 10);
  CHECK(dynamic.makespan == 9);
  CHECK(dynamic.times[1][2].start == 4);  // stage 1's B0 (list index 2) ran before its F1 (index 1)
  CHECK(dynamic.times[1][1].start == 6);
  CHECK(fixed.peak_live == std::vector<int>{2, 2});
  CHECK(dynamic.peak_live == std::vector<int>{2, 1});  // stage 1 freed F0's before F1 came
}

TEST_CASE("jitter: deterministic draws in [0, 1), spread out; each cost grows by jitter * draw") {
  double sum = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    const double d = pp::jitter_draw(3, 1, i);
    CHECK(d >= 0);
    CHECK(d < 1);
    CHECK(d == pp::jitter_draw(3, 1, i));
    sum += d;
  }
  CHECK(sum / 1000 == doctest::Approx(0.5).epsilon(0.05));
  CHECK(pp::jitter_draw(3, 1, 0) != pp::jitter_draw(4, 1, 0));
  CHECK(pp::jitter_draw(3, 1, 0) != pp::jitter_draw(3, 2, 0));
  const pp::Schedule s = pp::make_schedule({.kind = Kind::one_f_one_b, .stages = 2, .micro_batches = 4});
  const std::vector<pp::Costs> unit(2, pp::Costs{.forward = 1, .backward = 2});
  const pp::Simulation sim =
      pp::simulate(s, unit, pp::Replay{.execution = {.order = pp::Order::static_order, .jitter = 0.3}, .step = 5});
  for (int stage = 0; stage < 2; ++stage) {
    for (std::size_t i = 0; i < s.ops[static_cast<std::size_t>(stage)].size(); ++i) {
      const pp::Interval& t = sim.times[static_cast<std::size_t>(stage)][i];
      const double base = pp::cost_of(unit[0], s.ops[static_cast<std::size_t>(stage)][i].work);
      CHECK(t.end - t.start == doctest::Approx(base * (1 + 0.3 * pp::jitter_draw(5, stage, i))));
    }
  }
}

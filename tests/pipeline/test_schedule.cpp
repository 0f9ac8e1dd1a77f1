// Pipeline schedules as data: the published bubbles and memory of each schedule under unit costs, the validator's
// refusals (naming stage and operation), and the chart docs/pipeline.md shows.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/pipeline/partition.hpp"
#include "optimus/pipeline/schedule.hpp"
#include "optimus/pipeline/simulator.hpp"
#include "same_error.hpp"

namespace pp = optimus::pipeline;
using pp::Kind;
using pp::Op;
using pp::Work;

namespace {

pp::Schedule make(Kind kind, int stages, int micro_batches, int chunks = 1) {
  return pp::make_schedule({.kind = kind, .stages = stages, .micro_batches = micro_batches, .chunks = chunks});
}

std::string refusal(const pp::Schedule& s) {
  return optimus::test::error_of([&] { pp::validate(s); });
}

std::string refusal(const pp::ScheduleRequest& r) {
  return optimus::test::error_of([&] { pp::make_schedule(r); });
}

}  // namespace

TEST_CASE("unit costs give the published bubbles: GPipe, 1F1B (S-1)/(m+S-1), interleaved (S-1)/(vm+S-1), ZB-H1") {
  for (int stages : {2, 3, 4}) {
    for (int m : {4, 8, 12}) {
      CAPTURE(stages);
      CAPTURE(m);
      const double S = stages;
      const pp::Costs whole{.forward = 1, .backward = 2};
      for (Kind kind : {Kind::gpipe, Kind::one_f_one_b}) {
        const pp::Simulation sim = pp::simulate(make(kind, stages, m), whole);
        CHECK(sim.bubble == doctest::Approx((S - 1) / (m + S - 1)).epsilon(1e-12));
        CHECK(sim.makespan == 3 * (m + S - 1));
      }
      for (int v : {2, 3}) {
        if (m % stages != 0) continue;
        const pp::Simulation sim = pp::simulate(make(Kind::interleaved, stages, m, v), whole);
        CHECK(sim.bubble == doctest::Approx((S - 1) / (v * m + S - 1)).epsilon(1e-12));
      }
      // ZB-H1 (F = B_input = B_weight = 1): a bubble of (S-1) units per stage, against 1F1B's 3 (S-1).
      const pp::Simulation zb = pp::simulate(make(Kind::zero_bubble, stages, m), pp::Costs{});
      CHECK(zb.bubble == doctest::Approx((S - 1) / (3 * m + S - 1)).epsilon(1e-12));
      CHECK(zb.makespan == 3 * m + S - 1);
    }
  }
}

TEST_CASE("the wave (v = 2, F = 1, B = 2 per chunk) idles max(4S-5, 6S-4-2m) units per stage (docs/pipeline.md)") {
  for (int stages = 2; stages <= 8; ++stages) {
    for (int m = 1; m <= 5 * stages; ++m) {
      CAPTURE(stages);
      CAPTURE(m);
      const pp::Simulation sim = pp::simulate(make(Kind::wave, stages, m, 2), pp::Costs{.forward = 1, .backward = 2});
      const double idle = std::max(4 * stages - 5, 6 * stages - 4 - 2 * m);
      CHECK(sim.makespan == 6 * m + idle);
      CHECK(sim.bubble == doctest::Approx(idle / (6 * m + idle)).epsilon(1e-12));
    }
  }
}

TEST_CASE("peak live activations: 1F1B's stage s holds min(S-s, m), GPipe m, interleaved Megatron's warmup + 1") {
  for (int stages : {2, 4}) {
    for (int m : {2, 8}) {
      const pp::Simulation one = pp::simulate(make(Kind::one_f_one_b, stages, m), pp::Costs{});
      const pp::Simulation all = pp::simulate(make(Kind::gpipe, stages, m), pp::Costs{});
      for (int s = 0; s < stages; ++s) {
        CHECK(one.peak_live[static_cast<std::size_t>(s)] == std::min(stages - s, m));
        CHECK(all.peak_live[static_cast<std::size_t>(s)] == m);
      }
    }
  }
  // Interleaved at S = 4, v = 2, m = 8: (S - s - 1) 2 + (v - 1) S forwards before the first backward, one more after.
  const pp::Simulation inter = pp::simulate(make(Kind::interleaved, 4, 8, 2), pp::Costs{});
  CHECK(inter.peak_live == std::vector<int>{11, 9, 7, 5});
  // ZB-H1 as made here holds an activation until its weight gradient: up to (S - s) + (S - 1) (docs/pipeline.md).
  const pp::Simulation zb = pp::simulate(make(Kind::zero_bubble, 4, 8), pp::Costs{});
  CHECK(zb.peak_live == std::vector<int>{7, 6, 5, 4});
  // The wave at S = 4, v = 2: each virtual stage u keeps 1F1B's U - u, and a stage holds u and 2S-1-u: balanced.
  const pp::Simulation wave = pp::simulate(make(Kind::wave, 4, 8, 2), pp::Costs{});
  CHECK(wave.peak_live == std::vector<int>{8, 9, 9, 9});
}

TEST_CASE("every schedule validates at S = 1..4, m = 1..9, and runs each chunk's backward in micro-batch order") {
  for (Kind kind : {Kind::gpipe, Kind::one_f_one_b, Kind::interleaved, Kind::wave, Kind::zero_bubble}) {
    const bool chunked = kind == Kind::interleaved || kind == Kind::wave;
    for (int stages = 1; stages <= 4; ++stages) {
      for (int m = 1; m <= 9; ++m) {
        for (int v : chunked ? std::vector<int>{2, 3} : std::vector<int>{1}) {
          if (kind == Kind::interleaved && m % stages != 0) continue;
          CAPTURE(pp::name_of(kind));
          CAPTURE(stages);
          CAPTURE(m);
          CAPTURE(v);
          const pp::Schedule s = make(kind, stages, m, v);
          std::size_t ops = 0;
          for (const auto& stage : s.ops) ops += stage.size();
          CHECK(ops == static_cast<std::size_t>(stages * v * m * (s.split_backward ? 3 : 2)));
          CHECK(pp::simulate(s, pp::Costs{.forward = 1.5, .backward = 2.5, .p2p = 0.25}).makespan > 0);
        }
      }
    }
  }
}

TEST_CASE("placement: interleaved loops over the stages, the wave goes down and back up") {
  const pp::Schedule inter = make(Kind::interleaved, 4, 4, 2), wave = make(Kind::wave, 4, 4, 2);
  std::vector<int> inter_stages, wave_stages;
  for (int u = 0; u < 8; ++u) {
    inter_stages.push_back(inter.stage_of(u));
    wave_stages.push_back(wave.stage_of(u));
    CHECK(inter.virtual_stage(inter.stage_of(u), inter.chunk_of(u)) == u);
    CHECK(wave.virtual_stage(wave.stage_of(u), wave.chunk_of(u)) == u);
  }
  CHECK(inter_stages == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(wave_stages == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
}

TEST_CASE("the validator names the stage and operation: deadlock, duplicates, missing work, order, wrong kind") {
  pp::Schedule s = make(Kind::one_f_one_b, 2, 2);
  CHECK(s.ops[1].size() == 4);  // F0 B0 F1 B1
  {  // stage 1's B0 before its own F0
    pp::Schedule bad = s;
    std::swap(bad.ops[1][0], bad.ops[1][1]);
    CHECK(refusal(bad) ==
          "pipeline schedule 1f1b would wait forever: stage 0 operation 2 (B0) waits for B0 on stage 1; stage 1 "
          "operation 0 (B0) waits for F0 on stage 1");
  }
  {  // a cycle through two stages: stage 0 waits for B0 before it sends F1, stage 1 for F1 before it sends B0
    pp::Schedule bad = make(Kind::gpipe, 2, 2);
    bad.ops[0] = {Op{.work = Work::forward, .micro_batch = 0, .chunk = 0},
                  Op{.work = Work::backward, .micro_batch = 0, .chunk = 0},
                  Op{.work = Work::forward, .micro_batch = 1, .chunk = 0},
                  Op{.work = Work::backward, .micro_batch = 1, .chunk = 0}};
    CHECK(refusal(bad) ==
          "pipeline schedule gpipe would wait forever: stage 0 operation 1 (B0) waits for B0 on stage 1; stage 1 "
          "operation 1 (F1) waits for F1 on stage 0");
  }
  {
    pp::Schedule bad = s;
    bad.ops[0][1] = bad.ops[0][0];
    CHECK(refusal(bad) == "pipeline schedule 1f1b: stage 0 operation 1 (F0) appears twice");
  }
  {
    pp::Schedule bad = s;
    bad.ops[1].pop_back();
    CHECK(refusal(bad) == "pipeline schedule 1f1b: stage 1 runs B on chunk 0 for 1 of the 2 micro-batches");
  }
  {  // backward out of micro-batch order: the gradients would accumulate in another order than with pp = 1
    pp::Schedule bad = make(Kind::gpipe, 1, 2);
    std::swap(bad.ops[0][2], bad.ops[0][3]);
    CHECK(refusal(bad) ==
          "pipeline schedule gpipe: stage 0 operation 2 (B1): chunk 0 runs micro-batch 1 where micro-batch 0 comes "
          "first (each chunk takes micro-batches in order, so that gradients accumulate in the order of pp = 1)");
  }
  {
    pp::Schedule bad = s;
    bad.ops[0][0].micro_batch = 5;
    CHECK(refusal(bad) == "pipeline schedule 1f1b: stage 0 operation 0 (F5): micro-batch 5 on chunk 0 is not one of "
                          "the 2 micro-batches on 1 chunks");
  }
  {
    pp::Schedule bad = s;
    bad.ops[0][1].work = Work::backward_input;
    CHECK(refusal(bad) == "pipeline schedule 1f1b: stage 0 operation 1 (b1): a split backward in a schedule of whole "
                          "backwards");
  }
}

TEST_CASE("make_schedule refuses what a kind cannot take, naming the value") {
  CHECK(refusal(pp::ScheduleRequest{.kind = Kind::interleaved, .stages = 4, .micro_batches = 6, .chunks = 2}) ==
        "pipeline schedule interleaved: 6 micro-batches is not a multiple of the 4 stages (micro-batches go through "
        "each chunk in groups of S)");
  CHECK(refusal(pp::ScheduleRequest{.kind = Kind::one_f_one_b, .stages = 2, .micro_batches = 4, .chunks = 2}) ==
        "pipeline schedule 1f1b has one chunk per stage, not 2 (--chunks is for interleaved and wave)");
  CHECK(refusal(pp::ScheduleRequest{.kind = Kind::wave, .stages = 2, .micro_batches = 4, .chunks = 1}) ==
        "pipeline schedule wave needs at least 2 chunks per stage, got 1");
  CHECK(refusal(pp::ScheduleRequest{.kind = Kind::gpipe, .stages = 0, .micro_batches = 4, .chunks = 1}) ==
        "pipeline schedule gpipe: 0 stages (at least 1)");
  CHECK(refusal(pp::ScheduleRequest{.kind = Kind::zero_bubble, .stages = 2, .micro_batches = 0, .chunks = 1}) ==
        "pipeline schedule zb: 0 micro-batches (at least 1)");
  CHECK_THROWS_WITH_AS(pp::parse_kind("zigzag"), doctest::Contains("unknown pipeline schedule 'zigzag'"),
                       optimus::Error);
  for (Kind kind : {Kind::gpipe, Kind::one_f_one_b, Kind::interleaved, Kind::wave, Kind::zero_bubble}) {
    CHECK(pp::parse_kind(pp::name_of(kind)) == kind);
  }
}

TEST_CASE("the chart draws each stage's operations to scale (docs/pipeline.md)") {
  const pp::Schedule s = make(Kind::one_f_one_b, 2, 2);
  const std::vector<std::string> rows = pp::chart(s, pp::simulate(s, pp::Costs{}), 1.0);
  CHECK(rows == std::vector<std::string>{"stage 0 |F0 F1 ......B0--- ...B1--- |",
                                         "stage 1 |...F0 B0--- F1 B1--- ......|"});
}

TEST_CASE("the blocks are cut into S*v equal runs; the embedding and the head go with the first and last piece") {
  const pp::Schedule wave = make(Kind::wave, 4, 4, 2);
  for (int u = 0; u < 8; ++u) {
    const pp::LayerRange r = pp::layers_of(wave, 16, u);
    CHECK(r.first == 2 * u);
    CHECK(r.count == 2);
    CHECK(r.embedding == (u == 0));
    CHECK(r.head == (u == 7));
  }
  CHECK(wave.stage_of(0) == 0);  // in the wave, the embedding and the tied head share stage 0
  CHECK(wave.stage_of(7) == 0);
  CHECK(optimus::test::error_of([] { pp::check_layers(6, 4, 2); }) ==
        "pipeline: 6 layers do not divide among 4 stages x 2 chunks (8 pieces of equal, non-zero size)");
  CHECK(optimus::test::error_of([] { pp::check_layers(4, 4, 2); }) ==
        "pipeline: 4 layers do not divide among 4 stages x 2 chunks (8 pieces of equal, non-zero size)");
  CHECK(optimus::test::error_of([] { pp::check_layers(8, 4, 2); }) == "accepted");
  CHECK(optimus::test::error_of([&] { pp::layers_of(wave, 16, 8); }) == "pipeline: virtual stage 8 is not in [0, 8)");
}

TEST_CASE("messages between stages: two per micro-batch and boundary between stages, none at the wave's turn") {
  // 1F1B, S = 4, m = 8: stage 0 sends 8 activations and receives 8 gradients; inner stages twice that.
  const pp::Simulation one = pp::simulate(make(Kind::one_f_one_b, 4, 8), pp::Costs{});
  CHECK(one.sends == std::vector<int>{8, 16, 16, 8});
  CHECK(one.receives == std::vector<int>{8, 16, 16, 8});
  // Interleaved, v = 2: 7 boundaries, all between stages (u = 3 -> 4 goes from stage 3 to stage 0).
  const pp::Simulation inter = pp::simulate(make(Kind::interleaved, 4, 8, 2), pp::Costs{});
  CHECK(inter.sends == std::vector<int>{24, 32, 32, 24});
  // The wave, v = 2: the turn u = 3 -> 4 stays on stage 3, so stage 3 exchanges only with stage 2, like stage 0.
  const pp::Simulation wave = pp::simulate(make(Kind::wave, 4, 8, 2), pp::Costs{});
  CHECK(wave.sends == std::vector<int>{16, 32, 32, 16});
  CHECK(wave.receives == wave.sends);
  // ZB-H1: B_weight waits only for its own stage's B_input: the same messages as 1F1B.
  CHECK(pp::simulate(make(Kind::zero_bubble, 4, 8), pp::Costs{}).sends == one.sends);
}

TEST_CASE("costs per virtual stage: 1F1B, S = 2, m = 1, a heavier second stage and a message time, by hand") {
  const pp::Schedule s = pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 2, .micro_batches = 1, .chunks = 1});
  // u = 0: F 1, B 2; u = 1: F 3, B 4. Stage 0 F [0, 1]; stage 1 F [1, 4], B [4, 8]; stage 0 B [8, 10].
  std::vector<pp::Costs> costs{pp::Costs{.forward = 1, .backward = 2}, pp::Costs{.forward = 3, .backward = 4}};
  pp::Simulation sim = pp::simulate(s, costs);
  CHECK(sim.makespan == 10);
  CHECK(sim.bubble == doctest::Approx(0.5));
  CHECK(sim.times[1][1].start == 4);
  // A message of 0.5 delays each receiving operation: stage 1 F [1.5, 4.5], B [4.5, 8.5]; stage 0 B [9, 11].
  for (pp::Costs& c : costs) c.p2p = 0.5;
  sim = pp::simulate(s, costs);
  CHECK(sim.makespan == 11);
  CHECK(sim.bubble == doctest::Approx(1.0 - 10.0 / 22.0));
  // The same costs everywhere give the one-costs simulation.
  const pp::Schedule wave = pp::make_schedule({.kind = pp::Kind::wave, .stages = 4, .micro_batches = 8, .chunks = 2});
  CHECK(pp::simulate(wave, std::vector<pp::Costs>(8, pp::Costs{})).makespan == pp::simulate(wave, pp::Costs{}).makespan);
  CHECK(optimus::test::error_of([&] { pp::simulate(wave, costs); }) ==
        "pipeline simulation of wave: costs for 2 virtual stages, not 8");
}

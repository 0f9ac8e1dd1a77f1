// The sweep's runtime (optimus/sweep/runtime.hpp) with real models: members of different seeds, learning rates and
// lengths trained at once on 1 and 2 slots (in-process ranks) under every scheduler; each member's losses and final
// parameters bitwise those of its run alone (one stage, train_step), and the operations interleaved as the scheduler
// says.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../layers/layer_cases.hpp"
#include "capture_binding.hpp"
#include "optimus/layers/adamw.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/sweep/gpt_member.hpp"
#include "optimus/sweep/runtime.hpp"
#include "test_world.hpp"

namespace {

namespace sweep = optimus::sweep;
namespace pp = optimus::pipeline;

struct MemberSpec {
  std::uint64_t seed;
  int steps;
  double lr;
  int q = 1;  // the slots' grid side
};

constexpr std::int64_t kBatch = 2;

optimus::GptConfig member_config(const MemberSpec& spec) {
  optimus::GptConfig c = optimus::test::config_for(spec.q, 2, 0.1);
  c.seed = spec.seed;
  return c;
}

// Step `step`'s batch of a member: the same ids alone and in the sweep.
std::vector<int> ids_of(const MemberSpec& spec, int step, std::uint64_t which) {
  const optimus::GptConfig c = member_config(spec);
  return optimus::test::random_tokens(kBatch * c.max_seq, c.vocab, 1000 * spec.seed + 10 * step + which);
}

using TestMember = sweep::GptMember<double>;

std::unique_ptr<TestMember> member_of(optimus::Communicator& world, const MemberSpec& spec) {
  return std::make_unique<TestMember>(
      world, spec.q, member_config(spec),
      sweep::MemberTraining{.adam = {.lr = spec.lr, .max_grad_norm = 1.0}, .steps = spec.steps, .batch = kBatch,
                            .micro_batches = 1},
      [spec](int step, std::vector<int>& tokens, std::vector<int>& targets) {
        tokens = ids_of(spec, step, 0);
        targets = ids_of(spec, step, 1);
      });
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, optimus::GlobalMatrix> parameters;
};

// The member alone: one stage (on q x q ranks), train_step, AdamW.
Trained alone(const MemberSpec& spec) {
  Trained t;
  optimus::test::run_in_process(spec.q * spec.q, [&](optimus::Communicator& world) {
    optimus::Gpt2D<double> model(optimus::Grid::create(world, spec.q, 1), member_config(spec));
    optimus::AdamW<double> optimizer(model.grid(), model.parameters(),
                                     {.config = {.lr = spec.lr, .max_grad_norm = 1.0}, .norm_order = model.norm_order()});
    for (int step = 0; step < spec.steps; ++step) {
      model.zero_grad();
      const double loss =
          model.train_step(ids_of(spec, step, 0), ids_of(spec, step, 1), kBatch, static_cast<std::uint64_t>(step));
      if (world.rank() == 0) t.losses.push_back(loss);
      optimizer.step();
    }
    const auto parameters = model.gather(false);
    if (world.rank() == 0) t.parameters = parameters;
  });
  return t;
}

}  // namespace

TEST_CASE("a sweep's members train at once on 1 and 2 slots, each bitwise as alone, under every scheduler") {
  const std::vector<MemberSpec> specs{{.seed = 3, .steps = 3, .lr = 1e-3},
                                      {.seed = 4, .steps = 1, .lr = 3e-3},
                                      {.seed = 5, .steps = 4, .lr = 1e-2}};
  std::vector<Trained> expected;
  for (const MemberSpec& s : specs) expected.push_back(alone(s));
  CHECK(expected[0].losses[0] != expected[1].losses[0]);
  for (const int slots : {1, 2}) {
    for (const auto& setting :
         {std::pair{sweep::Scheduler::lrtf, 0}, std::pair{sweep::Scheduler::round_robin, 0},
          std::pair{sweep::Scheduler::model_parallel, 0}, std::pair{sweep::Scheduler::lrtf, 1},
          std::pair{sweep::Scheduler::round_robin, 2}}) {
      const sweep::Scheduler scheduler = setting.first;  // (lambdas below capture them: not structured bindings)
      const int in_flight = setting.second;
      CAPTURE(slots);
      CAPTURE(sweep::name_of(scheduler));
      CAPTURE(in_flight);
      std::vector<std::vector<sweep::OperationRun>> runs(static_cast<std::size_t>(slots));
      optimus::test::run_in_process(slots, [&](optimus::Communicator& world) {
        std::vector<std::unique_ptr<TestMember>> members;
        std::vector<sweep::MemberSteps*> steps;
        for (const MemberSpec& s : specs) {
          members.push_back(member_of(world, s));
          steps.push_back(members.back().get());
        }
        const std::unique_ptr<optimus::Communicator> self = world.split(world.rank(), 0);  // a slot of one rank
        runs[static_cast<std::size_t>(world.rank())] =
            sweep::train_members(steps, {.scheduler = scheduler, .in_flight = in_flight}, world, *self);
        for (std::size_t m = 0; m < specs.size(); ++m) {
          CHECK(members[m]->losses() == expected[m].losses);  // the loss on every rank
          // each slot holds its stage's parameters (wte on both end stages)
          const auto parameters = members[m]->model().gather(false);
          const double held = world.all_reduce(static_cast<double>(parameters.size()), optimus::ReduceOp::sum);
          CHECK(held == static_cast<double>(expected[m].parameters.size() + (slots > 1 ? 1 : 0)));
          for (const auto& [name, value] : parameters) {
            CAPTURE_BINDING(name);
            REQUIRE(expected[m].parameters.count(name) == 1);
            CHECK(value == expected[m].parameters.at(name));
          }
        }
      });
      // Each slot ran each member's 5 operations per step (forward, backward and the exchanged end's three), and ended
      // its steps in the order slot 0 decided, the same on every slot: one member's steps after another's under
      // model-parallel.
      std::vector<std::vector<sweep::OperationRun>> operations(runs.size());
      std::vector<std::vector<int>> ends(runs.size());
      for (std::size_t s = 0; s < runs.size(); ++s) {
        for (const sweep::OperationRun& r : runs[s]) {
          if (r.operation >= 0) operations[s].push_back(r);
          else ends[s].push_back(r.member);
        }
        CHECK(operations[s].size() == 5 * (3 + 1 + 4));
        CHECK(ends[s] == ends[0]);
      }
      for (int m = 0; m < 3; ++m) CHECK(std::count(ends[0].begin(), ends[0].end(), m) == specs[m].steps);
      if (scheduler == sweep::Scheduler::model_parallel || in_flight == 1) {
        // one member at a time: model-parallel in member order; LRTF the longest remaining (ties: the lower index)
        CHECK(ends[0] == (in_flight == 1 ? std::vector<int>{2, 0, 2, 0, 2, 0, 1, 2}
                                         : std::vector<int>{0, 0, 0, 1, 2, 2, 2, 2}));
      }
      const std::vector<sweep::OperationRun>& first = operations[0];
      if (scheduler == sweep::Scheduler::model_parallel) {
        // one member at a time: member 0's 15 operations, member 1's 5, member 2's 20
        for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i].member == (i < 15 ? 0 : i < 20 ? 1 : 2));
      } else if (scheduler == sweep::Scheduler::lrtf) {
        // the longest remaining (member 2, 4 steps) starts first
        CHECK(first.front().member == 2);
      } else {
        CHECK(first[0].member == 0);
        CHECK(first[1].member == 1);  // the next member after the one that ran last
      }
    }
  }
}

// Optimus's 2D inside HYDRA's task parallelism: each slot a 2 x 2 grid whose first rank chooses the operations for the
// four; members on 1 and 2 such slots (4 and 8 ranks), each bitwise its run alone on one 2 x 2 grid.
TEST_CASE("a sweep's members on slots of 2 x 2 ranks, each bitwise as alone on one 2 x 2 grid") {
  const std::vector<MemberSpec> specs{{.seed = 6, .steps = 2, .lr = 1e-3, .q = 2},
                                      {.seed = 7, .steps = 3, .lr = 3e-3, .q = 2}};
  std::vector<Trained> expected;
  for (const MemberSpec& s : specs) expected.push_back(alone(s));
  for (const int slots : {1, 2}) {
    for (const sweep::Scheduler scheduler : {sweep::Scheduler::lrtf, sweep::Scheduler::round_robin}) {
      CAPTURE(slots);
      CAPTURE(sweep::name_of(scheduler));
      optimus::test::run_in_process(4 * slots, [&](optimus::Communicator& world) {
        std::vector<std::unique_ptr<TestMember>> members;
        std::vector<sweep::MemberSteps*> steps;
        for (const MemberSpec& s : specs) {
          members.push_back(member_of(world, s));
          steps.push_back(members.back().get());
        }
        const std::unique_ptr<optimus::Communicator> slot = world.split(world.rank() / 4, world.rank());
        const std::vector<sweep::OperationRun> runs =
            sweep::train_members(steps, {.scheduler = scheduler, .in_flight = 0}, world, *slot);
        CHECK(runs.size() == 6 * (2 + 3));  // of each step: forward, backward, the end's three operations and the end
        for (std::size_t m = 0; m < specs.size(); ++m) {
          CHECK(members[m]->losses() == expected[m].losses);
          for (const auto& [name, value] : members[m]->model().gather(false)) {
            CAPTURE_BINDING(name);
            REQUIRE(expected[m].parameters.count(name) == 1);
            CHECK(value == expected[m].parameters.at(name));
          }
        }
      });
    }
  }
}

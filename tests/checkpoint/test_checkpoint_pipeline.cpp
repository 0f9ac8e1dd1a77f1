// Checkpoints of pipelines (in-process ranks): a pipeline's stages save one checkpoint that the whole model, other
// pipelines (another schedule, more chunks, more stages) and other grids load; pipelines load what whole models saved.
// Every pipeline here runs the whole model's arithmetic with the same micro-batches, so resumed losses are compared
// bit for bit, and the state (parameters, AdamW's moments) after a load is the saved state bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "checkpoint_support.hpp"
#include "test_world.hpp"

namespace fs = std::filesystem;
namespace pp = optimus::pipeline;
using optimus::GlobalMatrix;

namespace {

constexpr int kMicroBatches = 2;  // 6 sequences each: q = 1, 2 divide them

optimus::GptConfig four_blocks() {
  optimus::GptConfig c = optimus::test::small_config();
  c.layers = 4;  // 2 stages x 2 chunks, or 4 stages
  return c;
}

// What a run shows: its losses, and its state (parameters, "m/NAME", "v/NAME") after loading or before saving.
struct Run {
  std::vector<double> losses;
  std::map<std::string, GlobalMatrix> state;
};

// A layout that trains four_blocks(): the whole model on a q x q grid, or a pipeline of `stages` stages of q x q grids
// (or, one_d, of the 1D baseline's groups of p = q ranks).
struct Layout {
  int q = 1;
  int stages = 1;  // 1: the whole model on one stage
  pp::Kind kind = pp::Kind::one_f_one_b;
  int chunks = 1;
  bool one_d = false;
  int ranks() const { return one_d ? stages * q : stages * q * q; }
};

// The model and optimizer of a layout on this rank, with one step and the gathered state.
class Trainee {
 public:
  Trainee(optimus::Communicator& world, const Layout& l)
      : grid_(optimus::Grid::create(world, l.one_d ? 1 : l.q, l.one_d ? world.size() : l.stages)) {
    const optimus::AdamWConfig adam{.lr = 3e-3};
    if (l.one_d) {
      group_.emplace(optimus::megatron::Group::pipeline_stage(world, l.stages));
      const pp::Schedule s = pp::make_schedule(
          {.kind = l.kind, .stages = l.stages, .micro_batches = kMicroBatches, .chunks = l.chunks});
      one_d_ = std::make_unique<optimus::Gpt1D<float>>(*group_, four_blocks(), s);
      optimizer_ = std::make_unique<optimus::AdamW<float>>(
          *group_, one_d_->parameters(), optimus::AdamWOptions{.config = adam, .norm_order = one_d_->norm_order()});
    } else {
      const pp::Schedule s = pp::make_schedule(
          {.kind = l.kind, .stages = l.stages, .micro_batches = kMicroBatches, .chunks = l.chunks});
      staged_ = std::make_unique<optimus::Gpt2D<float>>(grid_, four_blocks(), s);
      optimizer_ = std::make_unique<optimus::AdamW<float>>(
          grid_, staged_->parameters(), optimus::AdamWOptions{.config = adam, .norm_order = staged_->norm_order()});
    }
  }

  double step(std::uint64_t step) {
    std::vector<int> tokens, targets;
    optimus::test::batch_of(step, 0, 1, tokens, targets);
    double loss = 0;
    if (one_d_) {
      one_d_->zero_grad();
      loss = one_d_->train_step(tokens, targets, optimus::test::global_batch, step);
    } else {
      staged_->zero_grad();
      loss = staged_->train_step(tokens, targets, optimus::test::global_batch, step);
    }
    optimizer_->step();
    return loss;
  }

  void save(const fs::path& dir, std::uint64_t step) {
    const optimus::checkpoint::TrainingState state{.step = step, .extra = {}};
    if (one_d_) optimus::checkpoint::save(dir, *one_d_, optimizer_.get(), state);
    else optimus::checkpoint::save(dir, *staged_, optimizer_.get(), state);
  }
  std::uint64_t load(const fs::path& dir) {
    if (one_d_) return optimus::checkpoint::load(dir, *one_d_, optimizer_.get(), nullptr).step;
    return optimus::checkpoint::load(dir, *staged_, optimizer_.get(), nullptr).step;
  }

  // This stage's state gathered over its grid or group (collective), added to `into` on its rank 0.
  void gather_into(std::map<std::string, GlobalMatrix>& into, std::mutex& lock) {
    optimus::Communicator& holders = group_ ? group_->tp() : grid_.grid();
    auto mine = one_d_ ? optimus::test::gather_state(*one_d_, *optimizer_, holders, nullptr)
                       : optimus::test::gather_state(*staged_, *optimizer_, holders, grid_.device());
    if (holders.rank() != 0) return;
    std::lock_guard guard(lock);
    for (auto& [name, value] : mine) into[name] = std::move(value);  // wte from either end stage: the same bits
  }

 private:
  optimus::Grid grid_;  // unused by the 1D layout, whose stages are group_'s
  std::optional<optimus::megatron::Group> group_;
  std::unique_ptr<optimus::Gpt1D<float>> one_d_;
  std::unique_ptr<optimus::Gpt2D<float>> staged_;
  std::unique_ptr<optimus::AdamW<float>> optimizer_;
};

// Trains `layout` from step first (after loading `from`, if given) to step last, saving `to` (if given) at the end. The
// state is the one loaded, or where the run saves, the one saved.
Run train(const Layout& layout, const fs::path& from, int first, int last, const fs::path& to) {
  Run run;
  std::mutex lock;
  optimus::test::run_in_process(layout.ranks(), [&](optimus::Communicator& world) {
    Trainee t(world, layout);
    if (!from.empty()) {
      CHECK(t.load(from) == static_cast<std::uint64_t>(first - 1));
      t.gather_into(run.state, lock);
    }
    std::vector<double> losses;
    for (int s = first; s <= last; ++s) losses.push_back(t.step(static_cast<std::uint64_t>(s)));
    if (!to.empty()) {
      t.save(to, static_cast<std::uint64_t>(last));
      t.gather_into(run.state, lock);
    }
    if (world.rank() == 0) run.losses = losses;
  });
  return run;
}

void check_same_state(const Run& got, const Run& expected) {
  REQUIRE(got.state.size() == expected.state.size());
  for (const auto& [name, value] : expected.state) {
    CAPTURE_BINDING(name);
    CHECK(got.state.at(name) == value);
  }
}

}  // namespace

TEST_CASE("a pipeline's checkpoint resumes bitwise in the whole model and in other pipelines, and the other way") {
  const fs::path dir = optimus::test::fresh_directory("pipeline");
  const Run whole = train({.q = 1}, {}, 1, 4, {});
  // Saved from 2 stages under 1F1B after step 2: the whole model's losses, state and files stage by stage.
  const Run saved = train({.q = 1, .stages = 2}, {}, 1, 2, dir / "step_2");
  CHECK(saved.losses == std::vector<double>(whole.losses.begin(), whole.losses.begin() + 2));
  const optimus::checkpoint::Info info = optimus::checkpoint::inspect(dir / "step_2");
  CHECK(info.mesh.pp == 2);
  CHECK(info.adamw_steps == 2);
  CHECK(fs::exists(dir / "step_2" / "rank_00001.safetensors"));
  const std::vector<double> rest(whole.losses.begin() + 2, whole.losses.end());
  for (const Layout& other : {Layout{.q = 1}, Layout{.q = 1, .stages = 2, .kind = pp::Kind::interleaved, .chunks = 2},
                              Layout{.q = 1, .stages = 4, .kind = pp::Kind::zero_bubble},
                              Layout{.q = 1, .stages = 2, .kind = pp::Kind::wave, .chunks = 2}}) {
    CAPTURE(other.stages);
    CAPTURE(pp::name_of(other.kind));
    const Run resumed = train(other, dir / "step_2", 3, 4, {});
    check_same_state(resumed, saved);
    CHECK(resumed.losses == rest);
  }
  // Resharded onto 2 x 2 grids, whole and pipelined: the state bit for bit (the sums then run in another order).
  check_same_state(train({.q = 2}, dir / "step_2", 3, 3, {}), saved);
  check_same_state(train({.q = 2, .stages = 2, .kind = pp::Kind::gpipe}, dir / "step_2", 3, 3, {}), saved);
  // Into the 1D baseline's pipeline (2 stages of p = 2): the state bit for bit, the losses within f32 rounding.
  const Run one_d = train({.q = 2, .stages = 2, .one_d = true}, dir / "step_2", 3, 4, {});
  check_same_state(one_d, saved);
  for (std::size_t k = 0; k < 2; ++k) CHECK(std::abs(one_d.losses[k] - rest[k]) <= 1e-5 * rest[k]);
  // And what the 1D pipeline saves (its state after step 3) loads into the whole 2D model.
  const Run one_d_saved = train({.q = 2, .stages = 2, .one_d = true}, dir / "step_2", 3, 3, dir / "one_d_3");
  check_same_state(train({.q = 1}, dir / "one_d_3", 4, 4, {}), one_d_saved);
  // The whole model's checkpoint into a pipeline: its state, and the uninterrupted losses.
  const Run whole_saved = train({.q = 1}, {}, 1, 2, dir / "whole_2");
  const Run into_pipeline = train({.q = 1, .stages = 2, .kind = pp::Kind::interleaved, .chunks = 2},
                                  dir / "whole_2", 3, 4, {});
  check_same_state(into_pipeline, whole_saved);
  CHECK(into_pipeline.losses == rest);
  fs::remove_all(dir);
}

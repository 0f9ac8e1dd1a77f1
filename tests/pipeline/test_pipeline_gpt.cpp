// The GPT through a pipeline: every schedule's loss and every gradient bitwise those of pp = 1 (layers/gpt.hpp's
// Gpt2D::train_step) with the same micro-batches, dropout on, f64 and f32; and its refusals.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "../layers/layer_cases.hpp"
#include "optimus/core/error.hpp"
#include "optimus/layers/gpt.hpp"
#include "optimus/pipeline/gpt.hpp"
#include "same_error.hpp"
#include "test_world.hpp"

namespace pp = optimus::pipeline;
using optimus::GlobalMatrix;

namespace {

struct Result {
  double loss = 0;
  std::map<std::string, GlobalMatrix> grads;  // every parameter's gradient, full
};

constexpr int kMicroBatches = 4;

// pp = 1 on dp x q x q ranks: one train_step of m micro-batches; the gradients gathered on replica 0.
template <class T>
Result whole(int dp, int q, std::int64_t layers) {
  Result out;
  std::mutex mu;
  optimus::test::run_in_process(dp * q * q, [&](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, q);
    optimus::Gpt2D<T> model(grid, optimus::test::config_for(q, layers, 0.1));
    const optimus::test::LayerShapes s = optimus::test::shapes_for(q);
    const std::int64_t batch = kMicroBatches * q;
    const auto tokens = optimus::test::random_tokens(batch * s.seq, s.vocab, 11 + grid.dp_index());
    const auto targets = optimus::test::random_tokens(batch * s.seq, s.vocab, 23 + grid.dp_index());
    model.zero_grad();
    const double loss = model.train_step(tokens, targets, batch, 3, kMicroBatches);
    auto grads = model.gather(true);
    if (world.rank() == 0) {
      std::lock_guard lock(mu);
      out.loss = loss;
      out.grads = std::move(grads);
    }
  });
  return out;
}

bool same_bits(const GlobalMatrix& a, const GlobalMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<std::size_t>(a.size())) == 0;
}

struct Case {
  int dp, stages, q;
  pp::Kind kind;
  int chunks;
  std::int64_t layers;
};

// The same step through the pipeline; each stage's gradients (and every rank's loss) compared bit for bit.
template <class T>
void check_case(const Case& c) {
  CAPTURE(pp::name_of(c.kind));
  CAPTURE(c.dp);
  CAPTURE(c.stages);
  CAPTURE(c.q);
  CAPTURE(c.chunks);
  const Result expected = whole<T>(c.dp, c.q, c.layers);
  std::mutex mu;
  std::map<std::string, int> compared;  // name -> stages that hold it
  optimus::test::run_in_process(c.dp * c.stages * c.q * c.q, [&](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, c.q, c.stages);
    const pp::Schedule schedule = pp::make_schedule(
        {.kind = c.kind, .stages = c.stages, .micro_batches = kMicroBatches, .chunks = c.chunks});
    pp::Gpt2D<T> model(grid, optimus::test::config_for(c.q, c.layers, 0.1), schedule);
    const optimus::test::LayerShapes s = optimus::test::shapes_for(c.q);
    const std::int64_t batch = kMicroBatches * c.q;
    const auto tokens = optimus::test::random_tokens(batch * s.seq, s.vocab, 11 + grid.dp_index());
    const auto targets = optimus::test::random_tokens(batch * s.seq, s.vocab, 23 + grid.dp_index());
    model.zero_grad();
    const double loss = model.train_step(tokens, targets, batch, 3);
    const auto grads = model.gather(true);
    std::lock_guard lock(mu);
    CHECK(std::memcmp(&loss, &expected.loss, sizeof loss) == 0);
    if (grid.dp_index() != 0 || grid.grid().rank() != 0) return;
    for (const auto& [name, g] : grads) {
      CAPTURE(name);
      REQUIRE(expected.grads.count(name) == 1);
      CHECK(same_bits(g, expected.grads.at(name)));
      ++compared[name];
    }
  });
  // Every parameter was compared, wte on both end stages when they differ.
  CHECK(compared.size() == expected.grads.size());
}

}  // namespace

TEST_CASE("every schedule gives pp = 1's loss and gradients bit for bit (in-process, f64 and f32, dropout on)") {
  for (const Case& c : {Case{1, 2, 1, pp::Kind::gpipe, 1, 2}, Case{1, 2, 1, pp::Kind::one_f_one_b, 1, 2},
                        Case{1, 2, 1, pp::Kind::interleaved, 2, 4}, Case{1, 2, 1, pp::Kind::wave, 2, 4},
                        Case{1, 4, 1, pp::Kind::one_f_one_b, 1, 4}, Case{1, 4, 1, pp::Kind::interleaved, 2, 8},
                        Case{1, 4, 1, pp::Kind::wave, 2, 8}, Case{1, 2, 2, pp::Kind::one_f_one_b, 1, 2},
                        Case{1, 2, 2, pp::Kind::wave, 2, 4}, Case{2, 2, 1, pp::Kind::interleaved, 2, 4},
                        Case{2, 2, 2, pp::Kind::gpipe, 1, 2}}) {
    check_case<double>(c);
    check_case<float>(c);
  }
}

TEST_CASE("a pipeline GPT refuses a grid of other stages, layers that do not divide, and split backwards") {
  optimus::test::run_in_process(2, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 1, 2);
    const auto config = optimus::test::config_for(1, 3, 0.0);
    const auto make = [&](pp::Kind kind, int stages, int chunks, std::int64_t layers) {
      auto c = config;
      c.layers = layers;
      pp::Gpt2D<double> model(
          grid, c, pp::make_schedule({.kind = kind, .stages = stages, .micro_batches = 4, .chunks = chunks}));
    };
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::one_f_one_b, 2, 1, 3); }) ==
          "pipeline: 3 layers do not divide among 2 stages x 1 chunks (2 pieces of equal, non-zero size)");
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::one_f_one_b, 4, 1, 4); }) ==
          "pipeline::Gpt2D: the grid has 2 stages (Grid::create(world, q, pp)) but the schedule 1f1b has 4");
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::zero_bubble, 2, 1, 2); }) ==
          "pipeline::Gpt2D: schedule zb splits the backward (B_input, B_weight), which the layers cannot do yet");
  });
}

// Non-finite numbers never pass silently: configuration values, tensors given to load_global, and gradients that hold
// a NaN or an inf (AdamW stops naming the step, or skips it on request, changing nothing).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "layer_cases.hpp"
#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/model/gpt.hpp"
#include "same_error.hpp"

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_value = std::numeric_limits<double>::infinity();

template <class Config>
std::string refusal(Config config) {
  return optimus::test::error_of([&] { optimus::validate(config); });
}

}  // namespace

TEST_CASE("AdamWConfig and GptConfig refuse non-finite and out-of-range values, naming the field") {
  using optimus::AdamWConfig;
  CHECK(refusal(AdamWConfig{}) == "accepted");
  CHECK(refusal(AdamWConfig{.lr = nan_value}) == "AdamWConfig: lr = nan must be positive and finite");
  CHECK(refusal(AdamWConfig{.lr = inf_value}) == "AdamWConfig: lr = inf must be positive and finite");
  CHECK(refusal(AdamWConfig{.lr = -1}) == "AdamWConfig: lr = -1 must be positive and finite");
  CHECK(refusal(AdamWConfig{.beta1 = 1}) == "AdamWConfig: beta1 = 1 must be in [0, 1)");
  CHECK(refusal(AdamWConfig{.beta2 = nan_value}) == "AdamWConfig: beta2 = nan must be in [0, 1)");
  CHECK(refusal(AdamWConfig{.eps = 0}) == "AdamWConfig: eps = 0 must be positive and finite");
  CHECK(refusal(AdamWConfig{.weight_decay = -0.1}) == "AdamWConfig: weight_decay = -0.1 must be non-negative and finite");
  CHECK(refusal(AdamWConfig{.max_grad_norm = nan_value}) ==
        "AdamWConfig: max_grad_norm = nan must be finite (<= 0 disables clipping)");
  CHECK(refusal(AdamWConfig{.max_grad_norm = 0}) == "accepted");  // no clipping

  optimus::GptConfig good = optimus::test::config_for(2, 1, 0.1);
  CHECK(refusal(good) == "accepted");
  const auto with = [&](auto change) {
    optimus::GptConfig c = good;
    change(c);
    return refusal(c);
  };
  CHECK(with([](auto& c) { c.hidden = 0; }) == "GptConfig: hidden = 0 must be positive");
  CHECK(with([](auto& c) { c.ffn = 0; }) == "GptConfig: ffn = 0 must be positive");
  CHECK(with([](auto& c) { c.vocab = -3; }) == "GptConfig: vocab = -3 must be positive");
  CHECK(with([](auto& c) { c.heads = 0; }) == "GptConfig: heads = 0 must be positive");
  CHECK(with([](auto& c) { c.layers = -1; }) == "GptConfig: layers = -1 must not be negative");
  CHECK(with([](auto& c) { c.dropout = nan_value; }) == "GptConfig: dropout = nan must be in [0, 1)");
  CHECK(with([](auto& c) { c.dropout = 1; }) == "GptConfig: dropout = 1 must be in [0, 1)");
  CHECK(with([](auto& c) { c.heads = 5; }) == "GptConfig: hidden = 36 is not divisible by heads = 5");
}

TEST_CASE("a NaN or inf gradient on one rank stops AdamW naming the step, or is skipped; nothing changes") {
  optimus::test::run_in_process(4, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2);
    optimus::Gpt2D<double> model(grid, optimus::test::config_for(2, 1, 0.0));
    optimus::AdamW<double> adam(grid, model.parameters(), {.config = optimus::AdamWConfig{}});
    CHECK(optimus::test::error_on_every_rank(world, [&] { adam.set_learning_rate(nan_value); }) ==
          "AdamWConfig: lr = nan must be positive and finite");
    const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
    const auto tokens = optimus::test::random_tokens(s.batch * s.seq, 30, 3);
    const auto train = [&] {
      model.zero_grad();
      model.train_step(tokens, tokens, s.batch, 1);
    };
    train();
    adam.step();  // one good step
    const auto before = model.gather(false);
    for (const double bad : {nan_value, inf_value}) {
      CAPTURE(bad);
      train();
      if (world.rank() == 3) model.parameters()[4].grad.data()[0] = bad;  // one element on one rank
      const std::string expected =
          std::string("AdamW step 2: the global gradient norm is ") + (std::isnan(bad) ? "nan" : "inf") +
          " (a gradient holds a NaN or an inf); parameters and moments are unchanged";
      CHECK(optimus::test::error_on_every_rank(world, [&] { adam.step(); }) == expected);
      CHECK(adam.steps_taken() == 1);
      adam.set_nonfinite(optimus::NonFinite::skip);
      CHECK_FALSE(std::isfinite(adam.step()));
      adam.set_nonfinite(optimus::NonFinite::stop);
      CHECK(model.gather(false) == before);
    }
    CHECK(adam.skipped_steps() == 2);
    CHECK(adam.steps_taken() == 1);
    train();
    CHECK(std::isfinite(adam.step()));  // the next finite step goes ahead
    CHECK(adam.steps_taken() == 2);
    CHECK(model.gather(false) != before);
  });
}

TEST_CASE("load_global refuses a tensor holding NaN or inf, naming it and the element, on every rank") {
  optimus::test::run_in_process(4, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2);
    optimus::Gpt2D<double> model(grid, optimus::test::config_for(2, 1, 0.0));
    auto tensors = model.gather(false);
    tensors.at("h.0.mlp.c_fc.weight")(3, 5) = nan_value;
    CHECK(optimus::test::error_on_every_rank(world, [&] { model.load_global(tensors); }) ==
          "load_global: 'h.0.mlp.c_fc.weight' holds nan at [3, 5]; parameters must be finite");
    tensors.at("h.0.mlp.c_fc.weight")(3, 5) = 0;
    tensors.at("wpe")(0, 0) = -inf_value;
    CHECK(optimus::test::error_on_every_rank(world, [&] { model.load_global(tensors); }) ==
          "load_global: 'wpe' holds -inf at [0, 0]; parameters must be finite");
  });
}

TEST_CASE("check-finite names the first layer and tensor where an inf appears, on every rank; off, nothing is checked") {
  optimus::test::run_in_process(4, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2);
    const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
    const auto tokens = optimus::test::random_tokens(s.batch * s.seq, 30, 3);
    // The same model unchecked and checked (each on its own handle of the grid), one rank's shard of a weight inf.
    const auto broken = [&](const optimus::Grid& on) {
      auto model = std::make_unique<optimus::Gpt2D<double>>(on, optimus::test::config_for(2, 2, 0.0));
      for (const optimus::ParameterRef<double>& p : model->parameters()) {
        if (p.name == "h.1.mlp.c_fc.weight" && world.rank() == 2) p.value.data()[0] = inf_value;
      }
      return model;
    };
    optimus::Gpt2D<double>::Context saved;
    CHECK_FALSE(std::isfinite(broken(grid)->forward(tokens, tokens, s.batch, 1, saved)));  // NaN, no word where
    const auto checked = broken(grid.with({.check_finite = true}));
    const std::string message =
        optimus::test::error_on_every_rank(world, [&] { checked->forward(tokens, tokens, s.batch, 1, saved); });
    CHECK(message.find("check-finite: h.1.mlp forward output holds ") == 0);
    CHECK(message.find(" of 30x36 (first on grid rank ") != std::string::npos);
  });
}

TEST_CASE("check-finite names the part whose input gradient is not finite, in backward, on every rank") {
  optimus::test::run_in_process(4, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2);
    const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
    const std::int64_t n = s.batch * s.seq;
    optimus::reference::Matrix dy_global = optimus::reference::random_matrix(n, s.hidden, 10);
    dy_global(n - 1, s.hidden - 1) = inf_value;  // the last row, in grid rank 3's block
    const optimus::Pass pass = optimus::Pass::train(1, 0);
    // The same block, its input and its output's gradient on a handle of the grid (`on`): unchecked, then checking.
    const auto backward = [&](const optimus::Grid& on, optimus::TransformerBlock2D<double>& block) {
      const auto x = optimus::DistMatrix<double>::from_global(on, optimus::reference::random_matrix(n, s.hidden, 9));
      const auto dy = optimus::DistMatrix<double>::from_global(on, dy_global);
      optimus::TransformerBlock2D<double>::Context saved;
      const auto forward = block.forward(x, s.seq, pass, saved);  // finite: passes the forward checks
      CHECK(forward.to_global().allFinite());
      return block.backward(std::move(saved), dy).to_global();
    };
    optimus::TransformerBlock2D<double> block(grid, optimus::test::config_for(2, 1, 0.0), 0);
    CHECK_FALSE(backward(grid, block).allFinite());  // unchecked: the inf spreads, no word where
    const optimus::Grid checking = grid.with({.check_finite = true});
    optimus::TransformerBlock2D<double> checked(checking, optimus::test::config_for(2, 1, 0.0), 0);
    const std::string message = optimus::test::error_on_every_rank(world, [&] { backward(checking, checked); });
    CAPTURE(message);
    // The MLP's backward spreads the inf along its row (through ln_2), so the first non-finite element of the MLP's input
    // gradient is the row's first, in grid rank 2's block (grid row 1, column 0).
    CHECK(message.find("check-finite: h.0.mlp backward input gradient holds ") == 0);
    CHECK(message.find(" at [" + std::to_string(n - 1) + ", 0] of ") != std::string::npos);
    CHECK(message.find("(first on grid rank 2") != std::string::npos);
  });
}

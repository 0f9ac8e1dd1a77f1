// The GPT through a pipeline, in-process: every schedule's loss and every gradient bitwise those of pp = 1 (the model
// on one stage) with the same micro-batches, dropout on, f64 and f32; and its refusals and
// AdamW's refusals of a norm order that does not fit.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../layers/layer_cases.hpp"
#include "capture_binding.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/gpt.hpp"
#include "pipeline_gpt_cases.hpp"
#include "same_error.hpp"
#include "test_world.hpp"

namespace pp = optimus::pipeline;
using optimus::test::PipelineCase;

TEST_CASE("every schedule gives pp = 1's loss and gradients bit for bit (in-process, m = 4 and 8, f64 and f32, dropout on)") {
  optimus::test::PipelineReferences references;
  for (const PipelineCase& c :
       {PipelineCase{1, 2, 1, pp::Kind::gpipe, 1, 2, 4}, PipelineCase{1, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4},
        PipelineCase{1, 2, 1, pp::Kind::interleaved, 2, 4, 4}, PipelineCase{1, 2, 1, pp::Kind::wave, 2, 4, 4},
        PipelineCase{1, 4, 1, pp::Kind::one_f_one_b, 1, 4, 4}, PipelineCase{1, 4, 1, pp::Kind::interleaved, 2, 8, 4},
        PipelineCase{1, 4, 1, pp::Kind::wave, 2, 8, 4}, PipelineCase{1, 2, 2, pp::Kind::one_f_one_b, 1, 2, 4},
        PipelineCase{1, 2, 2, pp::Kind::wave, 2, 4, 4}, PipelineCase{2, 2, 1, pp::Kind::interleaved, 2, 4, 4},
        PipelineCase{2, 2, 2, pp::Kind::gpipe, 1, 2, 4}, PipelineCase{1, 4, 1, pp::Kind::one_f_one_b, 1, 4, 8},
        PipelineCase{1, 2, 1, pp::Kind::interleaved, 2, 4, 8}, PipelineCase{1, 2, 2, pp::Kind::wave, 2, 4, 8},
        PipelineCase{2, 2, 1, pp::Kind::gpipe, 1, 2, 8}, PipelineCase{1, 2, 1, pp::Kind::zero_bubble, 1, 2, 4},
        PipelineCase{1, 4, 1, pp::Kind::zero_bubble, 1, 4, 8}, PipelineCase{1, 2, 2, pp::Kind::zero_bubble, 1, 2, 8},
        PipelineCase{2, 2, 1, pp::Kind::zero_bubble, 1, 2, 4}}) {
    const optimus::test::PipelineReference& expected = references.of(c);
    optimus::test::run_in_process(c.dp * c.stages * c.q * c.q, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, expected);
    });
  }
}

TEST_CASE("the 1D baseline through every schedule gives its pp = 1 loss, gradients, AdamW step and evaluation bit for bit") {
  using optimus::test::Pipeline1DCase;
  for (const Pipeline1DCase& c :
       {Pipeline1DCase{.stages = 2, .p = 1, .kind = pp::Kind::gpipe, .chunks = 1, .layers = 2, .micro_batches = 4},
        Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::one_f_one_b, .chunks = 1, .layers = 2, .micro_batches = 4},
        Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::interleaved, .chunks = 2, .layers = 4, .micro_batches = 4},
        Pipeline1DCase{.stages = 2, .p = 3, .kind = pp::Kind::wave, .chunks = 2, .layers = 4, .micro_batches = 4},
        Pipeline1DCase{.stages = 4, .p = 1, .kind = pp::Kind::zero_bubble, .chunks = 1, .layers = 4, .micro_batches = 8},
        Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::zero_bubble, .chunks = 1, .layers = 2, .micro_batches = 4}}) {
    const auto expected = optimus::test::pipeline_reference(c);
    optimus::test::run_in_process(c.stages * c.p, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, *expected);
    });
  }
}

TEST_CASE("recomputation and bf16 GEMMs inside the stages: pp = 1's bits without recomputation, in the same math") {
  using optimus::Recompute;
  using optimus::ops::GemmMath;
  optimus::test::PipelineReferences references;
  for (const PipelineCase& c :
       {PipelineCase{1, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4, Recompute::selective, GemmMath::f32},
        PipelineCase{1, 2, 2, pp::Kind::zero_bubble, 1, 2, 4, Recompute::full, GemmMath::f32},
        PipelineCase{1, 2, 1, pp::Kind::interleaved, 2, 4, 4, Recompute::full, GemmMath::bf16},
        PipelineCase{2, 2, 1, pp::Kind::wave, 2, 4, 4, Recompute::selective, GemmMath::bf16},
        PipelineCase{1, 2, 2, pp::Kind::gpipe, 1, 2, 4, Recompute::none, GemmMath::bf16}}) {
    const optimus::test::PipelineReference& expected = references.of(c);
    optimus::test::run_in_process(c.dp * c.stages * c.q * c.q, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, expected);
    });
  }
  using optimus::test::Pipeline1DCase;
  for (const Pipeline1DCase& c :
       {Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::zero_bubble, .chunks = 1, .layers = 2,
                       .micro_batches = 4, .recompute = Recompute::full},
        Pipeline1DCase{.stages = 2, .p = 1, .kind = pp::Kind::interleaved, .chunks = 2, .layers = 4,
                       .micro_batches = 4, .recompute = Recompute::selective}}) {
    const auto expected = optimus::test::pipeline_reference(c);
    optimus::test::run_in_process(c.stages * c.p, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, *expected);
    });
  }
}

TEST_CASE("pipelines on simulated devices, a device per rank: the CPU's bits under every schedule, moments offloaded or "
          "not, blocks spilled or not") {
  using optimus::Recompute;
  using optimus::Spill;
  using optimus::ops::GemmMath;
  optimus::test::PipelineReferences references;
  for (const PipelineCase& c :
       {PipelineCase{1, 2, 1, pp::Kind::gpipe, 1, 2, 4, Recompute::none, GemmMath::f32, true},
        PipelineCase{1, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4, Recompute::none, GemmMath::f32, true},
        PipelineCase{1, 2, 2, pp::Kind::interleaved, 2, 4, 4, Recompute::selective, GemmMath::bf16, true},
        PipelineCase{1, 4, 1, pp::Kind::wave, 2, 8, 8, Recompute::none, GemmMath::f32, true},
        PipelineCase{1, 4, 1, pp::Kind::zero_bubble, 1, 4, 8, Recompute::full, GemmMath::f32, true},
        PipelineCase{2, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4, Recompute::none, GemmMath::bf16, true},
        PipelineCase{1, 2, 2, pp::Kind::zero_bubble, 1, 2, 4, Recompute::none, GemmMath::f32, true, true},
        PipelineCase{2, 2, 1, pp::Kind::wave, 2, 4, 4, Recompute::selective, GemmMath::f32, true, true},
        // Each stage spills its own blocks (2 and 3 per chunk: the slots reused), the replicas' sums while resident.
        PipelineCase{1, 2, 2, pp::Kind::interleaved, 2, 8, 4, Recompute::none, GemmMath::f32, true, false,
                     Spill::parameters},
        PipelineCase{2, 2, 1, pp::Kind::one_f_one_b, 1, 6, 4, Recompute::selective, GemmMath::bf16, true, true,
                     Spill::parameters_and_activations},
        PipelineCase{1, 2, 1, pp::Kind::wave, 2, 8, 4, Recompute::full, GemmMath::f32, true, false,
                     Spill::parameters_and_activations},
        // ZB-H1's B_weight brings each spilled block back to run its queued weight gradients (summed while resident).
        PipelineCase{2, 2, 1, pp::Kind::zero_bubble, 1, 6, 4, Recompute::none, GemmMath::f32, true, false,
                     Spill::parameters_and_activations}}) {
    const optimus::test::PipelineReference& expected = references.of(c);
    optimus::test::run_in_process(c.dp * c.stages * c.q * c.q, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, expected);
    });
  }
}

TEST_CASE("dynamic execution: every schedule, 2D and 1D, CPU and simulated devices, pp = 2 and 4, recomputing or not: "
          "pp = 1's bits, within the static order's activation bytes") {
  using optimus::Recompute;
  using optimus::Spill;
  using optimus::ops::GemmMath;
  using optimus::test::Pipeline1DCase;
  constexpr pp::Order dynamic = pp::Order::dynamic;
  optimus::test::PipelineReferences references;
  for (const PipelineCase& c :
       {PipelineCase{1, 2, 1, pp::Kind::gpipe, 1, 2, 4, Recompute::none, GemmMath::f32, false, false, Spill::none, dynamic},
        PipelineCase{1, 4, 1, pp::Kind::one_f_one_b, 1, 4, 8, Recompute::selective, GemmMath::f32, false, false,
                     Spill::none, dynamic},
        PipelineCase{1, 2, 2, pp::Kind::interleaved, 2, 4, 4, Recompute::none, GemmMath::f32, false, false, Spill::none,
                     dynamic},
        PipelineCase{1, 4, 1, pp::Kind::wave, 2, 8, 8, Recompute::full, GemmMath::f32, false, false, Spill::none, dynamic},
        PipelineCase{1, 2, 2, pp::Kind::zero_bubble, 1, 2, 4, Recompute::none, GemmMath::f32, false, false, Spill::none,
                     dynamic},
        PipelineCase{2, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4, Recompute::none, GemmMath::f32, false, false, Spill::none,
                     dynamic},
        // The simulated devices' random delays reorder completions; their channels match by order, lane by lane.
        PipelineCase{1, 2, 2, pp::Kind::one_f_one_b, 1, 2, 4, Recompute::none, GemmMath::f32, true, false, Spill::none,
                     dynamic},
        PipelineCase{1, 2, 1, pp::Kind::wave, 2, 4, 4, Recompute::selective, GemmMath::f32, true, false, Spill::none,
                     dynamic},
        PipelineCase{1, 4, 1, pp::Kind::zero_bubble, 1, 4, 8, Recompute::full, GemmMath::f32, true, false, Spill::none,
                     dynamic},
        PipelineCase{1, 2, 1, pp::Kind::interleaved, 2, 4, 4, Recompute::none, GemmMath::f32, true, false,
                     Spill::parameters, dynamic}}) {
    const optimus::test::PipelineReference& expected = references.of(c);
    optimus::test::run_in_process(c.dp * c.stages * c.q * c.q, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, expected);
    });
  }
  for (const Pipeline1DCase& c :
       {Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::one_f_one_b, .chunks = 1, .layers = 2,
                       .micro_batches = 4, .recompute = Recompute::none, .order = dynamic},
        Pipeline1DCase{.stages = 2, .p = 1, .kind = pp::Kind::wave, .chunks = 2, .layers = 4, .micro_batches = 4,
                       .recompute = Recompute::selective, .order = dynamic},
        Pipeline1DCase{.stages = 4, .p = 1, .kind = pp::Kind::zero_bubble, .chunks = 1, .layers = 4,
                       .micro_batches = 8, .recompute = Recompute::none, .order = dynamic},
        Pipeline1DCase{.stages = 2, .p = 2, .kind = pp::Kind::interleaved, .chunks = 2, .layers = 4,
                       .micro_batches = 4, .recompute = Recompute::full, .order = dynamic},
        Pipeline1DCase{.stages = 2, .p = 1, .kind = pp::Kind::gpipe, .chunks = 1, .layers = 2, .micro_batches = 4,
                       .recompute = Recompute::none, .order = dynamic}}) {
    const std::shared_ptr<const optimus::test::PipelineReference> expected = optimus::test::pipeline_reference(c);
    optimus::test::run_in_process(c.stages * c.p, [&](optimus::Communicator& world) {
      optimus::test::check_pipeline_gpt(world, c, *expected);
    });
  }
}

TEST_CASE("a GPT's loss over a masked LM's predicted positions: refused where none is predicted; over data-parallel "
          "replicas a mean over the whole batch's predicted positions, one replica predicting none, equal to the "
          "reference's on the whole batch") {
  const auto config = optimus::test::config_for(1, 2, 0.1);
  std::vector<int> tokens(8, 1), targets(8, optimus::math::kIgnoredTarget);  // 2 sequences of 4
  optimus::test::run_in_process(1, [&](optimus::Communicator& world) {
    optimus::Gpt2D<double> model(optimus::Grid::create(world, 1), config);
    optimus::Gpt2D<double>::Context saved;
    CHECK(optimus::test::error_on_every_rank(world, [&] { model.forward(tokens, targets, 2, 0, saved); }) ==
          "Gpt2D::forward: none of the 8 targets is predicted (each is -1)");
  });
  optimus::test::run_in_process(2, [&](optimus::Communicator& world) {  // q = 1, pp = 1: 2 replicas
    optimus::Gpt2D<double> model(optimus::Grid::create(world, 1), config);
    CHECK(optimus::test::error_on_every_rank(world, [&] { model.train_step(tokens, targets, 2, 0); }) ==
          "Gpt2D::train_step: none of the 16 targets of the 2 replicas' batch is predicted (each is -1)");
  });
  // The whole batch: 4 sequences of 4; replica 0 holds the first two and predicts 3 of its positions, replica 1
  // predicts none. Against the reference on the whole batch (its mean over the 3), with micro-batches and without.
  const std::vector<int> all_tokens = optimus::test::random_tokens(16, config.vocab, 5);
  std::vector<int> all_targets = optimus::test::random_tokens(16, config.vocab, 6);
  for (std::size_t i = 0; i < all_targets.size(); ++i) {
    if (i != 1 && i != 4 && i != 6) all_targets[i] = optimus::math::kIgnoredTarget;
  }
  const optimus::reference::GptResult r = optimus::reference::gpt_forward_backward(
      config, optimus::reference::gpt_init(config), all_tokens, all_targets, 4, 7);
  auto no_dropout = config;
  no_dropout.dropout = 0;
  const double evaluated_loss = optimus::reference::gpt_forward_backward(
      no_dropout, optimus::reference::gpt_init(no_dropout), all_tokens, all_targets, 4, 0).loss;
  for (const int m : {1, 2}) {
    CAPTURE(m);
    optimus::test::run_in_process(2, [&](optimus::Communicator& world) {
      const optimus::Grid grid = optimus::Grid::create(world, 1);
      optimus::Gpt2D<double> model(grid, config, pp::one_stage(m));
      const auto first = static_cast<std::ptrdiff_t>(8 * grid.dp_index());
      const std::vector<int> mine(all_tokens.begin() + first, all_tokens.begin() + first + 8);
      const std::vector<int> my_targets(all_targets.begin() + first, all_targets.begin() + first + 8);
      const double loss = model.train_step(mine, my_targets, 2, 7);
      CHECK(std::abs(loss - r.loss) <= 1e-10 * r.loss);
      for (const auto& [name, g] : model.gather(true)) {
        CAPTURE_BINDING(name);
        CHECK(optimus::reference::compare_relative(g, r.grads.at(name), 1e-10).ok());
      }
      // evaluate (no dropout; the parameters unchanged: no optimizer step), and forward and backward taken apart.
      CHECK(std::abs(model.evaluate(mine, my_targets, 2) - evaluated_loss) <= 1e-10 * evaluated_loss);
      if (m == 1) {
        model.zero_grad();
        optimus::Gpt2D<double>::Context saved;
        CHECK(std::abs(model.forward(mine, my_targets, 2, 7, saved) - r.loss) <= 1e-10 * r.loss);
        model.backward(std::move(saved));
        for (const auto& [name, g] : model.gather(true)) {
          CAPTURE_BINDING(name);
          CHECK(optimus::reference::compare_relative(g, r.grads.at(name), 1e-10).ok());
        }
      }
    });
  }
}

TEST_CASE("an encoder's padded batch through a pipeline (1f1b, 2 stages, 2 micro-batches) gives one stage's loss and "
          "gradients bit for bit, and the reference's; bad lengths are one error on every rank") {
  auto config = optimus::test::config_for(1, 2, 0.1);
  config.block.post_norm = true;
  config.block.mlp = optimus::MlpKind::gelu_erf;
  config.block.bidirectional = true;
  const std::int64_t batch = 4, seq = 5;
  const std::vector<int> tokens = optimus::test::random_tokens(batch * seq, config.vocab, 3);
  std::vector<int> targets = optimus::test::random_tokens(batch * seq, config.vocab, 4);
  const optimus::EncoderInputs inputs{.token_types = {}, .lengths = {5, 3, 1, 4}};
  for (std::int64_t i = 0; i < batch * seq; ++i) {  // the padding and every other position not predicted
    if (i % seq >= inputs.lengths[static_cast<std::size_t>(i / seq)] || i % 2 == 1) {
      targets[static_cast<std::size_t>(i)] = optimus::math::kIgnoredTarget;
    }
  }
  const pp::Schedule one = pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 1, .micro_batches = 2});
  double whole_loss = 0;
  std::map<std::string, optimus::GlobalMatrix> whole;
  optimus::test::run_in_process(1, [&](optimus::Communicator& world) {
    optimus::Gpt2D<double> model(optimus::Grid::create(world, 1), config, one);
    whole_loss = model.train_step(tokens, targets, inputs, batch, 7);
    whole = model.gather(true);
  });
  const optimus::reference::GptResult r = optimus::reference::gpt_forward_backward(
      config, optimus::reference::gpt_init(config), tokens, targets, inputs, batch, 7);
  CHECK(std::abs(whole_loss - r.loss) <= 1e-10 * r.loss);
  for (const auto& [name, g] : whole) {
    CAPTURE_BINDING(name);
    CHECK(optimus::reference::compare_relative(g, r.grads.at(name), 1e-10).ok());
  }
  const pp::Schedule two = pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 2, .micro_batches = 2});
  optimus::test::run_in_process(2, [&](optimus::Communicator& world) {
    optimus::Gpt2D<double> model(optimus::Grid::create(world, 1, 2), config, two);
    const double loss = model.train_step(tokens, targets, inputs, batch, 7);
    CHECK(std::memcmp(&loss, &whole_loss, sizeof(double)) == 0);
    for (const auto& [name, g] : model.gather(true)) {
      CAPTURE_BINDING(name);
      CHECK(g == whole.at(name));
    }
    // Lengths that do not fit the batch: one error on every rank, naming them.
    const auto step_with = [&](std::vector<int> lengths) {
      return optimus::test::error_on_every_rank(
          world, [&] { model.train_step(tokens, targets, optimus::EncoderInputs{.token_types = {}, .lengths = lengths}, batch, 8); });
    };
    CHECK(step_with({5, 3, 1}) == "Gpt2D::train_step: 3 sequence lengths for a batch of 4 sequences");
    CHECK(step_with({5, 3, 0, 4}) ==
          "Gpt2D::train_step: sequence 2 has length 0, outside [1, 5] (its tokens before the padding)");
    CHECK(step_with({5, 6, 1, 4}) ==
          "Gpt2D::train_step: sequence 1 has length 6, outside [1, 5] (its tokens before the padding)");
  });
}

TEST_CASE("a pipeline GPT refuses a grid of other stages, layers that do not divide, and spilling on the host") {
  optimus::test::run_in_process(2, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 1, 2);
    const auto config = optimus::test::config_for(1, 3, 0.0);
    const auto make = [&](pp::Kind kind, int stages, int chunks, std::int64_t layers) {
      auto c = config;
      c.layers = layers;
      optimus::Gpt2D<double> model(
          grid, c, pp::make_schedule({.kind = kind, .stages = stages, .micro_batches = 4, .chunks = chunks}));
    };
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::one_f_one_b, 2, 1, 3); }) ==
          "pipeline: 3 layers do not divide among 2 stages x 1 chunks (2 pieces of equal, non-zero size)");
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::one_f_one_b, 4, 1, 4); }) ==
          "Gpt2D: the grid has 2 stages (Grid::create(world, q, pp)) but the schedule 1f1b has 4");
    CHECK(optimus::test::error_on_every_rank(world, [&] { make(pp::Kind::wave, 2, 2, 6); }) ==
          "pipeline: 6 layers do not divide among 2 stages x 2 chunks (4 pieces of equal, non-zero size)");
    const auto spilled = [&](pp::Kind kind) {
      auto c = config;
      c.layers = 2;
      optimus::Gpt2D<double> model(grid, c, pp::make_schedule({.kind = kind, .stages = 2, .micro_batches = 4, .chunks = 1}),
                              optimus::Spill::parameters);
    };
    CHECK(optimus::test::error_on_every_rank(world, [&] { spilled(pp::Kind::one_f_one_b); }).starts_with(
        "model spilling moves blocks between a device and the host, but this grid's matrices live on the host"));
  });
}

// The order is each rank's own (its stage's parameters), so each rank checks its own and names its own values.
TEST_CASE("AdamW refuses a pipeline stage's norm order that does not fit its parameters") {
  optimus::test::run_in_process(2, [](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 1, 2);
    optimus::Gpt2D<double> model(grid, optimus::test::config_for(1, 2, 0.0),
                            pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 2, .micro_batches = 2,
                                               .chunks = 1}));
    const auto adam = [&](optimus::NormOrder order) {
      optimus::AdamW<double> optimizer(grid, model.parameters(),
                                       {.config = optimus::AdamWConfig{}, .norm_order = std::move(order)});
    };
    const optimus::NormOrder good = model.norm_order();
    CHECK(optimus::test::error_of([&] { adam(good); }) == "accepted");
    // Stage 0: wte, wpe and block 0's 12 tensors (slots 0 .. 13); stage 1: wte (-1), block 1's and ln_f's.
    CHECK(good.slots == 2 + 2 * 12 + 2);
    optimus::NormOrder short_order = good;
    short_order.slot.pop_back();
    CHECK(optimus::test::error_of([&] { adam(short_order); }).starts_with(
        "AdamW: a pipeline stage's norm order has " + std::to_string(good.slot.size() - 1) + " slots for " +
        std::to_string(good.slot.size()) + " parameters"));
    optimus::NormOrder repeated = good;
    repeated.slot.back() = repeated.slot.front() == -1 ? repeated.slot[1] : repeated.slot.front();
    CHECK(optimus::test::error_of([&] { adam(repeated); }).find("taken by another parameter") !=
          std::string::npos);
    optimus::NormOrder outside = good;
    outside.slot.back() = good.slots;
    CHECK(optimus::test::error_of([&] { adam(outside); }).find("outside [0, slots)") !=
          std::string::npos);
  });
}

// A sweep's slots interleave the operations of several models (Gpt::TrainStep): two pipelines of two stages on the same
// ranks, their operations run in whichever order their inputs arrive (the second model first), give each model's
// train_step bits — loss and every gradient of every stage.
TEST_CASE("two models' steps interleaved operation by operation give each one's train_step bit for bit") {
  optimus::test::run_in_process(2, [](optimus::Communicator& world) {
    const auto schedule = pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 2, .micro_batches = 2,
                                             .chunks = 1});
    auto config = optimus::test::config_for(1, 4, 0.1);
    const auto make = [&](std::uint64_t seed) {
      auto c = config;
      c.seed = seed;
      return std::make_unique<optimus::Gpt2D<double>>(optimus::Grid::create(world, 1, 2), c, schedule);
    };
    const std::int64_t batch = 4, n = batch * config.max_seq;
    const std::vector<int> tokens = optimus::test::random_tokens(n, config.vocab, 7),
                           targets = optimus::test::random_tokens(n, config.vocab, 8);
    std::vector<double> alone_losses;
    std::vector<std::map<std::string, optimus::GlobalMatrix>> alone_gradients;
    for (const std::uint64_t seed : {11u, 12u}) {
      auto model = make(seed);
      alone_losses.push_back(model->train_step(tokens, targets, batch, 3));
      alone_gradients.push_back(model->gather(true));
    }
    auto a = make(11), b = make(12);
    std::vector<optimus::Gpt2D<double>::TrainStep> steps;
    steps.push_back(a->begin_step(tokens, targets, batch, 3));
    steps.push_back(b->begin_step(tokens, targets, batch, 3));
    int runs = 0;
    while (!steps[0].done() || !steps[1].done()) {
      for (int i : {1, 0}) {
        if (!steps[i].done() && steps[i].ready()) {
          steps[i].run_next();
          ++runs;
          break;
        }
      }
    }
    CHECK(runs == 2 * static_cast<int>(schedule.ops[static_cast<std::size_t>(a->grid().stage())].size()));
    CHECK(steps[0].finish() == alone_losses[0]);
    CHECK(steps[1].finish() == alone_losses[1]);
    CHECK(alone_losses[0] != alone_losses[1]);
    CHECK(optimus::test::error_of([&] { steps[0].finish(); }).find("the step has finished") != std::string::npos);
    for (const auto& [model, expected] :
         {std::pair{a.get(), &alone_gradients[0]}, std::pair{b.get(), &alone_gradients[1]}}) {
      const auto gradients = model->gather(true);
      REQUIRE(gradients.size() == expected->size());
      for (const auto& [name, g] : gradients) {
        CAPTURE_BINDING(name);
        CHECK(g == expected->at(name));
      }
    }
  });
}

// A sweep's member ends its step without waiting on another stage (Gpt::begin_step with partials): over three stages
// (the middle one holds neither wte part) with 1F1B, its loss, gradients, the stages' sums of squares and the AdamW step
// from them are train_step's and AdamW::step's bit for bit.
TEST_CASE("an exchanged end gives train_step's loss, gradients and AdamW step bit for bit") {
  optimus::test::run_in_process(3, [](optimus::Communicator& world) {
    const auto schedule = pp::make_schedule({.kind = pp::Kind::one_f_one_b, .stages = 3, .micro_batches = 2,
                                             .chunks = 1});
    const auto config = optimus::test::config_for(1, 3, 0.1);
    const std::int64_t batch = 4, n = batch * config.max_seq;
    const std::vector<int> tokens = optimus::test::random_tokens(n, config.vocab, 5),
                           targets = optimus::test::random_tokens(n, config.vocab, 6);
    struct Trained {
      double loss, norm;
      std::map<std::string, optimus::GlobalMatrix> gradients, parameters;
    };
    const auto train = [&](bool exchanged) {
      optimus::Gpt2D<double> model(optimus::Grid::create(world, 1, 3), config, schedule);
      optimus::AdamW<double> adam(model.grid(), model.parameters(),
                                  {.config = {.lr = 1e-2, .max_grad_norm = 0.5}, .norm_order = model.norm_order()});
      Trained t{};
      if (!exchanged) {
        t.loss = model.train_step(tokens, targets, batch, 2);
        t.gradients = model.gather(true);
        t.norm = adam.step();
      } else {
        auto step = model.begin_step(tokens, targets, batch, 2, [&adam] { return adam.stage_squares(); });
        int runs = 0;
        while (!step.done()) {
          while (!step.ready()) std::this_thread::yield();
          step.run_next();
          ++runs;
        }
        // the schedule's operations, then the end's three
        CHECK(runs == static_cast<int>(schedule.ops[static_cast<std::size_t>(model.grid().stage())].size()) + 3);
        t.loss = step.finish();
        t.gradients = model.gather(true);
        t.norm = adam.step_from(step.stage_sums());
        CHECK(optimus::test::error_of([&] { adam.step_from({1.0}); }).find("1 partial sums of squares") !=
              std::string::npos);
      }
      t.parameters = model.gather(false);
      return t;
    };
    const Trained expected = train(false), got = train(true);
    CHECK(got.loss == expected.loss);
    CHECK(got.norm == expected.norm);
    CHECK(expected.norm > 0.5);  // clipped: the norm scales every update
    for (const auto which : {&Trained::gradients, &Trained::parameters}) {
      REQUIRE((got.*which).size() == (expected.*which).size());
      for (const auto& [name, value] : got.*which) {
        CAPTURE_BINDING(name);
        CHECK(value == (expected.*which).at(name));
      }
    }
  });
}

// Layers and the GPT on the in-process backend at q = 1, 2, 3; partition independence, data parallelism
// and the activation memory per rank.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "capture_binding.hpp"
#include "layer_cases.hpp"
#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/layers/lm_head.hpp"
#include "optimus/reference/gpt.hpp"

namespace {
// The largest grid of the cases that train whole models repeatedly (the GPT's, mixed precision, recomputation,
// micro-batches): 3, or 2 in the sanitizers' build (OPTIMUS_TEST_REPEATED_Q), whose q = 3 paths are the layer and
// block cases' here and the GPT's in test_layers_mpi_np9 (Release).
#ifndef OPTIMUS_TEST_REPEATED_Q
#define OPTIMUS_TEST_REPEATED_Q 3
#endif
constexpr int kRepeatedQ = OPTIMUS_TEST_REPEATED_Q;

void on_grids(void (*check)(optimus::Communicator&, int), int largest = 3) {
  for (int q = 1; q <= largest; ++q) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { check(w, q); });
  }
}
}  // namespace

TEST_CASE("in-process Linear2D") { on_grids(optimus::test::check_linear); }
TEST_CASE("in-process LayerNorm2D") { on_grids(optimus::test::check_layernorm); }
TEST_CASE("in-process RMSNorm2D") { on_grids(optimus::test::check_rmsnorm); }
TEST_CASE("in-process Attention2D with rotary positions") { on_grids(optimus::test::check_rotary_attention); }
TEST_CASE("in-process Attention2D with grouped-query attention") { on_grids(optimus::test::check_grouped_query_attention); }
TEST_CASE("in-process MLP2D with SwiGLU") { on_grids(optimus::test::check_swiglu_mlp); }
TEST_CASE("in-process Attention2D") { on_grids(optimus::test::check_attention); }
TEST_CASE("in-process MLP2D") { on_grids(optimus::test::check_mlp); }
TEST_CASE("in-process TransformerBlock2D") { on_grids(optimus::test::check_block); }
TEST_CASE("in-process Embedding2D") { on_grids(optimus::test::check_embedding); }
TEST_CASE("in-process LmHead2D") { on_grids(optimus::test::check_lm_head); }
TEST_CASE("in-process Gpt2D") { on_grids(optimus::test::check_gpt, kRepeatedQ); }
TEST_CASE("in-process mixed precision: bf16 GEMM operands, f32 master weights") {
  on_grids(optimus::test::check_mixed_precision, kRepeatedQ);
}
TEST_CASE("in-process parameters") { on_grids(optimus::test::check_parameters); }
TEST_CASE("in-process errors") { on_grids(optimus::test::check_layer_errors); }
TEST_CASE("in-process recomputation: none, selective, full bitwise alike; saved bytes as stated") {
  on_grids(optimus::test::check_recompute, kRepeatedQ);
}
TEST_CASE("in-process micro-batches m = 1, 2, 4, 8 equal the whole batch at q = 1, 2, 3 and dp = 2 x q = 2") {
  on_grids(optimus::test::check_micro_batches, kRepeatedQ);
  optimus::test::run_in_process(8, [](optimus::Communicator& w) { optimus::test::check_micro_batches(w, 2); });
}

TEST_CASE("a Grid is a handle: moved or destroyed, its layers and matrices keep working; a moved-from one is refused") {
  optimus::test::run_in_process(4, [](optimus::Communicator& w) {
    const optimus::GptConfig config = optimus::test::config_for(2, 1, 0.1);
    const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
    std::optional<optimus::Grid> original(optimus::Grid::create(w, 2));
    optimus::Gpt2D<double> model(*original, config);
    optimus::DistMatrix<double> m(*original, 4, 6);
    m.fill_random(5);
    const optimus::Grid moved = std::move(*original);
    CHECK(original->empty());
    CHECK(model.grid().same(moved));
    CHECK_THROWS_WITH_AS(original->q(), doctest::Contains("this handle is empty (moved from)"), optimus::Error);
    CHECK_THROWS_WITH_AS(optimus::Linear2D<double>(*original, "lin", 4, 4), doctest::Contains("moved from"),
                         optimus::Error);
    original.reset();  // the Grid the model was built from is gone: the model keeps its own handle
    const std::vector<int> tokens = optimus::test::random_tokens(s.batch * s.seq, config.vocab, 3);
    const double loss = model.train_step(tokens, tokens, s.batch, 1);
    const auto ref = optimus::reference::gpt_forward_backward(config, optimus::reference::gpt_init(config), tokens,
                                                              tokens, s.batch, 1);
    CHECK(std::abs(loss - ref.loss) <= 1e-10 * ref.loss);
    CHECK(m.to_global().rows() == 4);
    // Layers outliving every user handle (the Grid was a temporary): they work and free cleanly (ASan checks).
    const std::uint64_t before = moved.memory().current_total();
    {
      optimus::Linear2D<double> lin(optimus::Grid::create(w, 2), "lin", 8, 12);
      optimus::DistMatrix<double> x = optimus::DistMatrix<double>::from_global(
          moved, optimus::reference::random_matrix(4, 8, 1));
      optimus::Linear2D<double>::Context saved;
      // x lives on another grid than lin's: refused by name, not corrupted.
      CHECK_THROWS_WITH_AS(lin.forward(x, optimus::Pass::train(0, 0), saved),
                           doctest::Contains("different grids"), optimus::Error);
    }
    CHECK(moved.memory().current_total() == before);
  });
}

TEST_CASE("contexts: backward refuses an empty or consumed context and one saved under other grid settings") {
  optimus::test::run_in_process(1, [](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 1);
    optimus::Linear2D<float> lin(grid, "lin", 8, 12);
    const auto x = optimus::DistMatrix<float>::from_global(grid, optimus::reference::random_matrix(4, 8, 1));
    const auto dy = optimus::DistMatrix<float>::from_global(grid, optimus::reference::random_matrix(4, 12, 2));
    optimus::Linear2D<float>::Context saved;
    lin.forward(x, optimus::Pass::train(0, 0), saved);
    optimus::Linear2D<float>::Context moved = std::move(saved);
    CHECK_THROWS_WITH_AS(
        lin.backward(std::move(saved), dy),
        doctest::Contains("lin: backward without a training forward's context (empty, or already consumed)"),
        optimus::Error);
    // The same layer on a handle of the grid that computes in bf16: the f32 context is refused.
    optimus::Linear2D<float> lin_bf16(grid.with({.gemm_math = optimus::ops::GemmMath::bf16}), "lin", 8, 12);
    CHECK_THROWS_WITH_AS(lin_bf16.backward(std::move(moved), dy),
                         doctest::Contains("lin: the context was saved under f32 GEMM math in cpu memory, but this "
                                           "layer's grid handle has bf16 in cpu memory; give a context back to the "
                                           "layer that saved it"),
                         optimus::Error);
    optimus::Linear2D<float>::Context inference;
    lin.forward(x, optimus::Pass::inference(), inference);
    CHECK_THROWS_AS(lin.backward(std::move(inference), dy), optimus::Error);  // inference saves nothing
    CHECK_THROWS_WITH_AS(grid.place_on(nullptr, grid.queue()), doctest::Contains("the grid already holds"),
                         optimus::Error);
  });
}

// Execution is a value per grid handle (grid/execution.hpp): a bf16 model beside an f32 one on the same grid, steps
// interleaved, each computes as its own handle says, and the f32 one gives the bits it gives alone.
TEST_CASE("two models on one grid execute as their handles say: bf16 beside f32, the f32 one bitwise as alone") {
  optimus::test::run_in_process(4, [](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    const optimus::GptConfig config = optimus::test::config_for(2, 2, 0.1);
    const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
    const auto tokens = optimus::test::random_tokens(s.batch * s.seq, config.vocab, 91);
    const auto targets = optimus::test::random_tokens(s.batch * s.seq, config.vocab, 92);
    const auto step = [&](optimus::Gpt2D<float>& model, std::uint64_t t) {
      model.zero_grad();
      return model.train_step(tokens, targets, s.batch, t);
    };
    std::vector<double> alone;
    {
      optimus::Gpt2D<float> f32(grid, config);
      for (std::uint64_t t = 1; t <= 2; ++t) alone.push_back(step(f32, t));
    }
    optimus::Gpt2D<float> f32(grid, config);
    optimus::Gpt2D<float> bf16(grid.with({.gemm_math = optimus::ops::GemmMath::bf16}), config);
    CHECK(grid.gemm_math() == optimus::ops::GemmMath::f32);  // the handle bf16 came from is unchanged
    for (std::uint64_t t = 1; t <= 2; ++t) {
      const double low = step(bf16, t), full = step(f32, t);
      CHECK(std::memcmp(&full, &alone[t - 1], sizeof full) == 0);
      CHECK(low != full);  // bf16 operands really were used ...
      CHECK(std::abs(low - full) <= 2e-2 * std::abs(full));  // ... within mixed precision's tolerance
    }
  });
}

TEST_CASE("partition independence: the same loss after 5 AdamW steps at q = 1, 2, 3 and dp = 2 x q = 2") {
  std::vector<double> losses;
  for (int q = 1; q <= 3; ++q) {
    std::vector<double> per_rank(static_cast<std::size_t>(q * q));
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) {
      per_rank[static_cast<std::size_t>(w.rank())] = optimus::test::check_training(w, q, 1);
    });
    for (double l : per_rank) CHECK(l == per_rank[0]);  // every rank reports the same loss
    losses.push_back(per_rank[0]);
  }
  for (double l : losses) CHECK(std::abs(l - losses[0]) <= 1e-10 * std::abs(losses[0]));
  // dp = 2 x q = 2: each replica trains on half of a twice-as-large global batch; check_training compares
  // every step's loss and gradient norm with the reference run on the whole global batch.
  optimus::test::run_in_process(8, [&](optimus::Communicator& w) { optimus::test::check_training(w, 2, 2); });
}

TEST_CASE("activation memory per rank scales as 1/q^2 for a block") {
  // The same global batch at q = 1 and q = 2: bytes saved for backward per rank.
  std::vector<std::uint64_t> saved(3), peak(3);
  for (int q : {1, 2}) {
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) {
      const optimus::Grid grid = optimus::Grid::create(w, q);
      const optimus::GptConfig config = optimus::test::config_for(2, 1, 0.1);
      const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
      optimus::TransformerBlock2D<float> block(grid, config, 0);
      optimus::DistMatrix<float> x(grid, s.batch * s.seq, s.hidden);
      x.fill_random(1);
      const std::uint64_t before = grid.memory().current(optimus::MemoryKind::activations);
      grid.memory().reset_peaks();
      optimus::TransformerBlock2D<float>::Context context;
      optimus::DistMatrix<float> y = block.forward(x, s.seq, optimus::Pass::train(1, 0), context);
      const std::uint64_t after = grid.memory().current(optimus::MemoryKind::activations);
      block.backward(std::move(context), y);
      CHECK(grid.memory().current(optimus::MemoryKind::activations) == before);  // all freed by backward
      if (w.rank() == 0) {
        saved[static_cast<std::size_t>(q)] = after - before;
        peak[static_cast<std::size_t>(q)] = grid.memory().peak_total();
      }
    });
  }
  MESSAGE("bytes saved for backward per rank: q=1 ", saved[1], ", q=2 ", saved[2], " (", 4.0 * static_cast<double>(saved[2]) / static_cast<double>(saved[1]),
          " x a quarter); peak including workspaces: q=1 ", peak[1], ", q=2 ", peak[2]);
  CHECK(saved[1] > 0);
  CHECK(static_cast<double>(saved[2]) <= 1.05 * static_cast<double>(saved[1]) / 4.0);
}

TEST_CASE("mixed precision keeps the activations saved for backward in bf16") {
  // What a block and the LM head save for backward, f32 vs bf16 GEMM math. Per token of a block: the inputs of the
  // four linears (3h + ffn), qkv (3h), LayerNorm's xhat (2h) and GELU's input (ffn), and per sequence and head the
  // s x s probabilities, all split q*q ways: 4 bytes each in f32, 2 in bf16; LayerNorm's 1/std (2 per token, split
  // q ways) stays f32. The head keeps x [N, h] and dlogits [N, vocab].
  for (int q : {1, 2}) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) {
      const optimus::Grid grid = optimus::Grid::create(w, q);
      const optimus::GptConfig config = optimus::test::config_for(q, 1, 0.1);
      const optimus::test::LayerShapes s = optimus::test::shapes_for(q);
      const std::int64_t n = s.batch * s.seq;
      const std::vector<int> targets = optimus::test::random_tokens(n, config.vocab, 3);
      auto saved_by = [&](optimus::ops::GemmMath math) {
        // The block, the head and their inputs on a handle computing in `math`.
        const optimus::Grid on = grid.with({.gemm_math = math});
        optimus::TransformerBlock2D<float> block(on, config, 0);
        optimus::LmHead2D<float> head(on, config.vocab);
        optimus::DistMatrix<float> x(on, n, s.hidden), wte(on, config.vocab, s.hidden), dwte(on, config.vocab, s.hidden);
        x.fill_random(1);
        wte.fill_random(2);
        const std::uint64_t before = grid.memory().current(optimus::MemoryKind::activations);
        const optimus::Pass pass = optimus::Pass::train(1, 0);
        optimus::TransformerBlock2D<float>::Context block_saved;
        optimus::LmHead2D<float>::Context head_saved;
        optimus::DistMatrix<float> y = block.forward(x, s.seq, pass, block_saved);
        const std::uint64_t after_block = grid.memory().current(optimus::MemoryKind::activations);
        head.forward(y, wte, targets, n, pass, head_saved);
        const std::uint64_t after_head = grid.memory().current(optimus::MemoryKind::activations);
        block.backward(std::move(block_saved), head.backward(std::move(head_saved), wte, dwte));
        CHECK(grid.memory().current(optimus::MemoryKind::activations) == before);  // all freed by backward
        return std::pair{after_block - before, after_head - after_block};
      };
      const auto [block_f32, head_f32] = saved_by(optimus::ops::GemmMath::f32);
      const auto [block_bf16, head_bf16] = saved_by(optimus::ops::GemmMath::bf16);
      const auto qq = static_cast<std::uint64_t>(q * q);
      const auto split = static_cast<std::uint64_t>(n * (8 * s.hidden + 2 * config.ffn)) / qq;
      // In f32 whatever the GEMM math: LayerNorm's 1/std (2 per token) and the attention's log-sum-exp per query and
      // head (no [s, s] probabilities: the fused attention).
      const auto rstd = static_cast<std::uint64_t>(2 * n / q) * 4;
      const auto lse = static_cast<std::uint64_t>(s.batch * s.heads * s.seq) / qq * 4;
      CHECK(block_f32 == 4 * split + rstd + lse);
      CHECK(block_bf16 == 2 * split + rstd + lse);
      const auto head_split = static_cast<std::uint64_t>(n * (s.hidden + config.vocab)) / qq;
      CHECK(head_f32 == 4 * head_split);
      CHECK(head_bf16 == 2 * head_split);
      if (w.rank() == 0) {
        MESSAGE("q=", q, ": a block saves ", block_f32, " bytes per rank in f32, ", block_bf16,
                " in mixed precision; the LM head ", head_f32, " and ", head_bf16);
      }
    });
  }
}

TEST_CASE("GPT-2's vocabulary of 50257 on a 2x2 grid: the reference's loss and gradients; padding rows stay zero") {
  optimus::test::run_in_process(4, [](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    const optimus::GptConfig config{.vocab = 50257, .padded_vocab = 0, .max_seq = 4, .layers = 1, .hidden = 8,
                                    .heads = 2, .ffn = 16, .dropout = 0.1, .seed = 5, .block = {}};
    CHECK(config.stored_vocab(2) == 50432);  // 50257 rounded up to a multiple of 128 * q
    optimus::Gpt2D<double> model(grid, config);
    optimus::AdamW<double> optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{}});
    const std::vector<int> tokens = optimus::test::random_tokens(2 * 4, config.vocab, 11);
    const std::vector<int> targets = optimus::test::random_tokens(2 * 4, config.vocab, 12);
    const double loss = model.train_step(tokens, targets, 2, 1);
    const auto ref = optimus::reference::gpt_forward_backward(config, optimus::reference::gpt_init(config), tokens,
                                                              targets, 2, 1);
    CHECK(std::abs(loss - ref.loss) <= 1e-10 * std::abs(ref.loss));
    const std::map<std::string, optimus::GlobalMatrix> grads = model.gather(true);
    CHECK(grads.at("wte").rows() == config.vocab);  // gathering strips the padding
    for (const auto& [name, g] : grads) {
      CAPTURE_BINDING(name);
      CHECK(optimus::reference::compare_relative(g, ref.grads.at(name), 1e-10).ok());
    }
    for (int step = 0; step < 3; ++step) optimizer.step();  // weight decay and moments touch every stored row
    for (const optimus::ParameterRef<double>& p : model.parameters()) {
      if (p.name != "wte") continue;
      const std::int64_t cols = p.layout.local_cols();
      for (std::int64_t r = 0; r < p.layout.local_rows(); ++r) {
        if (p.layout.global(r, 0).first < config.vocab) continue;
        for (std::int64_t c = 0; c < cols; ++c) CHECK(p.value.data()[r * cols + c] == 0.0);
      }
    }
  });
}

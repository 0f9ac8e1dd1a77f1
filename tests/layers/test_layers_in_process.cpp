// Layers and the GPT on the in-process backend at q = 1, 2, 3; partition independence, data parallelism
// and the activation memory per rank.
#include <doctest/doctest.h>

#include <cmath>

#include "layer_cases.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/layers/block.hpp"

namespace {
void on_grids(void (*check)(optimus::Communicator&, int)) {
  for (int q = 1; q <= 3; ++q) {
    CAPTURE(q);
    optimus::run_in_process(q * q, [&](optimus::Communicator& w) { check(w, q); });
  }
}
}  // namespace

TEST_CASE("in-process Linear2D") { on_grids(optimus::test::check_linear); }
TEST_CASE("in-process LayerNorm2D") { on_grids(optimus::test::check_layernorm); }
TEST_CASE("in-process Attention2D") { on_grids(optimus::test::check_attention); }
TEST_CASE("in-process MLP2D") { on_grids(optimus::test::check_mlp); }
TEST_CASE("in-process TransformerBlock2D") { on_grids(optimus::test::check_block); }
TEST_CASE("in-process Embedding2D") { on_grids(optimus::test::check_embedding); }
TEST_CASE("in-process LmHead2D") { on_grids(optimus::test::check_lm_head); }
TEST_CASE("in-process Gpt2D") { on_grids(optimus::test::check_gpt); }
TEST_CASE("in-process mixed precision: bf16 GEMM operands, f32 master weights") { on_grids(optimus::test::check_mixed_precision); }
TEST_CASE("in-process parameters") { on_grids(optimus::test::check_parameters); }
TEST_CASE("in-process errors") { on_grids(optimus::test::check_layer_errors); }

TEST_CASE("partition independence: the same loss after 5 AdamW steps at q = 1, 2, 3 and dp = 2 x q = 2") {
  std::vector<double> losses;
  for (int q = 1; q <= 3; ++q) {
    std::vector<double> per_rank(static_cast<std::size_t>(q * q));
    optimus::run_in_process(q * q, [&](optimus::Communicator& w) {
      per_rank[static_cast<std::size_t>(w.rank())] = optimus::test::check_training(w, q, 1);
    });
    for (double l : per_rank) CHECK(l == per_rank[0]);  // every rank reports the same loss
    losses.push_back(per_rank[0]);
  }
  for (double l : losses) CHECK(std::abs(l - losses[0]) <= 1e-10 * std::abs(losses[0]));
  // dp = 2 x q = 2: each replica trains on half of a twice-as-large global batch; check_training compares
  // every step's loss and gradient norm with the reference run on the whole global batch.
  optimus::run_in_process(8, [&](optimus::Communicator& w) { optimus::test::check_training(w, 2, 2); });
}

TEST_CASE("activation memory per rank scales as 1/q^2 for a block") {
  // The same global batch at q = 1 and q = 2: bytes saved for backward per rank.
  std::vector<std::uint64_t> saved(3), peak(3);
  for (int q : {1, 2}) {
    optimus::run_in_process(q * q, [&](optimus::Communicator& w) {
      const optimus::Grid grid = optimus::Grid::create(w, q);
      const optimus::GptConfig config = optimus::test::config_for(2, 1, 0.1);
      const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
      optimus::TransformerBlock2D<float> block(grid, config, 0);
      optimus::DistMatrix<float> x(grid, s.batch * s.seq, s.hidden);
      x.fill_random(1);
      const std::uint64_t before = grid.memory().current(optimus::MemoryKind::activations);
      grid.memory().reset_peaks();
      optimus::DistMatrix<float> y = block.forward(x, s.seq, optimus::Pass{1, true});
      const std::uint64_t after = grid.memory().current(optimus::MemoryKind::activations);
      block.backward(y);
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

// Layers and the GPT against the reference under mpiexec: at a square world size N, q = sqrt(N); at N = 8
// only the data-parallel training test runs (dp = 2 x q = 2).
#include <doctest/doctest.h>

#include <cmath>

#include "layer_cases.hpp"
#include "test_world.hpp"

namespace {
int grid_q() {
  const int n = optimus::test::world().size();
  const int q = static_cast<int>(std::lround(std::sqrt(n)));
  return q * q == n ? q : 0;
}
void on_grid(void (*check)(optimus::Communicator&, int)) {
  if (grid_q() == 0) return;  // not a square world: the layer cases compare one replica with the reference
  CAPTURE(grid_q());
  check(optimus::test::world(), grid_q());
}
}  // namespace

TEST_CASE("Linear2D") { on_grid(optimus::test::check_linear); }
TEST_CASE("LayerNorm2D") { on_grid(optimus::test::check_layernorm); }
TEST_CASE("RMSNorm2D") { on_grid(optimus::test::check_rmsnorm); }
TEST_CASE("Attention2D with rotary positions") { on_grid(optimus::test::check_rotary_attention); }
TEST_CASE("Attention2D with grouped-query attention") { on_grid(optimus::test::check_grouped_query_attention); }
TEST_CASE("MLP2D with SwiGLU") { on_grid(optimus::test::check_swiglu_mlp); }
TEST_CASE("Attention2D") { on_grid(optimus::test::check_attention); }
TEST_CASE("MLP2D") { on_grid(optimus::test::check_mlp); }
TEST_CASE("TransformerBlock2D") { on_grid(optimus::test::check_block); }
TEST_CASE("Embedding2D") { on_grid(optimus::test::check_embedding); }
TEST_CASE("LmHead2D") { on_grid(optimus::test::check_lm_head); }
TEST_CASE("Gpt2D") { on_grid(optimus::test::check_gpt); }
TEST_CASE("mixed precision: bf16 GEMM operands, f32 master weights") { on_grid(optimus::test::check_mixed_precision); }
TEST_CASE("parameters") { on_grid(optimus::test::check_parameters); }
TEST_CASE("errors") { on_grid(optimus::test::check_layer_errors); }
TEST_CASE("recomputation: none, selective, full bitwise alike; saved bytes as stated") {
  on_grid(optimus::test::check_recompute);
}
TEST_CASE("micro-batches equal the whole batch") {
  if (optimus::test::world().size() == 8) {
    optimus::test::check_micro_batches(optimus::test::world(), 2);  // dp = 2 x q = 2
  } else {
    on_grid(optimus::test::check_micro_batches);
  }
}
TEST_CASE("training matches the reference for 5 AdamW steps") {
  const int n = optimus::test::world().size();
  if (n == 8) {
    optimus::test::check_training(optimus::test::world(), 2, 2);  // dp = 2 x q = 2
  } else if (grid_q() > 0) {
    optimus::test::check_training(optimus::test::world(), grid_q(), 1);
  }
}

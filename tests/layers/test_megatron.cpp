// The 1D (Megatron) baseline, its block and its GPT, against the same reference as the 2D layers, at p = 1, 2, 4
// (MPI under mpiexec, and in-process; the GPT also at p = 3), with the communication Megatron prescribes: two
// all-reduces of [N, h] per block forward and two backward.
#include <doctest/doctest.h>

#include "layer_case_support.hpp"
#include "layer_cases.hpp"
#include "megatron_gpt_cases.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/layers/megatron/block.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"
#include "test_world.hpp"

namespace {

using optimus::reference::Matrix;

// math: the GEMM math of the group's layers (bf16: mixed precision, f32 only, within 2e-2). blocks: their parts;
// padded: the sequences padded as padded_lengths says (the attention's key-padding mask).
template <class T>
void check_block_1d(optimus::Communicator& world, double dropout, optimus::ops::GemmMath math,
                    const optimus::BlockConfig& blocks, bool padded) {
  const optimus::megatron::Group group = optimus::megatron::Group(world).with({.gemm_math = math});
  const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
  optimus::GptConfig config = optimus::test::config_for(2, 1, dropout);
  config.block = blocks;
  optimus::megatron::TransformerBlock1D<T> block(group, config, 0);
  std::vector<optimus::ParameterRef<T>> refs;
  block.parameters(refs);
  const optimus::reference::Parameters p = optimus::test::load_random(refs, 700, group.local().device());
  const std::int64_t n = s.batch * s.seq;
  const Matrix x = optimus::test::rounded<T>(optimus::reference::random_matrix(n, s.hidden, 41));
  const Matrix dy = optimus::test::rounded<T>(optimus::reference::random_matrix(n, s.hidden, 42));
  const optimus::reference::BlockWeights w = optimus::reference::block_weights(p, 0, blocks);
  const optimus::reference::Dropout rd{dropout, config.seed, 6, 0};
  optimus::Pass pass = optimus::Pass::train(6, 0);
  if (padded) pass.lengths = optimus::test::padded_lengths(s.batch, s.seq);
  optimus::reference::BlockCache cache;
  const Matrix expected = optimus::reference::block_forward(x, w, s.batch, s.heads, pass.lengths, rd, cache);
  const optimus::reference::BlockGrads g = optimus::reference::block_backward(cache, w, s.batch, s.heads, rd, dy);
  const bool mixed = sizeof(T) == 4 && math == optimus::ops::GemmMath::bf16;
  // bf16: 3e-2 here, not 2e-2. c_attn's weight gradient (attention with dropout on bf16 operands) is 2.44e-2 off
  // norm-wise with the unfused attention and 2.49e-2 with the fused one, one element past 2e-2 elementwise in the
  // latter (1.14 of a largest 45.6): bf16's rounding of q and k through a sharp softmax, not an error of the
  // algorithm, which f32 checks to 1e-4 here and ops' own test to 1e-12 in f64.
  const double tol = mixed ? 3e-2 : optimus::test::tolerance<T>(math);

  world.reset_stats();
  typename optimus::megatron::TransformerBlock1D<T>::Context saved;
  auto y = block.forward(optimus::DistMatrix<T>::from_global(group.local(), x), s.seq, pass, saved);
  const auto forward_stats = world.stats();
  auto dx = block.backward(std::move(saved), optimus::DistMatrix<T>::from_global(group.local(), dy));
  const auto pc = static_cast<std::uint64_t>(world.size());
  const std::uint64_t all_reduce_bytes = 2 * (pc - 1) * static_cast<std::uint64_t>(n * s.hidden) * sizeof(T) / pc;
  CHECK(forward_stats[optimus::CallKind::all_reduce].calls == 2);
  CHECK(forward_stats.bytes_received == 2 * all_reduce_bytes);
  CHECK(world.stats()[optimus::CallKind::all_reduce].calls == 4);
  CHECK(world.stats().bytes_received == 4 * all_reduce_bytes);

  CHECK(optimus::reference::compare_relative(y.to_global().template cast<double>(), expected, tol).ok());
  if (mixed) {  // bf16 operands really were used
    CHECK_FALSE(optimus::reference::compare_relative(y.to_global().template cast<double>(), expected, 1e-5).ok());
  }
  CHECK(optimus::reference::compare_relative(dx.to_global().template cast<double>(), g.dx, tol).ok());
  optimus::reference::Parameters grads;
  optimus::reference::store_block_grads(grads, 0, g.dw);
  for (const auto& r : refs) {
    CAPTURE(r.name);
    const auto cmp = optimus::reference::compare_relative(optimus::gather_parameter(world, r, true, nullptr), grads.at(r.name), tol);
    CAPTURE(cmp);
    CHECK(cmp.ok());
  }
}

// The 1D block with 1, 2 and 4 contexts in flight and under each recomputation policy: every context's output and
// input gradient, and the accumulated gradients, bitwise those of one context at a time without recomputation.
template <class T>
void check_contexts_1d(optimus::Communicator& world) {
  optimus::megatron::Group group(world);
  const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
  const optimus::GptConfig config = optimus::test::config_for(2, 1, 0.1);
  optimus::megatron::TransformerBlock1D<T> block(group, config, 0);
  std::vector<optimus::ParameterRef<T>> refs;
  block.parameters(refs);
  optimus::test::load_random(refs, 800, group.local().device());
  const std::int64_t n = s.batch * s.seq;
  const auto input = [&](std::uint64_t seed) {
    return optimus::DistMatrix<T>::from_global(group.local(), optimus::reference::random_matrix(n, s.hidden, seed));
  };
  const auto pass = [](int c) {
    return optimus::Pass::train(6 + static_cast<std::uint64_t>(c), 0);
  };
  struct Result {
    std::vector<Matrix> y, dx;
    std::vector<Matrix> grads;
  };
  // Forwards of `k` contexts, then their backwards in `order` (indices), through `on` (block, or another block whose
  // parameters are on_refs).
  const auto run_on = [&](optimus::megatron::TransformerBlock1D<T>& on,
                          const std::vector<optimus::ParameterRef<T>>& on_refs, int k, const std::vector<int>& order) {
    on.zero_grad();
    Result r;
    std::vector<typename optimus::megatron::TransformerBlock1D<T>::Context> saved(static_cast<std::size_t>(k));
    for (int c = 0; c < k; ++c) {
      r.y.push_back(on.forward(input(50 + c), s.seq, pass(c), saved[static_cast<std::size_t>(c)])
                        .to_global()
                        .template cast<double>());
    }
    r.dx.resize(static_cast<std::size_t>(k));
    for (int c : order) {
      r.dx[static_cast<std::size_t>(c)] =
          on.backward(std::move(saved[static_cast<std::size_t>(c)]), input(60 + c)).to_global().template cast<double>();
    }
    for (const auto& ref : on_refs) r.grads.push_back(optimus::gather_parameter(world, ref, true, nullptr));
    return r;
  };
  const auto run = [&](int k, const std::vector<int>& order) { return run_on(block, refs, k, order); };
  const Result one = run(1, {0});
  for (optimus::Recompute policy : {optimus::Recompute::none, optimus::Recompute::selective, optimus::Recompute::full}) {
    CAPTURE(std::string(optimus::name_of(policy)));
    block.set_recompute(policy);
    const Result again = run(1, {0});
    CHECK(again.y[0] == one.y[0]);
    CHECK(again.dx[0] == one.dx[0]);
    CHECK(again.grads == one.grads);
  }
  block.set_recompute(optimus::Recompute::none);
  // Blocking: the column-parallel backward waits for dx's all-reduce before dW (Megatron's asynchronous all-reduce
  // otherwise overlaps them): the same bits, from a block on a handle of the group that runs blocking.
  optimus::megatron::TransformerBlock1D<T> blocking_block(group.with({.overlap = false}), config, 0);
  std::vector<optimus::ParameterRef<T>> blocking_refs;
  blocking_block.parameters(blocking_refs);
  optimus::test::load_random(blocking_refs, 800, group.local().device());
  const Result blocking = run_on(blocking_block, blocking_refs, 1, {0});
  CHECK(blocking.y[0] == one.y[0]);
  CHECK(blocking.dx[0] == one.dx[0]);
  CHECK(blocking.grads == one.grads);
  // 2 contexts backward in reverse order, 4 in forward order, 4 out of order.
  const Result two = run(2, {1, 0}), forward = run(4, {0, 1, 2, 3}), four = run(4, {2, 0, 3, 1});
  CHECK(two.y[0] == one.y[0]);
  CHECK(four.y[0] == one.y[0]);
  CHECK(four.dx[0] == one.dx[0]);
  CHECK(forward.dx == four.dx);
  for (std::size_t p = 0; p < refs.size(); ++p) {
    CHECK(optimus::reference::compare_relative(forward.grads[p], four.grads[p], sizeof(T) == 8 ? 1e-12 : 1e-5).ok());
  }
  // Each context alone, summed, against the four in flight (order of accumulation differs: within rounding).
  std::vector<Matrix> sum;
  for (int c = 0; c < 4; ++c) {
    block.zero_grad();
    typename optimus::megatron::TransformerBlock1D<T>::Context saved;
    block.forward(input(50 + c), s.seq, pass(c), saved);
    CHECK(block.backward(std::move(saved), input(60 + c)).to_global().template cast<double>() ==
          four.dx[static_cast<std::size_t>(c)]);
    for (std::size_t p = 0; p < refs.size(); ++p) {
      const Matrix g = optimus::gather_parameter(world, refs[p], true, nullptr);
      if (c == 0) sum.push_back(g);
      else sum[p] += g;
    }
  }
  for (std::size_t p = 0; p < refs.size(); ++p) {
    CAPTURE(refs[p].name);
    CHECK(optimus::reference::compare_relative(four.grads[p], sum[p], sizeof(T) == 8 ? 1e-12 : 1e-5).ok());
  }
}

void check_all(optimus::Communicator& world) {
  check_contexts_1d<double>(world);
  check_contexts_1d<float>(world);
  const optimus::ops::GemmMath f32 = optimus::ops::GemmMath::f32;
  for (double dropout : {0.0, 0.1}) {
    check_block_1d<double>(world, dropout, f32, optimus::BlockConfig{}, false);
    check_block_1d<float>(world, dropout, f32, optimus::BlockConfig{}, false);
  }
  // all-reduces stay f32: the same bytes
  check_block_1d<float>(world, 0.1, optimus::ops::GemmMath::bf16, optimus::BlockConfig{}, false);
  // BERT's blocks on padded sequences.
  check_block_1d<double>(world, 0.1, f32, optimus::test::bert_blocks(), true);
  check_block_1d<float>(world, 0.1, f32, optimus::test::bert_blocks(), true);
  optimus::test::check_gpt_1d(world);
}

}  // namespace

TEST_CASE("1D block matches the reference with Megatron's all-reduces (MPI world)") {
  check_all(optimus::test::world());
}

TEST_CASE("1D block matches the reference at p = 1, 2, 4 in-process") {
  for (int p : {1, 2, 4}) {
    CAPTURE(p);
    optimus::test::run_in_process(p, [](optimus::Communicator& w) { check_all(w); });
  }
}

TEST_CASE("1D GPT matches the reference at p = 3 in-process") {
  optimus::test::run_in_process(3, [](optimus::Communicator& w) { optimus::test::check_gpt_1d(w); });
}

// Micro-batches and activation recomputation against the whole batch and against `none`, shared by the MPI,
// in-process and simulated-device suites.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "layer_cases.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/reference/compare.hpp"

namespace optimus::test {
namespace {

// The tokens and targets of each replica of a global batch of dp * batch sequences; this rank's replica's slice.
struct ReplicaBatch {
  std::vector<int> tokens, targets, all_tokens, all_targets;
};

ReplicaBatch replica_batch(const Grid& grid, const GptConfig& config, std::int64_t batch, std::int64_t seq,
                           std::uint64_t seed) {
  const std::int64_t mine = batch * seq, all = mine * grid.dp();
  ReplicaBatch b{.tokens = {}, .targets = {}, .all_tokens = random_tokens(all, config.vocab, seed),
                 .all_targets = random_tokens(all, config.vocab, seed + 1)};
  const auto first = static_cast<std::ptrdiff_t>(grid.dp_index() * mine), last = first + mine;
  b.tokens.assign(b.all_tokens.begin() + first, b.all_tokens.begin() + last);
  b.targets.assign(b.all_targets.begin() + first, b.all_targets.begin() + last);
  return b;
}

// One step's loss and every gradient (gathered) of `model` on `b` in its schedule's micro-batches.
template <class T>
std::pair<double, std::map<std::string, GlobalMatrix>> step_of(Gpt2D<T>& model, const ReplicaBatch& b,
                                                               std::int64_t batch) {
  model.zero_grad();
  const double loss = model.train_step(b.tokens, b.targets, batch, 7);
  return {loss, model.gather(true)};
}

template <class T>
void micro_batch_case(const Grid& grid, double tol) {
  const int q = grid.q();
  const LayerShapes s = shapes_for(q);
  const GptConfig config = config_for(q, 2, 0.1);
  const std::int64_t batch = 8 * q;  // m = 8 micro-batches of q sequences
  const ReplicaBatch b = replica_batch(grid, config, batch, s.seq, 61);
  Gpt2D<T> one(grid, config);
  const auto [whole_loss, whole] = step_of(one, b, batch);
  if (sizeof(T) == 8) {  // the whole batch against the reference (dp replicas: on the global batch)
    reference::Parameters p = reference::gpt_init(config);
    const reference::GptResult r =
        reference::gpt_forward_backward(config, p, b.all_tokens, b.all_targets, batch * grid.dp(), 7);
    CHECK(std::abs(whole_loss - r.loss) <= 1e-10 * r.loss);
    for (const auto& [name, g] : whole) CHECK(reference::compare_relative(g, r.grads.at(name), 1e-10).ok());
  }
  for (int m : {2, 4, 8}) {
    CAPTURE(m);
    Gpt2D<T> model(grid, config, pipeline::one_stage(m));
    const auto [loss, grads] = step_of(model, b, batch);
    CHECK(std::abs(loss - whole_loss) <= tol * whole_loss);
    for (const auto& [name, g] : whole) {
      CAPTURE_BINDING(name);
      const reference::Comparison cmp = reference::compare_relative(grads.at(name), g, tol);
      CAPTURE(cmp);
      CHECK(cmp.ok());
    }
  }
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// none, selective and full give bitwise the same loss and gradients: one step of a 2-layer GPT with dropout, in 1
// and 2 micro-batches.
template <class T>
void recompute_bitwise_case(const Grid& grid) {
  const int q = grid.q();
  const LayerShapes s = shapes_for(q);
  const GptConfig config = config_for(q, 2, 0.1);
  const std::int64_t batch = 2 * q;
  const ReplicaBatch b = replica_batch(grid, config, batch, s.seq, 71);
  for (int m : {1, 2}) {
    CAPTURE(m);
    Gpt2D<T> model(grid, config, pipeline::one_stage(m));
    model.set_recompute(Recompute::none);
    const auto [none_loss, none] = step_of(model, b, batch);
    for (Recompute policy : {Recompute::selective, Recompute::full}) {
      CAPTURE(std::string(name_of(policy)));
      model.set_recompute(policy);
      const auto [loss, grads] = step_of(model, b, batch);
      CHECK(same_bits(loss, none_loss));
      for (const auto& [name, g] : none) {
        CAPTURE_BINDING(name);
        CHECK(grads.at(name) == g);
      }
    }
  }
  // Mixed layers: the planner's per-block choice.
  Gpt2D<T> model(grid, config);
  model.set_recompute(0, Recompute::full);
  model.set_recompute(1, Recompute::selective);
  model.set_recompute(Recompute::none);
  const auto [none_loss, none] = step_of(model, b, batch);
  model.set_recompute(0, Recompute::full);
  model.set_recompute(1, Recompute::selective);
  const auto [loss, grads] = step_of(model, b, batch);
  CHECK(same_bits(loss, none_loss));
  for (const auto& [name, g] : none) CHECK(grads.at(name) == g);
}

// A block's context holds exactly block_saved_bytes per rank under each policy, and backward frees it.
template <class T>
void recompute_bytes_case(const Grid& grid) {
  const int q = grid.q();
  const LayerShapes s = shapes_for(q);
  const GptConfig config = config_for(q, 1, 0.1);
  TransformerBlock2D<T> block(grid, config, 0);
  DistMatrix<T> x(grid, s.batch * s.seq, s.hidden);
  x.fill_random(3);
  const BlockActivations shape = BlockActivations::of(config, s.batch, s.seq, q, sizeof(T),
                                                      SavedActivation<T>::keeps_bf16(grid) ? 2 : std::int64_t{sizeof(T)});
  for (Recompute policy : {Recompute::none, Recompute::selective, Recompute::full}) {
    CAPTURE(std::string(name_of(policy)));
    block.set_recompute(policy);
    const std::uint64_t before = grid.memory().current(MemoryKind::activations);
    typename TransformerBlock2D<T>::Context saved;
    DistMatrix<T> y = block.forward(x, s.seq, Pass::train(1, 0), saved);
    const std::uint64_t held = grid.memory().current(MemoryKind::activations) - before;
    CHECK(held == static_cast<std::uint64_t>(block_saved_bytes(shape, policy)));
    block.backward(std::move(saved), y);
    CHECK(grid.memory().current(MemoryKind::activations) == before);
  }
}

}  // namespace

void check_micro_batches(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  micro_batch_case<double>(grid, 1e-12);
}

void check_recompute(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  recompute_bitwise_case<double>(grid);
  recompute_bitwise_case<float>(grid);
  recompute_bytes_case<double>(grid);
  recompute_bytes_case<float>(grid);
  const Grid bf16 = grid.with({.gemm_math = ops::GemmMath::bf16});
  recompute_bytes_case<float>(bf16);  // saved in bf16, the input of full recomputation in f32
  recompute_bitwise_case<float>(bf16);
}

void check_recompute_and_micro_batches_on(const Grid& grid) {
  recompute_bitwise_case<float>(grid);
  recompute_bytes_case<float>(grid);
  micro_batch_case<float>(grid, 1e-4);
}

}  // namespace optimus::test

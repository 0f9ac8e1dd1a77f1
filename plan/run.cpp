// Running a plan (run.hpp).
#include "optimus/plan/run.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <vector>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/layers/adamw.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/plan/build.hpp"

namespace optimus::plan {
namespace {

KindBytes peaks(const MemoryTracker& m, MemoryPlace place) {
  return KindBytes{.parameters = m.peak(MemoryKind::parameters, place),
                   .gradients = m.peak(MemoryKind::gradients, place),
                   .optimizer = m.peak(MemoryKind::optimizer, place),
                   .activations = m.peak(MemoryKind::activations, place),
                   .workspace = m.peak(MemoryKind::workspace, place)};
}

// Times `step` (one training step on this rank's batch, then AdamW) and reads the tracker of `grid`.
Measured measure(Communicator& world, const Grid& grid, int warmup, int steps,
                 const std::function<double(std::uint64_t)>& step, Communicator* group) {
  std::vector<double> seconds;
  Measured out;
  // The communicators the model's layers call: the grid's, and a 1D model's tensor-parallel group.
  std::vector<Communicator*> comms = {&grid.row(), &grid.col(), &grid.grid(), &grid.dp_comm(), &grid.pipe()};
  if (group != nullptr) comms.push_back(group);
  const auto participants = [&] {
    double sum = 0;
    for (Communicator* c : comms) {
      if (c->size() > 1) sum += static_cast<double>(c->stats().calls) * c->size();
    }
    return sum;
  };
  double before = 0;
  for (int it = 0; it < warmup + steps; ++it) {
    if (it == warmup) before = participants();
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    out.loss = step(static_cast<std::uint64_t>(it));
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = world.all_reduce(local, ReduceOp::max);
    if (it >= warmup) seconds.push_back(slowest);
  }
  out.call_participants = (participants() - before) / steps;
  std::sort(seconds.begin(), seconds.end());
  out.step_seconds = seconds[seconds.size() / 2];
  // CPU ranks: the rank's memory plays the device's part (the plan's device memory), nothing is offloaded.
  const bool device = grid.device() != nullptr;
  out.device = peaks(grid.memory(), device ? MemoryPlace::device : MemoryPlace::host);
  out.host = device ? peaks(grid.memory(), MemoryPlace::host) : KindBytes{};
  out.stage = grid.stage();
  return out;
}

AdamWConfig adamw_config() { return AdamWConfig{.lr = 1e-3}; }

}  // namespace

std::vector<int> random_ids(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  CounterRng rng(seed, 0);
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    ids[static_cast<std::size_t>(i)] =
        static_cast<int>(rng.uniform(static_cast<std::uint64_t>(i), 0) * static_cast<double>(vocab));
  }
  return ids;
}

bool runs_on_cpu(const Layout& l, const Workload& w) {
  return runnable(l, false).empty() && shape_error(l, w).empty() && w.element_bytes == 4 && w.saved_bytes == 4;
}

Measured run_plan(Communicator& world, const Layout& l, const Workload& w, int warmup, int steps) {
  OPTIMUS_CHECK(world.size() == l.ranks(), "run plan: ", describe(l), " needs ", l.ranks(), " ranks, the world has ",
                world.size());
  OPTIMUS_CHECK(runnable(l, false).empty(), "run plan: ", describe(l), ": ", runnable(l, false));
  OPTIMUS_CHECK(shape_error(l, w).empty(), "run plan: ", describe(l), ": ", shape_error(l, w));
  OPTIMUS_CHECK(w.element_bytes == 4 && w.saved_bytes == 4, "run plan: runs f32 (element and saved bytes 4), got ",
                w.element_bytes, " and ", w.saved_bytes);
  OPTIMUS_CHECK(warmup >= 0 && steps >= 1, "run plan: ", warmup, " warm-up and ", steps, " timed steps");
  const std::int64_t replica = w.global_batch / l.dp;  // sequences per replica
  // The layout's model on `place` (its grid: the activations' and the replicas'); `tp` the 1D group's communicator.
  const auto run = [&](auto& model, const auto& place, const Grid& grid, Communicator* tp) {
    AdamW<float> adamw(place, model.parameters(), {.config = adamw_config(), .norm_order = model.norm_order()});
    const auto replica_of = static_cast<std::uint64_t>(grid.dp_index());
    const auto tokens = random_ids(replica * w.seq, w.config.vocab, 11 + replica_of);
    const auto targets = random_ids(replica * w.seq, w.config.vocab, 23 + replica_of);
    return measure(world, grid, warmup, steps, [&](std::uint64_t step) {
      model.zero_grad();
      const double loss = model.train_step(tokens, targets, replica, step);
      adamw.step();
      return loss;
    }, tp);
  };
  if (l.two_d()) {
    const Grid grid = Grid::create(world, l.q(), l.pp);
    return run(*build_gpt<TwoD<float>>(grid, w.config, l), grid, grid, nullptr);
  }
  const megatron::Group group = megatron::Group::pipeline_stage(world, l.pp, l.dp);
  return run(*build_gpt<OneD<float>>(group, w.config, l), group, group.local(), &group.tp());
}

double count_call_participants(const Layout& layout, const Workload& workload) {
  std::vector<double> each(static_cast<std::size_t>(layout.ranks()));
  run_in_process(layout.ranks(), [&](Communicator& world) {
    each[static_cast<std::size_t>(world.rank())] = run_plan(world, layout, workload, 0, 1).call_participants;
  });
  return std::accumulate(each.begin(), each.end(), 0.0);
}

}  // namespace optimus::plan

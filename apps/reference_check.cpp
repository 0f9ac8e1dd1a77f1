// train_gpt's reference check (reference_check.hpp).
#include "reference_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>

#include "optimus/model/gpt.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/gpt.hpp"

namespace optimus::apps {
namespace {

// On a comparing rank: the worst relative error of `loss` and `grads` (some or all of the model's) against the
// reference's step on the global batch; 0 elsewhere. Then the maximum over `world`.
double worst_error(Communicator& world, bool compares, const GptConfig& config, const CheckBatch& b, int replicas,
                   double loss, const std::map<std::string, GlobalMatrix>& grads) {
  double worst = 0;
  if (compares) {
    const auto ref = reference::gpt_forward_backward(config, reference::gpt_init(config), b.all.tokens, b.all.targets,
                                                     b.all.inputs, b.batch * replicas, 1);
    worst = std::abs(loss - ref.loss) / std::abs(ref.loss);
    for (const auto& [name, g] : grads) {
      worst = std::max(worst, reference::compare_relative(g, ref.grads.at(name), 0).rel_error);
    }
  }
  return world.all_reduce(worst, ReduceOp::max);
}

}  // namespace

std::int64_t checked_layers(const GptConfig& config, const pipeline::Schedule& schedule) {
  return schedule.stages > 1 ? schedule.virtual_stages() : std::min<std::int64_t>(config.layers, 2);
}

double reference_check(Communicator& world, const plan::Place& place, const GptConfig& config, const CheckBatch& b,
                       const pipeline::Schedule& schedule) {
  return place.visit([&](const auto& on) {
    using Family = FamilyOn<std::decay_t<decltype(on)>, double>;
    Gpt<Family> model(on, config, schedule);
    model.zero_grad();
    const double loss = model.train_step(b.mine.tokens, b.mine.targets, b.mine.inputs, b.batch, 1);
    const std::map<std::string, GlobalMatrix> grads = model.gather(true);
    const Grid& grid = Family::grid(on);
    const bool compares = grid.dp_index() == 0 && Family::holders(on).rank() == 0;  // replica 0's first holder
    return worst_error(world, compares, config, b, grid.dp(), loss, grads);
  });
}

void check_first_step(Communicator& world, const plan::Place& host, const Setup& setup,
                      const pipeline::Schedule& schedule) {
  const Grid& host_grid = host.grid();
  const GptConfig& config = setup.config;
  const auto append = [](std::vector<int>& to, const std::vector<int>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  Batch mine, all;
  for (int r = 0; r < host_grid.dp(); ++r) {
    draw_step(setup, setup.corpus.train, config.seed, 0, r, host_grid.dp(), mine);
    append(all.tokens, mine.tokens);
    append(all.targets, mine.targets);
    append(all.inputs.token_types, mine.inputs.token_types);
    append(all.inputs.lengths, mine.inputs.lengths);
  }
  draw_step(setup, setup.corpus.train, config.seed, 0, host_grid.dp_index(), host_grid.dp(), mine);
  GptConfig check = config;
  check.layers = checked_layers(config, schedule);
  const CheckBatch b{.mine = mine, .all = all, .batch = setup.batch};
  const double err = reference_check(world, host, check, b, schedule);
  if (world.rank() == 0) {
    std::printf("  reference check (fp64, one step, loss and every gradient): max relative error %.2e %s\n", err,
                err < 1e-10 ? "ok" : "FAILED");
  }
  OPTIMUS_CHECK(err < 1e-10, "the model on ", host.describe(), " disagrees with the reference (relative error ", err,
                ")");
  host_grid.memory().reset_peaks();  // the memory line reports training's peaks, not the f64 check's
}

}  // namespace optimus::apps

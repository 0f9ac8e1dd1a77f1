// train_gpt's reference check (reference_check.hpp).
#include "reference_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "optimus/model/gpt.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/gpt.hpp"

namespace optimus::examples {
namespace {

// On a comparing rank: the worst relative error of `loss` and `grads` (some or all of the model's) against the
// reference's step on the global batch; 0 elsewhere. Then the maximum over `world`.
double worst_error(Communicator& world, bool compares, const GptConfig& config, const CheckBatch& b, int replicas,
                   double loss, const std::map<std::string, GlobalMatrix>& grads) {
  double worst = 0;
  if (compares) {
    const auto ref = reference::gpt_forward_backward(config, reference::gpt_init(config), b.all_tokens, b.all_targets,
                                                     b.batch * replicas, 1);
    worst = std::abs(loss - ref.loss) / std::abs(ref.loss);
    for (const auto& [name, g] : grads) {
      worst = std::max(worst, reference::compare_relative(g, ref.grads.at(name), 0).rel_error);
    }
  }
  return world.all_reduce(worst, ReduceOp::max);
}

}  // namespace

double reference_check(Communicator& world, const Grid& grid, const GptConfig& config, const CheckBatch& b,
                       const pipeline::Schedule& schedule) {
  Gpt2D<double> model(grid, config, schedule);
  model.zero_grad();
  const double loss = model.train_step(b.tokens, b.targets, b.batch, 1);
  const std::map<std::string, GlobalMatrix> grads = model.gather(true);
  return worst_error(world, grid.dp_index() == 0 && grid.grid().rank() == 0, config, b, grid.dp(), loss, grads);
}

double reference_check(Communicator& world, const megatron::Group& group, const GptConfig& config,
                       const CheckBatch& b, const pipeline::Schedule& schedule) {
  Gpt1D<double> model(group, config, schedule);
  model.zero_grad();
  const double loss = model.train_step(b.tokens, b.targets, b.batch, 1);
  const std::map<std::string, GlobalMatrix> grads = model.gather(true);
  const Grid& grid = group.local();
  return worst_error(world, grid.dp_index() == 0 && group.rank() == 0, config, b, grid.dp(), loss, grads);
}

}  // namespace optimus::examples

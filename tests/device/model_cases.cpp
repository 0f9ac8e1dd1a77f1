// The 1D baseline's GPT and checkpoints on a device (device_cases.hpp).
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../layers/layer_cases.hpp"
#include "device_cases.hpp"
#include "optimus/checkpoint/checkpoint.hpp"

namespace optimus::test {
namespace {

using Gathered = std::map<std::string, GlobalMatrix>;

struct OneDRun {
  std::vector<double> losses, norms;
  Gathered parameters;
};

// Two AdamW steps of the 1D GPT on `group` (dropout on); with `save_to`, a checkpoint of the result.
OneDRun train_1d(const megatron::Group& group, const std::filesystem::path& save_to) {
  const GptConfig config = config_for(2, 2, 0.1);
  const LayerShapes s = shapes_for(2);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 81);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 82);
  Gpt1D<float> model(group, config, pipeline::one_stage(2));
  AdamW<float> adamw(group, model.parameters(), {.config = AdamWConfig{}});
  OneDRun r;
  for (std::uint64_t step = 1; step <= 2; ++step) {
    model.zero_grad();
    r.losses.push_back(model.train_step(tokens, targets, s.batch, step));
    r.norms.push_back(adamw.step());
  }
  r.parameters = model.gather(false);
  if (!save_to.empty()) checkpoint::save(save_to, model, &adamw, {.step = 2, .extra = {}});
  return r;
}

template <class Model>
Gathered loaded(Model& model, const std::filesystem::path& dir) {
  checkpoint::load(dir, model, static_cast<AdamW<float>*>(nullptr), nullptr);
  return model.gather(false);
}

}  // namespace

void check_models_and_checkpoints_on(Communicator& world, RankDevice& rank, Grid& grid,
                                     const std::filesystem::path& dir) {
  // The 1D GPT on the device: bitwise the host's, saved from device shards.
  megatron::Group on_device(world), on_host(world);
  on_device.place_on(&rank.memory(), rank.queue());
  const OneDRun device = train_1d(on_device, dir / "one_d"), host = train_1d(on_host, {});
  for (std::size_t step = 0; step < 2; ++step) {
    CAPTURE(step);
    CHECK(std::memcmp(&device.losses[step], &host.losses[step], sizeof(double)) == 0);
    CHECK(std::memcmp(&device.norms[step], &host.norms[step], sizeof(double)) == 0);
  }
  CHECK(device.parameters == host.parameters);
  // Checkpoints between device and host shards, 1D and 2D: what was saved comes back bit for bit.
  const GptConfig config = config_for(2, 2, 0.1);
  Gpt2D<float> two_d_device(grid, config);
  CHECK(loaded(two_d_device, dir / "one_d") == device.parameters);
  Gpt1D<float> one_d_host(on_host, config);
  CHECK(loaded(one_d_host, dir / "one_d") == device.parameters);
  checkpoint::save(dir / "two_d", two_d_device, static_cast<AdamW<float>*>(nullptr), {.step = 2, .extra = {}});
  Grid host_grid = Grid::create(world, grid.q());
  Gpt2D<float> two_d_host(host_grid, config);
  CHECK(loaded(two_d_host, dir / "two_d") == device.parameters);
}

}  // namespace optimus::test

// Mixed precision's weight copies on the simulated device (layers/weight_copy.hpp): AdamW's update writes each
// Linear2D weight's and wte's bf16 copy with its master, so that a step casts no weight, and the results are bitwise
// those of casting; whoever else writes a master makes the next product cast it again.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture_binding.hpp"
#include "../layers/layer_cases.hpp"
#include "device_world.hpp"
#include "optimus/layers/adamw.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::test {
namespace {

const DeviceTarget kSim{.kind = Device::sim, .sim = {}};

struct Trained {
  std::vector<double> losses;
  std::vector<int> casts;  // [steps]: f32 -> bf16 casts the device ran in each step (forward, backward, update)
  std::map<std::string, GlobalMatrix> parameters;
};

// Steps of a 2-block GPT under bf16 GEMMs on `grid` (q = 1, on `rank`'s simulated device), each traced. `recast`: its
// parameters() are taken before every step, as a writer would, so that every weight is cast again. `offload`: AdamW's
// moments offloaded so.
Trained train(RankDevice& rank, const Grid& grid, int steps, bool recast,
              const std::optional<OptimizerOffload>& offload) {
  auto& device = static_cast<sim::Runtime&>(rank.runtime());
  const GptConfig config = config_for(1, 2, 0.1);
  const LayerShapes s = shapes_for(1);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 81);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 82);
  Gpt2D<float> model(grid, config);
  AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}, .offload = offload});
  Trained r;
  for (int step = 1; step <= steps; ++step) {
    if (recast) (void)model.parameters();
    rank.stream().synchronize();
    device.set_tracing(true);
    model.zero_grad();
    r.losses.push_back(model.train_step(tokens, targets, s.batch, static_cast<std::uint64_t>(step)));
    adamw.step();
    rank.stream().synchronize();
    device.set_tracing(false);
    int casts = 0;
    for (const sim::Runtime::Span& span : device.trace()) casts += std::string_view(span.name) == "to_bf16" ? 1 : 0;
    r.casts.push_back(casts);
  }
  r.parameters = model.gather(false);
  return r;
}

TEST_CASE("mixed precision: AdamW writes the weights' bf16 copies — a step casts no weight, with the bits of casting") {
  on_shared_device(kSim, 1, 1, ops::GemmMath::bf16, [](Communicator&, RankDevice& rank, Grid& grid) {
    // c_attn, attn.c_proj, c_fc, mlp.c_proj in each of the 2 blocks, and wte, which the LM head multiplies
    const int steps = 3, weights = 4 * 2 + 1;
    const Trained kept = train(rank, grid, steps, false, std::nullopt);
    const Trained recast = train(rank, grid, steps, true, std::nullopt);
    // Step 1 casts every weight once in both (AdamW's constructor took the parameters; the forward's cast serves the
    // backward too); from step 2 only the recast run casts them, once each.
    CHECK(kept.casts[0] == recast.casts[0]);
    for (int step = 1; step < steps; ++step) {
      CAPTURE(step);
      CAPTURE(kept.casts[static_cast<std::size_t>(step)]);
      CAPTURE(recast.casts[static_cast<std::size_t>(step)]);
      CHECK(recast.casts[static_cast<std::size_t>(step)] - kept.casts[static_cast<std::size_t>(step)] == weights);
      CHECK(kept.casts[static_cast<std::size_t>(step)] == kept.casts[0] - weights);
    }
    for (int step = 0; step < steps; ++step) {
      CAPTURE(step);
      const auto k = static_cast<std::size_t>(step);
      CHECK(std::memcmp(&kept.losses[k], &recast.losses[k], sizeof(double)) == 0);
    }
    for (const auto& [name, m] : recast.parameters) {
      CAPTURE_BINDING(name);
      CHECK(kept.parameters.at(name) == m);
    }
  });
}

TEST_CASE("mixed precision: a step's only cast kernel is c_attn's output (qkv), once a block") {
  // Every other bf16 operand is written by the kernel that makes it: the weights' copies by AdamW's update, the
  // LayerNorms' outputs (ln_f's too, which the head takes over) by their normalizing kernels, GELU's and the attention's
  // outputs by theirs, each linear layer's output gradient by the pass that sums its columns for the bias, and dlogits
  // by the loss's gradient kernel. qkv is c_attn's f32 product plus bias, which SUMMA sums in f32.
  on_shared_device(kSim, 1, 1, ops::GemmMath::bf16, [](Communicator&, RankDevice& rank, Grid& grid) {
    const int steps = 2, blocks = 2, weights = 4 * blocks + 1;
    const Trained t = train(rank, grid, steps, false, std::nullopt);
    CHECK(t.casts[0] == blocks + weights);  // the first step casts each weight once (see above)
    CHECK(t.casts[1] == blocks);
  });
}

TEST_CASE("mixed precision: with AdamW's moments offloaded, the device way writes the copies by pieces, the host way "
          "leaves them to be cast; both give the bits of the moments on the device") {
  on_shared_device(kSim, 1, 1, ops::GemmMath::bf16, [](Communicator&, RankDevice& rank, Grid& grid) {
    const int steps = 3, weights = 4 * 2 + 1;
    const Trained plain = train(rank, grid, steps, false, std::nullopt);
    for (OffloadUpdate update : {OffloadUpdate::device, OffloadUpdate::host}) {
      CAPTURE(update == OffloadUpdate::device ? "device" : "host");
      const Trained offloaded =
          train(rank, grid, steps, false, OptimizerOffload{.update = update, .chunk_elements = 1000});
      for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        const auto k = static_cast<std::size_t>(step);
        CHECK(std::memcmp(&offloaded.losses[k], &plain.losses[k], sizeof(double)) == 0);
        const int recast = step > 0 && update == OffloadUpdate::host ? weights : 0;
        CHECK(offloaded.casts[k] == plain.casts[k] + recast);
      }
      for (const auto& [name, m] : plain.parameters) {
        CAPTURE_BINDING(name);
        CHECK(offloaded.parameters.at(name) == m);
      }
    }
  });
}

TEST_CASE("mixed precision: a master written after AdamW's update (a load through the optimizer's own references) is "
          "cast again before its next product") {
  on_shared_device(kSim, 1, 1, ops::GemmMath::bf16, [](Communicator&, RankDevice&, Grid& grid) {
    const GptConfig config = config_for(1, 2, 0.0);
    GptConfig other_config = config;
    other_config.seed = config.seed + 1;
    const LayerShapes s = shapes_for(1);
    const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 83);
    const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 84);
    Gpt2D<float> model(grid, config), other(grid, other_config);
    AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}});
    model.zero_grad();
    (void)model.train_step(tokens, targets, s.batch, 1);
    adamw.step();  // the copies are current: written by the update
    // load_parameter through references taken before the update (no parameters() call to invalidate the copies)
    load_named(adamw.parameters(), other.gather(false), grid.device());
    model.zero_grad();
    other.zero_grad();
    const double loaded = model.train_step(tokens, targets, s.batch, 2), expected = other.train_step(tokens, targets,
                                                                                                      s.batch, 2);
    CHECK(std::memcmp(&loaded, &expected, sizeof(double)) == 0);
  });
}

}  // namespace
}  // namespace optimus::test

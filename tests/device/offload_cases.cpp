// Optimizer offload on simulated devices with a capacity (offload_cases.hpp).
#include "offload_cases.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../layers/layer_cases.hpp"
#include "optimus/layers/gpt.hpp"

namespace optimus::test {
namespace {

constexpr int kSteps = 5;
constexpr std::int64_t kChunk = 1000;  // elements: wte's and the MLP's shards are cut into several chunks

// Optimizer state dominates: a wide vocabulary and a few short sequences (activations are small).
GptConfig offload_config() {
  return GptConfig{.vocab = 500, .max_seq = 8, .layers = 2, .hidden = 32, .heads = 4, .ffn = 64, .dropout = 0.1,
                   .seed = 77};
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, GlobalMatrix> parameters;
  std::int64_t local_parameters = 0;  // P on the reporting rank (this process's first)
  std::int64_t world_parameters = 0;  // P summed over ranks
  std::int64_t largest = 0;           // the largest local parameter on the reporting rank (elements)
  std::int64_t wte = 0;               // wte's local elements on the reporting rank
  MemoryTracker memory;               // the reporting rank's, peaks over the training steps
  TransferBytes moved;                // the reporting rank's offload engine's
  sim::Traffic traffic;               // summed over devices
  std::uint64_t device_bytes = 0;     // the most raw device memory any device had allocated at once
};

Run train(const SimLaunch& sim, int q, std::size_t capacity, std::optional<OptimizerOffload> how) {
  std::mutex mu;
  std::map<int, Run> by_rank;  // the ranks of this process (all of them in-process, one under MPI)
  const SimTotals totals = sim(capacity, [&](Communicator& world, RankDevice& rank, Grid& grid) {
    const GptConfig config = offload_config();
    const std::int64_t batch = 2 * q, seq = config.max_seq;
    const std::vector<int> tokens = random_tokens(batch * seq, config.vocab, 5);
    const std::vector<int> targets = random_tokens(batch * seq, config.vocab, 6);
    Gpt2D<float> model(grid, config);
    AdamW<float> adamw = how ? AdamW<float>(grid, model.parameters(), AdamWConfig{}, *how)
                             : AdamW<float>(grid, model.parameters(), AdamWConfig{});
    grid.memory().reset_peaks();
    Run mine;
    std::uint64_t allocations = 0;
    for (std::uint64_t step = 1; step <= kSteps; ++step) {
      model.zero_grad();
      mine.losses.push_back(model.train_step(tokens, targets, batch, step, 1));
      adamw.step();
      if (step == 1) allocations = rank.raw_allocations().memory;
    }
    CHECK(rank.raw_allocations().memory == allocations);  // steady state from the first step on
    mine.parameters = model.gather(false);
    for (const ParameterRef<float>& p : model.parameters()) {
      mine.local_parameters += p.value.numel();
      mine.largest = std::max(mine.largest, p.value.numel());
      if (p.name == "wte") mine.wte = p.value.numel();
    }
    mine.world_parameters = static_cast<std::int64_t>(
        world.all_reduce(static_cast<double>(mine.local_parameters), ReduceOp::sum));
    mine.memory = grid.memory();
    if (adamw.offloaded() != nullptr) mine.moved = adamw.offloaded()->transfers();
    const std::lock_guard lock(mu);
    by_rank[world.rank()] = std::move(mine);
  });
  Run out = std::move(by_rank.begin()->second);  // this process's first rank's
  out.traffic = totals.traffic;
  out.device_bytes = totals.peak_bytes;
  return out;
}

void check_same_training(const Run& got, const Run& expected) {
  REQUIRE(got.losses.size() == expected.losses.size());
  for (std::size_t s = 0; s < got.losses.size(); ++s) {
    CAPTURE(s);
    CHECK(std::memcmp(&got.losses[s], &expected.losses[s], sizeof(double)) == 0);
  }
  for (const auto& [name, m] : expected.parameters) {
    CAPTURE(name);
    CHECK(got.parameters.at(name) == m);
  }
}

// Peak bytes by kind and place against the formulas (P parameters of e = 4 bytes on the rank, B buffer elements).
void check_memory(const Run& run, const Run& plain, std::optional<OffloadUpdate> update) {
  const std::uint64_t e = sizeof(float), p = static_cast<std::uint64_t>(run.local_parameters) * e;
  const std::uint64_t buffers = 4 * static_cast<std::uint64_t>(std::min(kChunk, run.largest)) * e;
  const MemoryTracker& m = run.memory;
  CHECK(m.peak(MemoryKind::parameters, MemoryPlace::device) == p);
  // The LM head's part of wte's gradient is summed apart and added at the step's end (layers/gpt.hpp).
  CHECK(m.peak(MemoryKind::gradients, MemoryPlace::device) == p + static_cast<std::uint64_t>(run.wte) * e);
  CHECK(m.peak(MemoryKind::parameters, MemoryPlace::host) == 0);
  CHECK(m.peak(MemoryKind::gradients, MemoryPlace::host) == 0);
  const std::uint64_t on_device = !update ? 2 * p : *update == OffloadUpdate::device ? buffers : 0;
  const std::uint64_t on_host = !update ? 0 : *update == OffloadUpdate::device ? 2 * p : 2 * p + buffers;
  CHECK(m.peak(MemoryKind::optimizer, MemoryPlace::device) == on_device);
  CHECK(m.peak(MemoryKind::optimizer, MemoryPlace::host) == on_host);
  // Activations and workspace are the plain run's: the device's peak moves by the optimizer's change only.
  CHECK(m.peak_total(MemoryPlace::device) + 2 * p == plain.memory.peak_total(MemoryPlace::device) + on_device);
}

void check_transfers(const Run& run, const Run& plain, OffloadUpdate update) {
  const TransferBytes step = offload_step_transfers(update, run.local_parameters, sizeof(float));
  CHECK(run.moved.host_to_device == kSteps * step.host_to_device);
  CHECK(run.moved.device_to_host == kSteps * step.device_to_host);
  const TransferBytes all = offload_step_transfers(update, run.world_parameters, sizeof(float));
  CHECK(run.traffic.host_to_device - plain.traffic.host_to_device == kSteps * all.host_to_device);
  CHECK(run.traffic.device_to_host - plain.traffic.device_to_host == kSteps * all.device_to_host);
  CHECK(run.traffic.device_to_device == plain.traffic.device_to_device);
}

}  // namespace

void check_optimizer_offload(const SimLaunch& sim) {
  std::atomic<int> grid_q{0};
  sim(SIZE_MAX, [&](Communicator&, RankDevice&, Grid& grid) { grid_q = grid.q(); });
  const int q = grid_q;
  const Run plain = train(sim, q, SIZE_MAX, std::nullopt);
  check_memory(plain, plain, std::nullopt);
  std::uint64_t offloaded_bytes = 0;
  for (OffloadUpdate update : {OffloadUpdate::device, OffloadUpdate::host}) {
    CAPTURE(update == OffloadUpdate::device ? "device" : "host");
    const OptimizerOffload how{.update = update, .chunk_elements = kChunk};
    const Run run = train(sim, q, SIZE_MAX, how);
    check_same_training(run, plain);
    check_memory(run, plain, update);
    check_transfers(run, plain, update);
    offloaded_bytes = std::max(offloaded_bytes, run.device_bytes);
  }
  // A capacity between what the offloaded runs and the plain run hold: the plain run is out of memory, the offloaded
  // ones train to the same bits.
  CAPTURE(plain.device_bytes);
  CAPTURE(offloaded_bytes);
  REQUIRE(offloaded_bytes < plain.device_bytes);
  const std::size_t capacity = offloaded_bytes + (plain.device_bytes - offloaded_bytes) / 2;
  // The device's out-of-memory error, from the allocation that did not fit (a tensor, or a collective's staging).
  const std::string full = "bytes free of " + std::to_string(capacity);
  CHECK_THROWS_WITH_AS(train(sim, q, capacity, std::nullopt), doctest::Contains(full.c_str()), optimus::Error);
  for (OffloadUpdate update : {OffloadUpdate::device, OffloadUpdate::host}) {
    CAPTURE(update == OffloadUpdate::device ? "device" : "host");
    check_same_training(train(sim, q, capacity, OptimizerOffload{.update = update, .chunk_elements = kChunk}),
                        plain);
  }
  // Refusals.
  sim(SIZE_MAX, [&](Communicator& world, RankDevice&, Grid& grid) {
    Gpt2D<float> model(grid, offload_config());
    CHECK_THROWS_WITH_AS(AdamW<float>(grid, model.parameters(), AdamWConfig{},
                                      OptimizerOffload{.update = OffloadUpdate::device, .chunk_elements = 0}),
                         doctest::Contains("chunk_elements must be positive, got 0"), optimus::Error);
    Grid host = Grid::create(world, grid.q());
    Gpt2D<float> on_host(host, offload_config());
    CHECK_THROWS_WITH_AS(AdamW<float>(host, on_host.parameters(), AdamWConfig{}, OptimizerOffload{}),
                         doctest::Contains("matrices live on the host"), optimus::Error);
  });
}

}  // namespace optimus::test

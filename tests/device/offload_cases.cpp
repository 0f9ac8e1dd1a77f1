// Optimizer offload on simulated devices with a capacity (offload_cases.hpp).
#include "offload_cases.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "offload_run.hpp"

namespace optimus::test {
namespace {

constexpr int kSteps = 3;  // the first with fresh moments, then two in the steady state
constexpr std::int64_t kChunk = 1000;  // elements: wte's and the MLP's shards are cut into several chunks

// Optimizer state dominates: a wide vocabulary and a few short sequences (activations are small).
GptConfig offload_config() {
  return GptConfig{.vocab = 4000, .max_seq = 8, .layers = 2, .hidden = 64, .heads = 4, .ffn = 64, .dropout = 0.1,
                   .seed = 77, .block = {}};
}

OffloadSetup offload_setup(int q, std::optional<OptimizerOffload> how) {
  return OffloadSetup{.config = offload_config(), .batch = 2 * q, .micro_batches = 1, .recompute = Recompute::none,
                      .spill = Spill::none, .offload = how, .steps = kSteps};
}

// Peak bytes by kind and place against the formulas (P parameters of e = 4 bytes on the rank, B buffer elements).
void check_memory(const OffloadRun& run, const OffloadRun& plain, std::optional<OffloadUpdate> update) {
  const std::uint64_t e = sizeof(float), p = static_cast<std::uint64_t>(run.local_parameters) * e;
  const std::uint64_t buffers = 6 * static_cast<std::uint64_t>(std::min(kChunk, run.local_parameters)) * e;
  const MemoryTracker& m = run.memory;
  CHECK(m.peak(MemoryKind::parameters, MemoryPlace::device) == p);
  // The LM head's part of wte's gradient is summed apart and added at the step's end (model/gpt.hpp).
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

void check_transfers(const OffloadRun& run, const OffloadRun& plain, OffloadUpdate update) {
  const TransferBytes step = offload_step_transfers(update, run.local_parameters, sizeof(float));
  CHECK(run.moved.host_to_device == kSteps * step.host_to_device);
  CHECK(run.moved.device_to_host == kSteps * step.device_to_host);
  // The devices' own counters over the steps, all ranks: the plain run's copies and the offload's.
  const auto ranks = static_cast<std::uint64_t>(run.ranks);
  CHECK(run.step_traffic.host_to_device - plain.step_traffic.host_to_device == ranks * kSteps * step.host_to_device);
  CHECK(run.step_traffic.device_to_host - plain.step_traffic.device_to_host == ranks * kSteps * step.device_to_host);
  CHECK(run.step_traffic.device_to_device == plain.step_traffic.device_to_device);
}

}  // namespace

void check_optimizer_offload(const SimLaunch& sim) {
  const int q = launch_q(sim);
  const OffloadRun plain = train_offloaded(sim, offload_setup(q, std::nullopt), SIZE_MAX);
  CHECK(plain.steady);
  check_memory(plain, plain, std::nullopt);
  std::uint64_t offloaded_bytes = 0;
  for (OffloadUpdate update : {OffloadUpdate::device, OffloadUpdate::host}) {
    CAPTURE(update == OffloadUpdate::device ? "device" : "host");
    const OptimizerOffload how{.update = update, .chunk_elements = kChunk};
    const OffloadRun run = train_offloaded(sim, offload_setup(q, how), SIZE_MAX);
    CHECK(run.steady);  // from the first step on
    check_same_training(run, plain);
    check_memory(run, plain, update);
    check_transfers(run, plain, update);
    offloaded_bytes = std::max(offloaded_bytes, run.device_bytes);
  }
  // A capacity between what the offloaded runs and the plain run hold: the plain run is out of memory, the offloaded
  // ones train to the same bits. Only where each device serves one rank: ranks sharing a device overlap their
  // transient allocations differently from run to run, so that its peak varies by about as much as the moments save
  // in this small model (the MPI suite runs this check for q = 2, one device per process).
  if (sim(SIZE_MAX, [](Communicator&, RankDevice&, Grid&) {}).ranks_per_device == 1) {
    CAPTURE(plain.device_bytes);
    CAPTURE(offloaded_bytes);
    REQUIRE(offloaded_bytes < plain.device_bytes);
    const std::size_t capacity = offloaded_bytes + (plain.device_bytes - offloaded_bytes) / 2;
    // The device's out-of-memory error, from the allocation that did not fit (a tensor, or a collective's staging).
    const std::string full = "bytes free of " + std::to_string(capacity);
    CHECK_THROWS_WITH_AS(train_offloaded(sim, offload_setup(q, std::nullopt), capacity),
                         doctest::Contains(full.c_str()), optimus::Error);
    for (OffloadUpdate update : {OffloadUpdate::device, OffloadUpdate::host}) {
      CAPTURE(update == OffloadUpdate::device ? "device" : "host");
      const OptimizerOffload how{.update = update, .chunk_elements = kChunk};
      check_same_training(train_offloaded(sim, offload_setup(q, how), capacity), plain);
    }
  }
  // Refusals.
  sim(SIZE_MAX, [&](Communicator& world, RankDevice&, Grid& grid) {
    Gpt2D<float> model(grid, offload_config());
    CHECK_THROWS_WITH_AS(AdamW<float>(grid, model.parameters(),
                                      {.config = AdamWConfig{},
                                       .offload = OptimizerOffload{.update = OffloadUpdate::device, .chunk_elements = 0}}),
                         doctest::Contains("chunk_elements must be positive, got 0"), optimus::Error);
    Grid host = Grid::create(world, grid.q());
    Gpt2D<float> on_host(host, offload_config());
    CHECK_THROWS_WITH_AS(AdamW<float>(host, on_host.parameters(),
                                      {.config = AdamWConfig{}, .offload = OptimizerOffload{}}),
                         doctest::Contains("matrices live on the host"), optimus::Error);
  });
}

}  // namespace optimus::test

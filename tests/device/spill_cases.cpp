// Model spilling on simulated devices (offload_cases.hpp): bitwise training, exact memory and copies, a capacity that
// only a spilled model fits.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "capture_binding.hpp"
#include "../layers/layer_cases.hpp"
#include "offload_cases.hpp"
#include "offload_run.hpp"
#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/layers/offload.hpp"

namespace optimus::test {
namespace {

constexpr int kSteps = 3;  // the first with fresh moments, then two in the steady state
constexpr std::int64_t kChunk = 3000;  // elements of an offloaded optimizer chunk

// Blocks dominate: a small vocabulary, wide blocks, a few short sequences.
GptConfig spill_config(std::int64_t layers, std::int64_t hidden) {
  return GptConfig{.vocab = 64, .max_seq = 4, .layers = layers, .hidden = hidden, .heads = 4, .ffn = 4 * hidden,
                   .dropout = 0.1, .seed = 91, .block = {}};
}

struct SpillCase {
  const char* name;
  Spill spill;
  Recompute recompute;
  std::int64_t micro_batches;
  std::optional<OffloadUpdate> update;  // optimizer offload too, this way
  ops::GemmMath math = ops::GemmMath::f32;
};

OffloadSetup setup_of(const SpillCase& c, int q, std::int64_t layers, std::int64_t hidden) {
  std::optional<OptimizerOffload> offload;
  if (c.update) offload = OptimizerOffload{.update = *c.update, .chunk_elements = kChunk};
  return OffloadSetup{.config = spill_config(layers, hidden), .batch = 2 * q, .micro_batches = c.micro_batches,
                      .recompute = c.recompute, .spill = c.spill, .offload = offload, .steps = kSteps,
                      .math = c.math};
}

// The shape of one micro-batch's block on one rank (recompute.hpp's formulas).
BlockActivations block_shape(const OffloadSetup& s, int q) {
  return BlockActivations::of(s.config, s.batch / s.micro_batches, s.config.max_seq, q, sizeof(float),
                              s.math == ops::GemmMath::bf16 ? 2 : static_cast<std::int64_t>(sizeof(float)));
}

ModelShards shards_of(const OffloadRun& run, const OffloadSetup& s) {
  return ModelShards{.blocks = s.config.layers, .block_parameters = run.block_parameters,
                     .other_parameters = run.local_parameters - s.config.layers * run.block_parameters,
                     .wte = run.wte, .head_gradient = run.wte, .word = sizeof(float),
                     .block_weights = run.block_weights,
                     .copy_word = s.math == ops::GemmMath::bf16 ? std::size_t{2} : 0};
}

// Peak bytes by kind and place against the formulas (offload.hpp, spill.hpp), on the reporting rank.
void check_memory(const OffloadRun& run, const OffloadSetup& s, int q) {
  const MemoryTracker& m = run.memory;
  const StateFootprint f = state_footprint(s.spill, s.offload, shards_of(run, s));
  CHECK(m.peak(MemoryKind::parameters, MemoryPlace::device) == f.device.parameters);
  CHECK(m.peak(MemoryKind::gradients, MemoryPlace::device) == f.device.gradients);
  CHECK(m.peak(MemoryKind::optimizer, MemoryPlace::device) == f.device.optimizer);
  CHECK(m.peak(MemoryKind::parameters, MemoryPlace::host) == f.host.parameters);
  CHECK(m.peak(MemoryKind::gradients, MemoryPlace::host) == f.host.gradients);
  CHECK(m.peak(MemoryKind::optimizer, MemoryPlace::host) == f.host.optimizer);
  // The devices' parameters are the unspilled model's less all but two blocks' (and, under bf16 GEMMs, wte's bf16 copy:
  // the spilled blocks keep none).
  const std::uint64_t l = static_cast<std::uint64_t>(s.config.layers);
  if (s.spill != Spill::none) {
    const std::uint64_t wte_copy = s.math == ops::GemmMath::bf16 ? 2 * static_cast<std::uint64_t>(run.wte) : 0;
    CHECK(f.device.parameters - wte_copy + (l - std::min<std::uint64_t>(l, 2)) * run.block_parameters * sizeof(float) ==
          static_cast<std::uint64_t>(run.local_parameters) * sizeof(float));
  }
  // Saved activations (f32: the formulas; bf16 adds transient f32 tensors, checked against the plain run's below).
  if (s.math != ops::GemmMath::f32) return;
  const BlockActivations shape = block_shape(s, q);
  const std::int64_t saved = block_saved_bytes(shape, s.recompute);
  const std::int64_t transient = s.recompute == Recompute::full ? block_saved_bytes(shape, Recompute::none) : 0;
  const std::int64_t tail = head_saved_bytes(shape, s.config.stored_vocab(q));
  const bool activations = s.spill == Spill::parameters_and_activations;
  CHECK(m.peak(MemoryKind::activations, MemoryPlace::device) ==
        static_cast<std::uint64_t>(spill_activation_peak(s.config.layers, saved, transient, tail, activations)));
  CHECK(m.peak(MemoryKind::activations, MemoryPlace::host) ==
        (activations ? (l - 1) * static_cast<std::uint64_t>(saved) : 0));
}

// The spill's and the optimizer's copies against their formulas; with `plain` (the same micro-batches and
// recomputation), the devices' counters against the plain run's.
void check_transfers(const OffloadRun& run, const OffloadRun* plain, const OffloadSetup& s, int q) {
  const bool activations = s.spill == Spill::parameters_and_activations;
  const std::int64_t saved = activations ? block_saved_bytes(block_shape(s, q), s.recompute) : 0;
  const TransferBytes step =
      spill_step_transfers(s.config.layers, run.block_parameters, sizeof(float), s.micro_batches, saved);
  CHECK(run.spilled.host_to_device == kSteps * step.host_to_device);
  CHECK(run.spilled.device_to_host == kSteps * step.device_to_host);
  TransferBytes optimizer;
  if (s.offload) optimizer = offload_step_transfers(s.offload->update, run.device_parameters, sizeof(float));
  CHECK(run.moved.host_to_device == kSteps * optimizer.host_to_device);
  CHECK(run.moved.device_to_host == kSteps * optimizer.device_to_host);
  // Together: the step's formula (offload.hpp).
  TransferBytes both = step;
  both += optimizer;
  CHECK(both == step_transfers(s.spill, s.offload, shards_of(run, s), s.micro_batches, saved));
  if (plain == nullptr) return;
  // The devices' counters, all ranks: the plain run's copies, less the 8-byte partial norms the device no longer sends
  // for the spilled blocks' gradients (the host sums them), plus the spill's and the optimizer's copies.
  const auto ranks = static_cast<std::uint64_t>(run.ranks);
  const std::uint64_t norms = kSteps * 8 * static_cast<std::uint64_t>(s.config.layers * run.block_tensors);
  CHECK(run.step_traffic.host_to_device ==
        plain->step_traffic.host_to_device + ranks * kSteps * (step.host_to_device + optimizer.host_to_device));
  CHECK(run.step_traffic.device_to_host + ranks * norms ==
        plain->step_traffic.device_to_host + ranks * kSteps * (step.device_to_host + optimizer.device_to_host));
  CHECK(run.step_traffic.device_to_device == plain->step_traffic.device_to_device);
}

}  // namespace

void check_model_spill(const SimLaunch& sim) {
  const int q = launch_q(sim);
  const std::int64_t layers = 4;
  const SpillCase plain_case{.name = "plain", .spill = Spill::none, .recompute = Recompute::none, .micro_batches = 2,
                             .update = std::nullopt};
  const OffloadSetup plain_setup = setup_of(plain_case, q, layers, 64);
  const OffloadRun plain = train_offloaded(sim, plain_setup, SIZE_MAX);
  check_memory(plain, plain_setup, q);  // the in-memory formulas, for reference
  const SpillCase cases[] = {
      {.name = "parameters", .spill = Spill::parameters, .recompute = Recompute::none, .micro_batches = 2,
       .update = std::nullopt},
      {.name = "parameters, optimizer (device way)", .spill = Spill::parameters, .recompute = Recompute::none,
       .micro_batches = 2, .update = OffloadUpdate::device},
      {.name = "parameters and activations, optimizer (host way)", .spill = Spill::parameters_and_activations,
       .recompute = Recompute::none, .micro_batches = 2, .update = OffloadUpdate::host},
      {.name = "parameters and activations, full recomputation", .spill = Spill::parameters_and_activations,
       .recompute = Recompute::full, .micro_batches = 2, .update = OffloadUpdate::device},
  };
  for (const SpillCase& c : cases) {
    CAPTURE(c.name);
    const OffloadSetup s = setup_of(c, q, layers, 64);
    const OffloadRun run = train_offloaded(sim, s, SIZE_MAX);
    CHECK(run.steady);  // no raw allocation after the first step
    check_same_training(run, plain);  // recomputation gives the plain run's bits too
    check_memory(run, s, q);
    const bool comparable = c.micro_batches == plain_setup.micro_batches && c.recompute == plain_setup.recompute;
    check_transfers(run, comparable ? &plain : nullptr, s, q);  // (full recomputation copies its saved inputs too)
    if (comparable && c.spill == Spill::parameters) {
      // The state on the device is constant through a step and the activations and workspace are the plain run's:
      // the device's peak total moves by exactly the state's change.
      const auto state = [&](const OffloadRun& r, const OffloadSetup& setup) {
        return state_footprint(setup.spill, setup.offload, shards_of(r, setup)).device.total();
      };
      CHECK(run.memory.peak_total(MemoryPlace::device) + state(plain, plain_setup) ==
            plain.memory.peak_total(MemoryPlace::device) + state(run, s));
    }
  }
  // Mixed precision: the contexts that go to host memory and back hold bf16 tensors.
  SpillCase bf16_plain = plain_case;
  bf16_plain.math = ops::GemmMath::bf16;
  const SpillCase bf16_spilled{.name = "parameters and activations, bf16 GEMMs", .spill = Spill::parameters_and_activations,
                               .recompute = Recompute::none, .micro_batches = 2, .update = OffloadUpdate::host,
                               .math = ops::GemmMath::bf16};
  const OffloadSetup bf16_plain_setup = setup_of(bf16_plain, q, layers, 64);
  const OffloadRun bf16_reference = train_offloaded(sim, bf16_plain_setup, SIZE_MAX);
  check_memory(bf16_reference, bf16_plain_setup, q);
  {
    CAPTURE(bf16_spilled.name);
    const OffloadSetup s = setup_of(bf16_spilled, q, layers, 64);
    const OffloadRun run = train_offloaded(sim, s, SIZE_MAX);
    CHECK(run.steady);
    check_same_training(run, bf16_reference);
    check_memory(run, s, q);
    check_transfers(run, &bf16_reference, s, q);
    // Under bf16 the head holds f32 tensors beside its saved bf16 ones (the MLP's GELU writes its bf16 output and input
    // from an f32 workspace: no f32 activations): the blocks' phase peaks at 2B, the head's at the plain run's peak less
    // the L - 1 offloaded blocks' contexts.
    const BlockActivations shape = block_shape(s, q);
    const std::uint64_t b = static_cast<std::uint64_t>(block_saved_bytes(shape, Recompute::none));
    const std::uint64_t l = static_cast<std::uint64_t>(layers);
    const std::uint64_t plain_peak = bf16_reference.memory.peak(MemoryKind::activations, MemoryPlace::device);
    REQUIRE(plain_peak > l * b);  // the plain run peaks in the head's phase
    CHECK(run.memory.peak(MemoryKind::activations, MemoryPlace::device) == std::max(2 * b, plain_peak - (l - 1) * b));
    CHECK(run.memory.peak(MemoryKind::activations, MemoryPlace::host) == (l - 1) * b);
  }
  // Refused on the host.
  sim(SIZE_MAX, [&](Communicator& world, RankDevice&, Grid& grid) {
    Grid host = Grid::create(world, grid.q());
    CHECK_THROWS_WITH_AS(Gpt2D<float>(host, spill_config(2, 64), pipeline::one_stage(1), Spill::parameters),
                         doctest::Contains("this grid's matrices live on the host"), optimus::Error);
  });
}

void check_spill_checkpoint(const SimLaunch& sim) {
  const int q = launch_q(sim);
  const GptConfig config = spill_config(4, 64);
  const std::int64_t batch = 2 * q;
  const std::vector<int> tokens = random_tokens(batch * config.max_seq, config.vocab, 15);
  const std::vector<int> targets = random_tokens(batch * config.max_seq, config.vocab, 16);
  // One path for every process (MPI: a device per process, one file system).
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("optimus_spill_checkpoint_q" + std::to_string(q));
  std::mutex mu;
  std::map<std::string, GlobalMatrix> uninterrupted, resumed;
  const auto steps = [&](Gpt2D<float>& model, AdamW<float>& adamw, std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t step = first; step <= last; ++step) {
      model.zero_grad();
      model.train_step(tokens, targets, batch, step);
      adamw.step();
    }
  };
  sim(SIZE_MAX, [&](Communicator& world, RankDevice&, Grid& grid) {
    if (world.rank() == 0) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
    }
    world.barrier();
    Gpt2D<float> model(grid, config, pipeline::one_stage(1), Spill::parameters_and_activations);
    AdamW<float> adamw(grid, model.parameters(),
                       {.config = AdamWConfig{},
                        .offload = OptimizerOffload{.update = OffloadUpdate::device, .chunk_elements = kChunk}});
    steps(model, adamw, 1, 2);
    checkpoint::save(dir / "step_2", model, &adamw, {.step = 2, .extra = {}});
    steps(model, adamw, 3, 4);
    auto gathered = model.gather(false);
    const std::lock_guard lock(mu);
    uninterrupted = std::move(gathered);
  });
  sim(SIZE_MAX, [&](Communicator&, RankDevice&, Grid& grid) {
    Gpt2D<float> model(grid, config);
    AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}});
    CHECK(checkpoint::load(dir / "step_2", model, &adamw, nullptr).step == 2);
    steps(model, adamw, 3, 4);
    auto gathered = model.gather(false);
    const std::lock_guard lock(mu);
    resumed = std::move(gathered);
  });
  REQUIRE(resumed.size() == uninterrupted.size());
  for (const auto& [name, m] : uninterrupted) {
    CAPTURE_BINDING(name);
    const bool same = (resumed.at(name).array() == m.array()).all();
    CHECK(same);
  }
  sim(SIZE_MAX, [&](Communicator& world, RankDevice&, Grid&) {
    if (world.rank() == 0) std::filesystem::remove_all(dir);
  });
}

void check_spill_capacity(const SimLaunch& sim) {
  const int q = launch_q(sim);
  // Sixteen blocks of h = 256: two blocks' parameters and gradients, the activations, the workspaces (each rank's GEMM
  // workspace is 1 MiB on the simulated device) and, ranks sharing a device, their exchanges' staging area hold less
  // than the parameters alone.
  const std::int64_t layers = 16, hidden = 256;
  const SpillCase plain_case{.name = "plain", .spill = Spill::none, .recompute = Recompute::none, .micro_batches = 1,
                             .update = std::nullopt};
  const SpillCase spilled_case{.name = "spilled", .spill = Spill::parameters_and_activations,
                               .recompute = Recompute::none, .micro_batches = 1, .update = OffloadUpdate::host};
  const SpillCase optimizer_case{.name = "optimizer offload", .spill = Spill::none, .recompute = Recompute::none,
                                 .micro_batches = 1, .update = OffloadUpdate::host};
  // Two steps: the first moves every block in and out with fresh moments, the second with the first's (the other cases,
  // on small models, take kSteps).
  const auto setup = [&](const SpillCase& c) {
    OffloadSetup s = setup_of(c, q, layers, hidden);
    s.steps = 2;
    return s;
  };
  const OffloadRun plain = train_offloaded(sim, setup(plain_case), SIZE_MAX);
  const OffloadRun spilled = train_offloaded(sim, setup(spilled_case), SIZE_MAX);
  check_same_training(spilled, plain);
  // The parameters alone on one device: every rank it serves holds its shard of them.
  const int ranks_per_device = sim(SIZE_MAX, [](Communicator&, RankDevice&, Grid&) {}).ranks_per_device;
  const std::uint64_t parameters =
      static_cast<std::uint64_t>(ranks_per_device) * static_cast<std::uint64_t>(plain.local_parameters) * sizeof(float);
  CAPTURE(parameters);
  CAPTURE(spilled.device_bytes);
  REQUIRE(spilled.device_bytes < parameters);
  const std::size_t capacity = spilled.device_bytes + (parameters - spilled.device_bytes) / 2;
  const std::string full = "bytes free of " + std::to_string(capacity);
  CHECK_THROWS_WITH_AS(train_offloaded(sim, setup(plain_case), capacity), doctest::Contains(full.c_str()),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(train_offloaded(sim, setup(optimizer_case), capacity), doctest::Contains(full.c_str()),
                       optimus::Error);
  check_same_training(train_offloaded(sim, setup(spilled_case), capacity), plain);
}

}  // namespace optimus::test

// optimus-bench offload: one run measured (offload_run.hpp).
#include "offload_run.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/model/gpt.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace optimus::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

sim::Runtime* simulated(DeviceRuntime& device) { return dynamic_cast<sim::Runtime*>(&device); }

int stream_id(const DeviceStream& stream) { return static_cast<const sim::Stream&>(stream).id(); }

// The model's local shards as the formulas take them (offload.hpp), and its parameter tensors per block, into `out`.
void count_shards(Gpt2D<float>& model, OffloadMeasured& out) {
  out.shards = ModelShards{.blocks = model.config().layers, .block_parameters = 0, .other_parameters = 0, .wte = 0,
                           .word = sizeof(float)};
  out.block_tensors = 0;
  for (const ParameterRef<float>& p : model.parameters()) {
    if (p.name.starts_with("h.0.")) {
      out.shards.block_parameters += p.value.numel();
      ++out.block_tensors;
    }
    if (!p.name.starts_with("h.")) out.shards.other_parameters += p.value.numel();
    if (p.name == "wte") out.shards.wte = out.shards.head_gradient = p.value.numel();  // GPT-2's tied head
  }
}

// The share of the time of the copies on the `copy` streams that spans on the `compute` streams overlapped: for each
// copy, its intersection with the union of the compute spans.
double overlap_of(const std::vector<sim::Runtime::Span>& spans, const std::vector<int>& compute,
                  const std::vector<int>& copy) {
  std::vector<std::pair<double, double>> busy;
  for (const sim::Runtime::Span& s : spans) {
    if (std::find(compute.begin(), compute.end(), s.stream) != compute.end()) busy.emplace_back(s.start_us, s.end_us);
  }
  std::sort(busy.begin(), busy.end());
  std::vector<std::pair<double, double>> merged;  // disjoint, in order
  for (const auto& b : busy) {
    if (!merged.empty() && b.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, b.second);
    } else {
      merged.push_back(b);
    }
  }
  double copied = 0, hidden = 0;
  for (const sim::Runtime::Span& s : spans) {
    const bool copies = std::find(copy.begin(), copy.end(), s.stream) != copy.end();
    if (!copies || std::string_view(s.name).rfind("copy", 0) != 0) continue;
    copied += s.end_us - s.start_us;
    for (const auto& [a, b] : merged) hidden += std::max(0.0, std::min(b, s.end_us) - std::max(a, s.start_us));
  }
  return copied > 0 ? hidden / copied : 0.0;
}

// What every rank of one run shares: the setup, the grid side and mode, and the device they all run on.
struct RunOn {
  const OffloadSetup& setup;
  int q;
  Offload mode;
  DeviceRuntime& device;
  sim::Runtime* sim;  // the device when simulated; null on a GPU
};

// AdamW's offload in the run's mode: its moments in host memory (updated where the setup says), or none.
std::optional<OptimizerOffload> optimizer_of(const RunOn& on) {
  return offloads_optimizer(on.mode)
             ? std::optional(OptimizerOffload{.update = on.setup.update, .chunk_elements = on.setup.chunk})
             : std::nullopt;
}

// One in-process rank of a run: its grid on the shared device, the GPT in the run's offload mode, AdamW, and the
// step's token ids and targets (batch x max_seq of each). Constructing it is collective over `world` (the timing
// communicator's split, then the grid's).
struct RankRun {
  RankRun(Communicator& world, const RunOn& on)
      : timing(world.split(0, world.rank())), rank(on.device, ops::GemmMath::f32), grid(rank.grid(world, on.q)),
        model(grid, on.setup.config, pipeline::one_stage(1), spill_of(on.mode)),
        spill(model.spills().empty() ? nullptr : model.spills().front()),
        adamw(grid, model.parameters(), {.config = AdamWConfig{}, .offload = optimizer_of(on), .norm_order = {}}) {
    for (std::int64_t t = 0; t < on.setup.batch * on.setup.config.max_seq; ++t) {
      tokens.push_back(static_cast<int>((7 * t + 3) % on.setup.config.vocab));
      targets.push_back(static_cast<int>((5 * t + 1) % on.setup.config.vocab));
    }
  }

  // The timing's collectives on host scalars, split off before the grid stages the world's on the device.
  const std::unique_ptr<Communicator> timing;
  RankDevice rank;
  Grid grid;
  Gpt2D<float> model;
  const BlockSpill<float>* spill;  // the model's blocks' spill; null when nothing is spilled
  AdamW<float> adamw;
  std::vector<int> tokens, targets;
};

// The bytes the rank's offload engines (the spill's and the optimizer's) have moved so far.
TransferBytes moved(const RankRun& r) {
  TransferBytes m = r.spill != nullptr ? r.spill->transfers() : TransferBytes{};
  if (r.adamw.offloaded() != nullptr) m += r.adamw.offloaded()->transfers();
  return m;
}

// Every rank between steps, its device idle (collective over the timing communicator).
void idle(RankRun& r) {
  r.rank.stream().synchronize();
  r.timing->barrier();
}

// One step's seconds, the slowest rank's: forward + backward (train) and AdamW's step (update); the forward and the
// backward apart in mode none (elsewhere forward 0 and backward the whole of train).
struct StepSeconds {
  double train, update, forward, backward;
};

// Collective over the timing communicator: step number `step`, forward + backward then AdamW's step; with `tracer`
// (rank 0 of the last step, on the simulated device) the device traces the forward + backward.
StepSeconds timed_step(RankRun& r, const RunOn& on, std::uint64_t step, bool tracer) {
  idle(r);
  if (tracer) on.sim->set_tracing(true);
  r.timing->barrier();
  const Clock::time_point t0 = Clock::now();
  r.model.zero_grad();
  Clock::time_point forwarded = t0;
  if (on.mode == Offload::none) {  // forward and backward timed apart
    Gpt2D<float>::Context saved;
    r.model.forward(r.tokens, r.targets, on.setup.batch, step, saved);
    r.rank.stream().synchronize();
    forwarded = Clock::now();
    r.model.backward(std::move(saved));
  } else {
    r.model.train_step(r.tokens, r.targets, on.setup.batch, step);
  }
  r.rank.stream().synchronize();
  const Clock::time_point t1 = Clock::now();
  r.timing->barrier();
  if (tracer) on.sim->set_tracing(false);
  const Clock::time_point t2 = Clock::now();
  r.adamw.step();
  r.rank.stream().synchronize();
  const Clock::time_point t3 = Clock::now();
  const auto slowest = [&](double v) { return r.timing->all_reduce(v, ReduceOp::max); };
  const double train = slowest(seconds(t0, t1)), update = slowest(seconds(t2, t3));
  const double forward = slowest(seconds(t0, forwarded)), backward = slowest(seconds(forwarded, t1));
  return {.train = train, .update = update, .forward = forward, .backward = backward};
}

// The timed steps' seconds (each the slowest rank's), and the counters as the timed steps began.
struct Timed {
  std::vector<double> trains, updates, forwards, backwards;
  TransferBytes moved_before;   // the rank's offload engines'
  sim::Traffic traffic_before;  // the simulated device's copies, all ranks
};

// Collective over the timing communicator: the warm-up steps, then the timed ones (the last traced on the simulated
// device); the peaks are reset and the counters read, every device idle, when the timed steps begin.
Timed run_steps(Communicator& world, RankRun& r, const RunOn& on) {
  const OffloadSetup& s = on.setup;
  Timed out;
  std::uint64_t step = 0;
  for (int it = 0; it < s.warmup + s.iters; ++it) {
    const bool timed = it >= s.warmup, last = it + 1 == s.warmup + s.iters;
    if (it == s.warmup) {
      idle(r);
      r.grid.memory().reset_peaks();
      out.moved_before = moved(r);
      if (on.sim != nullptr) out.traffic_before = on.sim->traffic();
      r.timing->barrier();
    }
    const StepSeconds t = timed_step(r, on, ++step, last && on.sim != nullptr && world.rank() == 0);
    if (!timed) continue;
    out.trains.push_back(t.train);
    out.updates.push_back(t.update);
    out.forwards.push_back(t.forward);
    out.backwards.push_back(t.backward);
  }
  return out;
}

// Rank 0's figures of the run into `out`: the timed steps' medians, the bytes moved and copied per step, its shards,
// its memory tracker and the bytes one block saves.
void record(OffloadMeasured& out, RankRun& r, const RunOn& on, const Timed& timed) {
  const OffloadSetup& s = on.setup;
  const auto iters = static_cast<std::uint64_t>(std::max(s.iters, 1));
  const TransferBytes now = moved(r);
  out.moved = {.host_to_device = (now.host_to_device - timed.moved_before.host_to_device) / iters,
               .device_to_host = (now.device_to_host - timed.moved_before.device_to_host) / iters};
  if (on.sim != nullptr) {
    const sim::Traffic t = on.sim->traffic();
    const sim::Traffic& before = timed.traffic_before;
    out.traffic = {.host_to_device = (t.host_to_device - before.host_to_device) / iters,
                   .device_to_host = (t.device_to_host - before.device_to_host) / iters,
                   .device_to_device = (t.device_to_device - before.device_to_device) / iters};
  }
  out.train_s = median(timed.trains);
  out.update_s = median(timed.updates);
  out.forward_s = median(timed.forwards);
  out.backward_s = median(timed.backwards);
  count_shards(r.model, out);
  out.memory = r.grid.memory();
  const BlockActivations one =
      BlockActivations::of(s.config, s.batch, s.config.max_seq, on.q, sizeof(float), sizeof(float));
  out.block_activations = block_saved_bytes(one, Recompute::none);
}

// The simulated device's streams of one run: their rows in the trace, and which compute and which copy the spill.
struct Streams {
  std::mutex mu;  // the ranks are threads
  std::map<int, std::string> names;
  std::vector<int> compute, spill_copies;
};

// Adds rank `rank`'s streams to `streams`: its compute stream, its spill's and its optimizer's copy streams.
void name_streams(Streams& streams, const RankRun& r, int rank) {
  const std::lock_guard lock(streams.mu);
  streams.compute.push_back(stream_id(r.rank.stream()));
  streams.names[stream_id(r.rank.stream())] = format("rank %d compute", rank);
  if (r.spill != nullptr) {
    const int up = stream_id(r.spill->copies().up()), down = stream_id(r.spill->copies().down());
    streams.names[up] = format("rank %d spill: host to device", rank);
    streams.names[down] = format("rank %d spill: device to host", rank);
    streams.spill_copies.push_back(up);
    streams.spill_copies.push_back(down);
  }
  if (r.adamw.offloaded() != nullptr) {
    streams.names[stream_id(r.adamw.offloaded()->copies().up())] = format("rank %d optimizer: host to device", rank);
    streams.names[stream_id(r.adamw.offloaded()->copies().down())] = format("rank %d optimizer: device to host", rank);
  }
}

}  // namespace

OffloadMeasured run_offload(const OffloadSetup& s, int q, Offload mode) {
  const std::unique_ptr<DeviceRuntime> device = open_device(s.choice, 0);
  sim::Runtime* sim_device = simulated(*device);
  OPTIMUS_CHECK(s.trace.empty() || sim_device != nullptr, "optimus-bench offload: --trace records the simulated "
                "device's streams: it needs --device sim");
  if (sim_device != nullptr) sim_device->set_tracing(false);
  const RunOn on{.setup = s, .q = q, .mode = mode, .device = *device, .sim = sim_device};
  OffloadMeasured out;
  Streams streams;
  run_in_process(q * q, [&](Communicator& world) {
    RankRun r(world, on);
    const Timed timed = run_steps(world, r, on);
    idle(r);
    if (world.rank() == 0) record(out, r, on, timed);
    if (sim_device != nullptr) name_streams(streams, r, world.rank());
    r.timing->barrier();
  });
  if (sim_device != nullptr) {
    out.device_peak = sim_device->peak_bytes_in_use();
    out.overlap = overlap_of(sim_device->trace(), streams.compute, streams.spill_copies);
    if (!s.trace.empty()) sim_device->write_chrome_trace(s.trace, streams.names);
  }
  return out;
}

}  // namespace optimus::bench

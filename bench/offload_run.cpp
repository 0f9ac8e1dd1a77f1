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

}  // namespace

OffloadMeasured run_offload(const OffloadSetup& s, int q, Offload mode) {
  const std::unique_ptr<DeviceRuntime> device = open_device(s.choice, 0);
  sim::Runtime* sim_device = simulated(*device);
  OPTIMUS_CHECK(s.trace.empty() || sim_device != nullptr, "optimus-bench offload: --trace records the simulated "
                "device's streams: it needs --device sim");
  if (sim_device != nullptr) sim_device->set_tracing(false);
  OffloadMeasured out;
  std::mutex mu;
  std::map<int, std::string> names;  // the traced streams' rows
  std::vector<int> compute, spill_copies;
  run_in_process(q * q, [&](Communicator& world) {
    // The timing's collectives on host scalars, split off before the grid stages the world's on the device.
    const std::unique_ptr<Communicator> timing = world.split(0, world.rank());
    RankDevice rank(*device, ops::GemmMath::f32);
    Grid grid = rank.grid(world, q);
    Gpt2D<float> model(grid, s.config, pipeline::one_stage(1), spill_of(mode));
    const BlockSpill<float>* spill = model.spills().empty() ? nullptr : model.spills().front();
    const std::optional<OptimizerOffload> optimizer =
        offloads_optimizer(mode) ? std::optional(OptimizerOffload{.update = s.update, .chunk_elements = s.chunk})
                                 : std::nullopt;
    AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}, .offload = optimizer, .norm_order = {}});
    std::vector<int> tokens, targets;
    for (std::int64_t t = 0; t < s.batch * s.config.max_seq; ++t) {
      tokens.push_back(static_cast<int>((7 * t + 3) % s.config.vocab));
      targets.push_back(static_cast<int>((5 * t + 1) % s.config.vocab));
    }
    const auto moved = [&] {
      TransferBytes m = spill != nullptr ? spill->transfers() : TransferBytes{};
      if (adamw.offloaded() != nullptr) m += adamw.offloaded()->transfers();
      return m;
    };
    const auto idle = [&] {  // every rank between steps, its device idle
      rank.stream().synchronize();
      timing->barrier();
    };
    std::vector<double> trains, updates, forwards, backwards;
    std::uint64_t step = 0;
    TransferBytes moved_before;
    sim::Traffic traffic_before;
    for (int it = 0; it < s.warmup + s.iters; ++it) {
      const bool timed = it >= s.warmup, last = it + 1 == s.warmup + s.iters;
      if (it == s.warmup) {
        idle();
        grid.memory().reset_peaks();
        moved_before = moved();
        if (sim_device != nullptr) traffic_before = sim_device->traffic();
        timing->barrier();
      }
      const bool tracing = last && sim_device != nullptr;
      idle();
      if (tracing && world.rank() == 0) sim_device->set_tracing(true);
      timing->barrier();
      const Clock::time_point t0 = Clock::now();
      model.zero_grad();
      Clock::time_point forwarded = t0;
      if (mode == Offload::none) {  // forward and backward timed apart
        Gpt2D<float>::Context saved;
        model.forward(tokens, targets, s.batch, ++step, saved);
        rank.stream().synchronize();
        forwarded = Clock::now();
        model.backward(std::move(saved));
      } else {
        model.train_step(tokens, targets, s.batch, ++step);
      }
      rank.stream().synchronize();
      const Clock::time_point t1 = Clock::now();
      timing->barrier();
      if (tracing && world.rank() == 0) sim_device->set_tracing(false);
      const Clock::time_point t2 = Clock::now();
      adamw.step();
      rank.stream().synchronize();
      const Clock::time_point t3 = Clock::now();
      const auto slowest = [&](double v) { return timing->all_reduce(v, ReduceOp::max); };
      const double train = slowest(seconds(t0, t1)), update = slowest(seconds(t2, t3));
      const double forward = slowest(seconds(t0, forwarded)), backward = slowest(seconds(forwarded, t1));
      if (!timed) continue;
      trains.push_back(train);
      updates.push_back(update);
      forwards.push_back(forward);
      backwards.push_back(backward);
    }
    idle();
    if (world.rank() == 0) {
      const auto iters = static_cast<std::uint64_t>(std::max(s.iters, 1));
      const TransferBytes now = moved();
      out.moved = {.host_to_device = (now.host_to_device - moved_before.host_to_device) / iters,
                   .device_to_host = (now.device_to_host - moved_before.device_to_host) / iters};
      if (sim_device != nullptr) {
        const sim::Traffic t = sim_device->traffic();
        out.traffic = {.host_to_device = (t.host_to_device - traffic_before.host_to_device) / iters,
                       .device_to_host = (t.device_to_host - traffic_before.device_to_host) / iters,
                       .device_to_device = (t.device_to_device - traffic_before.device_to_device) / iters};
      }
      out.train_s = median(trains);
      out.update_s = median(updates);
      out.forward_s = median(forwards);
      out.backward_s = median(backwards);
      count_shards(model, out);
      out.memory = grid.memory();
      const BlockActivations one =
          BlockActivations::of(s.config, s.batch, s.config.max_seq, q, sizeof(float), sizeof(float));
      out.block_activations = block_saved_bytes(one, Recompute::none);
    }
    if (sim_device != nullptr) {
      const std::lock_guard lock(mu);
      const int r = world.rank();
      compute.push_back(stream_id(rank.stream()));
      names[stream_id(rank.stream())] = format("rank %d compute", r);
      if (spill != nullptr) {
        const int up = stream_id(spill->copies().up()), down = stream_id(spill->copies().down());
        names[up] = format("rank %d spill: host to device", r);
        names[down] = format("rank %d spill: device to host", r);
        spill_copies.push_back(up);
        spill_copies.push_back(down);
      }
      if (adamw.offloaded() != nullptr) {
        names[stream_id(adamw.offloaded()->copies().up())] = format("rank %d optimizer: host to device", r);
        names[stream_id(adamw.offloaded()->copies().down())] = format("rank %d optimizer: device to host", r);
      }
    }
    timing->barrier();
  });
  if (sim_device != nullptr) {
    out.device_peak = sim_device->peak_bytes_in_use();
    out.overlap = overlap_of(sim_device->trace(), compute, spill_copies);
    if (!s.trace.empty()) sim_device->write_chrome_trace(s.trace, names);
  }
  return out;
}

}  // namespace optimus::bench

// optimus-bench offload: AdamW with its moments on the device (none), and offloaded to host memory with the update on
// the device (AxoNN's way) or on the host (layers/optimizer_offload.hpp), for a GPT on grids that run inside this
// process — q = 1 and in-process q = 2 — on the simulated device (--device sim, whose copies --device-bandwidth
// throttles) or on one GPU (--device cuda).
//
//   optimus-bench offload [--device sim|cuda] [--device-bandwidth GB/s] [--device-memory SIZE] [--q 1,2] [--b B]
//                         [--s S] [--h H] [--heads A] [--ffn F] [--layers L] [--vocab V] [--chunk N]
//                         [--warmup W] [--iters I] [--largest on|off] [--max-layers L] [--trace PREFIX] [--json FILE]
//
// A row per q and mode: the training step (forward + backward) and the optimizer step, each the median over --iters
// of the slowest rank; the device's bytes per parameter for parameters, gradients and optimizer state (the peak per
// rank over the timed steps, from the memory tracker) beside the formula and AxoNN's figures; the bytes the update
// moved per step and rank beside the formula, and the device's own copy counters against the `none` row (simulated
// device); the time those bytes take at the copy bandwidth and how much of it the update hid (copies of chunk c+1
// overlap the update of chunk c). With --device-memory (simulated device) and --largest on: the most transformer
// blocks of this shape that train in that capacity in each mode, found by training one step at each size, beside the
// count predicted from the peak device bytes at 1 and 2 blocks (a line through them). --trace PREFIX: the last timed
// optimizer step of each offloaded mode at the first q as a Chrome trace, PREFIX-device.json and PREFIX-host.json: a
// row per stream of the simulated device, the copies on their own rows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "block_model.hpp"
#include "bench_options.hpp"
#include "commands.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/device/device_choice.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/layers/gpt.hpp"
#include "optimus/sim/runtime.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

enum class Mode { none, device, host };

const char* mode_name(Mode m) {
  return m == Mode::none ? "none" : m == Mode::device ? "optimizer/device" : "optimizer/host";
}

struct Setup {
  DeviceChoice choice;
  GptConfig config;
  std::int64_t batch = 0;
  std::int64_t chunk = 0;  // elements per offloaded chunk
  int warmup = 0, iters = 0;
  std::string trace;  // where the last timed optimizer step's device work goes (simulated device; empty: nowhere)
};

// What one rank of a run measured (the times are the slowest rank's, the same on every rank).
struct Measured {
  double train_s = 0, update_s = 0;
  std::int64_t parameters = 0, wte = 0, largest = 0;  // local elements
  std::uint64_t state_device = 0;  // peak device bytes of parameters + gradients + optimizer state
  std::uint64_t optimizer_device = 0, optimizer_host = 0;
  TransferBytes moved;       // by the offloaded update per step (this rank)
  sim::Traffic traffic;      // the device's copies per step, all ranks (simulated device; zero elsewhere)
  std::uint64_t device_peak = 0;  // the most device memory allocated at once (simulated device)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

sim::Traffic traffic_of(DeviceRuntime& device) {
  auto* s = dynamic_cast<sim::Runtime*>(&device);
  return s != nullptr ? s->traffic() : sim::Traffic{};
}

// Trains `s.warmup + s.iters` steps of `s.config` on a q x q grid sharing one fresh device of `s.choice`.
Measured run(const Setup& s, int q, Mode mode) {
  const std::unique_ptr<DeviceRuntime> device = open_device(s.choice, 0);
  std::vector<Measured> ranks(static_cast<std::size_t>(q * q));
  std::mutex names_mu;
  std::map<int, std::string> stream_names;  // the traced streams' rows
  run_in_process(q * q, [&](Communicator& world) {
    // The timing's collectives on host scalars, split off before the grid stages the world's on the device.
    const std::unique_ptr<Communicator> timing = world.split(0, world.rank());
    RankDevice rank(*device, ops::GemmMath::f32);
    Grid grid = rank.grid(world, q);
    Gpt2D<float> model(grid, s.config);
    const AdamWConfig adam{};
    std::unique_ptr<AdamW<float>> adamw =
        mode == Mode::none
            ? std::make_unique<AdamW<float>>(grid, model.parameters(), adam)
            : std::make_unique<AdamW<float>>(
                  grid, model.parameters(), adam,
                  OptimizerOffload{.update = mode == Mode::device ? OffloadUpdate::device : OffloadUpdate::host,
                                   .chunk_elements = s.chunk});
    const std::int64_t tokens_per_batch = s.batch * s.config.max_seq;
    std::vector<int> tokens, targets;
    for (std::int64_t t = 0; t < tokens_per_batch; ++t) {
      tokens.push_back(static_cast<int>((7 * t + 3) % s.config.vocab));
      targets.push_back(static_cast<int>((5 * t + 1) % s.config.vocab));
    }
    std::uint64_t step = 0;
    const auto train = [&] {
      model.zero_grad();
      model.train_step(tokens, targets, s.batch, ++step, 1);
      rank.stream().synchronize();
    };
    const auto update = [&] {
      adamw->step();
      rank.stream().synchronize();
    };
    for (int w = 0; w < s.warmup; ++w) {
      train();
      update();
    }
    grid.memory().reset_peaks();
    timing->barrier();
    const sim::Traffic before = traffic_of(*device);
    const TransferBytes moved_before = adamw->offloaded() ? adamw->offloaded()->transfers() : TransferBytes{};
    timing->barrier();
    Measured m;
    std::vector<double> trains, updates;
    auto* traced = s.trace.empty() ? nullptr : dynamic_cast<sim::Runtime*>(device.get());
    std::map<int, std::string>& names = stream_names;
    for (int it = 0; it < s.iters; ++it) {
      const bool tracing = traced != nullptr && it + 1 == s.iters;
      timing->barrier();
      const auto t0 = std::chrono::steady_clock::now();
      train();
      timing->barrier();
      if (tracing && world.rank() == 0) traced->set_tracing(true);
      timing->barrier();
      const auto t1 = std::chrono::steady_clock::now();
      update();
      const auto t2 = std::chrono::steady_clock::now();
      if (tracing) {
        {
          const std::lock_guard lock(names_mu);
          names[static_cast<sim::Stream&>(rank.stream()).id()] = format("rank %d compute", world.rank());
        }
        timing->barrier();
        if (world.rank() == 0) traced->set_tracing(false);
      }
      trains.push_back(timing->all_reduce(std::chrono::duration<double>(t1 - t0).count(), ReduceOp::max));
      updates.push_back(timing->all_reduce(std::chrono::duration<double>(t2 - t1).count(), ReduceOp::max));
    }
    timing->barrier();
    const sim::Traffic after = traffic_of(*device);
    timing->barrier();
    m.train_s = median(trains);
    m.update_s = median(updates);
    for (const ParameterRef<float>& p : model.parameters()) {
      m.parameters += p.value.numel();
      m.largest = std::max(m.largest, p.value.numel());
      if (p.name == "wte") m.wte = p.value.numel();
    }
    const MemoryTracker& t = grid.memory();
    m.optimizer_device = t.peak(MemoryKind::optimizer, MemoryPlace::device);
    m.optimizer_host = t.peak(MemoryKind::optimizer, MemoryPlace::host);
    m.state_device = t.peak(MemoryKind::parameters, MemoryPlace::device) +
                     t.peak(MemoryKind::gradients, MemoryPlace::device) + m.optimizer_device;
    const auto iters = static_cast<std::uint64_t>(std::max(s.iters, 1));
    if (adamw->offloaded()) {
      const TransferBytes now = adamw->offloaded()->transfers();
      m.moved = {.host_to_device = (now.host_to_device - moved_before.host_to_device) / iters,
                 .device_to_host = (now.device_to_host - moved_before.device_to_host) / iters};
    }
    m.traffic = {.host_to_device = (after.host_to_device - before.host_to_device) / iters,
                 .device_to_host = (after.device_to_host - before.device_to_host) / iters,
                 .device_to_device = (after.device_to_device - before.device_to_device) / iters};
    ranks[static_cast<std::size_t>(world.rank())] = m;
  });
  Measured m = ranks[0];
  if (auto* sim_device = dynamic_cast<sim::Runtime*>(device.get())) {
    m.device_peak = sim_device->peak_bytes_in_use();
    if (!s.trace.empty() && s.iters > 0) sim_device->write_chrome_trace(s.trace, stream_names);
  }
  return m;
}

// The device bytes of parameters, gradients and optimizer state per rank that the formulas give: P words of
// parameters, P + wte words of gradients (the LM head's part of wte's gradient is summed apart), and 2P words of
// moments (none), six buffers of min(chunk, P) words (device way) or nothing (host way).
std::uint64_t state_formula(const Measured& m, Mode mode, std::int64_t chunk) {
  const std::uint64_t e = sizeof(float), p = static_cast<std::uint64_t>(m.parameters) * e;
  const std::uint64_t optimizer = mode == Mode::none     ? 2 * p
                                  : mode == Mode::device ? 6 * static_cast<std::uint64_t>(std::min(chunk, m.parameters)) * e
                                                         : 0;
  return p + p + static_cast<std::uint64_t>(m.wte) * e + optimizer;
}

// Whether `layers` blocks train one step within the simulated device's capacity.
bool fits(Setup s, int q, Mode mode, std::int64_t layers) {
  s.config.layers = layers;
  s.warmup = 1;
  s.iters = 0;
  try {
    run(s, q, mode);
    return true;
  } catch (const Error& e) {
    if (std::string(e.what()).find("bytes free of") == std::string::npos) throw;  // not the device's out of memory
    return false;
  }
}

// The most blocks (up to `most`) that train within the capacity: doubling, then bisection; 0 if one does not fit.
std::int64_t largest_fitting(const Setup& s, int q, Mode mode, std::int64_t most) {
  std::int64_t good = 0, bad = most + 1;
  for (std::int64_t l = 1; l <= most; l *= 2) {
    if (!fits(s, q, mode, l)) {
      bad = l;
      break;
    }
    good = l;
  }
  if (bad == most + 1 && good < most && fits(s, q, mode, most)) return most;
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    (fits(s, q, mode, mid) ? good : bad) = mid;
  }
  return good;
}

}  // namespace

int run_offload_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("offload"));
  world.set_timeout(o.timeout());
  OPTIMUS_CHECK(world.size() == 1, "offload runs its grids inside one process (in-process ranks); launch 1 process, "
                "not ", world.size());
  const BlockShape shape = block_shape_option(o, 4);
  GptConfig config = block_config(shape, o.integer("layers", 2));
  config.vocab = o.integer("vocab", 8192);
  Setup s{.choice = choose_device(o),
          .config = config,
          .batch = shape.batch,
          .chunk = o.integer("chunk", std::int64_t{1} << 18),
          .warmup = static_cast<int>(o.integer("warmup", 1)),
          .iters = static_cast<int>(o.integer("iters", 3)),
          .trace = ""};
  const std::string trace = o.text("trace", "");
  OPTIMUS_CHECK(trace.empty() || s.choice.kind == Device::sim, "--trace records the simulated device's streams: it "
                "needs --device sim");
  OPTIMUS_CHECK(s.choice.kind != Device::cpu, "offload moves AdamW's state between a device and the host: it needs "
                "--device sim or cuda");
  const bool limited = s.choice.kind == Device::sim && o.has("device-memory");
  OPTIMUS_CHECK(o.text("largest", "off") == "off" || limited, "--largest on searches within the simulated device's "
                "capacity: it needs --device sim --device-memory SIZE");
  const double bandwidth = s.choice.sim_bandwidth;  // bytes/s; infinite: unthrottled

  Report report({{"q", 2}, {"mode", 16}, {"train_ms", 9}, {"update_ms", 9}, {"B/param", 7}, {"formula", 7},
                 {"AxoNN", 5}, {"up_KiB", 9}, {"down_KiB", 9}, {"formula", 7}, {"counters", 8}, {"copy_ms", 8},
                 {"hidden%", 7}, {"dev_MiB", 8}, {"host_MiB", 8}});
  report.header(format("optimus-bench offload: a GPT (%lld blocks, h %lld, vocabulary %lld, batch %lld x %lld) with "
                       "AdamW on %s, chunks of %lld elements, copies at %s",
                       (long long)s.config.layers, (long long)s.config.hidden, (long long)s.config.vocab,
                       (long long)s.batch, (long long)s.config.max_seq, std::string(name_of(s.choice.kind)).c_str(),
                       (long long)s.chunk,
                       std::isfinite(bandwidth) ? format("%.3g GB/s per stream", bandwidth / 1e9).c_str()
                                                : "memcpy speed (unthrottled)"));
  report.header("train_ms: forward + backward, update_ms: AdamW's step (median of the slowest rank); B/param: peak "
                "device bytes of parameters, gradients and optimizer state per local parameter (formula: P + (P + "
                "wte) + 2P words without offload, 4 min(chunk, largest) words of buffers with the device way, none "
                "with the host way); AxoNN: the device bytes per parameter AxoNN reports for mixed precision (20 "
                "without offload, 4 with); up/down_KiB: bytes the update moved per step and rank (formula: 2P up and "
                "2P down words, device way; P up and 2P down, host way); counters: the simulated device's copies "
                "against the none row, whole grid (= when exactly the formula times q^2); copy_ms: up + down at the "
                "copy bandwidth; hidden%: the share of copy_ms the update did not add to the none row's update_ms; "
                "dev_MiB: the device's peak bytes per rank (tracker); host_MiB: the optimizer's host bytes per rank");
  bool ok = true;
  for (std::int64_t q64 : o.integers("q", "1,2")) {
    const int q = static_cast<int>(q64);
    Measured plain;
    for (Mode mode : {Mode::none, Mode::device, Mode::host}) {
      Setup traced = s;
      if (!trace.empty() && mode != Mode::none && q64 == o.integers("q", "1,2").front()) {
        traced.trace = trace + (mode == Mode::device ? "-device.json" : "-host.json");
      }
      const Measured m = run(traced, q, mode);
      if (mode == Mode::none) plain = m;
      const double params = static_cast<double>(m.parameters);
      const bool state_ok = m.state_device == state_formula(m, mode, s.chunk);
      const TransferBytes expected =
          mode == Mode::none ? TransferBytes{}
                             : offload_step_transfers(mode == Mode::device ? OffloadUpdate::device : OffloadUpdate::host,
                                                      m.parameters, sizeof(float));
      const bool moved_ok = m.moved.host_to_device == expected.host_to_device &&
                            m.moved.device_to_host == expected.device_to_host;
      const auto ranks = static_cast<std::uint64_t>(q * q);
      const bool sim = s.choice.kind == Device::sim;
      const bool counters_ok =
          m.traffic.host_to_device - plain.traffic.host_to_device == ranks * expected.host_to_device &&
          m.traffic.device_to_host - plain.traffic.device_to_host == ranks * expected.device_to_host;
      ok = ok && state_ok && moved_ok && (!sim || counters_ok);
      const double copy_s = std::isfinite(bandwidth)
                                ? static_cast<double>(m.moved.host_to_device + m.moved.device_to_host) / bandwidth
                                : 0.0;
      const double added = m.update_s - plain.update_s;
      const std::string hidden =
          mode == Mode::none || copy_s <= 0 ? "-" : format("%.0f", 100.0 * std::clamp(1.0 - added / copy_s, 0.0, 1.0));
      report.row({format("%d", q), mode_name(mode), format("%.2f", m.train_s * 1e3), format("%.2f", m.update_s * 1e3),
                  format("%.2f", static_cast<double>(m.state_device) / params), state_ok ? "=" : "MISMATCH",
                  mode == Mode::none ? "20" : "4", format("%.1f", static_cast<double>(m.moved.host_to_device) / 1024),
                  format("%.1f", static_cast<double>(m.moved.device_to_host) / 1024), moved_ok ? "=" : "MISMATCH",
                  !sim ? "n/a" : counters_ok ? "=" : "MISMATCH", format("%.2f", copy_s * 1e3), hidden,
                  format("%.2f", static_cast<double>(m.state_device) / (1 << 20)),
                  format("%.2f", static_cast<double>(m.optimizer_host) / (1 << 20))});
    }
  }
  if (o.text("largest", "off") == "on") {
    const std::int64_t most = o.integer("max-layers", 64);
    const int q = static_cast<int>(o.integers("q", "1,2").front());
    Setup unlimited = s;
    unlimited.choice.sim_capacity = std::numeric_limits<std::uint64_t>::max();
    unlimited.warmup = 1;
    unlimited.iters = 0;
    for (Mode mode : {Mode::none, Mode::device, Mode::host}) {
      unlimited.config.layers = 1;
      const double one = static_cast<double>(run(unlimited, q, mode).device_peak);
      unlimited.config.layers = 2;
      const double two = static_cast<double>(run(unlimited, q, mode).device_peak);
      const double predicted = std::floor((static_cast<double>(s.choice.sim_capacity) - (one - (two - one))) /
                                          (two - one));
      const std::int64_t found = largest_fitting(s, q, mode, most);
      report.footer(format("largest GPT of this shape in %.1f MiB at q = %d, %s: %lld blocks (predicted %.0f from the "
                           "device's peak at 1 and 2 blocks: %.2f and %.2f MiB)",
                           static_cast<double>(s.choice.sim_capacity) / (1 << 20), q, mode_name(mode),
                           (long long)found, predicted, one / (1 << 20), two / (1 << 20)));
    }
  }
  report.footer(ok ? "every row's device bytes and transfers equal the formulas" : "FAILED: a row differs from its formula");
  report.print_header(stdout);
  for (std::size_t r = 0; r < report.rows(); ++r) report.print_row(stdout, r);
  report.print_footer(stdout);
  if (o.has("json")) report.write_json(o.text("json", ""), "offload");
  return ok ? 0 : 1;
}

}  // namespace optimus::bench

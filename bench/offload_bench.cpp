// optimus-bench offload: a GPT trained in each offload mode (layers/offload.hpp) — none, optimizer (AdamW's moments in
// host memory), spill (also the blocks' parameters and gradients, through two device slots), spill+activations (also
// the blocks' saved activations) — on grids of in-process ranks sharing one device: the simulated device (whose
// host<->device copies --device-bandwidth throttles, so that their overlap with compute is measured) or one GPU.
//
//   optimus-bench offload [--device sim|cuda] [--device-bandwidth GB/s] [--device-memory SIZE] [--q 1,2] [--b B]
//                         [--s S] [--h H] [--heads A] [--ffn F] [--layers L] [--vocab V]
//                         [--offload none,optimizer,spill,spill+activations] [--offload-update device|host]
//                         [--chunk N] [--sweep GB/s,...] [--warmup W] [--iters I] [--largest on|off]
//                         [--max-layers L] [--trace PREFIX] [--json FILE]
//
// A row per q and mode (bench/README.md defines each column): the forward + backward and the optimizer step (medians
// of the slowest rank) and what they add to the row without offload; the device's bytes per parameter of parameters,
// gradients and optimizer state (rank 0's tracker peaks) beside the formula (offload.hpp) and AxoNN's figures; the
// peak device and host bytes per rank; the bytes copied per step and rank beside the formula, and the device's own
// counters against the row without offload; the copies' time at the bandwidth and the share of it the compute streams
// overlapped (the simulated device's timeline of the last step). --sweep adds the spilling rows at other bandwidths
// (the first q), and the footer gives the bandwidth below which spilling no longer hides — measured (the first one,
// from the top, that adds more than 10% to the forward + backward) and predicted from the blocks' measured compute
// times. --largest on (with --device-memory): the most blocks of this shape that train in that capacity per mode,
// predicted from the device's peak at 2 and 3 blocks and found by training. Exit status 1 if a row differs from a
// formula.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "block_model.hpp"
#include "optimus/programs/arch_options.hpp"
#include "commands.hpp"
#include "offload_run.hpp"
#include "optimus/core/error.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

constexpr double kHides = 0.10;  // spilling "hides" while it adds at most this share to the forward + backward

std::optional<OptimizerOffload> optimizer_of(const OffloadSetup& s, Offload mode) {
  if (!offloads_optimizer(mode)) return std::nullopt;
  return OptimizerOffload{.update = s.update, .chunk_elements = s.chunk};
}

std::int64_t local_parameters(const ModelShards& m) { return m.other_parameters + m.blocks * m.block_parameters; }

std::string percent(double added, double base) {
  return base > 0 ? format("%+.1f", 100.0 * added / base) : std::string("-");
}

std::string bandwidth_text(double bytes_per_s) {
  return std::isfinite(bytes_per_s) ? format("%.3g", bytes_per_s / 1e9) : std::string("inf");
}

struct Checked {
  StateFootprint footprint;  // the formula's
  bool state, moved, counters;
};

// The row's figures against the formulas: device state bytes, the engines' copies, and the device's counters over
// the row without offload (a spilled block's partial norms, 8 bytes per tensor, are summed on the host instead).
Checked check_row(const OffloadSetup& s, Offload mode, const OffloadMeasured& m, const OffloadMeasured& plain,
                  int ranks, bool sim) {
  const StateFootprint f = state_footprint(spill_of(mode), optimizer_of(s, mode), m.shards);
  const MemoryTracker& t = m.memory;
  const bool state = t.peak(MemoryKind::parameters, MemoryPlace::device) == f.device.parameters &&
                     t.peak(MemoryKind::gradients, MemoryPlace::device) == f.device.gradients &&
                     t.peak(MemoryKind::optimizer, MemoryPlace::device) == f.device.optimizer &&
                     t.peak(MemoryKind::parameters, MemoryPlace::host) == f.host.parameters &&
                     t.peak(MemoryKind::gradients, MemoryPlace::host) == f.host.gradients &&
                     t.peak(MemoryKind::optimizer, MemoryPlace::host) == f.host.optimizer;
  const TransferBytes expected = step_transfers(spill_of(mode), optimizer_of(s, mode), m.shards, 1, m.block_activations);
  const bool moved = m.moved == expected;
  const auto r = static_cast<std::uint64_t>(ranks);
  const std::uint64_t norms =
      spill_of(mode) != Spill::none ? 8 * static_cast<std::uint64_t>(m.shards.blocks * m.block_tensors) : 0;
  const bool counters = !sim || (m.traffic.host_to_device == plain.traffic.host_to_device + r * expected.host_to_device &&
                                 m.traffic.device_to_host + r * norms ==
                                     plain.traffic.device_to_host + r * expected.device_to_host &&
                                 m.traffic.device_to_device == plain.traffic.device_to_device);
  return {.footprint = f, .state = state, .moved = moved, .counters = counters};
}

void add_row(Report& report, const OffloadSetup& s, int q, Offload mode, const OffloadMeasured& m,
             const OffloadMeasured& plain, const Checked& c, bool sim) {
  const double p = static_cast<double>(local_parameters(m.shards));
  const StateFootprint& f = c.footprint;
  const double state = static_cast<double>(m.memory.peak(MemoryKind::parameters, MemoryPlace::device) +
                                           m.memory.peak(MemoryKind::gradients, MemoryPlace::device) +
                                           m.memory.peak(MemoryKind::optimizer, MemoryPlace::device));
  const double bandwidth = s.choice.sim_bandwidth;
  const double copy_s = std::isfinite(bandwidth) ? static_cast<double>(std::max(m.moved.host_to_device,
                                                                                m.moved.device_to_host)) /
                                                       bandwidth
                                                 : 0.0;
  const double step = m.train_s + m.update_s, plain_step = plain.train_s + plain.update_s;
  const char* axonn = mode == Offload::none ? "20" : mode == Offload::optimizer ? "4" : "-";
  const auto mib = [](std::uint64_t bytes) { return format("%.2f", static_cast<double>(bytes) / (1 << 20)); };
  report.row({format("%d", q), name_of(mode), bandwidth_text(bandwidth), format("%.1f", m.train_s * 1e3),
              format("%.1f", m.update_s * 1e3), format("%.1f", step * 1e3),
              percent(m.train_s - plain.train_s, plain.train_s), percent(step - plain_step, plain_step),
              format("%.2f", state / p), c.state ? format("%.2f", static_cast<double>(f.device.total()) / p) : "MISMATCH",
              axonn, mib(m.memory.peak_total(MemoryPlace::device)), mib(m.memory.peak_total(MemoryPlace::host)),
              mib(m.moved.host_to_device), mib(m.moved.device_to_host), c.moved ? "=" : "MISMATCH",
              !sim ? "n/a" : c.counters ? "=" : "MISMATCH", format("%.1f", copy_s * 1e3),
              spill_of(mode) == Spill::none || !sim ? std::string("-") : format("%.0f", 100.0 * m.overlap)});
}

// Whether `layers` blocks train a step within the simulated device's capacity in `mode`.
bool fits(OffloadSetup s, int q, Offload mode, std::int64_t layers) {
  s.config.layers = layers;
  s.warmup = 1;
  s.iters = 0;
  s.trace.clear();
  try {
    run_offload(s, q, mode);
    return true;
  } catch (const Error& e) {
    if (std::string(e.what()).find("out of memory") == std::string::npos) throw;
    return false;
  }
}

// The most blocks (at most `most`) that train within the capacity, searched around `guess`; 0 if one does not fit.
std::int64_t largest_fitting(const OffloadSetup& s, int q, Offload mode, std::int64_t guess, std::int64_t most) {
  std::int64_t good = 0, bad = most + 1;
  guess = std::clamp<std::int64_t>(guess, 1, most);
  if (fits(s, q, mode, guess)) {
    good = guess;
    if (guess == most || !fits(s, q, mode, guess + 1)) return guess;
    good = guess + 1;
  } else {
    bad = guess;
  }
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    (fits(s, q, mode, mid) ? good : bad) = mid;
  }
  return good;
}

void largest_footers(Report& report, const OffloadSetup& s, int q, const std::vector<Offload>& modes,
                     std::int64_t most) {
  OffloadSetup unlimited = s;
  unlimited.choice.sim_capacity = std::numeric_limits<std::uint64_t>::max();
  unlimited.warmup = 1;
  unlimited.iters = 0;
  unlimited.trace.clear();
  const double capacity = static_cast<double>(s.choice.sim_capacity);
  for (Offload mode : modes) {  // from 2 blocks on, a block adds the same to every mode (two slots are full)
    unlimited.config.layers = 2;
    const double two = static_cast<double>(run_offload(unlimited, q, mode).device_peak);
    unlimited.config.layers = 3;
    const double three = static_cast<double>(run_offload(unlimited, q, mode).device_peak);
    const double per_block = three - two;
    const std::int64_t predicted =
        per_block > 0 ? static_cast<std::int64_t>(std::floor((capacity - two) / per_block)) + 2 : most;
    const std::int64_t found = largest_fitting(s, q, mode, predicted, most);
    report.footer(format("largest GPT of this shape in %.1f MiB at q = %d, %s: %s%lld blocks (predicted %s from the "
                         "device's peak at 2 and 3 blocks: %.2f and %.2f MiB)",
                         capacity / (1 << 20), q, name_of(mode), found == most ? ">= " : "", (long long)found,
                         per_block > 0 ? format("%lld", (long long)predicted).c_str() : "unbounded", two / (1 << 20),
                         three / (1 << 20)));
  }
}

// One bandwidth of a sweep and what spilling added to the forward + backward there (a share of the plain run's).
struct Hiding {
  double bandwidth;
  double added;
};

// Per spilling mode: the bandwidth below which its copies stop hiding behind compute, measured (the first bandwidth of
// the sweep, from the top, that adds more than kHides) and predicted from one block's forward and backward times
// (the plain run at L blocks and at one: the difference per block). Forward: the next block's values go up and, with
// activations, the last block's context down; backward: the next block's values (and context) go up and this
// block's gradients down. The busier copy engine of each phase must keep pace with the block's compute.
void hiding_footers(Report& report, const OffloadMeasured& plain, const OffloadMeasured& single, std::int64_t layers,
                    std::vector<std::pair<Offload, std::vector<Hiding>>> sweeps) {
  const double blocks = static_cast<double>(layers - 1);
  const double t_f = (plain.forward_s - single.forward_s) / blocks, t_b = (plain.backward_s - single.backward_s) / blocks;
  const double v = static_cast<double>(plain.shards.block_parameters) * sizeof(float);
  const double a = static_cast<double>(plain.block_activations);
  report.footer(format("one block per rank: forward %.1f ms, backward %.1f ms (none at %lld and at 1 block); "
                       "parameters %.2f MiB, saved activations %.2f MiB",
                       t_f * 1e3, t_b * 1e3, (long long)layers, v / (1 << 20), a / (1 << 20)));
  for (auto& [mode, points] : sweeps) {
    const bool activations = mode == Offload::spill_activations;
    const double predicted = activations ? std::max({v / t_f, a / t_f, (v + a) / t_b, v / t_b})
                                         : std::max(v / t_f, v / t_b);
    std::sort(points.begin(), points.end(), [](const Hiding& x, const Hiding& y) { return x.bandwidth > y.bandwidth; });
    const auto stops = std::find_if(points.begin(), points.end(), [](const Hiding& h) { return h.added > kHides; });
    const std::string measured =
        stops == points.end()     ? "hides at every bandwidth of the sweep"
        : stops == points.begin() ? "hides at none of the sweep's bandwidths"
                                  : "hides at " + bandwidth_text(std::prev(stops)->bandwidth) + " GB/s, not at " +
                                        bandwidth_text(stops->bandwidth) + " GB/s";
    report.footer(format("%s (hiding: adding at most %.0f%% to the forward + backward) %s; predicted to stop hiding "
                         "below %.3g GB/s (the busier copy engine's bytes per block over the block's compute time)",
                         name_of(mode), kHides * 100, measured.c_str(), predicted / 1e9));
  }
}

// The options' checks against the device: offload needs an accelerator; --sweep, --trace and --largest the simulated
// device; --device-memory only with --largest on.
void check_device_options(const cli::Options& o, const DeviceChoice& choice) {
  OPTIMUS_CHECK(choice.kind != Device::cpu, "offload moves state between a device and the host: it needs --device sim "
                "or cuda");
  const bool sim = choice.kind == Device::sim;
  OPTIMUS_CHECK(!o.has("sweep") || sim, "--sweep sets the simulated device's copy bandwidth: it needs --device sim");
  OPTIMUS_CHECK(!o.has("trace") || sim, "--trace records the simulated device's streams: it needs --device sim");
  OPTIMUS_CHECK(o.text("largest", "off") == "off" || (sim && o.has("device-memory")), "--largest on searches within "
                "the simulated device's capacity: it needs --device sim --device-memory SIZE");
  OPTIMUS_CHECK(o.text("largest", "off") == "on" || !o.has("device-memory"), "--device-memory is the capacity "
                "--largest on searches within; the rows run on an unlimited device (add --largest on)");
}

// The rows' setup: `config` on `choice`'s device made unlimited (--largest alone searches within its capacity),
// `batch` sequences per step.
OffloadSetup rows_setup(const cli::Options& o, const DeviceChoice& choice, const GptConfig& config, std::int64_t batch) {
  OffloadSetup base{.choice = choice,
                    .config = config,
                    .batch = batch,
                    .chunk = o.integer("chunk", std::int64_t{1} << 20),
                    .update = o.has("offload-update") ? parse_offload_update(o.text("offload-update", ""))
                                                      : preferred_offload_update(choice.kind),
                    .warmup = static_cast<int>(o.integer("warmup", 1)),
                    .iters = static_cast<int>(o.integer("iters", 3)),
                    .trace = ""};
  base.choice.sim_capacity = std::numeric_limits<std::uint64_t>::max();  // the rows: unlimited; --largest: the size
  return base;
}

// --offload: the modes, a row each.
std::vector<Offload> modes_of(const cli::Options& o) {
  std::vector<Offload> modes;
  for (const std::string& m : o.list("offload", "none,optimizer,spill,spill+activations")) {
    modes.push_back(parse_offload(m));
  }
  return modes;
}

// The report's columns and header lines, from the rows' setup.
Report offload_report(const OffloadSetup& base) {
  const GptConfig& config = base.config;
  Report report({{"q", 2}, {"mode", 17}, {"GB/s", 6}, {"fb_ms", 8}, {"upd_ms", 7}, {"step_ms", 8}, {"+fb%", 6},
                 {"+step%", 6}, {"B/param", 7}, {"formula", 8}, {"AxoNN", 5}, {"dev_MiB", 8}, {"host_MiB", 8},
                 {"up_MiB", 8}, {"down_MiB", 8}, {"formula", 8}, {"counters", 8}, {"copy_ms", 8}, {"overlap%", 8}});
  report.header(format("optimus-bench offload: a GPT of %lld blocks (h %lld, %lld heads, ffn %lld), vocabulary %lld, "
                       "batch %lld x %lld, f32, on %s; AdamW's offloaded update on the %s, chunks of %lld elements",
                       (long long)config.layers, (long long)config.hidden, (long long)config.heads,
                       (long long)config.ffn, (long long)config.vocab, (long long)base.batch,
                       (long long)config.max_seq, std::string(name_of(base.choice.kind)).c_str(),
                       base.update == OffloadUpdate::device ? "device" : "host", (long long)base.chunk));
  report.header("fb_ms: forward + backward, upd_ms: AdamW's step, step_ms: both (medians of the slowest rank); +fb%, "
                "+step%: added to the row without offload; B/param: peak device bytes of parameters, gradients and "
                "optimizer state per local parameter, formula: offload.hpp's (MISMATCH if the tracker differs); AxoNN: "
                "its device bytes per parameter (mixed precision); dev_MiB, host_MiB: peak bytes per rank of every "
                "kind; up/down_MiB: copied per step and rank by the offload engines, formula: offload.hpp's; counters: "
                "the device's copies against the row without offload, all ranks; copy_ms: the busier copy engine's "
                "time at GB/s; overlap%: the share of the spill's copies' time during the last forward + backward that "
                "compute overlapped (the device's timeline)");
  return report;
}

// What every row shares: the options, the rows' setup, the modes and grid sides, and the device.
struct Bench {
  const cli::Options& o;
  const OffloadSetup& base;
  std::vector<Offload> modes;
  std::vector<std::int64_t> qs;
  bool sim;                // the simulated device
  std::uint64_t capacity;  // --device-memory: the capacity --largest searches within (bytes)
};

// The rows so far: whether each matched its formulas, the first q's run without offload and its sweeps.
struct Outcome {
  bool ok = true;
  std::optional<OffloadMeasured> first_plain;
  std::vector<std::pair<Offload, std::vector<Hiding>>> sweeps;  // per spilling mode, the first q's sweep
};

// The rows' setup for `mode`: the first q's runs (`first`) write their timelines with --trace, as PREFIX-MODE.json.
OffloadSetup traced(const Bench& b, bool first, Offload mode) {
  OffloadSetup s = b.base;
  if (b.o.has("trace") && first) {
    std::string name = name_of(mode);
    std::replace(name.begin(), name.end(), '+', '_');
    s.trace = b.o.text("trace", "") + "-" + name + ".json";
  }
  return s;
}

// The rows of grid side q, a mode each, then for the first q (`first`) the spilling modes at each bandwidth of
// --sweep; each checked against its formulas into `out`.
void run_q(Report& report, Outcome& out, const Bench& b, int q, bool first) {
  const OffloadMeasured plain = run_offload(traced(b, first, Offload::none), q, Offload::none);
  if (!out.first_plain) out.first_plain = plain;
  const auto measure = [&](const OffloadSetup& s, Offload mode, const OffloadMeasured& m) {
    const Checked c = check_row(s, mode, m, plain, q * q, b.sim);
    out.ok = out.ok && c.state && c.moved && c.counters;
    add_row(report, s, q, mode, m, plain, c, b.sim);
  };
  for (Offload mode : b.modes) {
    const OffloadSetup s = traced(b, first, mode);
    measure(s, mode, mode == Offload::none ? plain : run_offload(s, q, mode));
  }
  if (!first || !b.o.has("sweep")) return;
  for (Offload mode : b.modes) {
    if (spill_of(mode) == Spill::none) continue;
    out.sweeps.emplace_back(mode, std::vector<Hiding>{});
    for (double gbs : b.o.reals("sweep", "1")) {
      OffloadSetup s = b.base;
      s.choice.sim_bandwidth = gbs * 1e9;
      const OffloadMeasured m = run_offload(s, q, mode);
      measure(s, mode, m);
      const double added = (m.train_s - plain.train_s) / plain.train_s;
      out.sweeps.back().second.push_back({.bandwidth = gbs * 1e9, .added = added});
    }
  }
}

// The footers of the sweeps (where spilling stops hiding; with more than one block) and of --largest on.
void sweep_and_largest_footers(Report& report, const Bench& b, const Outcome& out) {
  if (!out.sweeps.empty() && b.base.config.layers > 1) {
    OffloadSetup one = b.base;
    one.config.layers = 1;
    const OffloadMeasured single = run_offload(one, static_cast<int>(b.qs.front()), Offload::none);
    hiding_footers(report, *out.first_plain, single, b.base.config.layers, out.sweeps);
  }
  if (b.o.text("largest", "off") == "on") {
    OffloadSetup limited = b.base;
    limited.choice.sim_capacity = b.capacity;
    largest_footers(report, limited, static_cast<int>(b.qs.front()), b.modes, b.o.integer("max-layers", 64));
  }
}

}  // namespace

int run_offload_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("offload"));
  world.set_timeout(o.timeout());
  OPTIMUS_CHECK(world.size() == 1, "offload runs its grids inside one process (in-process ranks); launch 1 process, "
                "not ", world.size());
  const BlockShape shape = block_shape_option(o, 4);
  GptConfig config = block_config(shape, cli::arch_of(o), o.integer("layers", 8));
  config.vocab = o.integer("vocab", 8192);
  const DeviceChoice choice = choose_device(o);
  check_device_options(o, choice);
  const OffloadSetup base = rows_setup(o, choice, config, shape.batch);
  const Bench b{.o = o,
                .base = base,
                .modes = modes_of(o),
                .qs = o.integers("q", "1"),
                .sim = choice.kind == Device::sim,
                .capacity = choice.sim_capacity};

  Report report = offload_report(base);
  Outcome out;
  for (std::int64_t q64 : b.qs) run_q(report, out, b, static_cast<int>(q64), q64 == b.qs.front());
  sweep_and_largest_footers(report, b, out);
  report.footer(out.ok ? "every row's device bytes and copies equal the formulas"
                       : "FAILED: a row differs from its formula (MISMATCH)");
  report.print(stdout);
  if (o.has("json")) report.write_json(o.text("json", ""), "offload");
  return out.ok ? 0 : 1;
}

}  // namespace optimus::bench

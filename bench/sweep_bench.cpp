// optimus-bench sweep: a sweep's makespan under each scheduler (optimus/sweep/runtime.hpp), measured on in-process
// slots (a thread per slot; one core each where the machine has them), beside the simulator's prediction from costs
// measured in the same run, and the simulated makespans at more slots, beside HYDRA's figures:
//   measured rows   D = 1 (the members one after another: the sequential solo runs) and D = --slots under lrtf,
//                   round-robin, model-parallel and pipeline (1F1B of --m micro-batches), at most --in-flight members
//                   with a step in flight (0: all); makespan = the loop's time, the maximum over the slots, the median
//                   of --repeats runs (the rows' runs interleaved, so that the machine's drift reaches all alike);
//                   predicted = the simulator's makespan (ShardPlacement::slot_per_shard) from each stage's mean
//                   forward, backward and end (the exchanged end's operations and the step's end) measured alone (the
//                   model-parallel run, one member at a time; D = 1: the sequential run; the pipeline: its own run,
//                   simulate_pipeline);
//   busy            the slots' mean fraction of the makespan spent in operations and steps' ends (the rest: waiting for
//                   an input, or for the coordinator's word that a step may end);
//   independent     the ceiling: D sequential runs side by side, member m whole on slot m mod D (what the machine
//                   gives D slots when nothing is exchanged);
//   simulated rows  D = each of --simulate: every member cut into D shards of equal cost (the whole model's forward,
//                   backward and end measured at D = 1, over D), under lrtf with the runtime's placement and with
//                   HYDRA's (any slot), model-parallel and pipeline; speedup over the sequential runs, LRTF over model
//                   parallelism (HYDRA reports more than 7x) and over the pipeline (HYDRA: more than 1.5x).
// Members differ in seed (and so in data); all have the same shape, so that their costs are equal.
//
//   optimus-bench sweep [--members 8] [--slots 2] [--simulate 2,4,8] [--m 4] [--in-flight 0] [--repeats 3]
//                       [--steps 3] [--b 4] [--s 32] [--h 64] [--heads 2] [--layers 4] [--vocab 256]
//                       [--device cpu|sim|cuda] [--device-memory SIZE] [--device-bandwidth GB/s]
//                       [--offload none|spill|spill+activations] [--json FILE]
// With --device, the slots share one device (each its own stream and pool), and with --offload the members' blocks move
// between it and host memory at --device-bandwidth: the copies are then in the measured operations' costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/sweep/gpt_member.hpp"
#include "optimus/sweep/runtime.hpp"
#include "optimus/sweep/schedule.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

namespace sw = optimus::sweep;

struct SweepShape {
  int members, steps, micro_batches, in_flight;
  std::int64_t batch;
  GptConfig config;
  DeviceChoice device;  // cpu, or the device the in-process slots share (--device sim: its copies throttled)
  Spill spill;          // on a device: the members' blocks in host memory (--offload)
};

// What one run on D slots measured: its makespan and each member's per-stage mean costs (stage k on slot k).
struct SweepMeasured {
  double makespan = 0;
  double busy = 0;  // the slots' mean fraction of the makespan spent in operations and steps' ends
  std::vector<sw::MemberWork> work;  // [member]: shard k = stage k: its mean forward, backward and end per step
};

// Batches of random ids, the member's own per step.
sw::BatchOf batches_of(const SweepShape& shape, int member) {
  return [shape, member](int step, std::vector<int>& tokens, std::vector<int>& targets) {
    const auto n = static_cast<std::size_t>(shape.batch * shape.config.max_seq);
    const CounterRng rng(static_cast<std::uint64_t>(member + 1), static_cast<std::uint64_t>(step));
    const auto vocab = static_cast<std::uint32_t>(shape.config.vocab);
    tokens.resize(n);
    targets.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Philox4x32Counter bits = rng.bits(i, 0);
      tokens[i] = static_cast<int>(bits[0] % vocab);
      targets[i] = static_cast<int>(bits[1] % vocab);
    }
  };
}

// How the measured run places the members: each a pipeline of one stage per slot (the runtime's), or each whole on one
// slot, member m on slot m mod D, the slots never exchanging anything (D sequential runs side by side: what the machine
// gives D slots at most, the measured rows' ceiling).
enum class Placing { pipelined, independent };

SweepMeasured measure_sweep(const SweepShape& shape, int slots, sw::Scheduler scheduler, Placing placing) {
  std::vector<std::vector<sw::OperationRun>> runs(static_cast<std::size_t>(slots));
  std::vector<double> seconds(static_cast<std::size_t>(slots), 0.0);
  const int micro = scheduler == sw::Scheduler::pipeline ? shape.micro_batches : 1;
  const std::unique_ptr<DeviceRuntime> device =
      shape.device.kind == Device::cpu ? nullptr : open_device(shape.device, 0);
  run_in_process(slots, [&](Communicator& world) {
    std::optional<RankDevice> slot;  // the slot's stream and pool on the shared device, declared before the members
    if (device) slot.emplace(*device, ops::GemmMath::f32);
    const std::unique_ptr<Communicator> self = world.split(world.rank(), 0);  // a slot of one rank
    const bool independent = placing == Placing::independent;
    Communicator& ranks = independent ? *self : world;  // the members' ranks
    std::vector<std::unique_ptr<sw::GptMember<float>>> members;
    std::vector<sw::MemberSteps*> steps;
    for (int m = independent ? world.rank() : 0; m < shape.members; m += independent ? slots : 1) {
      GptConfig c = shape.config;
      c.seed = static_cast<std::uint64_t>(m + 1);
      const int stages = ranks.size();
      members.push_back(std::make_unique<sw::GptMember<float>>(
          slot ? slot->grid(ranks, 1, stages) : Grid::create(ranks, 1, stages), slot ? shape.spill : Spill::none, c,
          sw::MemberTraining{.adam = AdamWConfig{}, .steps = shape.steps, .batch = shape.batch, .micro_batches = micro},
          batches_of(shape, m)));
      steps.push_back(members.back().get());
    }
    world.barrier();
    const auto begin = std::chrono::steady_clock::now();
    runs[static_cast<std::size_t>(world.rank())] =
        sw::train_members(steps, {.scheduler = scheduler, .in_flight = shape.in_flight}, ranks, *self);
    seconds[static_cast<std::size_t>(world.rank())] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  });
  SweepMeasured out;
  out.makespan = *std::max_element(seconds.begin(), seconds.end());
  for (const std::vector<sw::OperationRun>& slot : runs) {
    for (const sw::OperationRun& r : slot) out.busy += (r.end - r.start) / out.makespan / slots;
  }
  if (placing == Placing::independent) return out;  // no stage costs: each slot ran whole members
  // Each run's kind from the members' schedule: its forwards, its backwards, then the exchanged end's operations and
  // the step's end (operation -1), which the simulator runs on every slot after the step's last backward.
  const pipeline::Schedule schedule = sw::member_schedule(slots, micro);
  for (int m = 0; m < shape.members; ++m) {
    sw::MemberWork w{.name = format("m%d", m), .shards = {}, .steps = shape.steps};
    for (int k = 0; k < slots; ++k) {
      const std::vector<pipeline::Op>& ops = schedule.ops[static_cast<std::size_t>(k)];
      sw::ShardCosts c;
      for (const sw::OperationRun& r : runs[static_cast<std::size_t>(k)]) {
        if (r.member != m) continue;
        const auto i = static_cast<std::size_t>(r.operation);
        const bool schedules = r.operation >= 0 && i < ops.size();
        (!schedules ? c.end : ops[i].work == pipeline::Work::forward ? c.forward : c.backward) += r.end - r.start;
      }
      w.shards.push_back({.forward = c.forward / shape.steps, .backward = c.backward / shape.steps, .copy = 0,
                          .end = c.end / shape.steps});
    }
    out.work.push_back(w);
  }
  return out;
}

// One measured row's run: its slots, scheduler and placing.
struct Measurement {
  int slots;
  sw::Scheduler scheduler;
  Placing placing;
};

// Each run `repeats` times, the repeats interleaved (every run once per round, so that the machine's drift over the
// bench reaches every row alike); of each, the run of median makespan.
std::vector<SweepMeasured> median_runs(const SweepShape& shape, const std::vector<Measurement>& runs, int repeats) {
  std::vector<std::vector<SweepMeasured>> all(runs.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      all[i].push_back(measure_sweep(shape, runs[i].slots, runs[i].scheduler, runs[i].placing));
    }
  }
  std::vector<SweepMeasured> out;
  for (std::vector<SweepMeasured>& repeated : all) {
    const auto middle = repeated.begin() + static_cast<std::ptrdiff_t>(repeated.size() / 2);
    std::nth_element(repeated.begin(), middle, repeated.end(),
                     [](const SweepMeasured& a, const SweepMeasured& b) { return a.makespan < b.makespan; });
    out.push_back(std::move(*middle));
  }
  return out;
}

// The members' work cut into D shards of equal cost.
std::vector<sw::MemberWork> cut_into(const std::vector<sw::MemberWork>& whole, int shards) {
  std::vector<sw::MemberWork> out;
  for (const sw::MemberWork& w : whole) {
    const sw::ShardCosts c = w.shards.front();
    out.push_back({.name = w.name,
                   .shards = std::vector<sw::ShardCosts>(static_cast<std::size_t>(shards),
                                                         {.forward = c.forward / shards,
                                                          .backward = c.backward / shards, .copy = 0,
                                                          .end = c.end / shards}),
                   .steps = w.steps});
  }
  return out;
}

double predict_makespan(const std::vector<sw::MemberWork>& work, int slots, sw::Scheduler scheduler,
                        int micro_batches) {
  if (scheduler == sw::Scheduler::pipeline) {
    return sw::simulate_pipeline(work, slots, {.kind = pipeline::Kind::one_f_one_b, .micro_batches = micro_batches})
        .makespan;
  }
  return sw::simulate(work, slots, scheduler, sw::ShardPlacement::slot_per_shard).makespan;
}

// The sweep's shape from the options, each checked.
SweepShape shape_of(const cli::Options& o, int slots) {
  const std::string offload = o.text("offload", "none");
  SweepShape shape{.members = static_cast<int>(o.integer("members", 8)),
                   .steps = static_cast<int>(o.integer("steps", 3)),
                   .micro_batches = static_cast<int>(o.integer("m", 4)),
                   .in_flight = static_cast<int>(o.integer("in-flight", 0)),
                   .batch = o.integer("b", 4),
                   .config = {},
                   .device = choose_device(o),
                   .spill = spill_of(parse_offload(offload))};
  OPTIMUS_CHECK(shape.spill == Spill::none || shape.device.kind != Device::cpu, "--offload ", offload,
                " moves the members' blocks between a device and the host: give --device sim or cuda");
  GptConfig& c = shape.config;
  c.vocab = o.integer("vocab", 256);
  c.max_seq = o.integer("s", 32);
  c.hidden = o.integer("h", 64);
  c.heads = o.integer("heads", 2);
  c.ffn = 4 * c.hidden;
  c.layers = o.integer("layers", 4);
  c.dropout = 0;
  OPTIMUS_CHECK(c.layers % slots == 0, "--layers ", c.layers, " do not divide among --slots ", slots,
                " (each member is a pipeline of one stage per slot)");
  OPTIMUS_CHECK(shape.batch % shape.micro_batches == 0, "--b ", shape.batch, " is not divisible by --m ",
                shape.micro_batches, " (the pipeline baseline's micro-batches)");
  return shape;
}

// The simulated rows of D slots: each member cut into D shards of equal cost, placed as the runtime does and as HYDRA
// does, and the two baselines.
void simulated_rows(Report& report, const SweepMeasured& sequential, double seq_predicted, int d,
                    const SweepShape& shape) {
  const std::vector<sw::MemberWork> work = cut_into(sequential.work, d);
  const double pinned = predict_makespan(work, d, sw::Scheduler::lrtf, 1);
  const double any = sw::simulate(work, d, sw::Scheduler::lrtf, sw::ShardPlacement::any_slot).makespan;
  const double mp = predict_makespan(work, d, sw::Scheduler::model_parallel, 1);
  const double pipe = predict_makespan(work, d, sw::Scheduler::pipeline, shape.micro_batches);
  const auto row = [&](const char* name, const char* placement, double makespan, double lrtf_same) {
    report.row({std::to_string(d), name, placement, "simulated", format("%.4f", makespan), "-", "-", "-",
                format("%.2f", seq_predicted / makespan), format("%.2f", makespan / lrtf_same)});
  };
  row("lrtf", "stage", pinned, pinned);
  row("lrtf", "any", any, any);
  row("model-parallel", "stage", mp, pinned);
  row("pipeline", "stage", pipe, pinned);
}

}  // namespace

int run_sweep_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("sweep"));
  OPTIMUS_CHECK(world.size() == 1, "optimus-bench sweep runs its slots as threads of one process: launch one, not ",
                world.size());
  const int slots = static_cast<int>(o.integer("slots", 2));
  const SweepShape shape = shape_of(o, slots);
  const GptConfig& c = shape.config;

  Report report({{"D", 3}, {"scheduler", 16}, {"placement", 9}, {"kind", 9}, {"makespan_s", 11}, {"predicted_s", 11},
                 {"meas/pred", 9}, {"busy", 5}, {"vs_seq", 7}, {"lrtf_vs", 7}});
  report.header(format("optimus-bench sweep: %d members (layers %lld, hidden %lld, heads %lld, seq %lld, batch %lld, "
                       "vocab %lld, %lld parameters each), %d steps each; in-process slots, one thread each, on %s "
                       "(offload %s)",
                       shape.members, static_cast<long long>(c.layers), static_cast<long long>(c.hidden),
                       static_cast<long long>(c.heads), static_cast<long long>(c.max_seq),
                       static_cast<long long>(shape.batch), static_cast<long long>(c.vocab),
                       static_cast<long long>(c.parameter_count()), shape.steps,
                       std::string(name_of(shape.device.kind)).c_str(), o.text("offload", "none").c_str()));
  report.header("busy: the slots' mean fraction of the makespan in operations and steps' ends; vs_seq: the sequential "
                "solo runs' makespan over the row's; lrtf_vs: this row's over the lrtf row's of the same D and placement "
                "(HYDRA: > 7x over model parallelism, > 1.5x over the pipeline)");

  // D = 1: the members one after another (model-parallel on one slot is exactly that); D = --slots under each
  // scheduler; the ceiling: D sequential runs side by side, each slot whole members of its own (the slots' contention
  // for the machine's cores, caches and memory, with nothing scheduled or exchanged).
  const std::vector<sw::Scheduler> schedulers{sw::Scheduler::lrtf, sw::Scheduler::round_robin,
                                              sw::Scheduler::model_parallel, sw::Scheduler::pipeline};
  std::vector<Measurement> runs{{1, sw::Scheduler::model_parallel, Placing::pipelined}};
  for (const sw::Scheduler s : schedulers) runs.push_back({slots, s, Placing::pipelined});
  runs.push_back({slots, sw::Scheduler::model_parallel, Placing::independent});
  const int repeats = static_cast<int>(o.integer("repeats", 3));
  const std::vector<SweepMeasured> measured = median_runs(shape, runs, repeats);
  // measured[0]: the sequential run; then each scheduler's, in `schedulers`' order; last the ceiling
  const auto at_d = [&](sw::Scheduler s) -> const SweepMeasured& {
    return measured[1 + static_cast<std::size_t>(std::find(schedulers.begin(), schedulers.end(), s) -
                                                 schedulers.begin())];
  };
  const SweepMeasured& sequential = measured.front();
  const double seq_predicted = predict_makespan(sequential.work, 1, sw::Scheduler::model_parallel, 1);
  report.row({"1", "sequential", "-", "measured", format("%.4f", sequential.makespan), format("%.4f", seq_predicted),
              format("%.3f", sequential.makespan / seq_predicted), format("%.2f", sequential.busy), "1.00", "-"});

  // Costs for the predictions from the model-parallel run (each member's stages alone); the pipeline from its own
  // run's (each member alone too; its micro-batches cost more than 1/m of the batch).
  const std::vector<sw::MemberWork>& alone = at_d(sw::Scheduler::model_parallel).work;
  const double lrtf = at_d(sw::Scheduler::lrtf).makespan;
  for (const sw::Scheduler s : schedulers) {
    const SweepMeasured& m = at_d(s);
    const double predicted = s == sw::Scheduler::pipeline ? predict_makespan(m.work, slots, s, shape.micro_batches)
                                                          : predict_makespan(alone, slots, s, 1);
    report.row({std::to_string(slots), std::string(sw::name_of(s)), "stage", "measured", format("%.4f", m.makespan),
                format("%.4f", predicted), format("%.3f", m.makespan / predicted), format("%.2f", m.busy),
                format("%.2f", sequential.makespan / m.makespan), format("%.2f", m.makespan / lrtf)});
  }
  const SweepMeasured& ceiling = measured.back();
  report.row({std::to_string(slots), "independent", "whole", "measured", format("%.4f", ceiling.makespan),
              format("%.4f", seq_predicted / slots), format("%.3f", ceiling.makespan / (seq_predicted / slots)),
              format("%.2f", ceiling.busy), format("%.2f", sequential.makespan / ceiling.makespan),
              format("%.2f", ceiling.makespan / lrtf)});

  // Simulated at more slots: each member cut into D shards of equal cost.
  for (const std::int64_t d : o.integers("simulate", "2,4,8")) {
    simulated_rows(report, sequential, seq_predicted, static_cast<int>(d), shape);
  }
  report.footer(format("measured rows: the loop's time, max over slots, the median of %d runs; predicted: the "
                       "simulator with each stage's costs measured alone (model-parallel's run; the pipeline's own); "
                       "independent: D sequential runs side by side (predicted: the sequential run's over D)",
                       repeats));
  report.print(stdout);
  if (o.has("json")) report.write_json(o.text("json", ""), "sweep");
  return 0;
}

}  // namespace optimus::bench

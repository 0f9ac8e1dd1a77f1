// optimus-bench pipeline: each pipeline schedule run on real ranks (world = dp x pp x q^2, Gpt2D; with
// --layout 1d, world = pp x p, the 1D baseline's Gpt1D on groups of p ranks), beside what the schedule
// simulator and the memory and traffic formulas predict for it:
//   step_ms      the step's time, the maximum over ranks (median over --iters steps);
//   bubble       measured from each timed step's timeline of operations, 1 - (time the stages computed) / (S * span),
//                span = the end of the last operation (each rank's clock starts when the step starts, after a barrier;
//                an operation's time starts once its input has arrived); the mean over the steps;
//   predicted    the simulator's bubble with the costs measured in the same step (each virtual stage's mean F, B,
//                B_input, B_weight time, the injected delays taken out, and a message's time from a ping-pong of one
//                block between stages 0 and 1), replayed in the row's execution order with the same step's delays
//                (simulator.hpp's Replay); the mean over the steps;
//   pred_ms      that replay's step time (its makespan), the mean over the steps;
//   act_B        the peak of activation bytes per rank of each stage (memory tracker), and memory.hpp's prediction
//                (2D only: "-" for 1D);
//   p2p_B        bytes each stage's ranks send over the pipeline (traffic counters: blocks, and wte's gradient
//                between the end stages), and the prediction: the simulator's messages x one block per rank,
//                [N/q, h/q] in 2D, the whole replicated [N, h] in 1D (N: a micro-batch's tokens);
//   #wrong       stages whose activation or p2p bytes differ from the prediction (must be 0; dynamic: activation bytes
//                above it).
// Each schedule runs once per --execution order (static: its list's order; dynamic: message-driven,
// pipeline/dynamic_order.hpp), a model each, their steps taking turns (so that a shared machine's drift falls on both), with --jitter J delaying each operation by J x jitter_draw(step, stage, i) x its time
// (a slow operation, as other tenants or NCCL's own jitter make one). A footer per schedule compares the orders: the
// measured step times' ratio dynamic / static beside the predicted one; and with --jitter, the simulator alone at unit
// costs (F = 1, B = 2, or 1 each split) for S = 2, 4, 8 over 100 steps' draws: each schedule's mean step, static and
// dynamic, and their ratio.
// Then the schedules ranked by measured and by predicted bubble, how many pairs of schedules the measurement tells
// apart (mean bubbles more than two standard errors of their difference apart) and how many of those the prediction
// orders the same way, and each schedule's measured timeline drawn as text (pipeline::chart). --trace FILE writes the
// timelines as a Chrome trace (chrome://tracing, Perfetto): one row per rank, the schedules one after another.
//
//   mpirun -np 2 optimus-bench pipeline [--pp 2] [--q 1 | --layout 1d] [--m 8]
//                                      [--schedules gpipe,1f1b,interleaved,wave,zb] [--chunks 2]
//                                      [--execution static,dynamic] [--jitter 0] [--b B] [--s 64]
//                                      [--h 256] [--heads 4] [--ffn 4h] [--layers L] [--vocab 512] [--dtype f32|f64]
//                                      [--warmup 1] [--iters 5] [--trace FILE] [--json FILE]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <numeric>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "pipeline_orders.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/plan/build.hpp"
#include "optimus/plan/memory_model.hpp"
#include "optimus/plan/place.hpp"
#include "optimus/pipeline/memory.hpp"
#include "optimus/pipeline/simulator.hpp"
#include "optimus/plan/run.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

namespace pp = optimus::pipeline;
using plan::random_ids;

struct ScheduleSetup {
  // The layout every schedule runs on: its tensor parallelism (tp: ranks per stage in a replica, q*q or p; q() the grid
  // side, or 1 in 1D: a stage's activations are on each rank whole), dp and pp; each schedule its own kind, chunks and
  // micro-batches.
  plan::Layout layout;
  int micro_batches, chunks;
  std::int64_t batch, seq, layers;
  GptConfig config;
  int warmup, iters;
  double jitter;  // --jitter
};

// One schedule's measurements on this rank, and the gathered timeline (every rank's operations).
struct ScheduleMeasured {
  double step_seconds = 0;                      // the median step's, the maximum over ranks
  std::vector<std::vector<pp::Interval>> steps;  // [step][rank * ops + i]: every rank's operations, each timed step
  std::size_t median = 0;                       // the median step's index in steps
  std::int64_t activation_bytes = 0;            // this rank's peak in the median step
  std::int64_t sent = 0, received = 0;          // this rank's pipeline bytes in the median step
};

// Seconds for one block to go from stage 0 to stage 1 (half the median of 20 round trips; 0 with one stage).
template <class T>
double message_seconds(Communicator& world, const Grid& grid, std::int64_t elements) {
  if (grid.pp() < 2) return 0;
  std::vector<T> block(static_cast<std::size_t>(elements));
  std::vector<double> trips;
  for (int i = 0; i < 21; ++i) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (grid.stage() == 0) {
      grid.pipe().send(block.data(), block.size(), dtype_of<T>, 1, 0);
      grid.pipe().recv(block.data(), block.size(), dtype_of<T>, 1, 0);
    } else if (grid.stage() == 1) {
      grid.pipe().recv(block.data(), block.size(), dtype_of<T>, 0, 0);
      grid.pipe().send(block.data(), block.size(), dtype_of<T>, 0, 0);
    }
    if (i > 0) trips.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(trips.begin(), trips.end());
  return world.all_reduce(trips[trips.size() / 2] / 2, ReduceOp::max);
}

// One timed step of a model on this rank.
struct StepRun {
  double seconds;
  std::vector<pp::Interval> times;
  std::int64_t activations, sent, received;
};

// A model's timed steps summed up: the median step's figures and every step's gathered timeline (collective).
ScheduleMeasured summarize(Communicator& world, const std::vector<StepRun>& runs) {
  // The median step (every rank has the same maxima, so picks the same step).
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return runs[a].seconds < runs[b].seconds; });
  const StepRun& median = runs[order[order.size() / 2]];
  ScheduleMeasured out{.step_seconds = median.seconds, .steps = {}, .median = order[order.size() / 2],
                       .activation_bytes = median.activations, .sent = median.sent, .received = median.received};
  // Every stage runs as many operations (F and one or two backward kinds per chunk and micro-batch).
  for (const StepRun& run : runs) {
    const std::size_t ops = run.times.size();
    std::vector<double> mine(2 * ops), all(2 * ops * static_cast<std::size_t>(world.size()));
    for (std::size_t i = 0; i < ops; ++i) {
      mine[2 * i] = run.times[i].start;
      mine[2 * i + 1] = run.times[i].end;
    }
    world.all_gather(mine.data(), all.data(), mine.size(), DType::f64);
    std::vector<pp::Interval>& step = out.steps.emplace_back();
    for (std::size_t i = 0; i < all.size(); i += 2) step.push_back(pp::Interval{.start = all[i], .end = all[i + 1]});
  }
  return out;
}

// The measurements of `setup.iters` steps of each of `models` after `setup.warmup` (collective over `world`). The
// models take turns step by step (step n of each, then step n + 1 of each): the machine's drift falls on each alike.
template <class Model>
std::vector<ScheduleMeasured> measure(Communicator& world, const std::vector<Model*>& models,
                                      const ScheduleSetup& setup) {
  const Grid& grid = models.front()->grid();
  const std::int64_t n = setup.batch * setup.seq;
  const auto tokens = random_ids(n, setup.config.vocab, 11 + static_cast<std::uint64_t>(grid.dp_index()));
  const auto targets = random_ids(n, setup.config.vocab, 23 + static_cast<std::uint64_t>(grid.dp_index()));
  std::vector<std::vector<StepRun>> runs(models.size());
  for (int it = 0; it < setup.warmup + setup.iters; ++it) {
    for (std::size_t k = 0; k < models.size(); ++k) {
      Model& model = *models[k];
      model.zero_grad();
      const std::uint64_t held = grid.memory().current(MemoryKind::activations);
      grid.memory().reset_peaks();
      grid.pipe().reset_stats();
      world.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      model.train_step(tokens, targets, setup.batch, static_cast<std::uint64_t>(it));
      const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const CommStats& stats = grid.pipe().stats();
      if (it < setup.warmup) continue;
      runs[k].push_back(StepRun{.seconds = world.all_reduce(local, ReduceOp::max),
                                .times = model.last_step_times(),
                                .activations = static_cast<std::int64_t>(grid.memory().peak(MemoryKind::activations) - held),
                                .sent = static_cast<std::int64_t>(stats[CallKind::send].bytes_sent),
                                .received = static_cast<std::int64_t>(stats[CallKind::recv].bytes_received)});
    }
  }
  std::vector<ScheduleMeasured> out;
  for (const std::vector<StepRun>& r : runs) out.push_back(summarize(world, r));
  return out;
}

// The schedule `schedule` run on `place` (setup.layout's, with the schedule's kind, chunks and micro-batches) in each
// of `orders`, a model each, their steps taking turns.
template <class T>
std::vector<ScheduleMeasured> run_schedule(Communicator& world, const plan::Place& place, const ScheduleSetup& setup,
                                           const pp::Schedule& schedule, const std::vector<pp::Order>& orders) {
  plan::Layout layout = setup.layout;
  layout.schedule = schedule.kind;
  layout.chunks = schedule.chunks;
  layout.micro_batches = schedule.micro_batches;
  std::vector<plan::AnyGpt<T>> built;
  for (std::size_t k = 0; k < orders.size(); ++k) built.push_back(plan::build_any_gpt<T>(place, setup.config, layout));
  return std::visit(
      [&](const auto& first) {
        using Pointer = std::decay_t<decltype(first)>;
        std::vector<typename Pointer::element_type*> models;
        for (std::size_t k = 0; k < orders.size(); ++k) {
          const Pointer& model = std::get<Pointer>(built[k]);
          model->set_execution({.order = orders[k], .jitter = setup.jitter});
          models.push_back(model.get());
        }
        return measure(world, models, setup);
      },
      built.front());
}

// The measured timeline as the simulator's result (stage s: the first rank of stage s in replica 0).
pp::Simulation timeline_of(const pp::Schedule& s, int per_stage, const std::vector<pp::Interval>& times) {
  const std::size_t ops = s.ops[0].size();
  pp::Simulation t;
  double busy = 0;
  for (int stage = 0; stage < s.stages; ++stage) {
    const auto first = static_cast<std::size_t>(stage * per_stage) * ops;
    t.times.emplace_back(times.begin() + static_cast<std::ptrdiff_t>(first),
                         times.begin() + static_cast<std::ptrdiff_t>(first + ops));
    for (const pp::Interval& i : t.times.back()) {
      t.makespan = std::max(t.makespan, i.end);
      busy += i.end - i.start;
    }
  }
  t.bubble = 1.0 - busy / (s.stages * t.makespan);
  return t;
}

// Each virtual stage's mean F, B, B_input and B_weight seconds in the measured timeline of `step`, the delays that
// `jitter` injected taken out (an operation of base time t took t (1 + jitter * draw)).
std::vector<pp::Costs> measured_costs(const pp::Schedule& s, const pp::Simulation& timeline, double p2p, double jitter,
                                      std::uint64_t step) {
  const auto u_count = static_cast<std::size_t>(s.virtual_stages());
  std::vector<std::array<double, 4>> sum(u_count, std::array<double, 4>{}), count = sum;
  for (int stage = 0; stage < s.stages; ++stage) {
    const auto& ops = s.ops[static_cast<std::size_t>(stage)];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const auto u = static_cast<std::size_t>(s.virtual_stage(stage, ops[i].chunk));
      const auto w = static_cast<std::size_t>(ops[i].work);
      const pp::Interval& t = timeline.times[static_cast<std::size_t>(stage)][i];
      sum[u][w] += (t.end - t.start) / (1 + jitter * pp::jitter_draw(step, stage, i));
      count[u][w] += 1;
    }
  }
  const auto mean = [&](std::size_t u, pp::Work w) {
    const auto k = static_cast<std::size_t>(w);
    return count[u][k] > 0 ? sum[u][k] / count[u][k] : 0.0;
  };
  std::vector<pp::Costs> costs;
  for (std::size_t u = 0; u < u_count; ++u) {
    costs.push_back(pp::Costs{.forward = mean(u, pp::Work::forward), .backward = mean(u, pp::Work::backward),
                              .backward_input = mean(u, pp::Work::backward_input),
                              .backward_weight = mean(u, pp::Work::backward_weight), .p2p = p2p});
  }
  return costs;
}

// Bytes each stage's ranks send and receive over the pipeline: the simulator's messages of one block each, and on
// the end stages (when they differ) their part of wte or of its gradient.
std::pair<std::int64_t, std::int64_t> predicted_p2p(const pp::Schedule& s, const pp::Simulation& sim, int stage,
                                                    std::int64_t block_bytes, std::int64_t wte_bytes) {
  const auto st = static_cast<std::size_t>(stage);
  std::int64_t sent = sim.sends[st] * block_bytes, received = sim.receives[st] * block_bytes;
  const int first = s.stage_of(0), last = s.stage_of(s.virtual_stages() - 1);
  if (first != last && (stage == first || stage == last)) {
    sent += wte_bytes;
    received += wte_bytes;
  }
  return {sent, received};
}

std::string joined(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) {
    if (!out.empty()) out += '/';
    out += std::to_string(v);
  }
  return out;
}

// Writes the schedules' timelines (every rank's operations) as one Chrome trace, each schedule after the previous
// one (output_file.hpp: written whole or not at all).
void write_trace(const std::string& path, int world_size, int per_stage, const std::vector<pp::Schedule>& schedules,
                 const std::vector<ScheduleMeasured>& runs) {
  std::ostringstream out;
  {
    out << "{\"traceEvents\": [\n";
    bool first = true;
    double offset_us = 0;
    for (std::size_t k = 0; k < schedules.size(); ++k) {
      const pp::Schedule& s = schedules[k];
      const std::size_t ops = s.ops[0].size();
      double end_us = 0;
      for (int r = 0; r < world_size; ++r) {
        const int stage = (r / per_stage) % s.stages;
        const auto& list = s.ops[static_cast<std::size_t>(stage)];
        if (k == 0) {
          out << (first ? "" : ",\n") << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << r
              << ", \"args\": {\"name\": \"rank " << r << " (stage " << stage << ")\"}}";
          first = false;
        }
        for (std::size_t i = 0; i < ops; ++i) {
          const pp::Interval& t = runs[k].steps[runs[k].median][static_cast<std::size_t>(r) * ops + i];
          const pp::Work w = list[i].work;
          const char* color = w == pp::Work::forward ? "good" : w == pp::Work::backward_weight ? "terrible" : "bad";
          out << ",\n{\"name\": \"" << pp::describe(s, list[i]) << "\", \"cat\": \"" << pp::name_of(s.kind)
              << "\", \"ph\": \"X\", \"pid\": " << r << ", \"tid\": 0, \"ts\": " << offset_us + 1e6 * t.start
              << ", \"dur\": " << 1e6 * (t.end - t.start) << ", \"cname\": \"" << color << "\"}";
          end_us = std::max(end_us, 1e6 * t.end);
        }
      }
      out << ",\n{\"name\": \"" << pp::name_of(s.kind) << "\", \"ph\": \"i\", \"s\": \"g\", \"pid\": 0, \"tid\": 0, "
          << "\"ts\": " << offset_us << "}";
      offset_us += end_us * 1.1;
    }
    out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  }
  write_file(path, out.str());
}

// A pipeline message per rank, and what the byte predictions are made of.
struct Messages {
  std::int64_t block_elements;  // one block of a micro-batch's activations: [N/q, h/q] (N: its tokens)
  std::int64_t block_bytes;     // the block's, in T
  std::int64_t wte_bytes;       // wte's (or its gradient's) part, sent between the end stages when they differ
  double seconds;               // the block from stage 0 to stage 1 (message_seconds)
};

// The block and wte's part per rank, and the block's time between stages (collective over `world`: a ping-pong).
template <class T>
Messages messages_of(Communicator& world, const Grid& grid, const ScheduleSetup& setup) {
  const std::int64_t rows = setup.batch / setup.micro_batches * setup.seq;  // tokens per micro-batch
  const int q = setup.layout.q();
  const std::int64_t block_elements = rows / q * (setup.config.hidden / q);
  // wte's rows per rank: V/q of a q x q grid's blocks (h/q columns), or V/p of the 1D vocab-parallel slices (all h).
  const int parts = setup.layout.head_parts();
  const std::int64_t wte_bytes = setup.config.stored_vocab(parts) / parts * (setup.config.hidden / q) *
                                 static_cast<std::int64_t>(sizeof(T));
  return Messages{.block_elements = block_elements,
                  .block_bytes = block_elements * static_cast<std::int64_t>(sizeof(T)),
                  .wte_bytes = wte_bytes,
                  .seconds = message_seconds<T>(world, grid, block_elements)};
}

// The report's columns and header lines (world, layout and GPT; `dtype`: "f32" or "f64").
Report pipeline_report(const Communicator& world, const ScheduleSetup& setup, const Messages& message, const char* dtype) {
  Report report({{"schedule", 11}, {"execution", 9}, {"v", 2}, {"step_ms", 9}, {"pred_ms", 9}, {"bubble", 7},
                 {"+-", 6}, {"predicted", 9}, {"diff", 6},
                 {"act_B", 22}, {"act_predicted_B", 22}, {"p2p_B", 22}, {"p2p_predicted_B", 22}, {"#wrong", 6}});
  const std::string layout = plan::describe_ranks(setup.layout);
  report.header(format("optimus-bench pipeline: world %d = %s, m = %d micro-batches of "
                       "%lld sequences, s=%lld h=%lld heads=%lld ffn=%lld layers=%lld vocab=%lld, %s",
                       world.size(), layout.c_str(), setup.micro_batches,
                       static_cast<long long>(setup.batch / setup.micro_batches), static_cast<long long>(setup.seq),
                       static_cast<long long>(setup.config.hidden), static_cast<long long>(setup.config.heads),
                       static_cast<long long>(setup.config.ffn), static_cast<long long>(setup.layers),
                       static_cast<long long>(setup.config.vocab), dtype));
  report.header(format("bubble: measured from each step's timeline; predicted: the simulator with that step's "
                       "costs per virtual stage (means over the steps) and a message of %.1f us (ping-pong of one %lld-byte block)",
                       1e6 * message.seconds, static_cast<long long>(message.block_bytes)));
  report.header(format("execution: each stage's order (static, or dynamic: message-driven); --jitter %.2f: each "
                       "operation then waits %.2f x a draw in [0, 1) x its time", setup.jitter, setup.jitter));
  report.header("act_B, p2p_B: per stage (stage 0/stage 1/...), bytes per rank; #wrong: stages off the prediction");
  return report;
}

// A schedule's bubble over its timed steps: the measured mean and spread, and the predicted mean.
struct Bubbles {
  double measured = 0;   // the mean of 1 - (time the stages computed) / (S * span)
  double spread = 0;     // the measured bubbles' standard deviation over the steps
  double predicted = 0;  // the mean of the simulator's, with each step's measured costs
  double predicted_seconds = 0;  // the mean of the simulator's makespans
};

// The bubbles of `m`'s timed steps of `s` (stage s: the first rank of stage s in replica 0); `p2p`: a message's
// seconds.
// `execution` and `first_step`: the order and delays the steps ran with, and the step number of m.steps[0].
Bubbles bubbles_of(const pp::Schedule& s, int per_stage, const ScheduleMeasured& m, double p2p,
                   const pp::Execution& execution, std::uint64_t first_step) {
  Bubbles out;
  double squares = 0;
  const auto steps = static_cast<double>(m.steps.size());
  for (std::size_t k = 0; k < m.steps.size(); ++k) {
    const pp::Simulation measured = timeline_of(s, per_stage, m.steps[k]);
    out.measured += measured.bubble / steps;
    squares += measured.bubble * measured.bubble / steps;
    const std::uint64_t step = first_step + k;
    const pp::Simulation predicted = pp::simulate(s, measured_costs(s, measured, p2p, execution.jitter, step),
                                                  pp::Replay{.execution = execution, .step = step});
    out.predicted += predicted.bubble / steps;
    out.predicted_seconds += predicted.makespan / steps;
  }
  out.spread = std::sqrt(std::max(0.0, squares - out.measured * out.measured));  // over the steps
  return out;
}

// A schedule's bytes per stage (stage 0, 1, ...): each stage's from replica 0's first rank of the stage, and the
// predictions; every rank's own against the prediction for its stage.
struct StageBytes {
  std::vector<std::int64_t> act, act_predicted;  // activation peaks (act_predicted empty in 1D: not modelled)
  std::vector<std::int64_t> sent, sent_predicted;
  std::int64_t wrong_stages = 0;  // ranks whose activation or p2p bytes differ from the prediction
};

// Collective over `world` (an all-gather): the bytes of `m`, the schedule `s`'s measurement on this rank, per stage.
template <class T>
StageBytes stage_bytes(Communicator& world, const Grid& grid, const ScheduleSetup& setup, const pp::Schedule& s,
                       pp::Order order, const ScheduleMeasured& m, const Messages& message) {
  const pp::Simulation unit = pp::simulate(s, pp::Costs{});
  StageBytes out;
  // memory.hpp models the 2D chunks; the 1D ones' activation bytes are reported, not predicted (none).
  out.act_predicted = plan::stage_activation_peaks(setup.layout, s, setup.config, setup.batch / setup.micro_batches,
                                                   setup.seq, sizeof(T));
  const auto [sent_predicted, received_predicted] =
      predicted_p2p(s, unit, grid.stage(), message.block_bytes, message.wte_bytes);
  // dynamic: at most the static order's bytes (dynamic_order.hpp's rule 3), less where backwards ran early
  const std::int64_t act_bound = out.act_predicted.empty() ? 0 : out.act_predicted[static_cast<std::size_t>(grid.stage())];
  const bool act_wrong = !out.act_predicted.empty() && (order == pp::Order::static_order ? m.activation_bytes != act_bound
                                                                                         : m.activation_bytes > act_bound);
  const bool wrong = act_wrong || m.sent != sent_predicted || m.received != received_predicted;
  std::vector<double> mine{static_cast<double>(m.activation_bytes), static_cast<double>(m.sent), wrong ? 1.0 : 0.0};
  std::vector<double> all(mine.size() * static_cast<std::size_t>(world.size()));
  world.all_gather(mine.data(), all.data(), mine.size(), DType::f64);
  for (int stage = 0; stage < setup.layout.pp; ++stage) {
    const std::size_t r = static_cast<std::size_t>(stage * setup.layout.tp);
    out.act.push_back(static_cast<std::int64_t>(all[3 * r]));
    out.sent.push_back(static_cast<std::int64_t>(all[3 * r + 1]));
    out.sent_predicted.push_back(predicted_p2p(s, unit, stage, message.block_bytes, message.wte_bytes).first);
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(world.size()); ++r) {
    out.wrong_stages += all[3 * r + 2] > 0 ? 1 : 0;
  }
  return out;
}

// What the footers and the trace take from the schedules run, in the order of --schedules.
struct Results {
  std::vector<pp::Schedule> schedules;
  std::vector<ScheduleMeasured> runs;
  std::vector<std::pair<double, std::string>> measured_rank, predicted_rank;  // (mean bubble, schedule)
  std::vector<double> standard_errors;  // [schedule]: of the measured mean bubble, spread / sqrt(steps)
  std::vector<std::string> charts;      // each schedule's median step drawn as text, a line each
  std::int64_t wrong_total = 0;         // stages off the prediction, all schedules
  std::vector<std::string> orders;      // the footers comparing each schedule's execution orders
};

// Collective over `world`: adds the row of schedule `s` run in `order` (its measurement m) to `report` (printed at once
// by rank 0) and its figures to `results`. Returns the measured step seconds and the predicted ones.
template <class T>
std::pair<double, double> add_row(Communicator& world, const plan::Place& place, const ScheduleSetup& setup,
                                  const Messages& message, const std::string& kind_name, const pp::Schedule& s,
                                  pp::Order order, const ScheduleMeasured& m, Report& report, Results& results) {
  const int chunks = s.chunks;
  const Bubbles bubble = bubbles_of(s, setup.layout.tp, m, message.seconds, {.order = order, .jitter = setup.jitter},
                                    static_cast<std::uint64_t>(setup.warmup));
  const std::string name = kind_name + (order == pp::Order::dynamic ? "/dyn" : "");
  const pp::Simulation timeline = timeline_of(s, setup.layout.tp, m.steps[m.median]);
  const StageBytes bytes = stage_bytes<T>(world, place.grid(), setup, s, order, m, message);
  results.wrong_total += bytes.wrong_stages;

  report.row({kind_name, std::string(pp::name_of(order)), std::to_string(chunks), format("%.2f", 1e3 * m.step_seconds),
              format("%.2f", 1e3 * bubble.predicted_seconds), format("%.3f", bubble.measured),
              format("%.3f", bubble.spread), format("%.3f", bubble.predicted),
              format("%+.3f", bubble.measured - bubble.predicted), joined(bytes.act),
              bytes.act_predicted.empty() ? "-" : joined(bytes.act_predicted), joined(bytes.sent), joined(bytes.sent_predicted),
              std::to_string(bytes.wrong_stages)});
  if (world.rank() == 0) report.print_row(stdout, report.rows() - 1);
  results.measured_rank.emplace_back(bubble.measured, name);
  results.predicted_rank.emplace_back(bubble.predicted, name);
  results.standard_errors.push_back(bubble.spread / std::sqrt(static_cast<double>(m.steps.size())));
  results.charts.push_back(
      format("%s, the median step (one character = %.2f ms):", name.c_str(), 1e3 * timeline.makespan / 40));
  for (const std::string& row : pp::chart(s, timeline, timeline.makespan / 40)) results.charts.push_back("  " + row);
  results.schedules.push_back(s);
  results.runs.push_back(m);
  return {m.step_seconds, bubble.predicted_seconds};
}

// The schedules' names from the smallest bubble to the largest ("a < b < c"; ties in the order run).
std::string ranking(std::vector<std::pair<double, std::string>> r) {
  std::stable_sort(r.begin(), r.end());
  std::string out;
  for (const auto& [bubble, name] : r) {
    if (!out.empty()) out += " < ";
    out += name;
  }
  return out;
}

// The footers: the rankings by measured and by predicted bubble, the pairs told apart and ordered alike, #wrong and
// the charts.
void footers(Report& report, const Results& results) {
  const std::string by_measured = ranking(results.measured_rank), by_predicted = ranking(results.predicted_rank);
  report.footer("ranked by measured bubble:  " + by_measured);
  report.footer("ranked by predicted bubble: " + by_predicted +
                (by_measured == by_predicted ? " (the same)" : " (differs)"));
  // Two schedules whose measured bubbles differ by less than twice the standard error of the difference are not told
  // apart by the measurement; the prediction should order every pair that the measurement does tell apart.
  const auto& measured_rank = results.measured_rank;
  const auto& predicted_rank = results.predicted_rank;
  int separated = 0, agreeing = 0;
  for (std::size_t a = 0; a < measured_rank.size(); ++a) {
    for (std::size_t b = a + 1; b < measured_rank.size(); ++b) {
      const double measured = measured_rank[a].first - measured_rank[b].first;
      const double error = std::hypot(results.standard_errors[a], results.standard_errors[b]);
      if (std::abs(measured) <= 2 * error) continue;
      ++separated;
      agreeing += (measured > 0) == (predicted_rank[a].first - predicted_rank[b].first > 0) ? 1 : 0;
    }
  }
  report.footer(format("pairs of schedules the measurement tells apart (bubbles more than 2 standard errors apart): "
                       "%d of %zu; ordered the same way by the prediction: %d", separated,
                       measured_rank.size() * (measured_rank.size() - 1) / 2, agreeing));
  report.footer(format("#wrong: %lld", static_cast<long long>(results.wrong_total)));
  for (const std::string& line : results.orders) report.footer(line);
  for (const std::string& line : results.charts) report.footer(line);
}

// T: f32 or f64; place: where setup.layout's stages are built (a 2D grid or the 1D baseline's group). Collective over
// `world`; rank 0 prints.
template <class T>
int run(Communicator& world, const cli::Options& o, const ScheduleSetup& setup, const plan::Place& place) {
  const Grid& grid = place.grid();
  const std::vector<std::string> names = o.list("schedules", "gpipe,1f1b,interleaved,wave,zb");
  const Messages message = messages_of<T>(world, grid, setup);
  Report report = pipeline_report(world, setup, message, sizeof(T) == 8 ? "f64" : "f32");
  if (world.rank() == 0) report.print_header(stdout);

  std::vector<pp::Order> orders;
  for (const std::string& order : o.list("execution", "static,dynamic")) orders.push_back(pp::parse_order(order));
  Results results;
  for (const std::string& name : names) {
    const pp::Schedule s = schedule_named(name, setup.layout.pp, setup.micro_batches, setup.chunks);
    const std::vector<ScheduleMeasured> measured = run_schedule<T>(world, place, setup, s, orders);
    std::vector<std::pair<double, double>> seconds;  // [order]: measured, predicted
    for (std::size_t k = 0; k < orders.size(); ++k) {
      seconds.push_back(add_row<T>(world, place, setup, message, name, s, orders[k], measured[k], report, results));
    }
    if (seconds.size() == 2 && orders[0] != orders[1]) {
      const std::size_t d = orders[0] == pp::Order::dynamic ? 0 : 1;  // the dynamic row, whichever ran first
      results.orders.push_back(format("%s: step time dynamic / static, measured %.3f, predicted %.3f", name.c_str(),
                                      seconds[d].first / seconds[1 - d].first,
                                      seconds[d].second / seconds[1 - d].second));
    }
  }
  if (setup.jitter > 0) {
    for (const std::string& line : simulated_orders(names, setup.chunks, setup.jitter)) results.orders.push_back(line);
  }
  footers(report, results);
  if (world.rank() == 0) report.print_footer(stdout);
  if (o.has("trace")) {
    if (world.rank() == 0) {
      write_trace(o.text("trace", ""), world.size(), setup.layout.tp, results.schedules, results.runs);
    }
    world.barrier();
  }
  if (o.has("json") && world.rank() == 0) report.write_json(o.text("json", ""), "pipeline");
  return results.wrong_total == 0 ? 0 : 1;
}

}  // namespace

int run_pipeline_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("pipeline"));
  world.set_timeout(o.timeout());
  ScheduleSetup setup{};
  plan::Layout& layout = setup.layout;
  const bool one_d = o.text("layout", "2d") == "1d";  // the option's meaning; the run is the layout's
  layout.tensor = one_d ? plan::TensorParallel::one_d : plan::TensorParallel::two_d;
  OPTIMUS_CHECK(!(one_d && o.has("q")), "pipeline: --q is the 2D grid's side; --layout 1d takes world / pp ranks "
                "per stage");
  layout.pp = static_cast<int>(o.integer("pp", 2));
  OPTIMUS_CHECK(layout.pp >= 2, "pipeline: --pp ", layout.pp, " is no pipeline (one stage accumulates its micro-batches "
                "one at a time whatever the schedule): the schedules differ from --pp 2 on");
  OPTIMUS_CHECK(!one_d || world.size() % layout.pp == 0, "pipeline: world size ", world.size(),
                " is not pp x p for pp = ", layout.pp);
  const int q = one_d ? 1 : static_cast<int>(o.integer("q", 1));
  layout.tp = one_d ? world.size() / layout.pp : q * q;
  setup.micro_batches = static_cast<int>(o.integer("m", 8));
  setup.chunks = static_cast<int>(o.integer("chunks", 2));
  setup.batch = o.integer("b", static_cast<std::int64_t>(setup.micro_batches) * q);
  setup.seq = o.integer("s", 64);
  setup.layers = o.integer("layers", 2 * static_cast<std::int64_t>(layout.pp) * setup.chunks);
  setup.warmup = static_cast<int>(o.integer("warmup", 1));
  setup.iters = static_cast<int>(o.integer("iters", 5));
  setup.jitter = o.real("jitter", 0);
  setup.config.hidden = o.integer("h", 256);
  setup.config.heads = o.integer("heads", 4);
  setup.config.ffn = o.integer("ffn", 4 * setup.config.hidden);
  setup.config.vocab = o.integer("vocab", 512);
  setup.config.max_seq = setup.seq;
  setup.config.layers = setup.layers;
  setup.config.dropout = 0.1;
  if (!one_d) Grid::check_world_size(world.size(), q, layout.pp);
  layout.dp = world.size() / (layout.pp * layout.tp);
  OPTIMUS_CHECK(setup.batch % setup.micro_batches == 0 && (setup.batch / setup.micro_batches) % q == 0,
                "pipeline: --b ", setup.batch, " sequences must split into --m ", setup.micro_batches,
                " micro-batches of a multiple of q = ", q, " sequences");
  cpu::set_gemm_threads(1);
  const bool f64 = o.text("dtype", "f32") == "f64";
  const plan::Place place = plan::Place::on_host(world, layout);
  return f64 ? run<double>(world, o, setup, place) : run<float>(world, o, setup, place);
}

}  // namespace optimus::bench

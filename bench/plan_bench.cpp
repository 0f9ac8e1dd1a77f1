// optimus-bench plan: the planner (optimus/plan/planner.hpp) checked against this machine. It plans a small GPT for
// the world's ranks (CPU ranks at the calibration's rates, --cores of them computing at once), runs every feasible
// plan that Optimus runs (up to --limit, spread evenly over the ranking, the planner's pick always) for --iters timed
// steps after --warmup, in --rounds rounds over all the plans, and prints, per plan:
//   pred_ms, meas_ms   the predicted and the measured step (the median over the steps of the slowest rank; forward,
//                      backward and AdamW; with rounds, the median of the rounds' figures);
//   spread%            the slowest round over the fastest, less 1 (0 with one round);
//   mem_MiB            the measured peak per rank of parameters/gradients/optimizer/activations (the largest stage);
//   #wrong             ranks x kinds whose peak differs from the memory model's for the rank's stage (must be 0);
// then the Spearman rank correlation of predicted and measured step times and how far the planner's pick is from the
// fastest plan measured. With two rounds or more it also prints the rank correlation of the rounds with one another:
// the measurement's own reproducibility, the most that can be asked of a model ranking the same plans.
//
//   optimus-bench plan --in-process 16 [--calibration FILE] [--cores 2] [--h 64] [--heads 4] [--layers 4] [--s 32]
//                      [--batch 16] [--vocab 512] [--layout 2d|1d] [--max-micro-batches 4] [--limit 40]
//                      [--memory 1GiB] [--warmup 1] [--iters 3] [--rounds 1] [--json FILE]
//   mpirun -np 4 optimus-bench plan --calibration FILE [--cores 2] ...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/plan/calibrate.hpp"
#include "optimus/plan/plan_report.hpp"
#include "optimus/plan/run.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace optimus::bench {
namespace {

// Ranks 1..n of `v` (ties share their mean rank).
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && v[order[j]] == v[order[i]]) ++j;
    for (std::size_t k = i; k < j; ++k) r[order[k]] = (static_cast<double>(i + j) + 1) / 2;
    i = j;
  }
  return r;
}

// Spearman's rho: Pearson's correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

std::string mib4(const plan::KindBytes& b) {
  const auto m = [](std::uint64_t x) { return static_cast<double>(x) / (1 << 20); };
  return format("%.3f/%.3f/%.3f/%.3f", m(b.parameters), m(b.gradients), m(b.optimizer), m(b.activations));
}

// Collective: the measured peaks of the largest stage (the rank with the most bytes of the four kinds) as text, and the
// ranks x kinds whose peak differs from the memory model's prediction for the rank's stage.
std::pair<std::string, std::int64_t> check_memory(Communicator& world, const plan::Layout& layout,
                                                  const plan::Workload& workload, const plan::Measured& m) {
  const std::vector<plan::MemoryPrediction> stages = plan::predict_memory_by_stage(layout, workload);
  const plan::KindBytes& want = stages[static_cast<std::size_t>(m.stage)].device;
  std::int64_t wrong = 0;
  for (MemoryKind kind : {MemoryKind::parameters, MemoryKind::gradients, MemoryKind::optimizer, MemoryKind::activations}) {
    wrong += m.device.of(kind) != want.of(kind) ? 1 : 0;
  }
  wrong = static_cast<std::int64_t>(world.all_reduce(static_cast<double>(wrong), ReduceOp::sum));
  const double mine =
      static_cast<double>(m.device.parameters + m.device.gradients + m.device.optimizer + m.device.activations);
  const double most = world.all_reduce(mine, ReduceOp::max);
  const int holder =
      static_cast<int>(world.all_reduce(mine == most ? static_cast<double>(world.rank()) : 1e9, ReduceOp::min));
  std::vector<double> kinds = {static_cast<double>(m.device.parameters), static_cast<double>(m.device.gradients),
                               static_cast<double>(m.device.optimizer), static_cast<double>(m.device.activations)};
  world.broadcast(kinds.data(), kinds.size(), DType::f64, holder);
  const plan::KindBytes shown{.parameters = static_cast<std::uint64_t>(kinds[0]),
                              .gradients = static_cast<std::uint64_t>(kinds[1]),
                              .optimizer = static_cast<std::uint64_t>(kinds[2]),
                              .activations = static_cast<std::uint64_t>(kinds[3])};
  return {mib4(shown), wrong};
}

// The planner's request for the bench's GPT on `cluster`.
plan::Request request_of(const cli::Options& o, const plan::Cluster& cluster) {
  plan::Request r;
  r.cluster = cluster;
  GptConfig& c = r.workload.config;
  c.hidden = o.integer("h", 64);
  c.heads = o.integer("heads", 4);
  c.layers = o.integer("layers", 4);
  c.ffn = o.integer("ffn", 4 * c.hidden);
  c.vocab = o.integer("vocab", 512);
  c.max_seq = o.integer("s", 32);
  c.dropout = 0.1;
  r.workload.seq = c.max_seq;
  r.workload.global_batch = o.integer("batch", 16);
  r.workload.element_bytes = r.workload.saved_bytes = 4;
  r.runnable_only = true;
  r.max_micro_batches = static_cast<int>(o.integer("max-micro-batches", 4));
  if (o.has("layout"))
    r.only = o.text("layout", "") == "2d" ? plan::TensorParallel::two_d : plan::TensorParallel::one_d;
  return r;
}

// The plans run, as indices into the ranking of `n`: all, or `limit` spread evenly over it (the first always).
std::vector<std::size_t> chosen_plans(std::size_t n, std::size_t limit) {
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < std::min(limit, n); ++i) {
    const std::size_t k = limit >= n ? i : i * (n - 1) / (limit - 1 == 0 ? 1 : limit - 1);
    if (chosen.empty() || chosen.back() != k) chosen.push_back(k);
  }
  return chosen;
}

// The report's columns and header line: the world, the plans feasible (n) and run, the steps and rounds.
Report plan_report(const Communicator& world, const cli::Options& o, std::size_t n, std::size_t chosen,
                   std::size_t limit) {
  Report report({{"rank", 4},
                 {"plan", 58},
                 {"pred_ms", 9},
                 {"meas_ms", 9},
                 {"meas/pred", 9},
                 {"spread%", 7},
                 {"mem_MiB p/g/o/a", 30},
                 {"#wrong", 6}});
  report.header(
      format("optimus-bench plan: world %d, %lld feasible plans Optimus runs, %zu run (--limit %zu), "
             "%d warm-up and %d timed steps each, in %d rounds",
             world.size(), static_cast<long long>(n), chosen, limit, static_cast<int>(o.integer("warmup", 1)),
             static_cast<int>(o.integer("iters", 3)), static_cast<int>(o.integer("rounds", 1))));
  return report;
}

// The chosen plans' measurements: each round's step times, and the memory checked in the first round.
struct Rounds {
  std::vector<std::vector<double>> by_round;  // [round][plan]: seconds per step
  std::vector<std::string> memory_shown;      // [plan]: the largest stage's peaks, MiB of p/g/o/a (check_memory)
  std::vector<std::int64_t> wrong_of;         // [plan]: ranks x kinds off the memory model
};

// Collective over `world`: every chosen plan measured once per round, the rounds one after another over all plans, so
// that the machine's drift falls on every plan alike. The memory is checked in the first round.
Rounds measure_rounds(Communicator& world, const cli::Options& o, const plan::Request& r, const plan::Result& result,
                      const std::vector<std::size_t>& chosen) {
  const int warmup = static_cast<int>(o.integer("warmup", 1)), iters = static_cast<int>(o.integer("iters", 3));
  const auto rounds = static_cast<std::size_t>(o.integer("rounds", 1));
  Rounds out{.by_round = std::vector<std::vector<double>>(rounds),
             .memory_shown = std::vector<std::string>(chosen.size()),
             .wrong_of = std::vector<std::int64_t>(chosen.size())};
  for (std::size_t round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      const plan::Plan& p = result.plans[chosen[i]];
      const plan::Measured m = plan::run_plan(world, p.layout, r.workload, warmup, iters);
      out.by_round[round].push_back(m.step_seconds);
      if (round == 0) std::tie(out.memory_shown[i], out.wrong_of[i]) = check_memory(world, p.layout, r.workload, m);
    }
  }
  return out;
}

// The chosen plans' predicted and measured step times (a plan's measured time: the median of its rounds), seconds.
struct Times {
  std::vector<double> predicted, measured;
};

// A row per chosen plan into `report` (each printed at once on the `root` rank); the plans' step times.
Times add_rows(Report& report, bool root, const plan::Result& result, const std::vector<std::size_t>& chosen,
               const Rounds& rounds) {
  Times out;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const plan::Plan& p = result.plans[chosen[i]];
    std::vector<double> times;
    for (const std::vector<double>& round : rounds.by_round) times.push_back(round[i]);
    out.predicted.push_back(p.time.seconds);
    out.measured.push_back(median(times));
    report.row({format("%zu", chosen[i] + 1), plan::describe(p.layout), format("%.2f", 1e3 * p.time.seconds),
                format("%.2f", 1e3 * out.measured.back()), format("%.2f", out.measured.back() / p.time.seconds),
                format("%.1f", 100 * (*std::max_element(times.begin(), times.end()) /
                                          *std::min_element(times.begin(), times.end()) -
                                      1)),
                rounds.memory_shown[i], format("%lld", static_cast<long long>(rounds.wrong_of[i]))});
    if (root) report.print_row(stdout, report.rows() - 1);
  }
  return out;
}

// Rank 0's summary lines: the rank correlation of prediction and measurement, the rounds' with one another (with two
// rounds or more), the planner's pick against the fastest plan and the memory check's total `wrong_total`.
void print_summary(const Times& t, const Rounds& rounds, std::int64_t wrong_total) {
  const double rho = spearman(t.predicted, t.measured);
  const double best = *std::min_element(t.measured.begin(), t.measured.end());
  const double pick = t.measured[0] / best;
  std::printf(
      "# Spearman rank correlation of predicted and measured step times over %zu plans: %.3f (acceptance: >= 0.8)\n",
      t.measured.size(), rho);
  const std::size_t count = rounds.by_round.size();
  if (count > 1) {
    // The measurement's own reproducibility: how well one round ranks the plans as another does. No model can be
    // expected to rank the plans more consistently with a measurement than the measurement does with itself.
    double sum = 0;
    int pairs = 0;
    for (std::size_t a = 0; a < count; ++a) {
      for (std::size_t b = a + 1; b < count; ++b, ++pairs) sum += spearman(rounds.by_round[a], rounds.by_round[b]);
    }
    std::printf("# the measurement against itself: Spearman between rounds, mean over %d pairs of %zu rounds: %.3f\n",
                pairs, count, sum / pairs);
  }
  std::printf(
      "# the planner's pick (rank 1) measured %.2f ms, the fastest measured %.2f ms: %.1f%% slower "
      "(acceptance: within 10%%)\n",
      1e3 * t.measured[0], 1e3 * best, 100 * (pick - 1));
  std::printf("# memory: %lld ranks x kinds off the model (must be 0)\n", static_cast<long long>(wrong_total));
}

// Collective over `world`: runs the plans of `result` (planned for `r`).
int bench(Communicator& world, const cli::Options& o, const plan::Request& r, const plan::Result& result) {
  const bool root = world.rank() == 0;
  if (root) {
    for (const std::string& line : plan::assumptions(r)) std::printf("%s\n", line.c_str());
  }
  OPTIMUS_CHECK(!result.plans.empty(), "plan: ", result.infeasible);
  const auto limit = static_cast<std::size_t>(o.integer("limit", 40));
  const std::vector<std::size_t> chosen = chosen_plans(result.plans.size(), limit);
  Report report = plan_report(world, o, result.plans.size(), chosen.size(), limit);
  if (root) report.print_header(stdout);
  // A plan's time is the median of its rounds.
  const Rounds rounds = measure_rounds(world, o, r, result, chosen);
  const Times times = add_rows(report, root, result, chosen, rounds);
  const std::int64_t wrong_total =
      std::accumulate(rounds.wrong_of.begin(), rounds.wrong_of.end(), std::int64_t{0});
  if (root) {
    print_summary(times, rounds, wrong_total);
    if (o.has("json")) report.write_json(o.text("json", ""), "plan");
  }
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int run_plan_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("plan"));
  world.set_timeout(o.timeout());
  const int ranks = o.has("in-process") ? static_cast<int>(o.integer("in-process", 1)) : world.size();
  const int cores = static_cast<int>(o.integer("cores", std::max(1u, std::thread::hardware_concurrency())));
  const std::uint64_t memory = o.bytes("memory", std::uint64_t{1} << 30);
  plan::Cluster cluster;
  if (o.has("calibration")) {
    cluster = plan::read_calibration(o.text("calibration", ""), ranks, cores, memory);
  } else {
    // Measured first: the rates with one in-process rank per core; a message's latency with the plans' ranks, which
    // wait for one another's turn on the cores (a broadcast's alpha over `ranks` is p - 1 messages: its share of one).
    OPTIMUS_CHECK(o.has("in-process") || world.size() == 1,
                  "plan under mpiexec needs --calibration (mpiexec -np CORES optimus-bench calibrate --json FILE)");
    plan::Calibration measured, crowded;
    run_in_process(std::max(cores, 2), [&](Communicator& w) {
      const plan::Calibration c = plan::calibrate(w, 5);
      if (w.rank() == 0) measured = c;
    });
    run_in_process(std::max(ranks, 2), [&](Communicator& w) {
      const plan::Calibration c = plan::calibrate(w, 5);
      if (w.rank() == 0) crowded = c;
    });
    cluster = plan::cluster_of(measured, ranks, cores, memory, "measured in-process first");
    cluster.intra.latency = cluster.inter.latency =
        std::max(measured.broadcast_alpha, crowded.broadcast_alpha / std::max(ranks - 1, 1));
    cluster.source +=
        format("; latency %.1f us per message measured with %d ranks", 1e6 * cluster.intra.latency, ranks);
    if (ranks > cores) {
      // The ranks share the cores: each collective call costs the machine the crowded figure per participant.
      cluster.call_seconds = crowded.call_seconds;
      cluster.source += format("; %.2f us per collective call and participant, measured with %d ranks on %d cores",
                               1e6 * cluster.call_seconds, ranks, cores);
    }
  }
  // Planned once (with ranks sharing cores the planner runs each layout's step once to count its calls).
  const plan::Request r = request_of(o, cluster);
  const plan::Result result = plan::plan(r);
  if (!o.has("in-process")) return bench(world, o, r, result);
  int status = 0;
  run_in_process(ranks, [&](Communicator& w) {
    w.set_timeout(o.timeout());
    const int s = bench(w, o, r, result);
    if (w.rank() == 0) status = s;
  });
  return status;
}

}  // namespace optimus::bench

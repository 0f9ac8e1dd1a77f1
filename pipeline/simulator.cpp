// The schedule validator and simulator (schedule.hpp, simulator.hpp): the structural rules, then a replay in which
// each stage runs its list in order and waits for its dependencies — the replay that finds a schedule that would
// wait forever is the one that times a good one.
#include "optimus/pipeline/simulator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "optimus/core/error.hpp"
#include "optimus/pipeline/dynamic_order.hpp"

namespace optimus::pipeline {
namespace {

constexpr double kNotYet = std::numeric_limits<double>::infinity();

// "stage 1 operation 3 (B0)"
std::string operation(const Schedule& s, int stage, std::size_t i) {
  return "stage " + std::to_string(stage) + " operation " + std::to_string(i) + " (" +
         describe(s, s.ops[static_cast<std::size_t>(stage)][i]) + ")";
}

std::string where(const Schedule& s, int stage, std::size_t i) {
  return "pipeline schedule " + std::string(name_of(s.kind)) + ": " + operation(s, stage, i);
}

// Every (work, micro-batch, chunk) once, the backward kinds the schedule's split says, micro-batch order per chunk.
void check_structure(const Schedule& s) {
  OPTIMUS_CHECK(s.stages >= 1 && s.chunks >= 1 && s.micro_batches >= 1, "pipeline schedule ", name_of(s.kind), ": ",
                s.stages, " stages, ", s.chunks, " chunks, ", s.micro_batches, " micro-batches (each at least 1)");
  OPTIMUS_CHECK(static_cast<int>(s.ops.size()) == s.stages, "pipeline schedule ", name_of(s.kind), ": lists for ",
                s.ops.size(), " stages, not ", s.stages);
  const std::vector<Work> kinds = s.split_backward
                                      ? std::vector<Work>{Work::forward, Work::backward_input, Work::backward_weight}
                                      : std::vector<Work>{Work::forward, Work::backward};
  for (int stage = 0; stage < s.stages; ++stage) {
    const std::vector<Op>& ops = s.ops[static_cast<std::size_t>(stage)];
    std::set<std::tuple<Work, int, int>> seen;
    // [work][chunk]: the next micro-batch expected, for the order rule.
    std::vector<std::vector<int>> next(4, std::vector<int>(static_cast<std::size_t>(s.chunks), 0));
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      OPTIMUS_CHECK(op.micro_batch >= 0 && op.micro_batch < s.micro_batches && op.chunk >= 0 && op.chunk < s.chunks,
                    where(s, stage, i), ": micro-batch ", op.micro_batch, " on chunk ", op.chunk,
                    " is not one of the ", s.micro_batches, " micro-batches on ", s.chunks, " chunks");
      OPTIMUS_CHECK(std::find(kinds.begin(), kinds.end(), op.work) != kinds.end(), where(s, stage, i),
                    s.split_backward ? ": a whole backward in a schedule split into B_input and B_weight"
                                     : ": a split backward in a schedule of whole backwards");
      OPTIMUS_CHECK(seen.emplace(op.work, op.micro_batch, op.chunk).second, where(s, stage, i), " appears twice");
      int& expected = next[static_cast<std::size_t>(op.work)][static_cast<std::size_t>(op.chunk)];
      OPTIMUS_CHECK(op.micro_batch == expected, where(s, stage, i), ": chunk ", op.chunk, " runs micro-batch ",
                    op.micro_batch, " where micro-batch ", expected, " comes first (each chunk takes micro-batches in "
                    "order, so that gradients accumulate in the order of pp = 1)");
      ++expected;
    }
    for (Work w : kinds) {
      for (int c = 0; c < s.chunks; ++c) {
        const int got = next[static_cast<std::size_t>(w)][static_cast<std::size_t>(c)];
        OPTIMUS_CHECK(got == s.micro_batches, "pipeline schedule ", name_of(s.kind), ": stage ", stage, " runs ",
                      describe(s, Op{.work = w, .micro_batch = got, .chunk = c}).substr(0, 1), " on chunk ", c,
                      " for ", got, " of the ", s.micro_batches, " micro-batches");
      }
    }
  }
}

// Finish times of every operation, indexed by work, micro-batch and virtual stage.
class Finishes {
 public:
  explicit Finishes(const Schedule& s)
      : u_(s.virtual_stages()), done_(4 * static_cast<std::size_t>(s.micro_batches * u_), kNotYet) {}
  double& at(Work w, int k, int u) {
    return done_[(static_cast<std::size_t>(w) * static_cast<std::size_t>(done_.size() / 4)) +
                 static_cast<std::size_t>(k * u_ + u)];
  }

 private:
  int u_;
  std::vector<double> done_;
};

struct Dependency {
  Work work;
  int micro_batch;
  int virtual_stage;
};

// What an operation waits for: at most two operations, kept in place (the replays ask for every operation's, often).
struct Dependencies {
  std::array<Dependency, 2> items{};
  std::size_t count = 0;
  void add(const Dependency& d) { items[count++] = d; }
  const Dependency* begin() const { return items.data(); }
  const Dependency* end() const { return items.data() + count; }
};

// What `op` on virtual stage u waits for.
Dependencies dependencies(const Schedule& s, const Op& op, int u) {
  const int k = op.micro_batch;
  Dependencies deps;
  switch (op.work) {
    case Work::forward:
      if (u > 0) deps.add({Work::forward, k, u - 1});
      break;
    case Work::backward:
    case Work::backward_input:
      deps.add({Work::forward, k, u});
      if (u + 1 < s.virtual_stages()) deps.add({op.work, k, u + 1});
      break;
    case Work::backward_weight: deps.add({Work::backward_input, k, u}); break;
  }
  return deps;
}

}  // namespace

double cost_of(const Costs& costs, Work work) {
  switch (work) {
    case Work::forward: return costs.forward;
    case Work::backward: return costs.backward;
    case Work::backward_input: return costs.backward_input;
    case Work::backward_weight: return costs.backward_weight;
  }
  return 0;
}

Simulation simulate(const Schedule& s, const Costs& costs) {
  check_structure(s);
  return simulate(s, std::vector<Costs>(static_cast<std::size_t>(s.virtual_stages()), costs));
}

Simulation simulate(const Schedule& s, const std::vector<Costs>& by_virtual_stage) {
  return simulate(s, by_virtual_stage, Replay{});
}

namespace {

// One replay of a schedule: each operation's start and finish, the stages' messages and live micro-batches.
class Replayer {
 public:
  Replayer(const Schedule& s, const std::vector<Costs>& by_virtual_stage, const Replay& replay)
      : s_(s), costs_(by_virtual_stage), replay_(replay), finished_(s),
        next_(static_cast<std::size_t>(s.stages), 0), free_at_(static_cast<std::size_t>(s.stages), 0),
        live_(static_cast<std::size_t>(s.stages), 0),
        frees_(s.split_backward ? Work::backward_weight : Work::backward) {
    sim_.times.resize(static_cast<std::size_t>(s.stages));
    sim_.peak_live.assign(static_cast<std::size_t>(s.stages), 0);
    sim_.sends.assign(static_cast<std::size_t>(s.stages), 0);
    sim_.receives.assign(static_cast<std::size_t>(s.stages), 0);
    for (int stage = 0; stage < s.stages; ++stage) {
      sim_.times[static_cast<std::size_t>(stage)].resize(s.ops[static_cast<std::size_t>(stage)].size());
    }
  }

  // Each stage runs its list in order as far as its dependencies have finished, sweeping the stages until none moves.
  void run_in_order() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int stage = 0; stage < s_.stages; ++stage) {
        const auto st = static_cast<std::size_t>(stage);
        for (; next_[st] < s_.ops[st].size(); ++next_[st]) {
          const double start = start_of(stage, next_[st]);
          if (start == kNotYet) break;
          run(stage, next_[st], start);
          progress = true;
        }
      }
    }
  }

  // Each round runs the operation that starts first of all stages' choices (a stage's choice: the earliest start of
  // the operations its order allows, the list order breaking ties), so every finish it depends on is known.
  void run_message_driven() {
    std::vector<DynamicOrder> orders;
    for (int stage = 0; stage < s_.stages; ++stage) orders.emplace_back(s_, stage);
    for (;;) {
      int best_stage = -1;
      std::size_t best = 0;
      double best_start = kNotYet;
      for (int stage = 0; stage < s_.stages; ++stage) {
        for (const std::size_t i : orders[static_cast<std::size_t>(stage)].allowed()) {
          const double start = start_of(stage, i);
          if (start < best_start) {
            best_stage = stage;
            best = i;
            best_start = start;
          }
        }
      }
      if (best_stage < 0) break;
      run(best_stage, best, best_start);
      DynamicOrder& order = orders[static_cast<std::size_t>(best_stage)];
      order.ran(best);
      next_[static_cast<std::size_t>(best_stage)] = order.first_not_run();
    }
  }

  // Throws, naming every stage's first operation that never ran and what it waits for, unless all ran; then the
  // makespan and the bubble.
  Simulation finish() {
    std::ostringstream stuck;
    for (int stage = 0; stage < s_.stages; ++stage) {
      const auto st = static_cast<std::size_t>(stage);
      if (next_[st] == s_.ops[st].size()) continue;
      const Op& op = s_.ops[st][next_[st]];
      stuck << (stuck.tellp() > 0 ? "; " : "") << operation(s_, stage, next_[st]) << " waits for";
      for (const Dependency& d : dependencies(s_, op, s_.virtual_stage(stage, op.chunk))) {
        if (finished_.at(d.work, d.micro_batch, d.virtual_stage) != kNotYet) continue;
        stuck << ' '
              << describe(s_, Op{.work = d.work, .micro_batch = d.micro_batch, .chunk = s_.chunk_of(d.virtual_stage)})
              << " on stage " << s_.stage_of(d.virtual_stage);
      }
    }
    OPTIMUS_CHECK(stuck.tellp() == 0, "pipeline schedule ", name_of(s_.kind), " would wait forever: ", stuck.str());
    double busy = 0;
    for (const auto& stage : sim_.times) {
      for (const Interval& i : stage) {
        sim_.makespan = std::max(sim_.makespan, i.end);
        busy += i.end - i.start;
      }
    }
    sim_.bubble = sim_.makespan > 0 ? 1.0 - busy / (s_.stages * sim_.makespan) : 0.0;
    return std::move(sim_);
  }

 private:
  // When operation i of `stage` could start (kNotYet while a dependency has not run).
  double start_of(int stage, std::size_t i) {
    const Op& op = s_.ops[static_cast<std::size_t>(stage)][i];
    const int u = s_.virtual_stage(stage, op.chunk);
    double start = free_at_[static_cast<std::size_t>(stage)];
    for (const Dependency& d : dependencies(s_, op, u)) {
      const double t = finished_.at(d.work, d.micro_batch, d.virtual_stage);
      if (t == kNotYet) return kNotYet;
      start = std::max(start, t + (s_.stage_of(d.virtual_stage) == stage ? 0.0 : costs_[u].p2p));
    }
    return start;
  }

  // Runs operation i of `stage` from `start`: its messages, its cost (jittered), its finish and the stage's live count.
  void run(int stage, std::size_t i, double start) {
    const auto st = static_cast<std::size_t>(stage);
    const Op& op = s_.ops[st][i];
    const int u = s_.virtual_stage(stage, op.chunk);
    for (const Dependency& d : dependencies(s_, op, u)) {  // a message for each dependency on another stage
      const int from = s_.stage_of(d.virtual_stage);
      if (from == stage) continue;
      ++sim_.sends[static_cast<std::size_t>(from)];
      ++sim_.receives[st];
    }
    const double jitter = replay_.execution.jitter;
    const double cost = cost_of(costs_[static_cast<std::size_t>(u)], op.work) *
                        (jitter > 0 ? 1 + jitter * jitter_draw(replay_.step, stage, i) : 1.0);
    const double end = start + cost;
    finished_.at(op.work, op.micro_batch, u) = end;
    sim_.times[st][i] = Interval{.start = start, .end = end};
    free_at_[st] = end;
    if (op.work == Work::forward) sim_.peak_live[st] = std::max(sim_.peak_live[st], ++live_[st]);
    if (op.work == frees_) --live_[st];
  }

  const Schedule& s_;
  const std::vector<Costs>& costs_;
  const Replay& replay_;
  Finishes finished_;
  Simulation sim_;
  std::vector<std::size_t> next_;  // each stage's first operation not yet run
  std::vector<double> free_at_;
  std::vector<int> live_;
  Work frees_;  // the operation after which a micro-batch's activations are freed
};

}  // namespace

Simulation simulate(const Schedule& s, const std::vector<Costs>& by_virtual_stage, const Replay& replay) {
  check_structure(s);
  OPTIMUS_CHECK(static_cast<int>(by_virtual_stage.size()) == s.virtual_stages(), "pipeline simulation of ",
                name_of(s.kind), ": costs for ", by_virtual_stage.size(), " virtual stages, not ",
                s.virtual_stages());
  OPTIMUS_CHECK(replay.execution.jitter >= 0 && std::isfinite(replay.execution.jitter), "pipeline simulation: jitter ",
                replay.execution.jitter, " is not a fraction >= 0");
  Replayer replayer(s, by_virtual_stage, replay);
  if (replay.execution.order == Order::dynamic) {
    replayer.run_message_driven();
  } else {
    replayer.run_in_order();
  }
  return replayer.finish();
}

void validate(const Schedule& schedule) { simulate(schedule, Costs{}); }

std::vector<std::string> chart(const Schedule& s, const Simulation& sim, double unit) {
  OPTIMUS_CHECK(unit > 0 && std::isfinite(unit), "pipeline chart: the unit of time must be positive, got ", unit);
  const auto column = [&](double t) { return static_cast<std::size_t>(std::lround(3 * t / unit)); };
  const std::size_t width = column(sim.makespan);
  std::vector<std::string> rows;
  for (int stage = 0; stage < s.stages; ++stage) {
    std::string row(width, '.');
    const auto st = static_cast<std::size_t>(stage);
    for (std::size_t i = 0; i < s.ops[st].size() && i < sim.times[st].size(); ++i) {
      const std::size_t from = column(sim.times[st][i].start), to = std::max(column(sim.times[st][i].end), from + 1);
      const std::size_t n = to - from;
      std::string cell = describe(s, s.ops[st][i]);  // cut short when it does not fit
      cell.resize(n > 1 ? n - 1 : 1, '-');
      if (n > 1) cell += ' ';
      row.replace(from, n, cell);
    }
    rows.push_back("stage " + std::to_string(stage) + " |" + row + "|");
  }
  return rows;
}

}  // namespace optimus::pipeline

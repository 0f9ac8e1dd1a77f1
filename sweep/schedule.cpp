// The sweep's scheduler simulator (optimus/sweep/schedule.hpp): list scheduling of every member's chain of shard runs.
#include "optimus/sweep/schedule.hpp"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstddef>
#include <sstream>

#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"
#include "optimus/pipeline/simulator.hpp"

namespace optimus::sweep {
namespace {

// One run of a member's chain, before it is placed.
struct Task {
  int step, shard;
  bool backward;
  double compute, copy;
};

// forward shards 0..S-1 then backward S-1..0, per step.
std::vector<Task> chain_of(const MemberWork& m) {
  std::vector<Task> chain;
  const int shards = static_cast<int>(m.shards.size());
  for (int step = 0; step < m.steps; ++step) {
    for (int k = 0; k < shards; ++k) {
      const ShardCosts& c = m.shards[static_cast<std::size_t>(k)];
      chain.push_back({.step = step, .shard = k, .backward = false, .compute = c.forward, .copy = c.copy});
    }
    for (int k = shards - 1; k >= 0; --k) {
      const ShardCosts& c = m.shards[static_cast<std::size_t>(k)];
      chain.push_back({.step = step, .shard = k, .backward = true, .compute = c.backward, .copy = c.copy});
    }
  }
  return chain;
}

void check(const std::vector<MemberWork>& members, int slots) {
  OPTIMUS_CHECK(slots >= 1, "sweep: ", slots, " slots; a sweep needs at least one");
  OPTIMUS_CHECK(!members.empty(), "sweep: no members");
  for (const MemberWork& m : members) {
    OPTIMUS_CHECK(!m.shards.empty(), "sweep: member '", m.name, "' has no shards");
    OPTIMUS_CHECK(m.steps >= 1, "sweep: member '", m.name, "' trains ", m.steps, " steps; at least one");
    for (std::size_t k = 0; k < m.shards.size(); ++k) {
      const ShardCosts& c = m.shards[k];
      for (const double v : {c.forward, c.backward, c.copy}) {
        OPTIMUS_CHECK(std::isfinite(v) && v >= 0, "sweep: member '", m.name, "' shard ", k, " has a cost of ", v,
                      " s; costs are finite and not negative");
      }
    }
  }
}

// The member `scheduler` picks among `candidates` (member indices, ascending; not empty).
int pick(Scheduler scheduler, const std::vector<int>& candidates, const std::vector<double>& remaining, int last,
         int members) {
  if (scheduler == Scheduler::lrtf) {
    int best = candidates.front();
    for (const int m : candidates) {
      if (remaining[static_cast<std::size_t>(m)] > remaining[static_cast<std::size_t>(best)]) best = m;
    }
    return best;
  }
  for (int k = 1; k <= members; ++k) {  // round-robin: the first candidate after `last`, cyclically
    const int m = (last + k) % members;
    if (std::find(candidates.begin(), candidates.end(), m) != candidates.end()) return m;
  }
  return candidates.front();
}

// The slots' two buffers: a slot may load its next shard once its current run computes (the other buffer is then
// free), and compute once the current run ends. place() puts a run on a slot and records it.
class Slots {
 public:
  explicit Slots(int slots) : load_free_(static_cast<std::size_t>(slots), 0.0), compute_free_(load_free_) {}
  // When slot s could start computing a new run (its other buffer is free earlier: when its current run started).
  double free(std::size_t s) const { return compute_free_[s]; }
  std::size_t size() const { return load_free_.size(); }
  // `task` of `member` (ready at `ready`) on slot s, its copy starting no earlier than `not_before`.
  ShardRun place(std::size_t s, int member, const Task& task, double ready, double not_before, SweepTimeline& out) {
    ShardRun run{.member = member, .step = task.step, .shard = task.shard, .backward = task.backward,
                 .slot = static_cast<int>(s), .copy_start = std::max(load_free_[s], not_before), .start = 0, .end = 0,
                 .copy_seconds = task.copy, .shards = 1, .micro_batch = -1};
    run.start = std::max({run.copy_start + task.copy, compute_free_[s], ready});
    run.end = run.start + task.compute;
    load_free_[s] = run.start;
    compute_free_[s] = run.end;
    out.makespan = std::max(out.makespan, run.end);
    out.runs.push_back(run);
    return run;
  }

 private:
  std::vector<double> load_free_, compute_free_;
};

// HYDRA's task parallelism: the slot that can compute first takes the next run of a member picked by `scheduler`.
SweepTimeline shared_slots(const std::vector<std::vector<Task>>& chains, int slots, Scheduler scheduler) {
  const std::size_t n = chains.size();
  std::vector<double> remaining(n, 0.0), ready(n, 0.0);  // compute left; when the member's last placed run ends
  std::vector<std::size_t> next(n, 0);
  std::size_t total = 0;
  for (std::size_t m = 0; m < n; ++m) {
    for (const Task& t : chains[m]) remaining[m] += t.compute;
    total += chains[m].size();
  }
  Slots place(slots);
  SweepTimeline out;
  int last = -1;
  while (out.runs.size() < total) {
    // The slot that can start computing first: an idle one before one whose buffer is free while it computes.
    std::size_t s = 0;
    for (std::size_t k = 1; k < place.size(); ++k) {
      if (place.free(k) < place.free(s)) s = k;
    }
    std::vector<int> candidates, waiting;  // ready by then; all with runs left
    for (std::size_t m = 0; m < n; ++m) {
      if (next[m] == chains[m].size()) continue;
      waiting.push_back(static_cast<int>(m));
      if (ready[m] <= place.free(s)) candidates.push_back(static_cast<int>(m));
    }
    if (candidates.empty()) {  // none ready in time: those ready first
      double first = ready[static_cast<std::size_t>(waiting.front())];
      for (const int m : waiting) first = std::min(first, ready[static_cast<std::size_t>(m)]);
      for (const int m : waiting) {
        if (ready[static_cast<std::size_t>(m)] == first) candidates.push_back(m);
      }
    }
    const int chosen = pick(scheduler, candidates, remaining, last, static_cast<int>(n));
    const auto m = static_cast<std::size_t>(chosen);
    const Task& task = chains[m][next[m]++];
    ready[m] = place.place(s, chosen, task, ready[m], 0.0, out).end;
    remaining[m] -= task.compute;
    last = chosen;
  }
  return out;
}

// The runtime's placement (optimus/sweep/runtime.hpp): shard k always on slot k mod D. Of the slots, the one that can
// start a run first takes one — among the members whose next run is its shard and is ready by then, the scheduler's
// pick.
SweepTimeline pinned_slots(const std::vector<std::vector<Task>>& chains, int slots, Scheduler scheduler) {
  const std::size_t n = chains.size();
  std::vector<double> remaining(n, 0.0), ready(n, 0.0);
  std::vector<std::size_t> next(n, 0);
  std::size_t total = 0;
  for (std::size_t m = 0; m < n; ++m) {
    for (const Task& t : chains[m]) remaining[m] += t.compute;
    total += chains[m].size();
  }
  const auto slot_of = [slots](const Task& t) { return static_cast<std::size_t>(t.shard % slots); };
  Slots place(slots);
  SweepTimeline out;
  std::vector<int> last(static_cast<std::size_t>(slots), -1);
  while (out.runs.size() < total) {
    // when each slot could start its earliest ready run; the first of them takes one
    std::size_t s = 0;
    double start = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < place.size(); ++k) {
      for (std::size_t m = 0; m < n; ++m) {
        if (next[m] == chains[m].size() || slot_of(chains[m][next[m]]) != k) continue;
        const double t = std::max(place.free(k), ready[m]);
        if (t < start) {
          start = t;
          s = k;
        }
      }
    }
    std::vector<int> candidates;
    for (std::size_t m = 0; m < n; ++m) {
      if (next[m] < chains[m].size() && slot_of(chains[m][next[m]]) == s && ready[m] <= start) {
        candidates.push_back(static_cast<int>(m));
      }
    }
    const int chosen = pick(scheduler, candidates, remaining, last[s], static_cast<int>(n));
    const auto m = static_cast<std::size_t>(chosen);
    const Task& task = chains[m][next[m]++];
    ready[m] = place.place(s, chosen, task, ready[m], 0.0, out).end;
    remaining[m] -= task.compute;
    last[s] = chosen;
  }
  return out;
}

// The model-parallel baseline: members one at a time, shard k on slot k mod D.
SweepTimeline model_parallel(const std::vector<std::vector<Task>>& chains, int slots) {
  Slots place(slots);
  SweepTimeline out;
  double previous_member_end = 0;
  for (std::size_t m = 0; m < chains.size(); ++m) {
    double ready = previous_member_end;
    for (const Task& task : chains[m]) {
      const auto s = static_cast<std::size_t>(task.shard % slots);
      ready = place.place(s, static_cast<int>(m), task, ready, previous_member_end, out).end;
    }
    previous_member_end = ready;
  }
  return out;
}

// One member's step as the pipeline baseline runs it: its shards grouped into `stages` consecutive stages, each
// micro-batch's forward and backward costing 1/m of the whole batch's. first: [stages + 1], stage p's first shard.
std::vector<pipeline::Costs> stage_costs(const MemberWork& m, int stages, int micro_batches, std::vector<int>& first) {
  const int shards = static_cast<int>(m.shards.size());
  first.assign(static_cast<std::size_t>(stages) + 1, 0);
  std::vector<pipeline::Costs> costs(static_cast<std::size_t>(stages));
  for (int p = 0; p <= stages; ++p) first[static_cast<std::size_t>(p)] = p * shards / stages;
  for (int p = 0; p < stages; ++p) {
    pipeline::Costs& c = costs[static_cast<std::size_t>(p)];
    c.forward = c.backward = 0;
    for (int k = first[static_cast<std::size_t>(p)]; k < first[static_cast<std::size_t>(p) + 1]; ++k) {
      c.forward += m.shards[static_cast<std::size_t>(k)].forward / micro_batches;
      c.backward += m.shards[static_cast<std::size_t>(k)].backward / micro_batches;
    }
  }
  return costs;
}

}  // namespace

Scheduler parse_scheduler(std::string_view name) {
  if (name == "lrtf") return Scheduler::lrtf;
  if (name == "round-robin") return Scheduler::round_robin;
  if (name == "model-parallel") return Scheduler::model_parallel;
  if (name == "pipeline") return Scheduler::pipeline;
  OPTIMUS_FAIL("sweep: unknown scheduler '", name, "' (lrtf, round-robin, model-parallel or pipeline)");
}

std::string_view name_of(Scheduler scheduler) {
  switch (scheduler) {
    case Scheduler::lrtf: return "lrtf";
    case Scheduler::round_robin: return "round-robin";
    case Scheduler::model_parallel: return "model-parallel";
    case Scheduler::pipeline: return "pipeline";
  }
  return "?";
}

SweepTimeline simulate(const std::vector<MemberWork>& members, int slots, Scheduler scheduler) {
  return simulate(members, slots, scheduler, ShardPlacement::any_slot);
}

SweepTimeline simulate(const std::vector<MemberWork>& members, int slots, Scheduler scheduler,
                       ShardPlacement placement) {
  check(members, slots);
  OPTIMUS_CHECK(scheduler != Scheduler::pipeline, "sweep: the pipeline baseline takes its schedule and micro-batches "
                "(simulate_pipeline)");
  std::vector<std::vector<Task>> chains;
  for (const MemberWork& m : members) chains.push_back(chain_of(m));
  if (scheduler == Scheduler::model_parallel) return model_parallel(chains, slots);
  return placement == ShardPlacement::any_slot ? shared_slots(chains, slots, scheduler)
                                               : pinned_slots(chains, slots, scheduler);
}

SweepTimeline simulate_pipeline(const std::vector<MemberWork>& members, int slots, PipelineBaseline baseline) {
  check(members, slots);
  OPTIMUS_CHECK(baseline.kind == pipeline::Kind::gpipe || baseline.kind == pipeline::Kind::one_f_one_b,
                "sweep: the pipeline baseline runs gpipe or 1f1b, not ", pipeline::name_of(baseline.kind));
  OPTIMUS_CHECK(baseline.micro_batches >= 1, "sweep: the pipeline baseline on ", baseline.micro_batches,
                " micro-batches; at least one");
  SweepTimeline out;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const int stages = std::min(static_cast<int>(members[m].shards.size()), slots);
    std::vector<int> first;
    const std::vector<pipeline::Costs> costs = stage_costs(members[m], stages, baseline.micro_batches, first);
    const pipeline::Schedule schedule = pipeline::make_schedule(
        {.kind = baseline.kind, .stages = stages, .micro_batches = baseline.micro_batches, .chunks = 1});
    const pipeline::Simulation sim = pipeline::simulate(schedule, costs);
    for (int step = 0; step < members[m].steps; ++step) {
      for (int p = 0; p < stages; ++p) {
        const auto& ops = schedule.ops[static_cast<std::size_t>(p)];
        for (std::size_t i = 0; i < ops.size(); ++i) {
          const pipeline::Interval& t = sim.times[static_cast<std::size_t>(p)][i];
          const int from = first[static_cast<std::size_t>(p)];
          out.runs.push_back({.member = static_cast<int>(m), .step = step, .shard = from,
                              .backward = ops[i].work != pipeline::Work::forward, .slot = p,
                              .copy_start = out.makespan + t.start, .start = out.makespan + t.start,
                              .end = out.makespan + t.end, .copy_seconds = 0,
                              .shards = first[static_cast<std::size_t>(p) + 1] - from,
                              .micro_batch = ops[i].micro_batch});
        }
      }
      out.makespan += sim.makespan;
    }
  }
  return out;
}

std::string gantt(const SweepTimeline& timeline, const std::vector<MemberWork>& members, int slots, int width) {
  OPTIMUS_CHECK(width >= 1, "sweep: a Gantt chart ", width, " characters wide");
  const auto letter = [](int member) { return member < 26 ? static_cast<char>('A' + member) : '#'; };
  std::ostringstream out;
  const double per = timeline.makespan / width;  // seconds per character
  for (int s = 0; s < slots; ++s) {
    out << "slot " << s << " |";
    for (int c = 0; c < width; ++c) {
      const double at = (c + 0.5) * per;
      char mark = '.';
      for (const ShardRun& r : timeline.runs) {
        if (r.slot == s && r.start <= at && at < r.end) mark = letter(r.member);
      }
      out << mark;
    }
    out << "|\n";
  }
  for (std::size_t m = 0; m < members.size(); ++m) {
    out << "  " << letter(static_cast<int>(m)) << "  " << members[m].name << " (" << members[m].shards.size()
        << " shards, " << members[m].steps << " steps)\n";
  }
  return out.str();
}

std::string chrome_trace(const SweepTimeline& timeline, const std::vector<MemberWork>& members) {
  nlohmann::json events = nlohmann::json::array();
  for (const ShardRun& r : timeline.runs) {
    const std::string& name = members.at(static_cast<std::size_t>(r.member)).name;
    std::string what = name + (r.backward ? " B" : " F");
    what += r.shards == 1 ? " shard " + std::to_string(r.shard)
                          : " shards " + std::to_string(r.shard) + "-" + std::to_string(r.shard + r.shards - 1);
    if (r.micro_batch >= 0) what += " micro-batch " + std::to_string(r.micro_batch);
    what += " step " + std::to_string(r.step);
    events.push_back({{"name", what}, {"ph", "X"}, {"pid", 0}, {"tid", r.slot}, {"ts", r.start * 1e6},
                      {"dur", (r.end - r.start) * 1e6}});
    if (r.copy_seconds > 0) {
      events.push_back({{"name", name + " copy shard " + std::to_string(r.shard)}, {"ph", "X"}, {"pid", 1},
                        {"tid", r.slot}, {"ts", r.copy_start * 1e6}, {"dur", r.copy_seconds * 1e6}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace optimus::sweep

// The sweep's scheduler simulator (optimus/sweep/schedule.hpp): list scheduling of every member's chain of shard runs.
#include "optimus/sweep/schedule.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <cmath>
#include <cstddef>
#include <sstream>

#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"
#include "optimus/pipeline/simulator.hpp"

namespace optimus::sweep {
namespace {

// One run of a member's chain, before it is placed. Consecutive end runs form a group: each ready when the step's last
// backward ends, the member's next run when all of them have.
struct Task {
  int step, shard;
  bool backward, step_end;
  double compute, copy;
};

// forward shards 0..S-1, then backward S-1..0, then (separate_ends, and some shard has an end cost) each shard's end,
// per step; without separate ends a shard's end cost is added to its backward's (HYDRA's: its optimizer step follows
// its backward).
std::vector<Task> chain_of(const MemberWork& m, bool separate_ends) {
  std::vector<Task> chain;
  const int shards = static_cast<int>(m.shards.size());
  const bool ends = separate_ends && std::any_of(m.shards.begin(), m.shards.end(),
                                                 [](const ShardCosts& c) { return c.end > 0; });
  for (int step = 0; step < m.steps; ++step) {
    for (int k = 0; k < shards; ++k) {
      const ShardCosts& c = m.shards[static_cast<std::size_t>(k)];
      chain.push_back(
          {.step = step, .shard = k, .backward = false, .step_end = false, .compute = c.forward, .copy = c.copy});
    }
    for (int k = shards - 1; k >= 0; --k) {
      const ShardCosts& c = m.shards[static_cast<std::size_t>(k)];
      chain.push_back({.step = step, .shard = k, .backward = true, .step_end = false,
                       .compute = c.backward + (ends ? 0.0 : c.end), .copy = c.copy});
    }
    for (int k = 0; ends && k < shards; ++k) {  // the shard's state is in its slot since its backward: nothing copied
      const ShardCosts& c = m.shards[static_cast<std::size_t>(k)];
      chain.push_back({.step = step, .shard = k, .backward = false, .step_end = true, .compute = c.end, .copy = 0});
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
      for (const double v : {c.forward, c.backward, c.copy, c.end}) {
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
                 .step_end = task.step_end, .slot = static_cast<int>(s),
                 .copy_start = std::max(load_free_[s], not_before), .start = 0, .end = 0,
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

// Where a member's chain stands as the runtime's placement and model parallelism place it: its next run, or the
// step's end group (its runs placed in any order, each on its shard's slot, all ready when the group is).
class ChainCursor {
 public:
  ChainCursor(const std::vector<Task>& chain, int slots) : chain_(&chain), slots_(slots) {}
  bool finished() const { return next_ == chain_->size(); }
  const Task& task(std::size_t i) const { return (*chain_)[i]; }
  std::size_t slot_of(std::size_t i) const { return static_cast<std::size_t>(task(i).shard % slots_); }
  // When the next run (or each run of the next end group) may start.
  double ready() const { return ready_; }

  // The run slot s would take next, if any: the next run if it is s's, else the end group's first unplaced run on s.
  std::optional<std::size_t> next_on(std::size_t s) const {
    if (finished()) return std::nullopt;
    if (!task(next_).step_end) return slot_of(next_) == s ? std::optional(next_) : std::nullopt;
    for (std::size_t i = next_; i < group_end_; ++i) {
      if (!placed_[i] && slot_of(i) == s) return i;
    }
    return std::nullopt;
  }

  // Runs of step `step` placed on slot s so far (0 for a step not begun).
  int done_on(std::size_t s, int step) const { return step == counted_step_ ? done_on_[s] : 0; }

  // Run i placed, ending at `end`: the chain moves on (past an end group once all of it is placed).
  void placed(std::size_t i, double end) {
    placed_[i] = true;
    if (task(i).step != counted_step_) {
      counted_step_ = task(i).step;
      std::fill(done_on_.begin(), done_on_.end(), 0);
    }
    ++done_on_[slot_of(i)];
    if (!task(next_).step_end) {
      ready_ = end;
      ++next_;
    } else {
      group_finish_ = std::max(group_finish_, end);
      if (!std::all_of(placed_.begin() + static_cast<std::ptrdiff_t>(next_),
                       placed_.begin() + static_cast<std::ptrdiff_t>(group_end_), [](bool p) { return p; })) {
        return;
      }
      ready_ = group_finish_;
      next_ = group_end_;
    }
    if (finished() || !task(next_).step_end) return;
    group_end_ = next_;  // a new end group: its runs, all of this step's
    while (group_end_ < chain_->size() && task(group_end_).step_end && task(group_end_).step == task(next_).step) {
      ++group_end_;
    }
    group_finish_ = ready_;
  }

 private:
  const std::vector<Task>* chain_;
  int slots_;
  std::size_t next_ = 0, group_end_ = 0;
  double ready_ = 0, group_finish_ = 0;
  std::vector<bool> placed_ = std::vector<bool>(chain_->size(), false);  // [i]: run i placed
  int counted_step_ = 0;                                                  // the step done_on_ counts
  std::vector<int> done_on_ = std::vector<int>(static_cast<std::size_t>(slots_), 0);  // [s]: its runs placed there
};

// The runtime's pick (runtime.hpp) among `candidates` on slot s: lrtf the member with the longest remaining training
// time in whole steps (its steps left, this one included, times its step's compute: MemberSteps::remaining), between
// equal ones the one with the most of its step's runs already done on this slot, then the lower index; round-robin as
// pick.
int pick_pinned(Scheduler scheduler, const std::vector<int>& candidates, const std::vector<ChainCursor>& cursors,
                const std::vector<MemberWork>& members, std::size_t s, int last) {
  const int n = static_cast<int>(members.size());
  if (scheduler != Scheduler::lrtf) return pick(scheduler, candidates, {}, last, n);
  const auto key = [&](int m) {
    const ChainCursor& c = cursors[static_cast<std::size_t>(m)];
    const MemberWork& w = members[static_cast<std::size_t>(m)];
    const int step = c.task(*c.next_on(s)).step;
    double step_compute = 0;
    for (const ShardCosts& k : w.shards) step_compute += k.forward + k.backward + k.end;
    return std::pair{(w.steps - step) * step_compute, c.done_on(s, step)};
  };
  int best = candidates.front();
  for (const int m : candidates) {
    if (key(m) > key(best)) best = m;
  }
  return best;
}

// The runtime's placement (optimus/sweep/runtime.hpp): shard k always on slot k mod D, a step's ends after its last
// backward. Of the slots, the one that can start a run first takes one — among the members whose next run is on it
// and is ready by then, the runtime's pick.
SweepTimeline pinned_slots(const std::vector<std::vector<Task>>& chains, const std::vector<MemberWork>& members,
                           int slots, Scheduler scheduler) {
  const std::size_t n = chains.size();
  std::vector<ChainCursor> cursors;
  std::size_t total = 0;
  for (std::size_t m = 0; m < n; ++m) {
    cursors.emplace_back(chains[m], slots);
    total += chains[m].size();
  }
  Slots place(slots);
  SweepTimeline out;
  std::vector<int> last(static_cast<std::size_t>(slots), -1);
  while (out.runs.size() < total) {
    // when each slot could start its earliest ready run; the first of them takes one
    std::size_t s = 0;
    double start = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < place.size(); ++k) {
      for (std::size_t m = 0; m < n; ++m) {
        if (!cursors[m].next_on(k)) continue;
        const double t = std::max(place.free(k), cursors[m].ready());
        if (t < start) {
          start = t;
          s = k;
        }
      }
    }
    std::vector<int> candidates;
    for (std::size_t m = 0; m < n; ++m) {
      if (cursors[m].next_on(s) && cursors[m].ready() <= start) candidates.push_back(static_cast<int>(m));
    }
    const int chosen = pick_pinned(scheduler, candidates, cursors, members, s, last[s]);
    const auto m = static_cast<std::size_t>(chosen);
    const std::size_t i = *cursors[m].next_on(s);
    cursors[m].placed(i, place.place(s, chosen, cursors[m].task(i), cursors[m].ready(), 0.0, out).end);
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
    ChainCursor cursor(chains[m], slots);
    while (!cursor.finished()) {
      for (std::size_t s = 0; s < place.size(); ++s) {  // an end group's runs each on its slot; otherwise the next run
        const std::optional<std::size_t> i = cursor.next_on(s);
        if (!i) continue;
        const double ready = std::max(cursor.ready(), previous_member_end);
        cursor.placed(*i, place.place(s, static_cast<int>(m), cursor.task(*i), ready, previous_member_end, out).end);
        break;
      }
    }
    previous_member_end = cursor.ready();
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
  // HYDRA's placement adds a shard's end to its backward; the runtime's (and model parallelism) run a step's ends after
  // its last backward
  const bool separate_ends = scheduler == Scheduler::model_parallel || placement == ShardPlacement::slot_per_shard;
  std::vector<std::vector<Task>> chains;
  for (const MemberWork& m : members) chains.push_back(chain_of(m, separate_ends));
  if (scheduler == Scheduler::model_parallel) return model_parallel(chains, slots);
  return placement == ShardPlacement::any_slot ? shared_slots(chains, slots, scheduler)
                                               : pinned_slots(chains, members, slots, scheduler);
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
                              .backward = ops[i].work != pipeline::Work::forward, .step_end = false, .slot = p,
                              .copy_start = out.makespan + t.start, .start = out.makespan + t.start,
                              .end = out.makespan + t.end, .copy_seconds = 0,
                              .shards = first[static_cast<std::size_t>(p) + 1] - from,
                              .micro_batch = ops[i].micro_batch});
        }
      }
      // the step's ends: each stage's after the pipeline's last operation, on every stage at once
      double longest_end = 0;
      for (int p = 0; p < stages; ++p) {
        double end = 0;
        for (int k = first[static_cast<std::size_t>(p)]; k < first[static_cast<std::size_t>(p) + 1]; ++k) {
          end += members[m].shards[static_cast<std::size_t>(k)].end;
        }
        if (end == 0) continue;
        const double start = out.makespan + sim.makespan;
        out.runs.push_back({.member = static_cast<int>(m), .step = step, .shard = first[static_cast<std::size_t>(p)],
                            .backward = false, .step_end = true, .slot = p, .copy_start = start, .start = start,
                            .end = start + end, .copy_seconds = 0,
                            .shards = first[static_cast<std::size_t>(p) + 1] - first[static_cast<std::size_t>(p)],
                            .micro_batch = -1});
        longest_end = std::max(longest_end, end);
      }
      out.makespan += sim.makespan + longest_end;
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
    std::string what = name + (r.step_end ? " E" : r.backward ? " B" : " F");
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

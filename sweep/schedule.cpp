// The sweep's scheduler simulator (optimus/sweep/schedule.hpp): list scheduling of every member's chain of shard runs.
#include "optimus/sweep/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>

#include "optimus/core/error.hpp"

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

}  // namespace

Scheduler parse_scheduler(std::string_view name) {
  if (name == "lrtf") return Scheduler::lrtf;
  if (name == "round-robin") return Scheduler::round_robin;
  OPTIMUS_FAIL("sweep: unknown scheduler '", name, "' (lrtf or round-robin)");
}

std::string_view name_of(Scheduler scheduler) { return scheduler == Scheduler::lrtf ? "lrtf" : "round-robin"; }

SweepTimeline simulate(const std::vector<MemberWork>& members, int slots, Scheduler scheduler) {
  check(members, slots);
  const auto n = members.size();
  std::vector<std::vector<Task>> chains;
  std::vector<double> remaining(n, 0.0), ready(n, 0.0);  // compute left; when the member's last placed run ends
  std::vector<std::size_t> next(n, 0);
  std::size_t total = 0;
  for (const MemberWork& m : members) {
    chains.push_back(chain_of(m));
    for (const Task& t : chains.back()) remaining[chains.size() - 1] += t.compute;
    total += chains.back().size();
  }
  // A slot may load its next shard once its current run computes (the other buffer is free), and compute once the
  // current run ends.
  std::vector<double> load_free(static_cast<std::size_t>(slots), 0.0), compute_free = load_free;
  SweepTimeline out;
  int last = -1;
  while (out.runs.size() < total) {
    // The slot that can start computing first: an idle one before one whose buffer is free while it computes.
    std::size_t s = 0;
    for (std::size_t k = 1; k < load_free.size(); ++k) {
      if (std::max(load_free[k], compute_free[k]) < std::max(load_free[s], compute_free[s])) s = k;
    }
    const double t = load_free[s], free = std::max(t, compute_free[s]);
    std::vector<int> candidates, waiting;  // ready by `free`; all with runs left
    for (std::size_t m = 0; m < n; ++m) {
      if (next[m] == chains[m].size()) continue;
      waiting.push_back(static_cast<int>(m));
      if (ready[m] <= free) candidates.push_back(static_cast<int>(m));
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
    ShardRun run{.member = chosen, .step = task.step, .shard = task.shard, .backward = task.backward,
                 .slot = static_cast<int>(s), .copy_start = t, .start = 0, .end = 0};
    run.start = std::max({t + task.copy, compute_free[s], ready[m]});
    run.end = run.start + task.compute;
    load_free[s] = run.start;
    compute_free[s] = run.end;
    ready[m] = run.end;
    remaining[m] -= task.compute;
    last = chosen;
    out.makespan = std::max(out.makespan, run.end);
    out.runs.push_back(run);
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

}  // namespace optimus::sweep

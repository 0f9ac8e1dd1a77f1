// A rank's loop over the members of a sweep (optimus/sweep/runtime.hpp).
#include "optimus/sweep/runtime.hpp"

#include <chrono>
#include <optional>
#include <thread>

namespace optimus::sweep {
namespace {

bool one_at_a_time(Scheduler s) { return s == Scheduler::model_parallel || s == Scheduler::pipeline; }

// The loop's state on this rank: which members have a step in flight and how far, whose end comes next, and who ran
// last.
class Loop {
 public:
  Loop(std::span<MemberSteps* const> members, Scheduler scheduler)
      : members_(members), scheduler_(scheduler), in_flight_(members.size(), false), steps_(members.size(), 0) {
    turn_ = next_with_steps(0);
  }

  std::vector<OperationRun> run() {
    while (turn_) {
      begin_steps();
      if (end_in_turn()) continue;
      if (!run_one()) std::this_thread::yield();  // every input is in flight: poll again
    }
    return runs_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::size_t count() const { return members_.size(); }

  // The first member from `from` on (cyclically) with steps left; none once every member is done.
  std::optional<std::size_t> next_with_steps(std::size_t from) const {
    for (std::size_t k = 0; k < count(); ++k) {
      const std::size_t m = (from + k) % count();
      if (members_[m]->more()) return m;
    }
    return std::nullopt;
  }

  // Members without a step in flight start their next one: any of them, or only the one in turn one at a time.
  void begin_steps() {
    for (std::size_t m = 0; m < count(); ++m) {
      if (in_flight_[m] || !members_[m]->more() || (one_at_a_time(scheduler_) && m != *turn_)) continue;
      members_[m]->begin();
      in_flight_[m] = true;
    }
  }

  // Ends the step of the member in turn once its operations on this rank have run; then the turn moves on.
  bool end_in_turn() {
    const std::size_t m = *turn_;
    if (!in_flight_[m] || !members_[m]->operations_done()) return false;
    OperationRun r{.member = static_cast<int>(m), .step = steps_[m], .operation = -1, .start = since_begin(), .end = 0};
    members_[m]->end();
    r.end = since_begin();
    runs_.push_back(r);
    in_flight_[m] = false;
    ++steps_[m];
    turn_ = next_with_steps(one_at_a_time(scheduler_) ? m : m + 1);
    return true;
  }

  // Runs one ready operation, the scheduler's choice; false when none is ready.
  bool run_one() {
    std::optional<std::size_t> chosen;
    for (std::size_t k = 0; k < count(); ++k) {
      // round-robin looks from the member after the last one that ran; the others in member order
      const std::size_t m = scheduler_ == Scheduler::round_robin ? (last_ + 1 + k) % count() : k;
      if (!in_flight_[m] || members_[m]->operations_done() || !members_[m]->ready()) continue;
      if (!chosen) chosen = m;
      if (scheduler_ != Scheduler::lrtf) break;
      if (members_[m]->remaining() > members_[*chosen]->remaining()) chosen = m;
    }
    if (!chosen) return false;
    const std::size_t m = *chosen;
    OperationRun r{.member = static_cast<int>(m), .step = steps_[m], .operation = operations_[m]++,
                   .start = since_begin(), .end = 0};
    members_[m]->run_next();
    r.end = since_begin();
    runs_.push_back(r);
    if (members_[m]->operations_done()) operations_[m] = 0;
    last_ = m;
    return true;
  }

  double since_begin() const { return std::chrono::duration<double>(Clock::now() - begin_).count(); }

  std::span<MemberSteps* const> members_;
  Scheduler scheduler_;
  std::vector<bool> in_flight_;
  std::vector<int> steps_;                                    // [m]: steps ended in this run
  std::vector<int> operations_ = std::vector<int>(members_.size(), 0);  // [m]: operations run of its step in flight
  std::optional<std::size_t> turn_;                           // whose step ends next
  std::size_t last_ = members_.size() - 1;                    // the member that ran last (round-robin)
  Clock::time_point begin_ = Clock::now();
  std::vector<OperationRun> runs_;
};

}  // namespace

std::vector<OperationRun> train_members(std::span<MemberSteps* const> members, Scheduler scheduler) {
  if (members.empty()) return {};
  return Loop(members, scheduler).run();
}

}  // namespace optimus::sweep

// A rank's loop over the members of a sweep (optimus/sweep/runtime.hpp).
#include "optimus/sweep/runtime.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/poll_backoff.hpp"

namespace optimus::sweep {
namespace {

bool one_at_a_time(Scheduler s) { return s == Scheduler::model_parallel || s == Scheduler::pipeline; }

// Messages sent without waiting, each kept with its bytes until its send completes; completed ones are dropped as new
// ones go, and the rest waited for at the end by their Requests' destructors (which abandon them instead once the job
// has failed: a wait would throw through the destructor). The loop's messages are a few bytes each, but one per
// operation.
class Outbox {
 public:
  void send(Communicator& comm, std::array<std::uint32_t, 2> words, std::size_t bytes, int dest, int tag) {
    std::erase_if(sent_, [](Sent& s) { return s.request.test(); });
    sent_.push_back({.words = words, .request = {}});
    sent_.back().request = comm.isend(sent_.back().words.data(), bytes, DType::u8, dest, tag);
  }

 private:
  struct Sent {
    std::array<std::uint32_t, 2> words;
    Request request;  // declared after the words: destroyed (waited for) first
  };
  std::list<Sent> sent_;  // a list: the bytes of a send in flight never move
};

// The messages about the steps' ends, over the loop's own communicators: each rank tells rank 0 (the coordinator,
// slot 0's leader) when a member's operations of its step have run there ("done", tagged with the member: one member's
// arrive in order), and the coordinator tells every slot's leader which member's end comes next ("end", over the
// leaders' communicator, in the order it decides; a leader passes it on to its slot). Receives are posted only while a
// member has a step in flight, so none is pending once the loop ends. Collective over `ranks`.
class EndMessages {
 public:
  EndMessages(Communicator& ranks, bool leader, std::size_t members)
      : comm_(ranks.split(0, ranks.rank())),
        leaders_(ranks.split(leader ? 0 : 1, ranks.rank())),
        end_tag_(static_cast<int>(members)),
        done_(members),
        done_buffers_(members * static_cast<std::size_t>(comm_->size()), 0) {}
  ~EndMessages() {
    // After an error only: a pending receive is left behind (the job is ending).
    for (std::vector<Request>& requests : done_) {
      for (Request& r : requests) r.abandon();
    }
    end_posted_.abandon();
  }

  bool coordinator() const { return comm_->rank() == 0; }

  // The coordinator, as member m begins a step: its receives of the other slots' "done".
  void listen(std::size_t m) {
    for (int peer = 1; peer < comm_->size(); ++peer) {
      done_[m].push_back(comm_->irecv(&done_buffers_[m * static_cast<std::size_t>(comm_->size()) + peer], 1,
                                      DType::u8, peer, static_cast<int>(m)));
    }
  }
  // The coordinator: whether every other slot has said member m's step is done there.
  bool all_done(std::size_t m) {
    for (Request& r : done_[m]) {
      if (!r.test()) return false;
    }
    return true;
  }
  // The coordinator: member m's end comes next.
  void send_end(std::size_t m) {
    done_[m].clear();
    for (int peer = 1; peer < leaders_->size(); ++peer) {
      outbox_.send(*leaders_, {static_cast<std::uint32_t>(m), 0}, 4, peer, end_tag_);
    }
  }

  // The watchdog, on a rank waiting for these messages alone (every member in flight done here): the coordinator
  // expires the first "done" not yet arrived, of the first member to be done here; another slot's leader the
  // coordinator's "end".
  [[noreturn]] void expire() {
    if (coordinator()) {
      for (std::vector<Request>& requests : done_) {
        for (Request& r : requests) {
          if (!r.test()) r.expire();
        }
      }
    } else if (!end_posted_.test()) {
      end_posted_.expire();
    }
    OPTIMUS_FAIL("sweep: the loop expired waiting for no message of the steps' ends");
  }

  // Another slot: member m's operations of its step have run here.
  void send_done(std::size_t m) { outbox_.send(*comm_, {1, 0}, 1, 0, static_cast<int>(m)); }
  // Another slot's leader, while a member has a step in flight: the member whose end the coordinator decided next, once
  // told.
  std::optional<std::size_t> next_end() {
    if (!end_posted_.pending()) end_posted_ = leaders_->irecv(end_buffer_, 4, DType::u8, 0, end_tag_);
    if (!end_posted_.test()) return std::nullopt;
    end_posted_ = Request();
    std::uint32_t m = 0;
    std::memcpy(&m, end_buffer_, sizeof m);
    return m;
  }

 private:
  std::unique_ptr<Communicator> comm_, leaders_;  // every rank; the slots' leaders (and the followers' own group)
  int end_tag_;
  std::vector<std::vector<Request>> done_;     // coordinator: [m] the receives of the other slots' "done"
  std::vector<std::uint8_t> done_buffers_;     // coordinator: [m][slot]
  Outbox outbox_;                              // declared after the communicators: its sends waited before they go
  std::uint8_t end_buffer_[4] = {};            // other slots: the next decision
  Request end_posted_;
};

// A slot of several ranks (a q x q grid): each operation is collective over them, and a step's end over every rank, so
// they run one sequence of events — the slot's first rank (its leader) chooses each operation and passes on each end
// the coordinator decides, telling the others in that order (a member and whether it is an operation or an end, tagged
// 0); the others run them as told, waiting inside an operation for an input still on its way. Every slot's sequence
// keeps the ends in the coordinator's order and each operation after what its inputs came from, so no two ranks wait
// for each other in different collectives. A receive is posted only while a member has a step in flight.
class SlotSequence {
 public:
  enum class Kind : std::uint32_t { operation, end };
  struct Event {
    Kind kind;
    std::size_t member;
  };

  explicit SlotSequence(Communicator& slot) : comm_(slot.split(0, slot.rank())) {}
  ~SlotSequence() { next_.abandon(); }  // after an error only
  bool leader() const { return comm_->rank() == 0; }

  // The leader: the slot's next event.
  void tell(Kind kind, std::size_t m) {
    for (int peer = 1; peer < comm_->size(); ++peer) {
      outbox_.send(*comm_, {static_cast<std::uint32_t>(kind), static_cast<std::uint32_t>(m)}, 8, peer, 0);
    }
  }
  // Another rank, past the watchdog's timeout: the leader's next event has not come.
  [[noreturn]] void expire() {
    if (!next_.test()) next_.expire();
    OPTIMUS_FAIL("sweep: the loop expired waiting for no event of the slot's leader");
  }
  // Another rank: the slot's next event, once told.
  std::optional<Event> next() {
    if (!next_.pending()) next_ = comm_->irecv(buffer_.data(), 8, DType::u8, 0, 0);
    if (!next_.test()) return std::nullopt;
    next_ = Request();
    return Event{.kind = static_cast<Kind>(buffer_[0]), .member = buffer_[1]};
  }

 private:
  std::unique_ptr<Communicator> comm_;
  Outbox outbox_;  // the leader's events in flight
  std::array<std::uint32_t, 2> buffer_{};
  Request next_;
};

// The loop's state on this rank: which members have a step in flight and how far, whose steps are done here, and who
// ran last.
class Loop {
 public:
  Loop(std::span<MemberSteps* const> members, const LoopOptions& options, Communicator& ranks, Communicator& slot)
      : members_(members),
        scheduler_(options.scheduler),
        limit_(options.in_flight == 0 ? static_cast<std::ptrdiff_t>(members.size()) : options.in_flight),
        timeout_(ranks.timeout()),
        job_(ranks.job()),
        slot_(slot),
        messages_(ranks, slot_.leader(), members.size()) {
    OPTIMUS_CHECK(options.in_flight >= 0, "sweep: ", options.in_flight, " members in flight; at least 1 (0: all)");
  }

  std::vector<OperationRun> run() {
    // Between polls that find nothing (every input in flight) a slot sleeps, up to 100 us: a slot's operations take
    // milliseconds, and slots (and a device's streams) may share cores.
    PollBackoff idle(32, std::chrono::microseconds(100));
    Clock::time_point waiting_since = Clock::now();
    try {
      while (true) {
        begin_steps();
        if (slot_.leader() ? end_one() || run_one() : follow()) {
          idle.reset();
          waiting_since = Clock::now();
          continue;
        }
        if (finished()) break;
        if (timeout_.count() > 0 && Clock::now() - waiting_since > timeout_) expire();
        idle.pause();
      }
    } catch (...) {
      // An operation failed here (a member's device out of memory, say): the other slots will wait for it in vain, so
      // the job is ending — its pending messages abandoned, not waited for as this error unwinds, and the program's
      // handler reports this error at once (Process::fail) instead of after the watchdog's timeout.
      job_->fail(std::current_exception());
      throw;
    }
    return runs_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::size_t count() const { return members_.size(); }

  bool finished() const {
    for (std::size_t m = 0; m < count(); ++m) {
      if (in_flight_[m] || members_[m]->more()) return false;
    }
    return true;
  }

  // The watchdog (train_members): what this rank has waited for past the timeout — the input of a member's next
  // operation not yet run here (the leader), else the messages of the steps' ends (or, on another rank of a slot, its
  // leader's next event).
  [[noreturn]] void expire() {
    if (!slot_.leader()) slot_.expire();
    for (std::size_t m = 0; m < count(); ++m) {
      if (in_flight_[m] && !done_here_[m]) members_[m]->expire();
    }
    messages_.expire();
  }

  // Members without a step in flight start their next one, up to the limit of steps in flight: one at a time the first
  // with steps left; else, while there is room, the longest remaining (lrtf) or the next after the last one begun
  // (round-robin). The members in flight change only at the ends, which every slot runs in one order: every slot begins
  // the same members.
  void begin_steps() {
    if (one_at_a_time(scheduler_)) {
      const std::size_t m = first_with_steps();
      if (m < count() && !in_flight_[m]) begin(m);
      return;
    }
    while (std::count(in_flight_.begin(), in_flight_.end(), true) < limit_) {
      std::optional<std::size_t> chosen;
      for (std::size_t k = 0; k < count(); ++k) {
        const std::size_t m = scheduler_ == Scheduler::round_robin ? (last_begun_ + 1 + k) % count() : k;
        if (in_flight_[m] || !members_[m]->more()) continue;
        if (!chosen) chosen = m;
        if (scheduler_ != Scheduler::lrtf) break;
        if (members_[m]->remaining() > members_[*chosen]->remaining()) chosen = m;
      }
      if (!chosen) return;
      begin(*chosen);
    }
  }
  void begin(std::size_t m) {
    members_[m]->begin();
    in_flight_[m] = true;
    done_here_[m] = false;
    last_begun_ = m;
    if (messages_.coordinator()) messages_.listen(m);
  }
  std::size_t first_with_steps() const {
    for (std::size_t m = 0; m < count(); ++m) {
      if (in_flight_[m] || members_[m]->more()) return m;
    }
    return count();
  }

  // The coordinator ends the step of a member done on every slot (the first to be), after telling the others; another
  // slot ends the one the coordinator told it to (done here, as the coordinator has heard).
  bool end_one() {
    std::optional<std::size_t> chosen;
    if (messages_.coordinator()) {
      for (const std::size_t m : done_order_) {
        if (messages_.all_done(m)) {
          chosen = m;
          break;
        }
      }
      if (!chosen) return false;
      messages_.send_end(*chosen);
    } else {
      if (std::find(in_flight_.begin(), in_flight_.end(), true) == in_flight_.end()) return false;
      chosen = messages_.next_end();
      if (!chosen) return false;
      OPTIMUS_CHECK(*chosen < count() && in_flight_[*chosen] && done_here_[*chosen], "sweep: slot 0 ended member ",
                    *chosen, "'s step before this slot had run its operations");
    }
    slot_.tell(SlotSequence::Kind::end, *chosen);
    end(*chosen);
    return true;
  }

  void end(std::size_t m) {
    std::erase(done_order_, m);
    OperationRun r{.member = static_cast<int>(m), .step = steps_[m], .operation = -1, .start = since_begin(), .end = 0};
    members_[m]->end();
    r.end = since_begin();
    runs_.push_back(r);
    in_flight_[m] = false;
    ++steps_[m];
  }

  // A rank of a slot that is not its leader: the slot's next event, once told.
  bool follow() {
    if (std::find(in_flight_.begin(), in_flight_.end(), true) == in_flight_.end()) return false;
    const std::optional<SlotSequence::Event> e = slot_.next();
    if (!e) return false;
    OPTIMUS_CHECK(e->member < count() && in_flight_[e->member], "sweep: the slot's leader named member ", e->member,
                  ", which has no step in flight here");
    if (e->kind == SlotSequence::Kind::end) {
      end(e->member);
    } else {
      run(e->member);
    }
    return true;
  }

  // The leader: runs one ready operation, the scheduler's choice, after telling its slot; false when none is ready.
  bool run_one() {
    const std::optional<std::size_t> m = choose();
    if (!m) return false;
    slot_.tell(SlotSequence::Kind::operation, *m);
    run(*m);
    return true;
  }

  // The scheduler's choice among the members whose next operation is ready here.
  std::optional<std::size_t> choose() {
    std::optional<std::size_t> chosen;
    for (std::size_t k = 0; k < count(); ++k) {
      // round-robin looks from the member after the last one that ran; the others in member order
      const std::size_t m = scheduler_ == Scheduler::round_robin ? (last_ + 1 + k) % count() : k;
      if (!in_flight_[m] || done_here_[m] || !members_[m]->ready()) continue;
      if (!chosen) chosen = m;
      if (scheduler_ != Scheduler::lrtf) break;
      if (longer(m, *chosen)) chosen = m;
    }
    return chosen;
  }

  void run(std::size_t m) {
    OperationRun r{.member = static_cast<int>(m), .step = steps_[m], .operation = operations_[m]++,
                   .start = since_begin(), .end = 0};
    members_[m]->run_next();
    r.end = since_begin();
    runs_.push_back(r);
    last_ = m;
    if (members_[m]->operations_done()) {
      operations_[m] = 0;
      done_here_[m] = true;
      if (messages_.coordinator()) done_order_.push_back(m);
      else messages_.send_done(m);
    }
  }

  // LRTF's order: the longer remaining training time; between equal ones, the member with more operations of its step
  // run here (nearer its step's end).
  bool longer(std::size_t a, std::size_t b) const {
    const double ra = members_[a]->remaining(), rb = members_[b]->remaining();
    return ra != rb ? ra > rb : operations_[a] > operations_[b];
  }

  double since_begin() const { return std::chrono::duration<double>(Clock::now() - begin_).count(); }

  std::span<MemberSteps* const> members_;
  Scheduler scheduler_;
  std::ptrdiff_t limit_;  // the most members with a step in flight
  std::chrono::milliseconds timeout_;  // the watchdog's (0: none)
  std::shared_ptr<JobState> job_;      // the ranks' (failed when an operation here fails)
  SlotSequence slot_;
  EndMessages messages_;
  std::vector<bool> in_flight_ = std::vector<bool>(members_.size(), false);   // [m]: a step begun, not ended
  std::vector<bool> done_here_ = std::vector<bool>(members_.size(), false);   // [m]: its operations have run here
  std::vector<int> steps_ = std::vector<int>(members_.size(), 0);             // [m]: steps ended in this run
  std::vector<int> operations_ = std::vector<int>(members_.size(), 0);        // [m]: operations run of its step
  std::deque<std::size_t> done_order_;         // coordinator: the members done here, in the order they got done
  std::size_t last_ = members_.size() - 1;     // the member that ran last (round-robin)
  std::size_t last_begun_ = members_.size() - 1;  // the member that began a step last (round-robin)
  Clock::time_point begin_ = Clock::now();
  std::vector<OperationRun> runs_;
};

}  // namespace

std::vector<OperationRun> train_members(std::span<MemberSteps* const> members, const LoopOptions& options,
                                        Communicator& ranks, Communicator& slot) {
  if (members.empty()) return {};
  return Loop(members, options, ranks, slot).run();
}

}  // namespace optimus::sweep

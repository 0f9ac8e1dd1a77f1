// Internal to comm: the state in-process ranks share (in_process.cpp) — per collective a numbered slot of
// contributions, staged or lent, and the bookkeeping of who has read them — and the request that waits on a slot.
// See in_process.cpp's opening comment for the protocol.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "idle_ranks.hpp"
#include "optimus/comm/communicator.hpp"
#include "optimus/core/error.hpp"

namespace optimus::in_process {

// A contribution in the staging area (host or device memory, as the rank's InProcessStaging allocates it).
struct Staged {
  std::shared_ptr<std::byte> data;  // null when empty; owns nothing when lent
  std::size_t size = 0;
  bool lent = false;                // the posting rank's own buffer (InProcessCommunicator::lent)
};

// An error another rank caused: run_in_process reports it only if no rank failed by itself.
class Induced : public Error {
 public:
  explicit Induced(const std::string& message) : Error(message, __FILE__, __LINE__) {}
};

// Thrown in ranks woken because another rank failed; never the error reported to the caller (that rank's is).
class PeerFailed : public Induced {
 public:
  explicit PeerFailed(int rank)
      : Induced(detail::concat("in-process rank ", rank, " stopped because another rank failed")) {}
};

struct WorldState {
  explicit WorldState(int size)
      : returned(static_cast<std::size_t>(size)), last_call(static_cast<std::size_t>(size)) {
    for (auto& t : last_call) t.store(detail::monotonic_ns());
  }
  std::atomic<bool> aborted{false};
  std::vector<std::atomic<bool>> returned;  // world rank r's function has returned (normally)
  std::atomic<std::int64_t> timeout_ms{0};  // the longest watchdog timeout any rank has set (run_in_process's grace)
  // When world rank r last posted, waited on or tested an operation: a rank that stopped (or computes past the
  // watchdog) is one whose last call is old.
  std::vector<std::atomic<std::uint64_t>> last_call;

  void called(int world_rank) { last_call[static_cast<std::size_t>(world_rank)].store(detail::monotonic_ns()); }
  // "; world rank 1 has made no communication call for 3.1 s (stopped?)" for each rank but `me` that has not returned
  // and whose last call is older than `patience` seconds.
  std::string idle_ranks(int me, double patience) const {
    std::string out;
    const std::uint64_t now = detail::monotonic_ns();
    for (std::size_t w = 0; w < last_call.size(); ++w) {
      const std::uint64_t then = last_call[w].load();
      const double idle = now > then ? static_cast<double>(now - then) * 1e-9 : 0.0;
      if (static_cast<int>(w) == me || returned[w].load() || idle <= patience) continue;
      out += detail::idle_rank_text(static_cast<int>(w), "", "communication", idle);
    }
    return out;
  }

  void note_timeout(std::chrono::milliseconds t) {
    std::int64_t seen = timeout_ms.load();
    while (t.count() > seen && !timeout_ms.compare_exchange_weak(seen, t.count())) {
    }
  }
};

struct Slot {
  std::vector<Staged> data;     // contribution of each rank (staged, or lent: the rank's own buffer)
  std::vector<char> posted;     // whether rank r has posted
  std::vector<char> finished;   // whether rank r has finished reading the contributions it needed (lenders wait)
  int n_posted = 0;
  int n_done = 0;
  int reading = 0;              // ranks reading contributions now, outside the lock
  int withdrawn_by = -1;        // a lender that withdrew its buffer; such a slot is never erased (see done)
};

struct GroupState {
  GroupState(std::vector<int> members, std::shared_ptr<WorldState> w)
      : size(static_cast<int>(members.size())), world_ranks(std::move(members)), world(std::move(w)) {}

  const int size;
  const std::vector<int> world_ranks;  // of the group's ranks
  const std::shared_ptr<WorldState> world;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, Slot> slots;
  std::map<std::tuple<int, int, int>, std::deque<Staged>> mailbox;  // (source, dest, tag) -> messages
  std::map<std::pair<std::uint64_t, int>, std::pair<std::shared_ptr<GroupState>, int>> children;  // (seq, color)

  // The group ranks among `ranks` whose world rank has returned from its function.
  std::vector<int> gone(const std::vector<int>& ranks) const {
    std::vector<int> out;
    for (int r : ranks) {
      if (world->returned[static_cast<std::size_t>(world_ranks[static_cast<std::size_t>(r)])].load()) out.push_back(r);
    }
    return out;
  }

  Slot& slot(std::uint64_t seq) {
    Slot& s = slots[seq];
    if (s.data.empty()) {
      s.data.resize(static_cast<std::size_t>(size));
      s.posted.assign(static_cast<std::size_t>(size), 0);
      s.finished.assign(static_cast<std::size_t>(size), 0);
    }
    return s;
  }

  void post(std::uint64_t seq, int rank, Staged contribution) {
    Slot& s = slot(seq);
    s.data[static_cast<std::size_t>(rank)] = std::move(contribution);
    s.posted[static_cast<std::size_t>(rank)] = 1;
    ++s.n_posted;
    cv.notify_all();
  }

  // Rank has finished reading slot `seq`'s contributions (start_reading), and is done with it. Locks.
  void finished_reading(std::uint64_t seq, int rank) {
    std::unique_lock lock(mu);
    Slot& s = slots.at(seq);
    --s.reading;
    s.finished[static_cast<std::size_t>(rank)] = 1;
    done(seq);
    cv.notify_all();
  }

  // Rank is done with slot `seq`; the last one erases it. (A lender that withdrew is never done: its slot stays for
  // the readers that come later to find it withdrawn.)
  void done(std::uint64_t seq) {
    auto it = slots.find(seq);
    if (++it->second.n_done == size) slots.erase(it);
  }
};

// What completes an operation: run with the group's lock held, it takes what the result needs from the slot (shared
// pointers to the contributions) and returns the delivery — the copies and reductions into the caller's buffer —
// which runs after the lock is released.
using Delivery = std::function<void()>;
using Take = std::function<Delivery()>;

// A lender's way out, run under the group's lock when its request ends without completing (its wait failed, or the
// request was abandoned): readers must not touch the buffer any more.
using Withdraw = std::function<void(std::unique_lock<std::mutex>&)>;

// A pending operation on a group: ready() (under the lock) says whether it can complete; take() then delivery().
// missing() (under the lock) names the group ranks it still waits for: if one of them has returned from its function
// the wait fails at once, and past the communicator's timeout the watchdog names them. A request that lends its
// caller's buffer has a withdraw(), run if it is destroyed before take() (it then no longer owns the buffer).
class SlotRequest final : public RequestImpl {
 public:
  SlotRequest(std::shared_ptr<GroupState> g, const Communicator& comm, std::function<bool()> ready,
              std::function<std::vector<int>()> missing, Take take, Withdraw withdraw)
      : RequestImpl(comm.job()), g_(std::move(g)), comm_(&comm), call_(comm.posting()), ready_(std::move(ready)),
        missing_(std::move(missing)), take_(std::move(take)), withdraw_(std::move(withdraw)),
        me_(g_->world_ranks[static_cast<std::size_t>(comm.rank())]) {
    g_->world->called(me_);
  }
  SlotRequest(const SlotRequest&) = delete;
  SlotRequest& operator=(const SlotRequest&) = delete;
  ~SlotRequest() override {
    if (taken_ || !withdraw_) return;
    std::unique_lock lock(g_->mu);
    withdraw_(lock);
  }

  void wait() override {
    Delivery deliver;
    {
      const auto started = std::chrono::steady_clock::now();
      const std::chrono::milliseconds timeout = comm_->timeout();
      std::unique_lock lock(g_->mu);
      while (!ready_()) {
        g_->world->called(me_);
        check_peers();
        if (timeout.count() > 0 && std::chrono::steady_clock::now() - started > timeout) expired();
        g_->cv.wait_for(lock, std::chrono::milliseconds(20));
      }
      deliver = take_();
      taken_ = true;
    }
    if (deliver) deliver();
  }
  bool test() override {
    g_->world->called(me_);
    Delivery deliver;
    {
      std::unique_lock lock(g_->mu);
      if (!ready_()) {
        check_peers();
        return false;
      }
      deliver = take_();
      taken_ = true;
    }
    if (deliver) deliver();
    return true;
  }
  void expire() override {
    std::unique_lock lock(g_->mu);
    expired();
  }

 private:
  // Under the lock: the watchdog's error, naming the ranks that have not joined and those of the world whose last call
  // is older than half the timeout.
  [[noreturn]] void expired() const {
    comm_->watchdog_expired(call_, missing_(),
                            g_->world->idle_ranks(me_, 0.5 * std::chrono::duration<double>(comm_->timeout()).count()));
  }

  // Under the lock, while not ready: this rank's job failed (another thread of it: a simulated device's stream),
  // another rank's failure, or a rank this waits for gone.
  void check_peers() const {
    if (job().failed()) job().throw_failure();
    if (g_->world->aborted.load()) {
      const PeerFailed failed(comm_->rank());
      job().fail(std::make_exception_ptr(failed));
      throw failed;
    }
    const std::vector<int> gone = g_->gone(missing_());
    if (!gone.empty()) comm_->peers_gone(call_, gone);
  }

  std::shared_ptr<GroupState> g_;
  const Communicator* comm_;  // the communicator that posted it (alive while its rank waits)
  CallLabel call_;
  std::function<bool()> ready_;
  std::function<std::vector<int>()> missing_;
  Take take_;
  Withdraw withdraw_;   // empty unless the request lends its caller's buffer
  bool taken_ = false;  // take() ran: complete, or delivering
  int me_;              // this rank's world rank
};

}  // namespace optimus::in_process

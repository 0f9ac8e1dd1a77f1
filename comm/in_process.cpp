// In-process communicator: ranks are threads; every collective is a numbered "slot" in state shared by
// the group. Posting copies the rank's contribution into the slot (so the caller's buffer is free at
// once); waiting blocks until the contributions it needs are there, then computes this rank's result.
// Broadcasts and reduces on host memory lend instead (the root's broadcast buffer, every reduce contribution): the slot
// points at the caller's buffer, the ranks that need it read it in place, and the lender's request completes once they
// have — MPI's rule for a non-blocking operation's buffers, and no copy on either side. A lender whose wait fails, or
// whose request is abandoned, withdraws: it waits for reads in progress, and later readers fail naming it.
// Blocking and non-blocking calls take the same path (a blocking call waits on its request at once).
// Reductions always add contributions in rank order, so every rank gets bit-identical results.
// The group's lock guards only the slots' bookkeeping: a rank takes (shared pointers to) the contributions it needs
// under the lock, and copies and reduces them after releasing it. Staged copies on a device wait for the rank's
// stream; under the lock they would serialise every rank of the group.
#include "optimus/comm/in_process.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "in_process_slots.hpp"
#include "optimus/core/error.hpp"
#include "staged_reduce.hpp"

namespace optimus {
namespace {

using in_process::Delivery;  // the shared state and requests of in_process_slots.hpp
using in_process::GroupState;
using in_process::Induced;
using in_process::PeerFailed;
using in_process::Slot;
using in_process::SlotRequest;
using in_process::Staged;
using in_process::Take;
using in_process::Withdraw;
using in_process::WorldState;

// The default staging area: host memory.
class HostStaging final : public InProcessStaging {
 public:
  Device device() const override { return Device::cpu; }
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
  void copy(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) override {
    detail::reduce_staged(acc, x, count, dtype, op, Device::cpu, ops::Queue{});
  }
  void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op) override {
    detail::combine_host(out, a, b, count, dtype, op);
  }
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<GroupState> g, int rank, std::shared_ptr<InProcessStaging> staging,
                        std::shared_ptr<JobState> job)
      : Communicator(rank, g->size, std::move(job)), g_(std::move(g)), staging_(std::move(staging)) {}

  std::string backend() const override { return "in-process"; }
  bool takes_buffers_on(Device device) const override {
    return device == Device::cpu || device == staging_->device();
  }

  bool needs_progress_calls() const override { return false; }  // waits take what posts staged

  void set_staging(std::shared_ptr<InProcessStaging> staging) { staging_ = std::move(staging); }
  std::vector<int> world_ranks() const override { return g_->world_ranks; }

 protected:
  void timeout_changed() override { g_->world->note_timeout(timeout()); }

  // Every operation is posted non-blocking: a wait takes what the posts staged.
  Request post(const Operation& o, Sync) override {
    switch (o.kind) {
      case CallKind::broadcast: return post_broadcast(o.recv, o.count, o.dtype, o.peer);
      case CallKind::reduce: return post_reduce(o.send, o.recv, o.count, o.dtype, o.op, o.peer);
      case CallKind::all_reduce: return post_all_reduce(o.send, o.recv, o.count, o.dtype, o.op);
      case CallKind::all_gather: return post_all_gather(o.send, o.recv, o.count, o.dtype);
      case CallKind::reduce_scatter: return post_reduce_scatter(o.send, o.recv, o.count, o.dtype, o.op);
      case CallKind::send: return post_send(o.send, o.count, o.dtype, o.peer, o.tag);
      case CallKind::recv: return post_recv(o.recv, o.count, o.dtype, o.peer, o.tag);
      case CallKind::barrier: return post_barrier();
      case CallKind::all_to_all: break;
    }
    OPTIMUS_FAIL("the in-process communicator has no single operation for ", name_of(o.kind));
  }

  Request post_broadcast(void* buf, std::size_t count, DType dtype, int root) {
    if (size() == 1) return {};  // the buffer already holds the root's data
    const std::size_t n = count * size_of(dtype);
    const std::uint64_t seq = next_seq_++;
    if (rank() == root) {
      const bool lend = lends(n);
      Staged mine = lend ? lent(buf, n) : stage(buf, n);  // copied before the group is locked
      std::unique_lock lock(g_->mu);
      g_->post(seq, rank(), std::move(mine));
      if (lend) return lender(seq, everyone_but(root));
      g_->done(seq);
      return {};
    }
    return receive_broadcast(seq, root, buf, n, nullptr);
  }

  // A broadcast whose receivers read a lent root buffer in place until they release their view (no copy at all).
  Request post_broadcast_view(void* buf, std::size_t count, DType dtype, int root,
                              const std::shared_ptr<BroadcastView::Lease>& lease) override {
    lease->data = buf;
    if (size() > 1 && rank() != root) return receive_broadcast(next_seq_++, root, buf, count * size_of(dtype), lease);
    // The root's own work may read its buffer at once. What its broadcast's request waits for (receivers reading a
    // lent buffer; nothing when staged) is when it may change the buffer again.
    lease->returned = post_broadcast(buf, count, dtype, root);
    return {};
  }

  Request post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root) {
    if (size() == 1) return alone(send, recv, count * size_of(dtype));
    const std::size_t n = count * size_of(dtype);
    const std::uint64_t seq = next_seq_++;
    // The root reads its own contribution in place too, unless its result overwrites it.
    const bool lend = lends(n) && !(rank() == root && overlap(send, recv, n));
    Staged mine = lend ? lent(send, n) : stage(send, n);
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), std::move(mine));
    if (rank() != root) {
      if (lend) return lender(seq, {root});
      g_->done(seq);
      return {};
    }
    return pending(all_posted(seq), not_posted(seq), [this, seq, recv, count, dtype, op, call = posting()]() -> Delivery {
      return reading(seq, call, [this, all = g_->slots.at(seq).data, recv, count, dtype, op]() mutable {
        unalias(all, recv, count * size_of(dtype));
        reduce_to(all, 0, count, dtype, op, recv);
      });
    });
  }

  Request post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
    if (size() == 1) return alone(send, recv, count * size_of(dtype));
    const std::uint64_t seq = next_seq_++;
    Staged mine = stage(send, count * size_of(dtype));
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), std::move(mine));
    return pending(all_posted(seq), not_posted(seq), [this, seq, recv, count, dtype, op]() -> Delivery {
      return [this, all = contributions(seq), recv, count, dtype, op] { reduce_to(all, 0, count, dtype, op, recv); };
    });
  }

  Request post_all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
    if (size() == 1) return alone(send, recv, count * size_of(dtype));
    const std::size_t n = count * size_of(dtype);
    const std::uint64_t seq = next_seq_++;
    Staged mine = stage(send, n);
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), std::move(mine));
    return pending(all_posted(seq), not_posted(seq), [this, seq, recv, n]() -> Delivery {
      return [this, all = contributions(seq), recv, n] {
        for (std::size_t r = 0; r < all.size(); ++r) deliver(static_cast<std::byte*>(recv) + r * n, all[r], n);
      };
    });
  }

  Request post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
    if (size() == 1) return alone(send, recv, count * size_of(dtype));
    const std::uint64_t seq = next_seq_++;
    Staged mine = stage(send, static_cast<std::size_t>(size()) * count * size_of(dtype));
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), std::move(mine));
    return pending(all_posted(seq), not_posted(seq), [this, seq, recv, count, dtype, op]() -> Delivery {
      return [this, all = contributions(seq), recv, count, dtype, op] {
        reduce_to(all, static_cast<std::size_t>(rank()) * count, count, dtype, op, recv);
      };
    });
  }

  Request post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag) {
    Staged message = stage(buf, count * size_of(dtype));
    std::unique_lock lock(g_->mu);
    g_->mailbox[{rank(), dest, tag}].push_back(std::move(message));
    g_->cv.notify_all();
    return {};
  }

  Request post_recv(void* buf, std::size_t count, DType dtype, int source, int tag) {
    const std::tuple<int, int, int> key{source, rank(), tag};
    const std::size_t n = count * size_of(dtype);
    return pending([this, key] { return !g_->mailbox[key].empty(); }, [source] { return std::vector<int>{source}; },
                   [this, key, buf, n, source, tag]() -> Delivery {
                     std::deque<Staged>& queue = g_->mailbox[key];
                     Staged message = std::move(queue.front());
                     queue.pop_front();
                     return [this, message, buf, n, source, tag] {
                       OPTIMUS_CHECK(message.size == n, "recv from rank ", source, " with tag ", tag, " expected ", n,
                                     " bytes but the message has ", message.size);
                       deliver(buf, message, n);
                     };
                   });
  }

  Request post_barrier() {
    const std::uint64_t seq = next_seq_++;
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), {});
    return pending(all_posted(seq), not_posted(seq), [this, seq]() -> Delivery {
      g_->done(seq);
      return {};
    });
  }

  std::unique_ptr<Communicator> do_split(int color, int key) override {
    // Exchange (color, key) through a slot, then the first member to arrive creates the child group.
    const std::uint64_t seq = next_seq_++;
    const int mine[2] = {color, key};
    std::vector<std::pair<int, int>> members;  // (key, rank) of ranks with my color
    std::unique_lock lock(g_->mu);
    g_->post(seq, rank(), host_staged(mine, sizeof(mine)));  // read below on the host
    lock.unlock();
    pending(all_posted(seq), not_posted(seq), [] { return Delivery{}; }).wait();  // (the watchdog's wait)
    lock.lock();
    const Slot& s = g_->slots.at(seq);
    for (int r = 0; r < size(); ++r) {
      int theirs[2];
      std::memcpy(theirs, s.data[static_cast<std::size_t>(r)].data.get(), sizeof(theirs));
      if (theirs[0] == color) members.emplace_back(theirs[1], r);
    }
    std::sort(members.begin(), members.end());
    const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), std::pair{key, rank()}) - members.begin());
    const int new_size = static_cast<int>(members.size());
    auto& [child, taken] = g_->children[{seq, color}];
    if (!child) {
      std::vector<int> world_ranks;
      for (const auto& [member_key, r] : members) world_ranks.push_back(g_->world_ranks[static_cast<std::size_t>(r)]);
      child = std::make_shared<GroupState>(std::move(world_ranks), g_->world);
    }
    std::shared_ptr<GroupState> mine_group = child;
    if (++taken == new_size) g_->children.erase({seq, color});
    g_->done(seq);
    return std::make_unique<InProcessCommunicator>(std::move(mine_group), new_rank, staging_, job());
  }

 private:
  // A collective of one rank: the result is its own data (copied when the buffers differ), nothing is staged.
  Request alone(const void* send, void* recv, std::size_t n) const {
    if (send != recv && n > 0) staging_->copy(recv, send, n);
    return {};
  }

  // A receiver's part of broadcast `seq` (n bytes): the root's values copied into buf — or, with a view's `lease`
  // and a lent root buffer, read in place until the view is released.
  Request receive_broadcast(std::uint64_t seq, int root, void* buf, std::size_t n,
                            std::shared_ptr<BroadcastView::Lease> lease) {
    std::unique_lock lock(g_->mu);
    g_->slot(seq);
    return pending([this, seq, root] { return g_->slots.at(seq).posted[static_cast<std::size_t>(root)] != 0; },
                   [root] { return std::vector<int>{root}; },
                   [this, seq, root, buf, n, lease, call = posting()]() -> Delivery {
                     const Staged from_root = g_->slots.at(seq).data[static_cast<std::size_t>(root)];
                     if (lease != nullptr && from_root.lent) {
                       start_reading(seq, call);  // until the view is released
                       lease->data = from_root.data.get();
                       lease->release = [g = g_, seq, me = rank()] { g->finished_reading(seq, me); };
                       return {};
                     }
                     return reading(seq, call, [this, buf, from_root, n]() {
                       std::vector<Staged> values{from_root};
                       unalias(values, buf, n);
                       deliver(buf, values[0], n);
                     });
                   });
  }

  // Whether a contribution of n bytes is lent rather than staged: when the ranks' buffers are host memory (the staging
  // area's too), which every rank's thread may read.
  bool lends(std::size_t n) const { return n > 0 && staging_->device() == Device::cpu; }
  // The caller's buffer as a contribution: not owned, read in place until the lender's request completes.
  static Staged lent(const void* p, std::size_t n) {
    return Staged{.data = std::shared_ptr<std::byte>(std::shared_ptr<std::byte>(),
                                                     static_cast<std::byte*>(const_cast<void*>(p))),
                  .size = n,
                  .lent = true};
  }
  static bool overlap(const void* a, const void* b, std::size_t n) {
    const auto* x = static_cast<const std::byte*>(a);
    const auto* y = static_cast<const std::byte*>(b);
    return x < y + n && y < x + n;
  }
  // Contributions that share memory with the result about to be written (ranks of one process may pass the same
  // buffer) are staged first, so the result is computed from the values posted.
  void unalias(std::vector<Staged>& contributions, const void* out, std::size_t n) const {
    for (Staged& c : contributions) {
      if (c.lent && overlap(c.data.get(), out, n)) c = stage(c.data.get(), c.size);
    }
  }
  std::vector<int> everyone_but(int rank) const {
    std::vector<int> out;
    for (int r = 0; r < size(); ++r) {
      if (r != rank) out.push_back(r);
    }
    return out;
  }

  // Under the group's lock, after posting a lent contribution to slot `seq`: the request that completes once every
  // rank of `readers` has finished reading it. Ended early, it withdraws the buffer: reads in progress finish first.
  Request lender(std::uint64_t seq, std::vector<int> readers) {
    auto unread = [this, seq, readers] {
      std::vector<int> out;
      const Slot& s = g_->slots.at(seq);
      for (int r : readers) {
        if (s.finished[static_cast<std::size_t>(r)] == 0) out.push_back(r);
      }
      return out;
    };
    return Request(std::make_unique<SlotRequest>(
        g_, *this, [unread] { return unread().empty(); }, unread,
        [this, seq]() -> Delivery {
          g_->done(seq);
          return {};
        },
        [this, seq](std::unique_lock<std::mutex>& lock) {
          Slot& s = g_->slots.at(seq);
          s.withdrawn_by = rank();
          g_->cv.wait(lock, [&s] { return s.reading == 0; });
        }));
  }

  // Under the group's lock, taking from slot `seq`: this rank starts reading its contributions (some may be lent: their
  // lenders wait until it has finished, GroupState::finished_reading). Fails if a lender has withdrawn.
  void start_reading(std::uint64_t seq, const CallLabel& call) {
    Slot& s = g_->slots.at(seq);
    if (s.withdrawn_by >= 0) throw Induced(withdrawn_message(call, s.withdrawn_by));
    ++s.reading;
  }
  // The same, returning the delivery that runs `read` and then finishes reading (also when `read` throws).
  Delivery reading(std::uint64_t seq, const CallLabel& call, std::function<void()> read) {
    start_reading(seq, call);
    return [g = g_, seq, me = rank(), read = std::move(read)] {
      struct Finish {
        GroupState& g;
        std::uint64_t seq;
        int me;
        ~Finish() { g.finished_reading(seq, me); }
      } finish{*g, seq, me};
      read();
    };
  }

  // The caller's buffer -> a contribution in the staging area, and a staged contribution -> the caller's buffer.
  Staged stage(const void* p, std::size_t n) const {
    Staged staged{.data = n > 0 ? staging_->allocate(n) : nullptr, .size = n};
    if (n > 0) staging_->copy(staged.data.get(), p, n);
    return staged;
  }
  void deliver(void* dst, const Staged& src, std::size_t n) const {
    if (n > 0) staging_->copy(dst, src.data.get(), n);
  }
  static Staged host_staged(const void* p, std::size_t n) {
    Staged staged{.data = HostStaging().allocate(n), .size = n};
    std::memcpy(staged.data.get(), p, n);
    return staged;
  }
  // Under the group's lock: every rank's contribution to slot `seq` (kept alive by the shared pointers), and this
  // rank is done with the slot.
  std::vector<Staged> contributions(std::uint64_t seq) {
    std::vector<Staged> all = g_->slots.at(seq).data;
    g_->done(seq);
    return all;
  }

  // out[0..count) = the reduction over ranks, in rank order, of elements [offset, offset + count) of each
  // contribution, computed where the staging area is.
  void reduce_to(const std::vector<Staged>& all, std::size_t offset, std::size_t count, DType dtype, ReduceOp op,
                 void* out) const {
    if (count == 0) return;
    const std::size_t width = size_of(dtype);
    staging_->combine(out, all[0].data.get() + offset * width, all[1].data.get() + offset * width, count, dtype, op);
    for (std::size_t r = 2; r < all.size(); ++r) {
      staging_->reduce(out, all[r].data.get() + offset * width, count, dtype, op);
    }
  }

  std::function<bool()> all_posted(std::uint64_t seq) {
    return [this, seq] { return g_->slots.at(seq).n_posted == size(); };
  }

  // The ranks that have not posted slot `seq`.
  std::function<std::vector<int>()> not_posted(std::uint64_t seq) {
    return [this, seq] {
      std::vector<int> out;
      const Slot& s = g_->slots.at(seq);
      for (int r = 0; r < size(); ++r) {
        if (s.posted[static_cast<std::size_t>(r)] == 0) out.push_back(r);
      }
      return out;
    };
  }

  Request pending(std::function<bool()> ready, std::function<std::vector<int>()> missing, Take take) {
    return Request(
        std::make_unique<SlotRequest>(g_, *this, std::move(ready), std::move(missing), std::move(take), Withdraw{}));
  }

  std::shared_ptr<GroupState> g_;
  std::shared_ptr<InProcessStaging> staging_;  // shared with the communicators split from this one
  std::uint64_t next_seq_ = 0;                 // collectives are numbered identically on every rank
};

}  // namespace

void InProcessStaging::combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op) {
  copy(out, a, count * size_of(dtype));
  reduce(out, b, count, dtype, op);
}

std::shared_ptr<InProcessStaging> host_staging() { return std::make_shared<HostStaging>(); }

void set_in_process_staging(Communicator& comm, std::shared_ptr<InProcessStaging> staging) {
  auto* in_process = dynamic_cast<InProcessCommunicator*>(&comm);
  OPTIMUS_CHECK(in_process != nullptr, "set_in_process_staging: the communicator's backend is '", comm.backend(),
                "', not in-process");
  OPTIMUS_CHECK(staging != nullptr, "set_in_process_staging: no staging given");
  in_process->set_staging(std::move(staging));
}

namespace {

// After a failure, how long run_in_process waits at least for the other ranks to return (see run_in_process).
constexpr std::chrono::milliseconds kLeastGrace{2000};

// What run_in_process shares with its ranks' threads, owned by them too: a thread left running (see run_in_process)
// outlives the call.
struct RunState {
  RunState(int size, std::function<void(Communicator&)> f)
      : world(std::make_shared<WorldState>(size)), fn(std::move(f)), done(static_cast<std::size_t>(size), 0),
        errors(static_cast<std::size_t>(size)), induced(static_cast<std::size_t>(size), 0) {}

  std::shared_ptr<WorldState> world;
  std::function<void(Communicator&)> fn;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;                         // ranks whose function has returned or thrown
  std::vector<char> done;                   // by rank: whether it has
  std::vector<std::exception_ptr> errors;
  std::vector<char> induced;

  void run(int r, const std::shared_ptr<GroupState>& group) {
    const auto ri = static_cast<std::size_t>(r);
    std::exception_ptr error;
    bool caused_elsewhere = false;
    try {
      InProcessCommunicator comm(group, r, host_staging(), std::make_shared<JobState>());
      fn(comm);
      world->returned[ri].store(true);  // a wait on this rank can no longer complete
    } catch (const Induced&) {
      error = std::current_exception();
      caused_elsewhere = true;
    } catch (...) {
      error = std::current_exception();
    }
    if (error) world->aborted.store(true);  // (already, for an induced error, unless a lender withdrew without failing)
    std::lock_guard lock(mu);
    errors[ri] = error;
    induced[ri] = caused_elsewhere ? 1 : 0;
    done[ri] = 1;
    ++finished;
    cv.notify_all();
  }
};

}  // namespace

void run_in_process(int size, const std::function<void(Communicator& world)>& fn) {
  OPTIMUS_CHECK(size >= 1, "run_in_process needs at least one rank, got ", size);
  auto state = std::make_shared<RunState>(size, fn);
  std::vector<int> everyone(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) everyone[static_cast<std::size_t>(r)] = r;
  auto group = std::make_shared<GroupState>(everyone, state->world);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  try {
    for (int r = 0; r < size; ++r) threads.emplace_back([state, group, r] { state->run(r, group); });
  } catch (const std::system_error& e) {  // no thread for a rank (a process or memory limit): the others stop
    state->world->aborted.store(true);
    for (std::thread& t : threads) t.join();
    OPTIMUS_FAIL("run_in_process: cannot start a thread for in-process rank ", threads.size(), " of ", size, " (",
                 e.what(), "): lower --in-process, or raise the limit on threads or memory (ulimit -u, -v)");
  } catch (...) {  // (out of memory copying what a thread runs): the ranks started stop, then the error goes on
    state->world->aborted.store(true);
    for (std::thread& t : threads) t.join();
    throw;
  }
  // Every rank's end; after a failure, the ranks still running are woken (their waits fail) and are given the
  // watchdog's timeout (at least kLeastGrace) to return. One that does not (stuck outside any wait) is left running:
  // the error is reported and the process must end, as MPI_Abort ends a job.
  std::vector<int> left;
  {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->finished == size || state->world->aborted.load(); });
    const std::chrono::milliseconds timeout(state->world->timeout_ms.load());
    const std::chrono::milliseconds grace = std::max(timeout, kLeastGrace);
    if (timeout.count() > 0) {
      state->cv.wait_for(lock, grace, [&] { return state->finished == size; });
    } else {
      state->cv.wait(lock, [&] { return state->finished == size; });
    }
    for (int r = 0; r < size; ++r) {
      if (state->done[static_cast<std::size_t>(r)] == 0) left.push_back(r);
    }
  }
  for (std::size_t r = 0; r < threads.size(); ++r) {
    if (std::find(left.begin(), left.end(), static_cast<int>(r)) != left.end()) {
      threads[r].detach();
    } else {
      threads[r].join();
    }
  }
  std::lock_guard lock(state->mu);  // (a thread left running may still finish)
  for (int pass = 0; pass < 2; ++pass) {  // original failures first, then induced ones
    for (std::size_t r = 0; r < state->errors.size(); ++r) {
      if (!state->errors[r] || state->induced[r] != pass) continue;
      if (left.empty()) std::rethrow_exception(state->errors[r]);
      std::string ranks;
      for (int k : left) ranks += (ranks.empty() ? "" : ", ") + std::to_string(k);
      const std::string first = detail::message_of(state->errors[r]);
      throw RanksLeftRunning(
          detail::concat(first, " (in-process rank", left.size() == 1 ? " " : "s ", ranks,
                         " did not stop within ",
                         static_cast<double>(std::max(state->world->timeout_ms.load(), kLeastGrace.count())) / 1e3,
                         " s after it and ",
                         left.size() == 1 ? "was" : "were", " left running)"),
          __FILE__, __LINE__);
    }
  }
}

std::unique_ptr<Communicator> make_self_communicator() {
  return std::make_unique<InProcessCommunicator>(
      std::make_shared<GroupState>(std::vector<int>{0}, std::make_shared<WorldState>(1)), 0, host_staging(),
      std::make_shared<JobState>());
}

}  // namespace optimus

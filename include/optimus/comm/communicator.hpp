// The one narrow communication interface every backend implements (docs/design.md, "Communicators").
//
// Buffers are raw pointers with an element count and a DType; typed helpers below take spans.
// Every operation exists blocking and non-blocking: `ibroadcast` returns a Request to wait on, and
// `broadcast` is `ibroadcast(...).wait()`. Collectives must be called by every rank of the
// communicator in the same order. Every public function makes an Operation (operation.hpp) and starts it: start()
// validates its arguments, counts its traffic (stats.hpp) and names it for the watchdog, once for every backend; a
// backend implements only post(), which moves the bytes. all_to_all is written here once, over the backends' sends and
// receives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optimus/comm/operation.hpp"
#include "optimus/comm/stats.hpp"
#include "optimus/core/device.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/reduce_op.hpp"

namespace optimus {

// Whether a backend call must complete before returning (blocking) or may return a pending Request.
// Backends with a faster blocking path (MPI_Bcast rather than MPI_Ibcast + MPI_Wait) use it.
enum class Sync { blocking, nonblocking };

// An operation as the watchdog names it: its kind and its number on the communicator (collectives are numbered from 1
// in the order every rank calls them; sends and receives have their own count).
struct CallLabel {
  CallKind kind = CallKind::barrier;
  std::uint64_t number = 0;
};

// What one rank's communicators share — a world, every communicator split from it, and the device communicators and
// transports created over them: whether one of their operations failed for good (the watchdog fired, a rank it waited
// for is gone, a device communicator aborted). From then on the job is ending: its pending requests are abandoned
// instead of waited for (each would otherwise wait its own timeout while the error unwinds), waits fail at once and
// new operations are refused, so the first error reaches the program's handler (Process::fail) without delay.
class JobState {
 public:
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  // Records a failure (a null one is ignored); the first one is kept.
  void fail(std::exception_ptr error) noexcept;
  // The first failure's message ("" while none).
  std::string failure() const;
  // The error of a wait on an operation of this failed job, which is abandoned: the first failure again, so that
  // whichever thread of the rank reports it names the cause (and it keeps its type: run_in_process tells an error
  // another rank caused from one of a rank's own).
  [[noreturn]] void throw_failure() const;

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::exception_ptr first_;
};

// Completion of a non-blocking operation, implemented by each backend. `job` is its communicator's (JobState).
class RequestImpl {
 public:
  explicit RequestImpl(std::shared_ptr<JobState> job);
  virtual ~RequestImpl() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;  // true once complete; never blocks
  // Throws the watchdog's error for this operation (naming the ranks it waits for where the backend knows them) and
  // marks the job failed: for a caller that polls with test() and keeps its own deadline (the simulated device's
  // streams).
  [[noreturn]] virtual void expire() = 0;
  JobState& job() const { return *job_; }

 private:
  std::shared_ptr<JobState> job_;
};

// A handle to a non-blocking operation. Move-only; destroying a pending request waits for it (and logs, never throws,
// if that fails), so buffers are never left in flight — unless its job has failed (JobState): it is then abandoned at
// once, silently (the job's first error is what gets reported, and the process is about to end).
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<RequestImpl> impl) : impl_(std::move(impl)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  ~Request();

  // Both throw at once, abandoning the operation, where its job has failed.
  void wait();
  bool test();
  // See RequestImpl::expire (a pending request only).
  [[noreturn]] void expire();
  bool pending() const { return impl_ != nullptr; }
  // Forgets a pending operation without waiting for it, after its communicator failed or was aborted (it may never
  // complete). It may still complete later: its buffers must stay valid as long as the process uses them.
  void abandon() noexcept { impl_.reset(); }

 private:
  std::unique_ptr<RequestImpl> impl_;
};

// Waits until one of `requests` (pending ones, of any communicators and backends) has completed and returns its index:
// the first complete one in the span's order. Polls them in turn (each poll makes MPI progress and is an MPI rank's
// sign of life), pausing between rounds (PollBackoff) so that a waiting rank leaves the cores to those computing. Past
// `timeout` (0: none) the watchdog fires on the first request still pending: its error names that operation, its
// communicator and the ranks it waits for (RequestImpl::expire). A request not pending counts as complete. Throws
// optimus::Error for an empty span or a null pointer, and at once once the job has failed.
std::size_t wait_any(std::span<Request* const> requests, std::chrono::milliseconds timeout);

// Where a rank reads the values of a broadcast started with Communicator::ibroadcast_view. After wait(), data() is the
// receive buffer — or, where the backend shares memory with the root (in-process ranks on host memory), the root's own
// buffer, read in place instead of copied. A receiver reads there until release() (or the view's destruction). The
// root's data() is its own buffer: after wait() its own work may read it, and reclaim() waits until every receiver has
// released it (at once where the values were copied), after which the root may change it. Move-only; destroying a
// view waits for it, releases and reclaims (logging, never throwing, a failure).
class BroadcastView {
 public:
  // Filled in by the backend: at the root when posted, at a receiver when its wait completes.
  struct Lease {
    const void* data = nullptr;
    std::function<void()> release;  // a receiver's, when it reads in place
    Request returned;               // the root's, when receivers read in place: complete once they have all released
  };

  BroadcastView() = default;
  BroadcastView(Request request, std::shared_ptr<Lease> lease, bool root)
      : request_(std::move(request)), lease_(std::move(lease)), root_(root) {}
  BroadcastView(BroadcastView&&) noexcept = default;
  BroadcastView& operator=(BroadcastView&& other) noexcept;
  BroadcastView(const BroadcastView&) = delete;
  BroadcastView& operator=(const BroadcastView&) = delete;
  ~BroadcastView();

  void wait() { request_.wait(); }
  bool test() { return request_.test(); }
  // The values: valid after wait() (at the root, at once) until release().
  const void* data() const;
  // A receiver is done reading. Idempotent; nothing at the root.
  void release() noexcept;
  // At the root: waits until every receiver has released its buffer. Nothing elsewhere.
  void reclaim();

 private:
  Request request_;
  std::shared_ptr<Lease> lease_;
  bool root_ = false;
};

class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;  // "mpi", "in-process", ...
  // Whether this communicator moves buffers that live on `device` (every one moves host buffers; a device
  // communicator, or an in-process one staging on a device, also moves that device's buffers).
  virtual bool takes_buffers_on(Device device) const = 0;
  // Whether threads other than the one that created it may call it (a simulated device's streams call their
  // communicators' transports from their own threads). MPI allows it only under MPI_THREAD_MULTIPLE.
  virtual bool allows_any_thread() const { return true; }
  // Whether non-blocking operations advance only while the process is inside this communicator's calls (MPI), so that
  // work overlapping them should poll them (Request::test) as it goes: SUMMA then splits its local GEMMs into row tiles
  // and polls between them. In-process operations advance by themselves (posting stages the data, waiting takes it).
  // A device communicator answers as its bootstrap does, so that a simulated device makes the CPU's GEMM calls on the
  // same launch and gives its bits (a GPU's GEMMs are never split).
  virtual bool needs_progress_calls() const = 0;
  // Whether a receive matches the send of its tag (MPI, in-process), or the next send between the two ranks, whatever
  // its tag (a device communicator: NCCL has no tags). Where it does not, a rank's sends to a peer and the peer's
  // receives from it must come in the same order, and a send may hold back the messages after it until it is received.
  virtual bool matches_tags() const { return true; }

  // buf: count elements at every rank; the root's values end up everywhere.
  Request ibroadcast(void* buf, std::size_t count, DType dtype, int root);
  // send: count elements at every rank; recv (root only, may equal send): their reduction.
  Request ireduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root);
  // send, recv: count elements (may be the same buffer); every rank gets the reduction.
  Request iall_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // send: count elements; recv: size()*count elements, rank r's contribution at r*count.
  Request iall_gather(const void* send, void* recv, std::size_t count, DType dtype);
  // send: size()*count elements; recv: count elements, block rank() of the reduction.
  Request ireduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // send: size()*count elements, block r (count elements at r*count) for rank r; recv: size()*count elements, block r
  // from rank r. The buffers must not overlap.
  Request iall_to_all(const void* send, void* recv, std::size_t count, DType dtype);
  // The variable form (an expert dispatch): send_counts[r] elements for rank r, the blocks one after another in rank
  // order from send; recv_counts[r] elements from rank r, likewise in recv. Both spans have size() entries, and
  // recv_counts[r] must be what rank r sends this rank, as every collective's counts must agree among its ranks (this
  // rank's own entries are checked equal; the others are the caller's to know: exchange them first with all_to_all).
  Request iall_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                        std::span<const std::size_t> recv_counts, DType dtype);
  // Tags are 0 to kMaxTag, as MPI promises them (MPI_TAG_UB is at least 32767); the tag after it carries all_to_all's
  // blocks.
  static constexpr int kMaxTag = 32766;
  Request isend(const void* buf, std::size_t count, DType dtype, int dest, int tag);
  Request irecv(void* buf, std::size_t count, DType dtype, int source, int tag);
  Request ibarrier();
  // A broadcast of count elements from buf at the root, whose receivers read the values through the view: in place at
  // the root where the backend can (see BroadcastView), otherwise copied into their buf. Counted as a broadcast.
  BroadcastView ibroadcast_view(void* buf, std::size_t count, DType dtype, int root);

  void broadcast(void* buf, std::size_t count, DType dtype, int root);
  void reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root);
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  void all_gather(const void* send, void* recv, std::size_t count, DType dtype);
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  void all_to_all(const void* send, void* recv, std::size_t count, DType dtype);
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                    std::span<const std::size_t> recv_counts, DType dtype);
  void send(const void* buf, std::size_t count, DType dtype, int dest, int tag);
  void recv(void* buf, std::size_t count, DType dtype, int source, int tag);
  void barrier();
  // The operation (any kind but all_to_all) checked, counted and posted: what every call above does. With
  // Sync::blocking the backend may complete it before returning; wait on the request either way. (For decorators and
  // for collectives that run a host transport's operation on their own buffers.)
  Request start(const Operation& operation, Sync sync);

  // Typed conveniences.
  template <class T>
  void broadcast(std::span<T> buf, int root) {
    broadcast(buf.data(), buf.size(), dtype_of<T>, root);
  }
  template <class T>
  void all_reduce(std::span<T> buf, ReduceOp op) {
    all_reduce(buf.data(), buf.data(), buf.size(), dtype_of<T>, op);
  }
  template <class T>
  T all_reduce(T value, ReduceOp op) {
    all_reduce(&value, &value, 1, dtype_of<T>, op);
    return value;
  }
  template <class T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    all_gather(send.data(), recv.data(), send.size(), dtype_of<T>);
  }

  // Collective: ranks with the same color form a new communicator, ordered by (key, rank). It inherits the timeout.
  std::unique_ptr<Communicator> split(int color, int key);

  // The watchdog, off (0) by default: waiting on an operation of this communicator that has not completed within
  // `timeout` throws optimus::Error naming the operation, the communicator (its ranks in the world) and the ranks that
  // have not joined it where the backend can tell (in-process: always; MPI: the ranks on this node). Collective: every
  // rank sets the same timeout. Communicators split from this one inherit it. (In-process, a wait on a rank that has
  // returned from run_in_process's function fails at once, watchdog or not.)
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // This communicator's ranks as ranks of the world it was split from (the backend's), for messages; empty: unknown.
  virtual std::vector<int> world_ranks() const = 0;
  // The host a world rank runs on, for messages where ranks span hosts (MPI, once the watchdog is on); "" when unknown
  // or beside the point (in-process ranks).
  virtual std::string host_of(int /*world_rank*/) const { return ""; }

  // The job this communicator belongs to (JobState): shared with the communicators split from it and created over it.
  const std::shared_ptr<JobState>& job() const { return job_; }

  // For the backends' pending requests. The operation being posted: set by start() just before post().
  const CallLabel& posting() const { return posting_; }
  // The watchdog's error: `call` on this communicator did not complete within timeout(); `missing`: the ranks (of this
  // communicator) that have not joined it, when known; `more`: what else the backend knows ("; world rank 1 on host a
  // has made no MPI call for 7.1 s"), or empty. Marks the job failed.
  [[noreturn]] void watchdog_expired(const CallLabel& call, const std::optional<std::vector<int>>& missing,
                                     const std::string& more) const;
  // The error of a wait that can never complete: `call` waits on `missing` ranks (of this communicator) that are gone.
  // Marks the job failed.
  [[noreturn]] void peers_gone(const CallLabel& call, const std::vector<int>& missing) const;
  // "all_reduce #3 on the mpi communicator of 4 ranks (world ranks 0, 1, 2, 3), at its rank 2": `call` named for
  // messages.
  std::string describe(const CallLabel& call) const;
  // The same from the communicator's facts, for what must not hold the communicator itself.
  static std::string describe(const CallLabel& call, std::string_view backend, int size,
                              const std::vector<int>& world_ranks, int rank);
  // The message of a wait that needs a buffer `lender` (a rank of this communicator) lent to `call` and has withdrawn,
  // its own wait having failed or its request having been abandoned. (A backend throws it as an error another rank
  // caused, which run_in_process reports only when no rank failed by itself.)
  std::string withdrawn_message(const CallLabel& call, int lender) const;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  // `job`: a new JobState for a world, the parent's for a communicator split or created over another.
  Communicator(int rank, int size, std::shared_ptr<JobState> job);

  // The backend's transport: moves `operation`'s bytes, once start() has checked and counted it; with Sync::blocking
  // it may complete the operation before returning.
  virtual Request post(const Operation& operation, Sync sync) = 0;
  // ibroadcast_view's backend half: fills `lease` (see BroadcastView::Lease). By default a broadcast into buf.
  virtual Request post_broadcast_view(void* buf, std::size_t count, DType dtype, int root,
                                      const std::shared_ptr<BroadcastView::Lease>& lease);
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;
  // The backend's part of set_timeout (collective), after timeout() changed; nothing by default.
  virtual void timeout_changed() {}


 private:
  // Checks `operation`'s arguments, names it for the watchdog and counts its traffic (start() without the post).
  void check_and_count(const Operation& operation);
  // all_to_all of either form: written once, over the backend's sends and receives (the device communicator groups
  // them, as NCCL's all-to-all is a group of sends and receives), one request completing with all of them.
  Request start_all_to_all(const void* send, std::span<const std::size_t> send_counts, void* recv,
                           std::span<const std::size_t> recv_counts, DType dtype);
  void check_peer(int peer, const char* what) const;
  void check_reducible(DType dtype, const char* what) const;
  void label(CallKind kind);  // posting_ for the call about to be posted (refused once the job has failed)
  void refuse_after_failure(std::string_view what) const;  // throws once the job has failed

  int rank_;
  int size_;
  std::shared_ptr<JobState> job_;
  CommStats stats_;
  std::chrono::milliseconds timeout_{0};
  CallLabel posting_;
  std::uint64_t collectives_ = 0, messages_ = 0;
};

}  // namespace optimus

// MPI backend: blocking operations are the blocking MPI calls, non-blocking ones the MPI_I* calls.
#include "optimus/comm/mpi_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "idle_ranks.hpp"
#include "mpi_check.hpp"

namespace optimus {
namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16: return MPI_UINT16_T;  // moved as bits, never reduced
    case DType::u8: return MPI_BYTE;
  }
  OPTIMUS_FAIL("unknown dtype");
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  OPTIMUS_FAIL("unknown reduce op");
}

int mpi_count(std::size_t count) {
  OPTIMUS_CHECK(count <= static_cast<std::size_t>(INT_MAX), "MPI message of ", count,
                " elements exceeds INT_MAX; split the buffer");
  return static_cast<int>(count);
}

class MpiRequest final : public RequestImpl {
 public:
  // With a timeout (> 0), wait() polls — each poll a sign of life (`beat`) — and calls `expired` (which throws the
  // watchdog's error) past it, or throws at once once the job has failed.
  MpiRequest(std::shared_ptr<JobState> job, std::function<void()> expired, std::chrono::milliseconds timeout,
             std::function<void()> beat)
      : RequestImpl(std::move(job)), expired_(std::move(expired)), timeout_(timeout), beat_(std::move(beat)) {}
  MPI_Request* handle() { return &request_; }

  void wait() override {
    if (timeout_.count() == 0) {
      OPTIMUS_CHECK_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE));
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    for (int polls = 0; !test(); ++polls) {
      if (job().failed()) job().throw_failure();  // (another thread's wait failed: a simulated device's stream)
      if (std::chrono::steady_clock::now() - started > timeout_) expired_();
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));  // past the first millisecond
    }
  }
  bool test() override {
    if (beat_) beat_();
    int done = 0;
    OPTIMUS_CHECK_MPI(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  void expire() override {
    expired_();
    OPTIMUS_FAIL("MpiRequest::expire: the watchdog's error was not thrown");
  }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::function<void()> expired_;
  std::chrono::milliseconds timeout_;
  std::function<void()> beat_;
};

int comm_rank(MPI_Comm comm) {
  int r = 0;
  OPTIMUS_CHECK_MPI(MPI_Comm_rank(comm, &r));
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  OPTIMUS_CHECK_MPI(MPI_Comm_size(comm, &s));
  return s;
}

// `comm`'s ranks as ranks of MPI_COMM_WORLD.
std::vector<int> ranks_in_world(MPI_Comm comm, int size) {
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_group(comm, &mine));
  OPTIMUS_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> ranks(static_cast<std::size_t>(size)), out(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  OPTIMUS_CHECK_MPI(MPI_Group_translate_ranks(mine, size, ranks.data(), world, out.data()));
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  return out;
}


// A node-local shared window of one 64-bit word per process of `comm` on this node: `mine`, and each one's word by its
// rank in `comm`. Collective over `comm`.
struct NodeWords {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win window = MPI_WIN_NULL;
  std::uint64_t* mine = nullptr;
  std::vector<std::pair<int, std::uint64_t*>> peers;  // (rank in `comm`, its word)

  explicit NodeWords(MPI_Comm comm) {
    int rank = 0;
    OPTIMUS_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    OPTIMUS_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    void* base = nullptr;
    OPTIMUS_CHECK_MPI(MPI_Win_allocate_shared(sizeof(std::uint64_t), sizeof(std::uint64_t), MPI_INFO_NULL, node,
                                              &base, &window));
    mine = static_cast<std::uint64_t*>(base);
    std::atomic_ref<std::uint64_t>(*mine).store(0);
    MPI_Group node_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
    OPTIMUS_CHECK_MPI(MPI_Comm_group(node, &node_group));
    OPTIMUS_CHECK_MPI(MPI_Comm_group(comm, &comm_group));
    int n = 0;
    OPTIMUS_CHECK_MPI(MPI_Comm_size(node, &n));
    for (int j = 0; j < n; ++j) {
      MPI_Aint bytes = 0;
      int unit = 0;
      void* theirs = nullptr;
      OPTIMUS_CHECK_MPI(MPI_Win_shared_query(window, j, &bytes, &unit, &theirs));
      int in_comm = 0;
      OPTIMUS_CHECK_MPI(MPI_Group_translate_ranks(node_group, 1, &j, comm_group, &in_comm));
      peers.emplace_back(in_comm, static_cast<std::uint64_t*>(theirs));
    }
    MPI_Group_free(&node_group);
    MPI_Group_free(&comm_group);
    MPI_Barrier(node);  // every word is zero before any is read
  }
  NodeWords(const NodeWords&) = delete;
  NodeWords& operator=(const NodeWords&) = delete;
  // MPI_Win_free synchronizes the node's ranks. While an exception unwinds (a watchdog alarm, a failed rank), or once
  // the job has failed, the peers may never get here — one may be the rank that stopped — so the window is left to
  // MPI_Finalize or to the job's abort (Process::fail) instead of waiting for them.
  void free(bool job_failed) {
    if (std::uncaught_exceptions() > 0 || job_failed) return;
    MPI_Win_free(&window);
    MPI_Comm_free(&node);
  }

  static void store(std::uint64_t* word, std::uint64_t value) { std::atomic_ref<std::uint64_t>(*word).store(value); }
  static std::uint64_t load(const std::uint64_t* word) { return std::atomic_ref<const std::uint64_t>(*word).load(); }
};

// This process's host, as MPI names it.
std::string this_host() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) return "?";
  return std::string(name, static_cast<std::size_t>(length));
}

}  // namespace

// The collectives each rank on this node has posted on the communicator: a rank stores its own count as it posts, and
// a rank whose wait expires reads the others' without their help.
struct MpiCommunicator::NodeCounters {
  NodeWords words;
  std::shared_ptr<JobState> job;

  NodeCounters(MPI_Comm comm, std::shared_ptr<JobState> j) : words(comm), job(std::move(j)) {}
  ~NodeCounters() { words.free(job->failed()); }

  void posted(std::uint64_t number) { NodeWords::store(words.mine, number); }
  // The ranks on this node that have not yet posted collective `number`.
  std::vector<int> behind(std::uint64_t number) const {
    std::vector<int> out;
    for (const auto& [rank, counter] : words.peers) {
      if (NodeWords::load(counter) < number) out.push_back(rank);
    }
    return out;
  }
};

// When each process on this node last called MPI through Optimus (posting, or polling a wait), in a node-local shared
// window, and every rank's host, gathered once: made where the watchdog is first turned on, shared by every
// communicator split from there. A rank that joined an operation and then stopped (SIGSTOP, a debugger, a swapped-out
// node) is one whose last call is old.
struct MpiCommunicator::Liveness {
  NodeWords words;
  std::shared_ptr<JobState> job;
  std::map<int, const std::uint64_t*> last_call;  // world rank -> its word, for the processes on this node
  std::map<int, std::string> hosts;               // world rank -> host, for every rank of the communicator

  Liveness(MPI_Comm comm, std::shared_ptr<JobState> j) : words(comm), job(std::move(j)) {
    int size = 0;
    OPTIMUS_CHECK_MPI(MPI_Comm_size(comm, &size));
    const std::vector<int> world = ranks_in_world(comm, size);
    for (const auto& [rank, word] : words.peers) last_call[world[static_cast<std::size_t>(rank)]] = word;
    std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all(mine.size() * static_cast<std::size_t>(size));
    const std::string host = this_host();
    std::copy(host.begin(), host.end(), mine.begin());
    OPTIMUS_CHECK_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                                    static_cast<int>(mine.size()), MPI_CHAR, comm));
    for (int r = 0; r < size; ++r) hosts[world[static_cast<std::size_t>(r)]] = all.data() + r * mine.size();
    beat();
  }
  ~Liveness() { words.free(job->failed()); }

  void beat() { NodeWords::store(words.mine, detail::monotonic_ns()); }
  // Seconds since world rank `w` last called MPI through Optimus; none where it is on another node.
  std::optional<double> idle(int w) const {
    const auto it = last_call.find(w);
    if (it == last_call.end()) return std::nullopt;
    const std::uint64_t then = NodeWords::load(it->second), now = detail::monotonic_ns();
    return now > then ? static_cast<double>(now - then) * 1e-9 : 0.0;
  }
  std::string host(int w) const {
    const auto it = hosts.find(w);
    return it == hosts.end() ? std::string() : it->second;
  }
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned)
    : MpiCommunicator(comm, owned, comm_rank(comm), comm_size(comm), std::make_shared<JobState>(), nullptr) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, int rank, int size, std::shared_ptr<JobState> job,
                                 std::shared_ptr<Liveness> liveness)
    : Communicator(rank, size, std::move(job)),
      comm_(comm),
      owned_(owned && comm != MPI_COMM_WORLD),
      world_ranks_(ranks_in_world(comm, size)),
      liveness_(std::move(liveness)) {
  OPTIMUS_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

void MpiCommunicator::timeout_changed() {
  if (timeout().count() == 0) return;
  if (!liveness_) liveness_ = std::make_shared<Liveness>(comm_, job());
  if (!counters_) counters_ = std::make_shared<NodeCounters>(comm_, job());
}

std::string MpiCommunicator::host_of(int world_rank) const {
  return liveness_ ? liveness_->host(world_rank) : std::string();
}

void MpiCommunicator::expired(const CallLabel& call, int peer, const std::shared_ptr<NodeCounters>& counters) const {
  // What this node can tell: the ranks that have not posted the operation, and the processes of the job on this node
  // (those of the communicator where the watchdog was first turned on) whose last MPI call is older than half the
  // timeout — stopped, or computing past the watchdog — whether or not they are ranks of this communicator: a rank
  // that waits for one that waits for a stopped one names the stopped one too.
  const std::optional<std::vector<int>> missing =
      peer >= 0 ? std::optional(std::vector<int>{peer})
                : counters ? std::optional(counters->behind(call.number)) : std::nullopt;
  const bool none_missing = !missing || missing->empty();
  if (!liveness_) watchdog_expired(call, missing, "");
  std::vector<int> named;  // the world ranks the message names already
  if (missing) {
    for (int r : *missing) named.push_back(world_ranks_[static_cast<std::size_t>(r)]);
  }
  const int me = world_ranks_[static_cast<std::size_t>(rank())];
  const double patience = 0.5 * std::chrono::duration<double>(timeout()).count();
  std::string more;
  for (const auto& [w, word] : liveness_->last_call) {
    const std::optional<double> idle = liveness_->idle(w);
    if (w == me || !idle || *idle <= patience) continue;
    const bool said = std::find(named.begin(), named.end(), w) != named.end();
    more += detail::idle_rank_text(w, said ? "" : " on " + host_of(w), "MPI", *idle);
  }
  if (more.empty() && none_missing) {
    std::string elsewhere;  // this communicator's ranks on other nodes
    for (int w : world_ranks_) {
      if (!liveness_->idle(w)) elsewhere += (elsewhere.empty() ? "" : ", ") + std::to_string(w) + " on " + host_of(w);
    }
    more = elsewhere.empty() ? "; every rank joined it and is calling MPI (operations posted in different orders?)"
                             : "; every rank on this host (" + host_of(me) + ") joined it and is calling MPI; "
                               "whether world ranks " + elsewhere + " did is unknown here";
  }
  watchdog_expired(call, missing, more);
}

template <class Blocking, class Nonblocking>
Request MpiCommunicator::issue(Sync sync, int peer, Blocking&& blocking, Nonblocking&& nonblocking) {
  if (sync == Sync::blocking && timeout().count() == 0) {
    OPTIMUS_CHECK_MPI(blocking());
    return {};
  }
  const CallLabel call = posting();
  if (counters_ && peer < 0) counters_->posted(call.number);
  std::function<void()> beat;
  if (liveness_) {
    liveness_->beat();
    beat = [liveness = liveness_] { liveness->beat(); };
  }
  auto request = std::make_unique<MpiRequest>(
      job(), [this, call, peer, counters = counters_] { expired(call, peer, counters); }, timeout(), std::move(beat));
  OPTIMUS_CHECK_MPI(nonblocking(request->handle()));
  Request pending(std::move(request));
  if (sync == Sync::blocking) pending.wait();
  return pending;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    counters_.reset();
    liveness_.reset();
  }
  // Once the job has failed, requests abandoned on this communicator may still be in flight: no more MPI calls on it
  // (MPI_Comm_free could progress them into buffers already gone); the job's abort ends them.
  if (owned_ && !finalized && !job()->failed()) {
    const int code = MPI_Comm_free(&comm_);
    if (code != MPI_SUCCESS) std::cerr << "optimus: MPI_Comm_free failed: " << detail::mpi_error_string(code) << '\n';
  }
}

bool MpiCommunicator::allows_any_thread() const {
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}

// Each kind as its blocking MPI call and its non-blocking one; a send's or receive's peer is named by the watchdog.
Request MpiCommunicator::post(const Operation& o, Sync sync) {
  const int n = mpi_count(o.count);
  const MPI_Datatype t = mpi_type(o.dtype);
  const MPI_Op op = mpi_op(o.op);
  const void* source = o.send == o.recv && o.reduces() ? MPI_IN_PLACE : o.send;  // a reduction in place
  switch (o.kind) {
    case CallKind::broadcast:
      return issue(
          sync, -1, [&] { return MPI_Bcast(o.recv, n, t, o.peer, comm_); },
          [&](MPI_Request* r) { return MPI_Ibcast(o.recv, n, t, o.peer, comm_, r); });
    case CallKind::reduce:
      if (rank() != o.peer) source = o.send;  // MPI_IN_PLACE is the root's alone
      return issue(
          sync, -1, [&] { return MPI_Reduce(source, o.recv, n, t, op, o.peer, comm_); },
          [&](MPI_Request* r) { return MPI_Ireduce(source, o.recv, n, t, op, o.peer, comm_, r); });
    case CallKind::all_reduce:
      return issue(
          sync, -1, [&] { return MPI_Allreduce(source, o.recv, n, t, op, comm_); },
          [&](MPI_Request* r) { return MPI_Iallreduce(source, o.recv, n, t, op, comm_, r); });
    case CallKind::all_gather:
      return issue(
          sync, -1, [&] { return MPI_Allgather(o.send, n, t, o.recv, n, t, comm_); },
          [&](MPI_Request* r) { return MPI_Iallgather(o.send, n, t, o.recv, n, t, comm_, r); });
    case CallKind::reduce_scatter:
      return issue(
          sync, -1, [&] { return MPI_Reduce_scatter_block(o.send, o.recv, n, t, op, comm_); },
          [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(o.send, o.recv, n, t, op, comm_, r); });
    case CallKind::send:
      return issue(
          sync, o.peer, [&] { return MPI_Send(o.send, n, t, o.peer, o.tag, comm_); },
          [&](MPI_Request* r) { return MPI_Isend(o.send, n, t, o.peer, o.tag, comm_, r); });
    case CallKind::recv:
      return issue(
          sync, o.peer, [&] { return MPI_Recv(o.recv, n, t, o.peer, o.tag, comm_, MPI_STATUS_IGNORE); },
          [&](MPI_Request* r) { return MPI_Irecv(o.recv, n, t, o.peer, o.tag, comm_, r); });
    case CallKind::barrier:
      return issue(
          sync, -1, [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
    case CallKind::all_to_all: break;
  }
  OPTIMUS_FAIL("the MPI communicator has no single call for ", name_of(o.kind));
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm child = MPI_COMM_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_split(comm_, color, key, &child));
  const int rank = comm_rank(child), size = comm_size(child);
  return std::unique_ptr<Communicator>(new MpiCommunicator(child, true, rank, size, job(), liveness_));
}

}  // namespace optimus

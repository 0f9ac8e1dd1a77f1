// MPI backend: blocking operations are the blocking MPI calls, non-blocking ones the MPI_I* calls.
#include "optimus/comm/mpi_communicator.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

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
  // With a timeout (> 0), wait() polls and calls `expired` (which throws the watchdog's error) past it.
  explicit MpiRequest(std::function<void()> expired, std::chrono::milliseconds timeout)
      : expired_(std::move(expired)), timeout_(timeout) {}
  MPI_Request* handle() { return &request_; }

  void wait() override {
    if (timeout_.count() == 0) {
      OPTIMUS_CHECK_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE));
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    for (int polls = 0; !test(); ++polls) {
      if (std::chrono::steady_clock::now() - started > timeout_) expired_();
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));  // past the first millisecond
    }
  }
  bool test() override {
    int done = 0;
    OPTIMUS_CHECK_MPI(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::function<void()> expired_;
  std::chrono::milliseconds timeout_;
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

}  // namespace

// The collectives each rank on this node has posted on the communicator, in a node-local shared window: a rank
// stores its own count as it posts, and a rank whose wait expires reads the others' without their help.
struct MpiCommunicator::NodeCounters {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win window = MPI_WIN_NULL;
  std::uint64_t* mine = nullptr;
  std::vector<std::pair<int, std::uint64_t*>> peers;  // (rank in the communicator, its counter)

  explicit NodeCounters(MPI_Comm comm) {
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
    MPI_Barrier(node);  // every counter is zero before any is read
  }
  // MPI_Win_free synchronizes the node's ranks. While an exception unwinds (a watchdog alarm, a failed rank) the peers
  // may never get here — one may be the rank that stopped — so the window is left to MPI_Finalize or to the job's
  // abort (Context::fail) instead of waiting for them.
  ~NodeCounters() {
    if (std::uncaught_exceptions() > 0) return;
    MPI_Win_free(&window);
    MPI_Comm_free(&node);
  }

  void posted(std::uint64_t number) { std::atomic_ref<std::uint64_t>(*mine).store(number); }
  // The ranks on this node that have not yet posted collective `number`.
  std::vector<int> behind(std::uint64_t number) const {
    std::vector<int> out;
    for (const auto& [rank, counter] : peers) {
      if (std::atomic_ref<std::uint64_t>(*counter).load() < number) out.push_back(rank);
    }
    return out;
  }
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned)
    : MpiCommunicator(comm, owned, comm_rank(comm), comm_size(comm)) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, int rank, int size)
    : Communicator(rank, size),
      comm_(comm),
      owned_(owned && comm != MPI_COMM_WORLD),
      world_ranks_(ranks_in_world(comm, size)) {
  OPTIMUS_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

void MpiCommunicator::timeout_changed() {
  if (timeout().count() > 0 && !counters_) counters_ = std::make_shared<NodeCounters>(comm_);
}

template <class Blocking, class Nonblocking>
Request MpiCommunicator::start(Sync sync, int peer, Blocking&& blocking, Nonblocking&& nonblocking) {
  if (sync == Sync::blocking && timeout().count() == 0) {
    OPTIMUS_CHECK_MPI(blocking());
    return {};
  }
  const CallLabel call = posting();
  if (counters_ && peer < 0) counters_->posted(call.number);
  std::function<void()> expired;
  if (timeout().count() > 0) {
    expired = [this, call, peer, counters = counters_] {
      if (peer >= 0) watchdog_expired(call, std::vector<int>{peer});
      watchdog_expired(call, counters ? std::optional(counters->behind(call.number)) : std::nullopt);
    };
  }
  auto request = std::make_unique<MpiRequest>(std::move(expired), timeout());
  OPTIMUS_CHECK_MPI(nonblocking(request->handle()));
  Request pending(std::move(request));
  if (sync == Sync::blocking) pending.wait();
  return pending;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) counters_.reset();
  if (owned_ && !finalized) {
    const int code = MPI_Comm_free(&comm_);
    if (code != MPI_SUCCESS) std::cerr << "optimus: MPI_Comm_free failed: " << detail::mpi_error_string(code) << '\n';
  }
}

bool MpiCommunicator::allows_any_thread() const {
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}

Request MpiCommunicator::post_broadcast(void* buf, std::size_t count, DType dtype, int root, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, -1, [&] { return MPI_Bcast(buf, n, t, root, comm_); },
      [&](MPI_Request* r) { return MPI_Ibcast(buf, n, t, root, comm_, r); });
}

Request MpiCommunicator::post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                     int root, Sync sync) {
  const void* source = (rank() == root && send == recv) ? MPI_IN_PLACE : send;
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, -1, [&] { return MPI_Reduce(source, recv, n, t, mpi_op(op), root, comm_); },
      [&](MPI_Request* r) { return MPI_Ireduce(source, recv, n, t, mpi_op(op), root, comm_, r); });
}

Request MpiCommunicator::post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                         Sync sync) {
  const void* source = send == recv ? MPI_IN_PLACE : send;
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, -1, [&] { return MPI_Allreduce(source, recv, n, t, mpi_op(op), comm_); },
      [&](MPI_Request* r) { return MPI_Iallreduce(source, recv, n, t, mpi_op(op), comm_, r); });
}

Request MpiCommunicator::post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, -1, [&] { return MPI_Allgather(send, n, t, recv, n, t, comm_); },
      [&](MPI_Request* r) { return MPI_Iallgather(send, n, t, recv, n, t, comm_, r); });
}

Request MpiCommunicator::post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                             ReduceOp op, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, -1, [&] { return MPI_Reduce_scatter_block(send, recv, n, t, mpi_op(op), comm_); },
      [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(send, recv, n, t, mpi_op(op), comm_, r); });
}

Request MpiCommunicator::post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, dest, [&] { return MPI_Send(buf, n, t, dest, tag, comm_); },
      [&](MPI_Request* r) { return MPI_Isend(buf, n, t, dest, tag, comm_, r); });
}

Request MpiCommunicator::post_recv(void* buf, std::size_t count, DType dtype, int source, int tag, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, source, [&] { return MPI_Recv(buf, n, t, source, tag, comm_, MPI_STATUS_IGNORE); },
      [&](MPI_Request* r) { return MPI_Irecv(buf, n, t, source, tag, comm_, r); });
}

Request MpiCommunicator::post_barrier(Sync sync) {
  return start(
      sync, -1, [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm child = MPI_COMM_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_split(comm_, color, key, &child));
  return std::make_unique<MpiCommunicator>(child, true);
}

}  // namespace optimus

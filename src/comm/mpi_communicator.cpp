// MPI backend: blocking operations are the blocking MPI calls, non-blocking ones the MPI_I* calls.
#include "optimus/comm/mpi_communicator.hpp"

#include <climits>
#include <iostream>

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
  MpiRequest() = default;
  MPI_Request* handle() { return &request_; }

  void wait() override { OPTIMUS_CHECK_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE)); }
  bool test() override {
    int done = 0;
    OPTIMUS_CHECK_MPI(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Runs the blocking MPI call, or posts the non-blocking one (which fills in a request handle).
template <class Blocking, class Nonblocking>
Request start(Sync sync, Blocking&& blocking, Nonblocking&& nonblocking) {
  if (sync == Sync::blocking) {
    OPTIMUS_CHECK_MPI(blocking());
    return {};
  }
  auto request = std::make_unique<MpiRequest>();
  OPTIMUS_CHECK_MPI(nonblocking(request->handle()));
  return Request(std::move(request));
}

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

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned)
    : MpiCommunicator(comm, owned, comm_rank(comm), comm_size(comm)) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, int rank, int size)
    : Communicator(rank, size), comm_(comm), owned_(owned && comm != MPI_COMM_WORLD) {
  OPTIMUS_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
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
      sync, [&] { return MPI_Bcast(buf, n, t, root, comm_); },
      [&](MPI_Request* r) { return MPI_Ibcast(buf, n, t, root, comm_, r); });
}

Request MpiCommunicator::post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                     int root, Sync sync) {
  const void* source = (rank() == root && send == recv) ? MPI_IN_PLACE : send;
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Reduce(source, recv, n, t, mpi_op(op), root, comm_); },
      [&](MPI_Request* r) { return MPI_Ireduce(source, recv, n, t, mpi_op(op), root, comm_, r); });
}

Request MpiCommunicator::post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                         Sync sync) {
  const void* source = send == recv ? MPI_IN_PLACE : send;
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Allreduce(source, recv, n, t, mpi_op(op), comm_); },
      [&](MPI_Request* r) { return MPI_Iallreduce(source, recv, n, t, mpi_op(op), comm_, r); });
}

Request MpiCommunicator::post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Allgather(send, n, t, recv, n, t, comm_); },
      [&](MPI_Request* r) { return MPI_Iallgather(send, n, t, recv, n, t, comm_, r); });
}

Request MpiCommunicator::post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                             ReduceOp op, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Reduce_scatter_block(send, recv, n, t, mpi_op(op), comm_); },
      [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(send, recv, n, t, mpi_op(op), comm_, r); });
}

Request MpiCommunicator::post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Send(buf, n, t, dest, tag, comm_); },
      [&](MPI_Request* r) { return MPI_Isend(buf, n, t, dest, tag, comm_, r); });
}

Request MpiCommunicator::post_recv(void* buf, std::size_t count, DType dtype, int source, int tag, Sync sync) {
  const int n = mpi_count(count);
  const MPI_Datatype t = mpi_type(dtype);
  return start(
      sync, [&] { return MPI_Recv(buf, n, t, source, tag, comm_, MPI_STATUS_IGNORE); },
      [&](MPI_Request* r) { return MPI_Irecv(buf, n, t, source, tag, comm_, r); });
}

Request MpiCommunicator::post_barrier(Sync sync) {
  return start(
      sync, [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm child = MPI_COMM_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_split(comm_, color, key, &child));
  return std::make_unique<MpiCommunicator>(child, true);
}

}  // namespace optimus

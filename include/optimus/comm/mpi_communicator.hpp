// The MPI backend (host memory). This header is about MPI, so it includes mpi.h; nothing else public does.
// Blocking operations call the blocking MPI functions (MPI_Bcast, ...), whose shared-memory algorithms are
// faster than a non-blocking call followed by MPI_Wait; non-blocking ones call MPI_Ibcast, ....
#pragma once

#include <mpi.h>

#include "optimus/comm/communicator.hpp"

namespace optimus {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm`; frees it on destruction when `owned` (never MPI_COMM_WORLD itself).
  // The communicator's error handler is set to MPI_ERRORS_RETURN so failures become optimus::Error.
  MpiCommunicator(MPI_Comm comm, bool owned);
  ~MpiCommunicator() override;

  MPI_Comm native() const { return comm_; }
  std::string backend() const override { return "mpi"; }
  bool takes_buffers_on(Device device) const override { return device == Device::cpu; }
  // Whether MPI was initialized with MPI_THREAD_MULTIPLE (optimus::Context asks for it).
  bool allows_any_thread() const override;

 protected:
  Request post_broadcast(void* buf, std::size_t count, DType dtype, int root, Sync sync) override;
  Request post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root,
                      Sync sync) override;
  Request post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                          Sync sync) override;
  Request post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) override;
  Request post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                              Sync sync) override;
  Request post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag, Sync sync) override;
  Request post_recv(void* buf, std::size_t count, DType dtype, int source, int tag, Sync sync) override;
  Request post_barrier(Sync sync) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  MpiCommunicator(MPI_Comm comm, bool owned, int rank, int size);

  MPI_Comm comm_;
  bool owned_;
};

}  // namespace optimus

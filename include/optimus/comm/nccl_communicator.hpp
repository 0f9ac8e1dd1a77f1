// The NCCL backend: collectives on device buffers, ordered on a communication stream (DESIGN.md section 3).
// This header is about NCCL, so it includes nccl.h.
//
// Bootstrap: rank 0 of a host communicator (MPI, or in-process) creates the ncclUniqueId and broadcasts it;
// every rank then joins with ncclCommInitRank on its device. Every operation is enqueued on the
// communicator's stream and returns a Request; waiting polls the stream's completion and
// ncclCommGetAsyncError, and on an NCCL error aborts the communicator and throws instead of hanging.
// Blocking calls wait the same way. Traffic counters follow the same convention as every backend.
// send/recv ignore the tag (NCCL has none): messages between two ranks match in the order they are posted.
//
// Ordering with the computation: set_compute_stream() names the stream whose kernels write and read this
// communicator's buffers; every operation then first waits (on the device) for what is enqueued there, and a
// Request completes only when the NCCL work is done, so kernels enqueued after wait() see the result. Host
// buffers (the layers' scalar reductions: the loss, the gradient norm) are staged through a device buffer of the
// communicator and complete before the call returns.
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/cuda/runtime.hpp"

#define OPTIMUS_CHECK_NCCL(call)                                                                    \
  do {                                                                                              \
    const ncclResult_t optimus_nccl_status_ = (call);                                               \
    OPTIMUS_CHECK(optimus_nccl_status_ == ncclSuccess, #call, " failed: ", ncclGetErrorString(optimus_nccl_status_)); \
  } while (0)

namespace optimus {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`: one NCCL rank per bootstrap rank, on CUDA device `device`.
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, int device);
  ~NcclCommunicator() override;

  std::string backend() const override { return "nccl"; }
  ncclComm_t native() const { return comm_; }
  cudaStream_t stream() const { return stream_.get(); }
  // Every later operation (here and in communicators split from this one) waits for `compute`'s work first.
  void set_compute_stream(cudaStream_t compute) { compute_ = compute; }

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
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, cudaStream_t compute);
  // The communication stream waits for the compute stream's work so far.
  void order_after_compute();
  // Records completion of what was just enqueued; waits for it when `sync` is blocking.
  Request finish(Sync sync);
  // Runs `op(send, recv)` on device buffers: the given ones, or for host buffers the staging buffer (send's
  // `send_bytes` copied in first, recv's `recv_bytes` copied out after, blocking). `recv` may equal `send`.
  template <class Op>
  Request run(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes, Sync sync, Op&& op);
  // A device buffer of at least `bytes` (grown as needed, kept for later host-buffer operations).
  void* staging(std::size_t bytes);

  ncclComm_t comm_;
  int device_;
  cudaStream_t compute_;  // null: no ordering with a compute stream
  cuda::Stream stream_;
  cuda::Event computed_;  // recorded on compute_ before each operation
  std::shared_ptr<float> barrier_word_;  // one device float for barrier()
  std::shared_ptr<void> staging_;        // host-buffer operations run through it
  std::size_t staging_bytes_ = 0;
  // Set when a request saw an asynchronous error and aborted comm_ (then it is not destroyed again).
  std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace optimus

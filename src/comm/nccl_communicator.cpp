// NCCL communicator: stream-ordered collectives with asynchronous error checks.
#include "optimus/comm/nccl_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

namespace optimus {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
  }
  OPTIMUS_FAIL("unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  OPTIMUS_FAIL("unknown reduce op");
}

// Completion of enqueued NCCL work: an event on the communication stream, polled together with the
// communicator's asynchronous error state so that a failed peer aborts instead of hanging.
class NcclRequest final : public RequestImpl {
 public:
  NcclRequest(ncclComm_t comm, cudaStream_t stream, std::shared_ptr<std::atomic<bool>> aborted)
      : comm_(comm), aborted_(std::move(aborted)) {
    event_.record(stream);
  }

  void wait() override {
    while (!test()) std::this_thread::yield();
  }
  bool test() override {
    OPTIMUS_CHECK(!aborted_->load(), "NCCL communicator was aborted after an earlier failure");
    ncclResult_t async = ncclSuccess;
    OPTIMUS_CHECK_NCCL(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      if (!aborted_->exchange(true)) ncclCommAbort(comm_);  // once; the communicator then destroys nothing
      OPTIMUS_FAIL("NCCL operation failed asynchronously: ", ncclGetErrorString(async), " (communicator aborted)");
    }
    return event_.done();
  }

 private:
  ncclComm_t comm_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  cuda::Event event_;
};

// Whether NCCL can use `p` as it is; null counts as usable (nothing to move).
bool on_device(const void* p) { return p == nullptr || cuda::is_device_pointer(p); }

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap, int device) {
  cuda::require_device(device);
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) OPTIMUS_CHECK_NCCL(ncclGetUniqueId(&id));
  static_assert(sizeof(id) % 2 == 0);
  bootstrap.broadcast(&id, sizeof(id) / 2, DType::bf16, 0);  // bf16 moves 2-byte words as they are
  OPTIMUS_CHECK_CUDA(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  OPTIMUS_CHECK_NCCL(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(comm, bootstrap.rank(), bootstrap.size(), device, nullptr));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size, int device, cudaStream_t compute)
    : Communicator(rank, size), comm_(comm), device_(device), compute_(compute) {
  float* word = nullptr;
  OPTIMUS_CHECK_CUDA(cudaMalloc(&word, sizeof(float)));
  barrier_word_ = std::shared_ptr<float>(word, [](float* p) { cudaFree(p); });
}

NcclCommunicator::~NcclCommunicator() {
  if (aborted_->load()) return;  // ncclCommAbort already released it
  const ncclResult_t s = ncclCommDestroy(comm_);
  if (s != ncclSuccess) std::cerr << "optimus: ncclCommDestroy failed: " << ncclGetErrorString(s) << '\n';
}

Request NcclCommunicator::finish(Sync sync) {
  Request r(std::make_unique<NcclRequest>(comm_, stream_.get(), aborted_));
  if (sync == Sync::blocking) r.wait();
  return r;
}

void NcclCommunicator::order_after_compute() {
  if (compute_ == nullptr) return;
  computed_.record(compute_);
  computed_.wait_on(stream_.get());
}

void* NcclCommunicator::staging(std::size_t bytes) {
  if (bytes > staging_bytes_) {
    void* p = nullptr;
    OPTIMUS_CHECK_CUDA(cudaMalloc(&p, bytes));  // grows to the largest host-buffer operation, then stays
    staging_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
    staging_bytes_ = bytes;
  }
  return staging_.get();
}

template <class Op>
Request NcclCommunicator::run(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes, Sync sync,
                              Op&& op) {
  OPTIMUS_CHECK_CUDA(cudaSetDevice(device_));
  order_after_compute();
  if (on_device(send) && on_device(recv)) {
    op(send, recv);
    return finish(sync);
  }
  const bool in_place = send == recv;
  char* base = static_cast<char*>(staging(in_place ? std::max(send_bytes, recv_bytes) : send_bytes + recv_bytes));
  void* staged_send = send == nullptr ? nullptr : base;
  void* staged_recv = recv == nullptr ? nullptr : in_place ? base : base + send_bytes;
  if (send != nullptr && send_bytes > 0) {
    OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(staged_send, send, send_bytes, cudaMemcpyDefault, stream_.get()));
  }
  op(staged_send, staged_recv);
  if (recv != nullptr && recv_bytes > 0) {
    OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(recv, staged_recv, recv_bytes, cudaMemcpyDefault, stream_.get()));
  }
  return finish(Sync::blocking);  // host buffers hold the result when the call returns
}

Request NcclCommunicator::post_broadcast(void* buf, std::size_t count, DType dtype, int root, Sync sync) {
  const std::size_t bytes = count * size_of(dtype);
  return run(buf, bytes, buf, bytes, sync, [&](const void* send, void* recv) {
    OPTIMUS_CHECK_NCCL(ncclBroadcast(send, recv, count, nccl_type(dtype), root, comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                      int root, Sync sync) {
  const std::size_t bytes = count * size_of(dtype);
  return run(send, bytes, rank() == root ? recv : nullptr, bytes, sync, [&](const void* s, void* r) {
    OPTIMUS_CHECK_NCCL(ncclReduce(s, r, count, nccl_type(dtype), nccl_op(op), root, comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                          Sync sync) {
  const std::size_t bytes = count * size_of(dtype);
  return run(send, bytes, recv, bytes, sync, [&](const void* s, void* r) {
    OPTIMUS_CHECK_NCCL(ncclAllReduce(s, r, count, nccl_type(dtype), nccl_op(op), comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) {
  const std::size_t bytes = count * size_of(dtype);
  const auto ranks = static_cast<std::size_t>(size());
  return run(send, bytes, recv, bytes * ranks, sync, [&](const void* s, void* r) {
    OPTIMUS_CHECK_NCCL(ncclAllGather(s, r, count, nccl_type(dtype), comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                              ReduceOp op, Sync sync) {
  const std::size_t bytes = count * size_of(dtype);
  const auto ranks = static_cast<std::size_t>(size());
  return run(send, bytes * ranks, recv, bytes, sync, [&](const void* s, void* r) {
    OPTIMUS_CHECK_NCCL(ncclReduceScatter(s, r, count, nccl_type(dtype), nccl_op(op), comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_send(const void* buf, std::size_t count, DType dtype, int dest, int /*tag*/,
                                    Sync sync) {
  return run(buf, count * size_of(dtype), nullptr, 0, sync, [&](const void* s, void*) {
    OPTIMUS_CHECK_NCCL(ncclSend(s, count, nccl_type(dtype), dest, comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_recv(void* buf, std::size_t count, DType dtype, int source, int /*tag*/, Sync sync) {
  return run(nullptr, 0, buf, count * size_of(dtype), sync, [&](const void*, void* r) {
    OPTIMUS_CHECK_NCCL(ncclRecv(r, count, nccl_type(dtype), source, comm_, stream_.get()));
  });
}

Request NcclCommunicator::post_barrier(Sync sync) {
  return run(barrier_word_.get(), sizeof(float), barrier_word_.get(), sizeof(float), sync, [&](const void*, void*) {
    OPTIMUS_CHECK_NCCL(ncclAllReduce(barrier_word_.get(), barrier_word_.get(), 1, ncclFloat32, ncclSum, comm_,
                                     stream_.get()));
  });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  ncclComm_t child = nullptr;
  OPTIMUS_CHECK_NCCL(ncclCommSplit(comm_, color, key, &child, nullptr));
  int rank = 0, size = 0;
  OPTIMUS_CHECK_NCCL(ncclCommUserRank(child, &rank));
  OPTIMUS_CHECK_NCCL(ncclCommCount(child, &size));
  return std::unique_ptr<Communicator>(new NcclCommunicator(child, rank, size, device_, compute_));
}

}  // namespace optimus

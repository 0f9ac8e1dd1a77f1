// NCCL behind the DeviceCollectives interface (optimus/comm/device_collectives.hpp): each operation enqueued on the
// given stream of the communicator's GPU, every call through the table of the library opened on first use
// (nccl_library.hpp). GPU-only code: CI compiles it, a GPU runs it; the device communicator above it runs in CI over
// the simulated device's collectives.
#include <nccl.h>

#include <iostream>

#include "nccl_library.hpp"
#include "optimus/core/error.hpp"
#include "optimus/cuda/device.hpp"
#include "optimus/cuda/runtime.hpp"

#define OPTIMUS_CHECK_NCCL(call)                                                                         \
  do {                                                                                                   \
    const ncclResult_t optimus_nccl_status_ = (call);                                                    \
    OPTIMUS_CHECK(optimus_nccl_status_ == ncclSuccess, #call, " failed: ",                               \
                  ::optimus::detail::nccl().ncclGetErrorString(optimus_nccl_status_));                   \
  } while (0)

namespace optimus {
namespace {

using detail::nccl;  // NCCL's functions; the first call opens the library

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::u8: return ncclUint8;
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

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(ncclComm_t comm, DeviceRuntime& device) : comm_(comm), device_(&device) {
    OPTIMUS_CHECK_NCCL(nccl().ncclCommUserRank(comm_, &rank_));
    OPTIMUS_CHECK_NCCL(nccl().ncclCommCount(comm_, &size_));
  }
  ~NcclCollectives() override {
    if (aborted_) return;  // ncclCommAbort released it
    const ncclResult_t s = nccl().ncclCommDestroy(comm_);
    if (s != ncclSuccess) std::cerr << "optimus: ncclCommDestroy failed: " << nccl().ncclGetErrorString(s) << '\n';
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void run(const Operation& o, Sync, DeviceStream& s) override {
    const ncclDataType_t t = nccl_type(o.dtype);
    const cudaStream_t st = stream(s);
    switch (o.kind) {
      case CallKind::broadcast:
        OPTIMUS_CHECK_NCCL(nccl().ncclBroadcast(o.send, o.recv, o.count, t, o.peer, comm_, st));
        return;
      case CallKind::reduce:
        OPTIMUS_CHECK_NCCL(nccl().ncclReduce(o.send, o.recv, o.count, t, nccl_op(o.op), o.peer, comm_, st));
        return;
      case CallKind::all_reduce:
        OPTIMUS_CHECK_NCCL(nccl().ncclAllReduce(o.send, o.recv, o.count, t, nccl_op(o.op), comm_, st));
        return;
      case CallKind::all_gather: OPTIMUS_CHECK_NCCL(nccl().ncclAllGather(o.send, o.recv, o.count, t, comm_, st)); return;
      case CallKind::reduce_scatter:
        OPTIMUS_CHECK_NCCL(nccl().ncclReduceScatter(o.send, o.recv, o.count, t, nccl_op(o.op), comm_, st));
        return;
      case CallKind::send: OPTIMUS_CHECK_NCCL(nccl().ncclSend(o.send, o.count, t, o.peer, comm_, st)); return;
      case CallKind::recv: OPTIMUS_CHECK_NCCL(nccl().ncclRecv(o.recv, o.count, t, o.peer, comm_, st)); return;
      case CallKind::barrier:
      case CallKind::all_to_all: break;
    }
    OPTIMUS_FAIL("NCCL collectives: no single call for ", name_of(o.kind));
  }
  void group_start() override { OPTIMUS_CHECK_NCCL(nccl().ncclGroupStart()); }
  void group_end() override { OPTIMUS_CHECK_NCCL(nccl().ncclGroupEnd()); }

  void check_async_errors() override {
    OPTIMUS_CHECK(!aborted_, "NCCL communicator was aborted after an earlier failure");
    ncclResult_t async = ncclSuccess;
    OPTIMUS_CHECK_NCCL(nccl().ncclCommGetAsyncError(comm_, &async));
    OPTIMUS_CHECK(async == ncclSuccess || async == ncclInProgress, "NCCL operation failed asynchronously: ",
                  nccl().ncclGetErrorString(async));
  }
  void abort() noexcept override {
    if (aborted_) return;
    aborted_ = true;
    nccl().ncclCommAbort(comm_);
  }
  std::unique_ptr<DeviceCollectives> split(int color, int key) override {
    ncclComm_t child = nullptr;
    OPTIMUS_CHECK_NCCL(nccl().ncclCommSplit(comm_, color, key, &child, nullptr));
    return std::make_unique<NcclCollectives>(child, *device_);
  }

 private:
  static cudaStream_t stream(DeviceStream& s) { return cuda::native(s, "NCCL"); }

  ncclComm_t comm_;
  DeviceRuntime* device_;
  int rank_ = 0, size_ = 0;
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<DeviceCollectives> nccl_collectives(Communicator& bootstrap, DeviceRuntime& device) {
  OPTIMUS_CHECK(device.device() == Device::cuda, "NCCL needs a CUDA device, got ", device.name());
  nccl();  // every rank opens NCCL before the broadcast: where it does not load, every rank throws the same error
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) OPTIMUS_CHECK_NCCL(nccl().ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof(id), DType::u8, 0);
  device.make_current();
  ncclComm_t comm = nullptr;
  OPTIMUS_CHECK_NCCL(nccl().ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  return std::make_unique<NcclCollectives>(comm, device);
}

}  // namespace optimus

// A Communicator on an accelerator (docs/design.md, "Communicators"): collectives on device buffers queued on a
// communication stream — NCCL on a GPU, the simulated device's collectives on sim (device_collectives.hpp); where two
// ranks share one device (DeviceRuntime::identity: processes on one GPU, which NCCL refuses), collectives staged
// through the host (staged_collectives.hpp; backend() says "mpi-staged"). This is the device-generic half of what was the NCCL communicator, so that CI runs it
// with several ranks on the simulated device (over MPI between processes, or in-process between threads):
//
//   * Bootstrap: create() is collective over a host communicator (MPI, or in-process): NCCL's unique id is broadcast
//     over it; the simulated collectives use a private duplicate of it as their transport.
//   * Ordering with the computation: set_compute_stream() names the stream whose kernels write and read this
//     communicator's buffers; every operation first waits (on the device, an event) for what is queued there, and a
//     Request completes only when the operation is done, so kernels queued after wait() see the result. Split
//     communicators inherit the compute stream and the timeout.
//   * Host buffers (the layers' scalar reductions: the loss, the gradient norm) are staged through a device buffer of
//     the communicator and complete before the call returns.
//   * Point-to-point: a device send blocks until the peer's receive runs, so isend and irecv are not started at once:
//     consecutive ones are posted together, as one group, when one of their requests is waited on or tested, or when
//     another operation is posted — an exchange (both ranks isend, then irecv, then wait) completes, as with MPI.
//     Unlike MPI, a collective posted after a send is queued behind it: rank 0 isend then all_reduce, rank 1
//     all_reduce then irecv deadlocks (as on NCCL) — post the matching receive first.
//     send/recv ignore the tag (NCCL has none): messages between two ranks match in the order they are posted.
//   * Failures: waiting checks the collectives' asynchronous errors; an operation still running after the timeout
//     (default 10 minutes: a peer that died leaves NCCL waiting forever) aborts the communicator. Either way wait()
//     throws, and every later operation on the communicator throws at once; the job fails (JobState), so the rank's
//     other pending operations are abandoned. Over a host transport with a watchdog (the simulated device's, staged
//     collectives) the transport's error, which names the ranks that did not join, is the one reported.
// Traffic counters follow the same convention as every backend.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/comm/device_collectives.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

class DeviceCommunicator final : public Communicator {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);

  // Collective over `bootstrap`: one rank per bootstrap rank, on `device` (which must outlive the communicator and
  // those split from it), over the device's own collectives `native` (NCCL's, the simulated device's: the device
  // module chooses them, optimus/device/rank_device.hpp's device_communicator), or staged through the host where two
  // ranks share one device (staged_collectives.hpp).
  static std::unique_ptr<DeviceCommunicator> create(Communicator& bootstrap, DeviceRuntime& device,
                                                    const NativeCollectives& native);
  ~DeviceCommunicator() override;

  std::string backend() const override;
  bool takes_buffers_on(Device device) const override;
  bool needs_progress_calls() const override;  // the bootstrap's answer (see Communicator)
  bool matches_tags() const override { return false; }
  // The bootstrap's world ranks for a communicator made by create(); empty (unknown) for one split from it.
  std::vector<int> world_ranks() const override;
  // Every later operation (here and in communicators split from this one) first waits for `compute`'s work.
  void set_compute_stream(DeviceStream* compute);
  // How long wait() lets an operation run before it aborts the communicator (here and in later splits) is
  // Communicator::set_timeout's timeout, kDefaultTimeout while that is 0.
  DeviceStream& stream() const;

 protected:
  Request post(const Operation& operation, Sync sync) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  void timeout_changed() override;

 public:
  struct Core;  // the communicator's state, shared with its pending requests

 private:
  DeviceCommunicator(std::shared_ptr<Core> core, int rank, int size);
  // The watchdog's error for the operation being posted (its requests throw it past the timeout).
  std::function<void()> watchdog() const;
  // Runs `op(send, recv)` on device buffers: the given ones, or for host buffers the staging buffer (send's
  // `send_bytes` copied in first, recv's `recv_bytes` copied out after, blocking). `recv` may equal `send`.
  template <class Op>
  Request run(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes, Sync sync, Op&& op);
  template <class Op>
  Request point_to_point(const void* send, void* recv, std::size_t bytes, Sync sync, Op&& op);

  std::shared_ptr<Core> core_;
};

}  // namespace optimus

// The simulated device's NCCL (optimus/comm/device_collectives.hpp): collectives between simulated devices of several
// ranks — threads of one process (in-process) or processes (MPI) — with NCCL's rules, so that the device
// communicators (optimus/comm/device_communicator.hpp) are tested with several ranks in CI:
//
//   * device buffers only (host memory is refused, as NCCL cannot read it), checked when the operation is queued;
//   * stream-ordered and asynchronous: each operation runs on the stream it was queued on, when the stream reaches it;
//     the host learns of completion from events and of failures from check_async_errors();
//   * a send blocks its stream until the peer's matching receive has run, and a receive until the send's data arrived
//     (NCCL's rendezvous), so two ranks that both send before they receive deadlock unless the operations are grouped;
//   * a peer that fails (an in-process rank that throws) is an asynchronous error; abort() ends the operations that
//     wait, so a stuck collective can be given up — except a blocking reduction over MPI (below), which only MPI's
//     own abort ends.
//
// The data move through a transport: a private duplicate of the bootstrap communicator (MPI needs
// MPI_THREAD_MULTIPLE: the streams' threads call it), on the host storage behind the device buffers. Reductions run
// the transport's blocking form when the caller waits at once (Sync::blocking) and its non-blocking form otherwise,
// as a host grid does: over MPI the two sum in different orders, and a device grid's results equal a host grid's bit
// for bit. In-process the two are one algorithm (rank order), always run non-blocking so that abort() ends it.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "optimus/comm/device_collectives.hpp"
#include "optimus/comm/point_to_point_group.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::sim {

class Collectives final : public DeviceCollectives {
 public:
  // Collective over `bootstrap`; `device` must outlive the collectives.
  static std::unique_ptr<Collectives> create(Communicator& bootstrap, Runtime& device);

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  std::string backend() const override { return "sim-nccl"; }

  void run(const Operation& operation, Sync sync, DeviceStream& stream) override;
  void group_start() override;
  void group_end() override;
  void check_async_errors() override;
  void abort() noexcept override;
  bool has_watchdog() const override { return transport_->timeout().count() > 0; }
  std::unique_ptr<DeviceCollectives> split(int color, int key) override;

  // What the operations queued so far share with the stream work that runs them.
  struct State {
    std::atomic<bool> aborted{false};
    std::mutex mu;
    std::exception_ptr error;  // the first asynchronous failure
    // The rendezvous' acknowledgement bytes of exchanges an abort left unfinished: the transport may still write
    // them, so they live as long as the collectives.
    std::vector<std::unique_ptr<std::uint8_t[]>> abandoned;
  };
  // A point-to-point operation: the host storage of its buffer, and whether it sends.
  struct P2p {
    void* host;
    std::size_t bytes;
    int peer;
    bool sends;
  };

 private:
  Collectives(Runtime& device, std::unique_ptr<Communicator> transport);
  // Queues `work` (which runs the transport on host storage) on `stream`, touching `accesses`.
  void queue(DeviceStream& stream, const char* name, std::vector<Access> accesses, std::function<void()> work);
  void queue_p2p(DeviceStream& stream, std::vector<P2p> operations, std::vector<Access> accesses);

  Runtime* device_;
  std::shared_ptr<Communicator> transport_;  // shared with the queued work
  bool blocking_reductions_;                 // the transport sums differently when blocking (MPI)
  std::shared_ptr<State> state_ = std::make_shared<State>();
  // A grouped operation and what it touches on the device.
  struct Grouped {
    P2p op;
    Access access;
  };
  PointToPointGroup<Grouped> group_{"sim collectives"};
};

}  // namespace optimus::sim

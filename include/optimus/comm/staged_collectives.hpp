// Device collectives staged through host memory (optimus/comm/device_collectives.hpp), for ranks that share one device:
// NCCL refuses two ranks on one GPU, so DeviceCommunicator::create (device_communicator.hpp) takes these when the
// devices of two ranks have the same identity (DeviceRuntime::identity). Each operation waits for the work queued on
// its stream, copies its device buffers to host memory, runs the host transport (a private duplicate of the bootstrap:
// MPI between processes), and copies the result back before it returns; the operation is then complete in stream
// order. Correct, not fast: every byte crosses the host twice and nothing overlaps — the path that lets processes that
// share a GPU train at all (and tests them), not one to measure.
//
// Reductions run the transport's blocking form when the caller waits at once (Sync::blocking) and its non-blocking form
// otherwise, as a host grid does, so that a grid's results equal a host grid's bit for bit. Sends and receives between
// group_start and group_end are posted together and completed together; one outside a group blocks until the peer
// takes it (NCCL's rule). The transport's timeout applies to each wait: a peer that never joins ends in the
// transport's error, not a hang.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "optimus/comm/device_collectives.hpp"
#include "optimus/comm/point_to_point_group.hpp"

namespace optimus {

class StagedCollectives final : public DeviceCollectives {
 public:
  // Collective over `bootstrap`; `device` must outlive the collectives.
  static std::unique_ptr<StagedCollectives> create(Communicator& bootstrap, DeviceRuntime& device);

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  std::string backend() const override { return transport_->backend() + "-staged"; }

  void run(const Operation& operation, Sync sync, DeviceStream& stream) override;
  void group_start() override;
  void group_end() override;
  void check_async_errors() override {}  // every failure is thrown by the operation itself
  void abort() noexcept override { aborted_ = true; }
  bool has_watchdog() const override { return transport_->timeout().count() > 0; }
  std::unique_ptr<DeviceCollectives> split(int color, int key) override;

 private:
  StagedCollectives(DeviceRuntime& device, std::unique_ptr<Communicator> transport);
  // A point-to-point operation of a group: its device buffer and host copy.
  struct P2p {
    void* device;
    std::vector<std::byte> host;
    std::size_t count;
    DType dtype;
    int peer;
    bool sends;
  };
  // The bytes of device buffer p, after the stream's work (which the caller waited for); and the way back.
  std::vector<std::byte> download(const void* p, std::size_t bytes, DeviceStream& stream);
  void upload(void* p, const std::vector<std::byte>& host, DeviceStream& stream);
  void run_group(std::vector<P2p> operations, DeviceStream& stream);

  DeviceRuntime* device_;
  std::unique_ptr<Communicator> transport_;
  bool aborted_ = false;
  PointToPointGroup<P2p> group_{"staged collectives"};
};

}  // namespace optimus

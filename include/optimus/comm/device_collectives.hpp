// The collectives of one device communicator, as NCCL offers them: operations on device buffers, each queued on
// a stream of the device and complete when the stream reaches it. Two implementations: NCCL (comm/
// nccl_collectives.cpp, GPU-only) and the simulated device's (optimus/sim/collectives.hpp), which keeps NCCL's rules —
// device buffers only, stream order, asynchronous completion and errors, a send that blocks its stream until the
// peer's receive runs. DeviceCommunicator (device_communicator.hpp) is the Communicator built on them; it is where
// validation, traffic counting, host-buffer staging, ordering after the compute stream and timeouts live, once.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

class DeviceCollectives {
 public:
  DeviceCollectives() = default;
  DeviceCollectives(const DeviceCollectives&) = delete;
  DeviceCollectives& operator=(const DeviceCollectives&) = delete;
  virtual ~DeviceCollectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "nccl", "sim"

  // Queues `operation` (any kind but barrier and all_to_all) on `stream`, on device buffers. A broadcast moves the
  // root's send to every rank's recv (they may be one buffer); a reduce's recv is the root's alone (null elsewhere); the
  // tag of a send or receive is ignored. `sync` says how the caller will wait: NCCL ignores it; the simulated NCCL over
  // MPI runs MPI's blocking or non-blocking reduction accordingly — their summation orders differ — so that a device
  // grid's results equal a host grid's bit for bit.
  // A send blocks its stream until the peer's matching receive runs, and the other way round: sends and receives
  // that must progress together (an exchange between two ranks) go between group_start() and group_end().
  virtual void run(const Operation& operation, Sync sync, DeviceStream& stream) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;

  // Throws (optimus::Error, or the transport's own error) if an operation failed asynchronously.
  virtual void check_async_errors() = 0;
  // Stops every pending operation (they never complete); the collectives must not be used afterwards.
  virtual void abort() noexcept = 0;
  // Whether the operations run over a host transport whose watchdog bounds them and names the ranks that did not join
  // (the simulated device's collectives and staged ones, when the transport has a timeout); NCCL's do not.
  virtual bool has_watchdog() const { return false; }
  // Collective over the ranks: those with the same color form new collectives, ordered by (key, rank). Nothing may
  // be queued at the time (the caller synchronises its stream first).
  virtual std::unique_ptr<DeviceCollectives> split(int color, int key) = 0;
};

// How a device communicator gets its device's own collectives, one rank per rank of `bootstrap` (collective over it).
using NativeCollectives = std::function<std::unique_ptr<DeviceCollectives>(Communicator& bootstrap,
                                                                           DeviceRuntime& device)>;

}  // namespace optimus

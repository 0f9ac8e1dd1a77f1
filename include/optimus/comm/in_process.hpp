// The in-process backend: a world of `size` ranks as threads of one process, exchanging data through
// shared memory. It is how unit tests run a grid without mpirun and how a whole q x q grid runs on one GPU
// (with set_in_process_staging). Collectives stage each contribution in shared buffers when posted — broadcasts and
// reduces on host memory lend the caller's buffer instead, which the ranks that need it read in place, and the lender's
// request completes once they have (no copy on the way in; MPI's rule for non-blocking buffers) — so a posted
// operation needs nothing more of its rank, and non-blocking operations on different communicators may be waited on
// in any order, as with MPI.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/device.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

// Runs fn(world) on `size` threads, each with its own rank's communicator, and joins them.
// If any rank throws, the ranks blocked in communication are woken with an error instead of hanging,
// and the first original exception (lowest rank) is rethrown here. A rank that has not returned within the watchdog's
// timeout after that (the longest any rank set, and at least 2 s; without a watchdog, it is waited for) is stuck
// outside communication: it is left running, and the error is thrown as RanksLeftRunning, saying so — the process must
// then end (as MPI_Abort ends a job) without destroying what those ranks use: catch it where `fn`'s objects are still
// alive and report it with Process::fail, which ends the process (std::_Exit).
void run_in_process(int size, const std::function<void(Communicator& world)>& fn);

// run_in_process's error where ranks were left running (see there).
class RanksLeftRunning : public Error {
 public:
  using Error::Error;
};

// Where an in-process rank's collectives stage contributions, and how bytes move and reduce there. The default
// is host memory (memcpy; reductions on the CPU). A rank whose buffers are device memory sets one that keeps the
// staging area on the device (RankDevice::grid does, with DeviceStaging: optimus/comm/device_staging.hpp): its copies
// and reductions run on the rank's stream and complete when they return, so a whole q x q grid runs on one device
// without host round trips. Reductions combine the contributions in rank order either way: every rank gets
// bit-identical results. Copies into a rank's buffers run outside the group's lock, so ranks waiting for their
// devices do not wait for each other.
class InProcessStaging {
 public:
  virtual ~InProcessStaging() = default;
  // Where the rank's buffers may be besides the host: the device whose memory this staging moves (cpu: host only).
  virtual Device device() const = 0;
  // A staging buffer of `bytes` (> 0). Its deleter may run on another rank's thread.
  virtual std::shared_ptr<std::byte> allocate(std::size_t bytes) = 0;
  // dst <- src, each one of this rank's buffers or a staging buffer; complete when it returns.
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // acc[e] = acc[e] op x[e] for `count` elements of f32 or f64 (acc: this rank's buffer, x: a staging buffer);
  // complete when it returns.
  virtual void reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) = 0;
  // out[e] = a[e] op b[e] (out: this rank's buffer; a, b: contributions), the bits of copy(out, a) then
  // reduce(out, b), which is what it does unless a staging area does it in one pass (the host's does).
  virtual void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op);
};

// Host memory: what every in-process communicator uses unless told otherwise.
std::shared_ptr<InProcessStaging> host_staging();

// Sets `comm`'s staging (an in-process communicator; otherwise optimus::Error). Communicators split from it later
// inherit it: set it on the world before Grid::create. Every rank sets its own.
void set_in_process_staging(Communicator& comm, std::shared_ptr<InProcessStaging> staging);

// A communicator of one rank (used as the world when Optimus is built without MPI).
std::unique_ptr<Communicator> make_self_communicator();

}  // namespace optimus

// The MPI backend (host memory). This header is about MPI, so it includes mpi.h; nothing else public does.
// Blocking operations call the blocking MPI functions (MPI_Bcast, ...), whose shared-memory algorithms are
// faster than a non-blocking call followed by MPI_Wait; non-blocking ones call MPI_Ibcast, ....
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm`, a world of its own (a new JobState); frees it on destruction when `owned` (never MPI_COMM_WORLD
  // itself). The communicator's error handler is set to MPI_ERRORS_RETURN so failures become optimus::Error.
  MpiCommunicator(MPI_Comm comm, bool owned);
  ~MpiCommunicator() override;

  MPI_Comm native() const { return comm_; }
  std::string backend() const override { return "mpi"; }
  bool takes_buffers_on(Device device) const override { return device == Device::cpu; }
  // Whether MPI was initialized with MPI_THREAD_MULTIPLE (optimus::Process asks for it).
  bool allows_any_thread() const override;
  bool needs_progress_calls() const override { return true; }  // MPI progresses inside MPI calls
  std::vector<int> world_ranks() const override { return world_ranks_; }
  std::string host_of(int world_rank) const override;

 protected:
  Request post(const Operation& operation, Sync sync) override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  // With a timeout, operations are posted non-blocking and waited on with a deadline; the ranks on this node count
  // the collectives they have posted in shared memory (NodeCounters), so a wait that expires names those that lag, and
  // every process stores when it last called MPI through Optimus (Liveness), so that it names a rank that stopped
  // after joining, with the hosts of the ranks it names.
  void timeout_changed() override;

 public:
  struct NodeCounters;  // the collectives posted by each rank on this node
  struct Liveness;      // when each process on this node last called MPI, and every rank's host

 private:
  MpiCommunicator(MPI_Comm comm, bool owned, int rank, int size, std::shared_ptr<JobState> job,
                  std::shared_ptr<Liveness> liveness);
  // The watchdog's error for `call`; `peer`: the other rank of a send or receive (-1 for a collective).
  [[noreturn]] void expired(const CallLabel& call, int peer, const std::shared_ptr<NodeCounters>& counters) const;
  // Posts a call: the blocking form, or with a timeout (or `sync` non-blocking) the non-blocking one in a request the
  // watchdog waits on; `peer` is the other rank of a send or receive (-1 for a collective).
  template <class Blocking, class Nonblocking>
  Request issue(Sync sync, int peer, Blocking&& blocking, Nonblocking&& nonblocking);

  MPI_Comm comm_;
  bool owned_;
  std::vector<int> world_ranks_;
  std::shared_ptr<NodeCounters> counters_;  // while the watchdog is on
  std::shared_ptr<Liveness> liveness_;      // since the watchdog was first on here or where this was split from
};

}  // namespace optimus

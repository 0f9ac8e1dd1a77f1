// The in-process backend: a world of `size` ranks as threads of one process, exchanging data through
// shared memory. It is how unit tests run a grid without mpirun and how a whole q x q grid will run on
// one GPU. Collectives stage each contribution in shared buffers when posted, so non-blocking
// operations on different communicators may be waited on in any order, as with MPI.
#pragma once

#include <functional>
#include <memory>

#include "optimus/comm/communicator.hpp"

namespace optimus {

// Runs fn(world) on `size` threads, each with its own rank's communicator, and joins them.
// If any rank throws, the ranks blocked in communication are woken with an error instead of hanging,
// and the first original exception (lowest rank) is rethrown here.
void run_in_process(int size, const std::function<void(Communicator& world)>& fn);

// A communicator of one rank (used as the world when Optimus is built without MPI).
std::unique_ptr<Communicator> make_self_communicator();

}  // namespace optimus

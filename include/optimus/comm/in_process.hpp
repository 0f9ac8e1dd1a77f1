// The in-process backend: a world of `size` ranks as threads of one process, exchanging data through
// shared memory. It is how unit tests run a grid without mpirun and how a whole q x q grid runs on one
// GPU (with set_in_process_copy). Collectives stage each contribution in shared buffers when posted, so non-blocking
// operations on different communicators may be waited on in any order, as with MPI.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "optimus/comm/communicator.hpp"

namespace optimus {

// Runs fn(world) on `size` threads, each with its own rank's communicator, and joins them.
// If any rank throws, the ranks blocked in communication are woken with an error instead of hanging,
// and the first original exception (lowest rank) is rethrown here.
void run_in_process(int size, const std::function<void(Communicator& world)>& fn);

// How an in-process rank moves bytes between its own buffers and the shared staging area (host memory), in
// either direction. memcpy unless set: a rank whose buffers are device memory sets a copy ordered after the work
// on its stream that wrote them and completed before it returns (cudaMemcpyDefault), so the whole grid runs on
// one GPU. Reductions are computed on the host in rank order, as always.
using InProcessCopy = std::function<void(void* dst, const void* src, std::size_t bytes)>;
// Sets `comm`'s copy (an in-process communicator; otherwise optimus::Error). Communicators split from it later
// inherit it: set it on the world before Grid::create.
void set_in_process_copy(Communicator& comm, InProcessCopy copy);

// A communicator of one rank (used as the world when Optimus is built without MPI).
std::unique_ptr<Communicator> make_self_communicator();

}  // namespace optimus

// Context with MPI: initialization, the duplicated world, and the job-wide failure path.
#include <chrono>
#include <cstdio>
#include <thread>

#include "mpi_check.hpp"
#include "optimus/comm/context.hpp"
#include "optimus/comm/mpi_communicator.hpp"

namespace optimus {

struct Context::Mpi {
  bool finalize = false;          // true when this Context initialized MPI
  MPI_Comm errors = MPI_COMM_NULL;  // used only by fail(), so its barrier cannot meet other traffic
};

Context::Context(int& argc, char**& argv) : mpi_(std::make_unique<Mpi>()) {
  int initialized = 0;
  OPTIMUS_CHECK_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    // MPI_THREAD_MULTIPLE where the library offers it: the simulated device's communicators call MPI from their
    // streams' threads (MpiCommunicator::allows_any_thread says whether they may).
    int provided = 0;
    OPTIMUS_CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    mpi_->finalize = true;
  }
  MPI_Comm world = MPI_COMM_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  OPTIMUS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->errors));
  world_ = std::make_unique<MpiCommunicator>(world, true);
}

Context::~Context() {
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&mpi_->errors);
  if (mpi_->finalize) MPI_Finalize();
}

int Context::fail(std::string_view program, const std::exception& error) noexcept {
  const int rank = world_->rank();
  // Did every rank fail? A barrier on the error communicator completes only if all of them got here.
  MPI_Request request = MPI_REQUEST_NULL;
  int all_failed = 0;
  if (MPI_Ibarrier(mpi_->errors, &request) == MPI_SUCCESS) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!all_failed && std::chrono::steady_clock::now() < deadline) {
      MPI_Test(&request, &all_failed, MPI_STATUS_IGNORE);
      if (!all_failed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (all_failed) {
    if (rank == 0) std::fprintf(stderr, "%.*s: error: %s\n", static_cast<int>(program.size()), program.data(), error.what());
    return 1;
  }
  std::fprintf(stderr, "%.*s: error on rank %d: %s\n", static_cast<int>(program.size()), program.data(), rank,
               error.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace optimus

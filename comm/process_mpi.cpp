// Process with MPI: initialization, the duplicated world, and the job-wide failure path.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>

#include "mpi_check.hpp"
#include "optimus/comm/process.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/comm/mpi_communicator.hpp"

namespace optimus {

namespace {

// The node's word (Process::Mpi::reported): nothing reported yet; a rank of the node is reporting an error of its own;
// a line was printed.
constexpr int kNoneReported = 0, kOwnErrorPending = 2, kReported = 1;

}  // namespace

struct Process::Mpi {
  int* argc = nullptr;              // the program's, for MPI_Init_thread (world())
  char*** argv = nullptr;
  bool finalize = false;            // true when this Process initialized MPI
  MPI_Comm errors = MPI_COMM_NULL;  // used only by fail(), so its barrier cannot meet other traffic
  // This node's processes share one word: the first to report a failure that ends the job takes it, and the others
  // stay silent (several ranks whose watchdogs fire at once would otherwise print the same line each).
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win window = MPI_WIN_NULL;
  int* reported = nullptr;
};

Process::Process(int& argc, char**& argv) : mpi_(std::make_unique<Mpi>()) {
  fail_writes_past_file_size_limit();
  mpi_->argc = &argc;
  mpi_->argv = &argv;
}

Communicator& Process::world() {
  if (world_) return *world_;
  int initialized = 0;
  OPTIMUS_CHECK_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    // MPI_THREAD_MULTIPLE where the library offers it: the simulated device's communicators call MPI from their
    // streams' threads (MpiCommunicator::allows_any_thread says whether they may).
    int provided = 0;
    OPTIMUS_CHECK_MPI(MPI_Init_thread(mpi_->argc, mpi_->argv, MPI_THREAD_MULTIPLE, &provided));
    mpi_->finalize = true;
  }
  MPI_Comm world = MPI_COMM_NULL;
  OPTIMUS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  OPTIMUS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->errors));
  OPTIMUS_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &mpi_->node));
  int node_rank = 0;
  OPTIMUS_CHECK_MPI(MPI_Comm_rank(mpi_->node, &node_rank));
  void* base = nullptr;
  OPTIMUS_CHECK_MPI(MPI_Win_allocate_shared(node_rank == 0 ? sizeof(int) : 0, sizeof(int), MPI_INFO_NULL, mpi_->node,
                                            &base, &mpi_->window));
  MPI_Aint bytes = 0;
  int unit = 0;
  OPTIMUS_CHECK_MPI(MPI_Win_shared_query(mpi_->window, 0, &bytes, &unit, &base));
  mpi_->reported = static_cast<int*>(base);
  if (node_rank == 0) std::atomic_ref<int>(*mpi_->reported).store(0);
  MPI_Barrier(mpi_->node);
  world_ = std::make_unique<MpiCommunicator>(world, true);
  return *world_;
}

Process::~Process() {
  if (!world_) return;  // MPI never started
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&mpi_->errors);
  MPI_Win_free(&mpi_->window);
  MPI_Comm_free(&mpi_->node);
  if (mpi_->finalize) MPI_Finalize();
}

int Process::fail(std::string_view program, const std::exception& error) noexcept {
  std::fflush(stdout);  // what the program printed comes before its error
  if (!world_ && launched_processes() > 1) {
    // An error before the program asked for its world (a bad option, read the same by every process): MPI starts now,
    // so that the processes agree on one line.
    try {
      world();
    } catch (...) {  // (MPI cannot start: each process reports alone)
    }
  }
  if (!world_) {  // MPI never started: this process is the whole job
    print_line(program, -1, text_of(error));
    end_process_if_left_running(error);
    return 1;
  }
  const int rank = world_->rank();
  const std::string text = text_of(error);
  std::atomic_ref<int> word(*mpi_->reported);
  if (world_->job()->failed()) {
    // The world's communication failed for good (the watchdog, a rank gone): a rank it waited for will not come, so
    // not every rank failed. A rank of this node reporting its own error (the cause, likely) goes first; else the
    // first of these reports, once per node, and the job is aborted.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (word.load() == kOwnErrorPending && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // it aborts the job
    }
    int expected = kNoneReported;
    const bool reporter = word.compare_exchange_strong(expected, kReported);
    if (reporter) print_line(program, rank, text);
    end_process_if_left_running(error);
    // One abort per node: Open MPI's launcher prints a banner for each rank that aborts (and `mpirun --quiet` none).
    // The others give the reporter's abort a while to end the job before aborting themselves.
    if (!reporter) std::this_thread::sleep_for(std::chrono::seconds(5));
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  // This rank's own error: did every rank fail (a configuration error, checked the same everywhere)? A barrier on the
  // error communicator completes only if all of them got here.
  int expected = kNoneReported;
  word.compare_exchange_strong(expected, kOwnErrorPending);  // the node's watchdog reports wait for this one
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
    if (rank == 0) print_line(program, -1, text);
    end_process_if_left_running(error);
    return 1;
  }
  word.store(kReported);
  print_line(program, rank, text);  // every rank with an error of its own says it
  end_process_if_left_running(error);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace optimus

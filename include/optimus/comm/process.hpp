// optimus::Process: the process's entry into Optimus. With MPI it initializes MPI on the first call of world() (unless
// the program already did) and finalizes it at the end; world() is then a duplicate of MPI_COMM_WORLD, so library
// traffic never mixes with the program's own. A program that never asks for the world — its ranks threads of this
// process (run_in_process) — never starts MPI, nor meets what starting it needs (its shared-memory files, a launcher's
// services, room under `ulimit -f` and `-v`). Without MPI, world() is a single rank.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "optimus/comm/communicator.hpp"

namespace optimus {

class Process {
 public:
  // Also makes a file-size limit an error of the write that meets it, not SIGXFSZ (core/output_file.hpp).
  Process(int& argc, char**& argv);
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  // The process's world, MPI's started here the first time (from the thread that constructed the Process).
  Communicator& world();
  // How many processes the launcher started (mpirun's, from its environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE), without
  // starting MPI; 1 where none did.
  static int launched_processes();

  // For a program's catch block: reports `error` once and returns the exit status (1). What the program printed to
  // standard output is flushed first, so that the error comes after it however the streams are redirected. When every
  // rank failed (a configuration error, checked identically everywhere), rank 0 prints one line
  // "program: error: ..." and all ranks return. When only some ranks failed, those print their error with their rank,
  // "program: error on rank R: ...", and the whole job is aborted, so no rank is left waiting in a collective. Where
  // the world's communication failed for good (JobState: the watchdog fired, a rank is gone) — which several ranks may
  // report at once — one line per node is printed: a rank of the node reporting an error of its own (the likely
  // cause) first, else the first such report. With OPTIMUS_DEBUG set (not "0") in the environment, an optimus::Error's
  // line ends in the source location that raised it. For run_in_process's RanksLeftRunning (a rank thread still runs,
  // using its caller's objects) the process ends here (std::_Exit) after the line, destroying nothing.
  int fail(std::string_view program, const std::exception& error) noexcept;

 private:
  // The line for `error`: its message, and where OPTIMUS_DEBUG asks for it, the source location.
  std::string text_of(const std::exception& error) const noexcept;
  // "program: error: text", or with rank >= 0 "program: error on rank R: text", on stderr, flushed.
  static void print_line(std::string_view program, int rank, const std::string& text) noexcept;
  // Ends the process at once (std::_Exit) where `error` is run_in_process's RanksLeftRunning.
  static void end_process_if_left_running(const std::exception& error) noexcept;
  static bool debug_from_environment();  // OPTIMUS_DEBUG set, and not "0"

  struct Mpi;
  std::unique_ptr<Mpi> mpi_;  // MPI state when built with MPI (started by world())
  std::unique_ptr<Communicator> world_;
  bool debug_ = debug_from_environment();
};

}  // namespace optimus

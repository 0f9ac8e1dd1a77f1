// optimus::Context: the process's entry into Optimus. With MPI it initializes MPI (unless the program
// already did) and finalizes it at the end; world() is then a duplicate of MPI_COMM_WORLD, so library
// traffic never mixes with the program's own. Without MPI, world() is a single rank.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "optimus/comm/communicator.hpp"

namespace optimus {

class Context {
 public:
  // Also makes a file-size limit an error of the write that meets it, not SIGXFSZ (core/output_file.hpp).
  Context(int& argc, char**& argv);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  Communicator& world() { return *world_; }

  // For a program's catch block: reports `error` once and returns the exit status (1). What the program printed to
  // standard output is flushed first, so that the error comes after it however the streams are redirected. When every
  // rank failed (a configuration error, checked identically everywhere), rank 0 prints one line
  // "program: error: ..." and all ranks return. When only some ranks failed — or the world's communication failed
  // for good (JobState: the watchdog fired, a rank is gone), which not every rank can report — the first of them on
  // each node prints its error with its rank, "program: error on rank R: ...", and the whole job is aborted, so no
  // rank is left waiting in a collective. With OPTIMUS_DEBUG set (not "0") in the environment, an optimus::Error's
  // line ends in the source location that raised it.
  int fail(std::string_view program, const std::exception& error) noexcept;

 private:
  // The line for `error`: its message, and where OPTIMUS_DEBUG asks for it, the source location.
  std::string text_of(const std::exception& error) const;
  static bool debug_from_environment();  // OPTIMUS_DEBUG set, and not "0"

  struct Mpi;
  std::unique_ptr<Mpi> mpi_;  // MPI state when built with MPI
  std::unique_ptr<Communicator> world_;
  bool debug_ = debug_from_environment();
};

}  // namespace optimus

// optimus::Context: the process's entry into Optimus. With MPI it initializes MPI (unless the program
// already did) and finalizes it at the end; world() is then a duplicate of MPI_COMM_WORLD, so library
// traffic never mixes with the program's own. Without MPI, world() is a single rank.
#pragma once

#include <exception>
#include <memory>
#include <string_view>

#include "optimus/comm/communicator.hpp"

namespace optimus {

class Context {
 public:
  Context(int& argc, char**& argv);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  Communicator& world() { return *world_; }

  // For a program's catch block: reports `error` once and returns the exit status (1). When every
  // rank failed (a configuration error, checked identically everywhere), rank 0 prints one line
  // "program: error: ..." and all ranks return. When only some ranks failed, those print their error
  // with their rank and abort the whole job, so no rank is left waiting in a collective.
  int fail(std::string_view program, const std::exception& error) noexcept;

 private:
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;  // MPI state when built with MPI
  std::unique_ptr<Communicator> world_;
};

}  // namespace optimus

// Process without MPI: the world is this process alone.
#include <cstdio>
#include <string>
#include <string_view>

#include "optimus/comm/process.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/comm/in_process.hpp"

namespace optimus {

struct Process::Mpi {};

Process::Process(int& /*argc*/, char**& /*argv*/) : world_(make_self_communicator()) {
  fail_writes_past_file_size_limit();
}

Process::~Process() = default;

Communicator& Process::world() { return *world_; }

int Process::fail(std::string_view program, const std::exception& error) noexcept {
  std::fflush(stdout);  // what the program printed comes before its error
  print_line(program, -1, text_of(error));
  end_process_if_left_running(error);
  return 1;
}

}  // namespace optimus

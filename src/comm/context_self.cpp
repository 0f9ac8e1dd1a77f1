// Context without MPI: the world is this process alone.
#include <cstdio>
#include <string>
#include <string_view>

#include "optimus/comm/context.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/comm/in_process.hpp"

namespace optimus {

struct Context::Mpi {};

Context::Context(int& /*argc*/, char**& /*argv*/) : world_(make_self_communicator()) {
  fail_writes_past_file_size_limit();
}

Context::~Context() = default;

Communicator& Context::world() { return *world_; }

int Context::fail(std::string_view program, const std::exception& error) noexcept {
  std::fflush(stdout);  // what the program printed comes before its error
  print_line(program, -1, text_of(error));
  end_process_if_left_running(error);
  return 1;
}

}  // namespace optimus

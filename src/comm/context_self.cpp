// Context without MPI: the world is this process alone.
#include <cstdio>

#include "optimus/comm/context.hpp"
#include "optimus/comm/in_process.hpp"

namespace optimus {

struct Context::Mpi {};

Context::Context(int& /*argc*/, char**& /*argv*/) : world_(make_self_communicator()) {}

Context::~Context() = default;

int Context::fail(std::string_view program, const std::exception& error) noexcept {
  std::fprintf(stderr, "%.*s: error: %s\n", static_cast<int>(program.size()), program.data(), error.what());
  return 1;
}

}  // namespace optimus

// The test suites' watchdog (test_world.hpp): OPTIMUS_TEST_TIMEOUT, on the MPI world and on in-process worlds.
#include <cstdint>
#include <cstdlib>

#include "optimus/comm/in_process.hpp"
#include "test_world.hpp"

namespace optimus::test {

std::chrono::milliseconds watchdog_timeout() {
  const char* seconds = std::getenv("OPTIMUS_TEST_TIMEOUT");
  if (seconds == nullptr || *seconds == '\0') return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::atof(seconds) * 1e3));
}

void run_in_process(int size, const std::function<void(Communicator& world)>& fn) {
  const std::chrono::milliseconds timeout = watchdog_timeout();
  optimus::run_in_process(size, [&](Communicator& world) {
    world.set_timeout(timeout);
    fn(world);
  });
}

}  // namespace optimus::test

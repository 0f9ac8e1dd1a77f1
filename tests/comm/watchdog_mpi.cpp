// Ranks that do not join a collective (they sleep, as stopped or hung ranks would): with the watchdog on, rank 0's wait
// expires after 1 s and the job ends with a line naming the operation and the missing ranks (the CTest
// watchdog_mpi_np4 checks the line, the non-zero exit and that it ends long before the sleepers would). Rank 0 has
// thirty more all-reduces pending then: they are abandoned with the job (JobState), not waited for a second each while
// the error unwinds, which would take longer than the test's bound (20 s). A 2 x 2 grid
// is alive meanwhile: its communicators, split from the world, have the watchdog too, and are destroyed while the error
// unwinds, without waiting for the sleepers (MpiCommunicator's node counters are not freed collectively then).
// Only rank 0 waits, so that the rank that reports is known (Process::fail prints one line per node, the first
// failing rank's), and the watchdog starts after a first barrier, so that ranks starting late on a loaded machine do
// not trip it early. `watchdog_mpi staged` does the same through staged device collectives (watchdog_mpi_staged_np4).
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "optimus/comm/process.hpp"
#include "optimus/comm/device_communicator.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/core/error.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/sim/runtime.hpp"

namespace {

// `watchdog_mpi staged`: the same on a device communicator whose processes share one (simulated) device, so that its
// collectives are staged through the host (StagedCollectives): the transport's watchdog names the sleepers.
int staged(optimus::Communicator& world) {
  world.barrier();
  world.set_timeout(std::chrono::seconds(1));  // before the communicator: its transport inherits it
  optimus::sim::Runtime device(optimus::sim::Options{.shared_as = "one GPU"});
  const auto comm = optimus::device_communicator(world, device);
  OPTIMUS_CHECK(comm->backend() == "mpi-staged", "the device communicator is ", comm->backend(), ", not mpi-staged");
  std::vector<float> x(4, 1.0f);
  comm->all_reduce(x.data(), x.data(), x.size(), optimus::DType::f32, optimus::ReduceOp::sum);  // all join
  if (world.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(60));
  comm->all_reduce(x.data(), x.data(), x.size(), optimus::DType::f32, optimus::ReduceOp::sum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    optimus::Communicator& world = ctx.world();
    if (argc > 1 && std::string(argv[1]) == "staged") return staged(world);
    world.barrier();  // #1, every rank started
    world.set_timeout(std::chrono::seconds(1));
    const optimus::Grid grid = optimus::Grid::create(world, 2);  // a barrier (#2) and an all-reduce (#3) on the world
    double x = 1;
    grid.row().all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);  // all join: no alarm
    world.all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);       // #4
    if (world.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(60));
    std::vector<double> values(31, 1.0);
    std::vector<optimus::Request> pending;  // #5 to #35
    for (double& v : values) {
      pending.push_back(world.iall_reduce(&v, &v, 1, optimus::DType::f64, optimus::ReduceOp::sum));
    }
    pending.front().wait();  // #5: the watchdog fires; #6 to #35 are destroyed pending
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("watchdog_mpi", e);
  }
}

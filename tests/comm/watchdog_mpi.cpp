// A rank that does not join a collective (it sleeps, as a stopped or hung rank would): with the watchdog on, the others'
// wait expires after 1 s and the job ends with a line naming the operation and the missing rank (the CTest
// watchdog_mpi_np4 checks the line, the non-zero exit and that it ends long before the sleeper would). A 2 x 2 grid
// is alive meanwhile: its communicators, split from the world, have the watchdog too, and are destroyed while the error
// unwinds, without waiting for the sleeper (MpiCommunicator's node counters are not freed collectively then).
#include <chrono>
#include <thread>

#include "optimus/comm/context.hpp"
#include "optimus/core/error.hpp"
#include "optimus/grid/grid.hpp"

int main(int argc, char** argv) {
  optimus::Context ctx(argc, argv);
  try {
    optimus::Communicator& world = ctx.world();
    world.set_timeout(std::chrono::seconds(1));
    const optimus::Grid grid = optimus::Grid::create(world, 2);  // one all-reduce on the world (#1)
    double x = 1;
    grid.row().all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);  // all join: no alarm
    world.all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);       // #2
    if (world.rank() == world.size() - 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    world.all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("watchdog_mpi", e);
  }
}

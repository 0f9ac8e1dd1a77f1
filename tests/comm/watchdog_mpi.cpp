// Ranks that do not join a collective (they sleep, as stopped or hung ranks would): with the watchdog on, rank 0's wait
// expires after 1 s and the job ends with a line naming the operation and the missing ranks (the CTest
// watchdog_mpi_np4 checks the line, the non-zero exit and that it ends long before the sleepers would). A 2 x 2 grid
// is alive meanwhile: its communicators, split from the world, have the watchdog too, and are destroyed while the error
// unwinds, without waiting for the sleepers (MpiCommunicator's node counters are not freed collectively then).
// Only rank 0 waits, so that exactly one rank reports (several would race to print before MPI_Abort ends the job), and
// the watchdog starts after a first barrier, so that ranks starting late on a loaded machine do not trip it early.
#include <chrono>
#include <thread>

#include "optimus/comm/context.hpp"
#include "optimus/core/error.hpp"
#include "optimus/grid/grid.hpp"

int main(int argc, char** argv) {
  optimus::Context ctx(argc, argv);
  try {
    optimus::Communicator& world = ctx.world();
    world.barrier();  // #1, every rank started
    world.set_timeout(std::chrono::seconds(1));
    const optimus::Grid grid = optimus::Grid::create(world, 2);  // a barrier (#2) and an all-reduce (#3) on the world
    double x = 1;
    grid.row().all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);  // all join: no alarm
    world.all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);       // #4
    if (world.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(60));
    world.all_reduce(&x, &x, 1, optimus::DType::f64, optimus::ReduceOp::sum);  // #5
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("watchdog_mpi", e);
  }
}

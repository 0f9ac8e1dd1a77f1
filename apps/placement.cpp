// train_gpt's placement (placement.hpp).
#include "placement.hpp"

#include <cstdlib>
#include <sstream>

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/cuda/device.hpp"

namespace optimus::apps {
namespace {

// This rank's GPU: its rank on the node modulo the node's devices.
int local_gpu(const Communicator& world) {
  int local = world.rank();
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if (const char* value = std::getenv(name)) {
      local = std::atoi(value);
      break;
    }
  }
  const int devices = cuda_device_count();
  return devices > 0 ? local % devices : 0;  // with none, opening device 0 reports that it does not exist
}

}  // namespace

int run_ranks(Process& ctx, const cli::Options& o, Placement& where, const char* program,
              const std::function<int(Communicator& world)>& run) {
  if (!where.in_process) return run(ctx.world());
  // In-process ranks never start MPI (Process::world): a launcher's processes are counted from its environment.
  const int launched = Process::launched_processes();
  OPTIMUS_CHECK(launched == 1, "--in-process runs every rank in this process: launch one process, not ", launched);
  if (where.choice.kind != Device::cpu) where.shared = optimus::open_device(where.choice, 0);  // the node's first GPU
  int status = 0;
  try {
    run_in_process(static_cast<int>(o.integer("in-process", 1)), [&](Communicator& world) {
      const int mine = run(world);
      if (world.rank() == 0) status = mine;
    });
  } catch (const RanksLeftRunning& e) {
    // A rank left running still uses this frame's options, device and status: report and end the process here,
    // destroying nothing (Process::fail ends it without returning).
    return ctx.fail(program, e);
  }
  return status;
}

std::unique_ptr<DeviceRuntime> open_device(const Placement& where, const Communicator& world) {
  return optimus::open_device(where.choice, where.choice.kind == Device::cuda ? local_gpu(world) : 0);
}

std::unique_ptr<RankDevice> open_rank_device(DeviceRuntime& device, ops::GemmMath math, const Placement& where,
                                             Communicator& world) {
  std::unique_ptr<RankDevice> rank;
  all_or_throw({&world}, [&] {  // one verdict: in-process ranks sharing a device race for it
    try {
      rank = std::make_unique<RankDevice>(device, math);
    } catch (const Error& e) {
      if (where.choice.kind != Device::sim) throw;
      OPTIMUS_FAIL("--device-memory ", where.choice.sim_capacity, " bytes cannot hold even ",
                   where.in_process ? "the in-process ranks' GEMM workspaces, their first allocations"
                                    : "the rank's GEMM workspace, its first allocation",
                   " (", e.what(), "): give the simulated device more memory");
    }
  });
  return rank;
}

std::string memory_line(Communicator& world, const Grid& grid) {
  const MemoryTracker& m = grid.memory();
  auto mib = [&](std::uint64_t bytes) {
    return world.all_reduce(static_cast<double>(bytes), ReduceOp::max) / (1 << 20);
  };
  const auto place = [&](MemoryPlace where) {
    std::ostringstream os;
    os.precision(3);
    os << name_of(where) << ": parameters " << mib(m.current(MemoryKind::parameters, where)) << ", gradients "
       << mib(m.current(MemoryKind::gradients, where)) << ", optimizer " << mib(m.current(MemoryKind::optimizer, where))
       << ", peak activations saved for backward " << mib(m.peak(MemoryKind::activations, where)) << ", peak total "
       << mib(m.peak_total(where));
    return os.str();
  };
  const std::string device = place(MemoryPlace::device), host = place(MemoryPlace::host);  // collective: both
  return "memory per rank (max over ranks, MiB): " +
         (grid.device() == nullptr ? host : device + "\n    " + host);
}

}  // namespace optimus::apps

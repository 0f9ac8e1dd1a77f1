// train_gpt's placement: the device each rank (or the in-process ranks together) trains on, and the memory line it
// prints at the end.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "optimus/comm/communicator.hpp"
#include "optimus/comm/process.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::apps {

// Where the model lives: the device of this process (one rank per process), or the one device every in-process rank
// shares; none on the CPU.
struct Placement {
  DeviceChoice choice;                    // --device, --device-memory
  bool in_process;
  std::unique_ptr<DeviceRuntime> shared;  // the in-process ranks' device
  // optimus-sweep's: this rank's slot on the device (its stream and memory pool), which every member training on it
  // shares; null: a run makes its own.
  RankDevice* slot = nullptr;
};

// The device of `world`'s rank (the node-local GPU: its rank on the node, as Open MPI, Slurm or MPICH tell it, else its
// world rank, modulo the node's devices), or of its in-process ranks.
std::unique_ptr<DeviceRuntime> open_device(const Placement& where, const Communicator& world);

// This rank's RankDevice on `device` (its stream, memory pool and GEMM engine, whose workspace is its first
// allocation), computing in `math`: a simulated device too small even for that is named as such (--device-memory), the
// same error on every rank of `world` (collective).
std::unique_ptr<RankDevice> open_rank_device(DeviceRuntime& device, ops::GemmMath math, const Placement& where,
                                             Communicator& world);

// A program's ranks, each running `run` on its world: the MPI world's (one rank per process), or --in-process N ranks
// as threads of this process sharing one device; `where` is filled in. Returns rank 0's exit status. optimus::Error
// where --in-process is given to more than one process; a rank left running when another failed ends the process
// through Process::fail, naming `program`.
int run_ranks(Process& ctx, const cli::Options& o, Placement& where, const char* program,
              const std::function<int(Communicator& world)>& run);

// Collective over `world`: this run's memory by kind and place (device, host), the maximum over ranks.
std::string memory_line(Communicator& world, const Grid& grid);

}  // namespace optimus::apps

// One rank's GPU: its stream, device memory (caching allocator) and GEMM engine, and how a grid is placed on
// it. With the in-process backend, q*q ranks (threads) each hold one of these on the same device, and the
// whole grid runs on one GPU:
//
//   optimus::run_in_process(q * q, [&](optimus::Communicator& world) {
//     optimus::cuda::RankDevice gpu(0);
//     optimus::Grid grid = gpu.grid(world, q);   // matrices made on it live on device 0
//     ...
//   });
//
// Declare it before anything placed on it (it must be destroyed last).
#pragma once

#include "optimus/comm/in_process.hpp"
#include "optimus/cuda/device_staging.hpp"
#include "optimus/cuda/lt_gemm.hpp"
#include "optimus/cuda/runtime.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::cuda {

// Makes a device current for the calling thread, after checking that it exists: the first member of RankDevice,
// so that its stream and memory are created on that device (one process per GPU uses devices other than 0).
struct CurrentDevice {
  explicit CurrentDevice(int device) : id(device) {
    require_device(device);
    OPTIMUS_CHECK_CUDA(cudaSetDevice(device));
  }
  int id;
};

struct RankDevice {
  // math: how f32 GEMMs compute on this device (f32, TF32 or bf16 operands; see ops::GemmMath).
  explicit RankDevice(int device_id = 0, ops::GemmMath gemm_math = ops::GemmMath::f32)
      : device(device_id), memory(device_id, stream.get()), gemm(memory.allocator()), math(gemm_math) {}

  // The queue the grid's local work runs on (its scratch is set by Grid::place_on).
  ops::Queue queue() { return ops::Queue{stream.get(), &gemm, math, {}}; }

  // Makes `world` (in-process) stage its exchanges on this device (DeviceStaging), then a grid placed on it.
  Grid grid(Communicator& world, int q) {
    staging = std::make_shared<DeviceStaging>(device.id, memory);
    set_in_process_staging(world, staging);
    Grid g = Grid::create(world, q);
    g.place_on(&memory, queue());
    return g;
  }

  CurrentDevice device;  // first: the members below are created on it
  Stream stream;
  DeviceMemoryPool memory;
  LtGemm gemm;
  ops::GemmMath math;
  std::shared_ptr<DeviceStaging> staging;  // set by grid(): the in-process exchanges of this rank
};

}  // namespace optimus::cuda

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
#include "optimus/cuda/lt_gemm.hpp"
#include "optimus/cuda/runtime.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::cuda {

struct RankDevice {
  // math: how f32 GEMMs compute on this device (f32, TF32 or bf16 operands; see ops::GemmMath).
  explicit RankDevice(int device = 0, ops::GemmMath gemm_math = ops::GemmMath::f32)
      : memory(device, stream.get()), gemm(memory.allocator()), math(gemm_math) {}

  // The queue the grid's local work runs on (its scratch is set by Grid::place_on).
  ops::Queue queue() { return ops::Queue{stream.get(), &gemm, math, {}}; }

  // Makes `world` (in-process) exchange this rank's device buffers, then a grid placed on this device.
  Grid grid(Communicator& world, int q) {
    set_in_process_copy(world, [this](void* dst, const void* src, std::size_t n) { memory.copy(dst, src, n); });
    Grid g = Grid::create(world, q);
    g.place_on(&memory, queue());
    return g;
  }

  Stream stream;
  DeviceMemoryPool memory;
  LtGemm gemm;
  ops::GemmMath math;
};

}  // namespace optimus::cuda

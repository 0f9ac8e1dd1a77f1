// The device cases: what every accelerator must pass, run on the simulated device in CI (test_sim, test_sim_mpi) and
// on a GPU where one is present (test_cuda). Each compares the device with the host: the simulated device gives the
// host's results bit for bit (it runs the CPU kernels), a GPU within the tolerances the CPU suites use against the
// reference.
#pragma once

#include <filesystem>

#include "optimus/device/rank_device.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::test {

// Every operation of optimus/core/ops.hpp on `rank`'s device against the same operation on the host: element-wise,
// dropout (infs and NaNs dropped to 0), reductions, casts, row statistics, LayerNorm, softmax, embedding,
// cross-entropy, the optimizer, GEMMs with every transpose, f32 and bf16 math, fused and unfused epilogues, k = 0,
// and attention's strided batches at unaligned offsets.
void check_kernels(RankDevice& rank);

// The CPU suites' f32 cases on `grid` (placed on a device): SUMMA products with exact traffic, saved operands and
// epilogues; overlapped and blocking SUMMA and PendingProduct bit for bit; every layer and the GPT against the
// reference at f32 and bf16 math; 5 AdamW steps at both. Collective over the grid.
void check_device_grid(const Grid& grid);
// The 1D baseline's GPT on `rank`'s device (a megatron::Group of all of `world`, micro-batches, AdamW) against the
// same on the host, bit for bit (the simulated device only); checkpoints written from device shards (1D and 2D on
// `grid`) read back into device and host shards, bit for bit. `dir`: an empty directory all ranks see.
void check_models_and_checkpoints_on(Communicator& world, RankDevice& rank, Grid& grid,
                                     const std::filesystem::path& dir);
// The same training step (forward, backward, AdamW, twice) on `on_device` and on `on_host`, a grid of the same world and
// q: the same losses, gradient norms and parameters — bit for bit when `bitwise` (the simulated device), within
// 1e-4 relative (1e-3 with bf16 GEMMs) otherwise.
void check_step_like_host(const Grid& on_device, const Grid& on_host, bool bitwise);
// The three SUMMA products of tall matrices (the CPU's GEMM in row tiles) on `on_device` and on `on_host`, at f32 and
// bf16 math: bit for bit when `bitwise`, within 1e-5 (1e-3 with bf16) otherwise.
void check_products_like_host(const Grid& on_device, const Grid& on_host, bool bitwise);
// Repeated SUMMA products and GPT training steps make no raw allocation from the rank's memory pool or page-locked
// buffers after the first, and prepare no new GEMM plan.
void check_steady_state(RankDevice& rank, Grid& grid);
// Host and device operands in one operation are refused naming both; a grid whose communicators cannot move device
// buffers cannot be placed on the device.
void check_device_errors(Communicator& world, RankDevice& rank, Grid& grid);

}  // namespace optimus::test

// Internal to src/: the pieces of the CUDA backend that device-generic code creates, defined by src/cuda/ (and
// src/comm/nccl_collectives.cpp) or, in a build without CUDA (or NCCL), by src/core/cuda_absent.cpp
// (src/comm/nccl_absent.cpp), which refuse with a message naming the build option. The first GEMM engine opens
// cuBLASLt and the first NCCL communicator opens NCCL (neither is linked: src/core/dynamic_library.hpp).
#pragma once

#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/comm/device_collectives.hpp"
#include "optimus/core/gemm_engine.hpp"

namespace optimus::detail {

std::unique_ptr<GemmEngine> make_cuda_gemm_engine(DeviceAllocator& allocator);
// NCCL communicators over `bootstrap` (one rank per bootstrap rank) on CUDA device `device`.
std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator& bootstrap, DeviceRuntime& device);

}  // namespace optimus::detail
